"""`scripts/testbed.py perf`: the all-reduce launcher on a testbed, switch
against Gloo, with the bounds that links of the shaped rate allow
(docs/testbed.md, "Switch against Gloo on the testbed")."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional

from .net import (REPO, STATE_DIR, LinkShape, Testbed, TestbedError, die_with_parent,
                  parse_host_rates, parse_rate)

ETH_HEADER = 14          # what tbf counts per packet besides the IP packet
IP_UDP_CAIS = 20 + 8 + 20
IP6_UDP_CAIS = 40 + 8 + 20
IP_TCP = 20 + 32         # TCP with timestamps, as Linux sends it


def wire_bounds(size: int, hosts: int, rate_bps: float, mtu: int, chunk: int,
                ipv6: bool = False) -> dict:
    """The fastest an all-reduce of `size` bytes can finish when every host
    link carries rate_bps each way, counted on wire bytes (headers included):
    a ring moves 2(n-1)/n of the tensor through each host link in TCP
    segments (IPv4), the switch moves the tensor once each way in CAIS
    datagrams (over IPv6 with `ipv6`)."""
    if hosts < 2:
        return {"ring_s": 0.0, "switch_s": 0.0}
    headers = IP6_UDP_CAIS if ipv6 else IP_UDP_CAIS
    payload = min(chunk, mtu - headers)
    packets = -(-size // payload)
    switch_bytes = size + packets * (headers + ETH_HEADER)
    mss = mtu - IP_TCP
    ring_payload = 2 * (hosts - 1) / hosts * size
    ring_bytes = ring_payload + -(-ring_payload // mss) * (IP_TCP + ETH_HEADER)
    return {"ring_s": ring_bytes * 8 / rate_bps, "switch_s": switch_bytes * 8 / rate_bps}


def perf(a, out=sys.stdout) -> dict:
    """Builds a testbed, starts inca-switchd in its switch namespace and one
    cais-perf rank per host namespace, for each backend in turn; prints both
    nccl-tests rows per size, their ratio, both bounds and the fraction of
    its bound each backend reached; returns them. The slowest host link sets
    the bounds (--host-rate)."""
    build = os.environ.get("INCA_BUILD_DIR") or os.path.join(REPO, "build", "release")
    perf_bin = os.path.join(build, "bin", "cais-perf")
    switchd = os.path.join(build, "bin", "inca-switchd")
    for b in (perf_bin, switchd):
        if not os.path.exists(b):
            raise TestbedError("%s not found: build it (scripts/setup.sh) or set INCA_BUILD_DIR"
                               % b)
    impair = {k: getattr(a, k, None) for k in ("delay", "jitter", "loss", "duplicate", "reorder")}
    shape = LinkShape(rate=a.rate, burst=a.burst, latency=a.latency, limit_bytes=a.limit_bytes,
                      **impair)
    host_shapes = {i: LinkShape(rate=rate, burst=a.burst, latency=a.latency,
                                limit_bytes=a.limit_bytes, **impair)
                   for i, rate in parse_host_rates(a.host_rate).items()}
    rate_bps = min([parse_rate(a.rate)] + [parse_rate(h.rate) for h in host_shapes.values()])
    tb = Testbed(a.name, a.hosts, shape=shape, host_shapes=host_shapes, mtu=a.mtu,
                 owner_pid=os.getpid(),
                 ipv6=getattr(a, "ipv6", False))
    results: Dict[str, List[dict]] = {}
    holding = None
    striped: List[Optional[int]] = []  # chunks each switch completed
    cpu: Dict[str, dict] = {}
    with tb:
        with _switch(tb, switchd, a) as switch_addr:
            for backend in a.backends.split(","):
                before = cpu_sample(tb)
                results[backend] = _perf_ranks(tb, perf_bin, backend, switch_addr, a, out)
                cpu[backend] = cpu_shares(before, cpu_sample(tb))
                if backend == "switch":
                    holding = slot_holding(tb)
                    striped = [(switch_totals(tb, k) or {}).get("completed_chunks")
                               for k in range(getattr(a, "switches", 1))]
    rows = []
    extra = "".join(", %s %s" % (k, getattr(a, k)) for k in ("loss", "duplicate", "delay",
                                                              "jitter", "reorder")
                    if getattr(a, k, None))
    if a.delay and tb.netem is False:
        extra += " (delay by inca-linkdelay: no netem)"
    print("# testbed: %d hosts x %s each way%s, MTU %d, tbf burst %s, queue %s%s; chunk %d B%s" % (
        a.hosts, a.rate, "".join(", host %s" % h for h in a.host_rate), a.mtu, a.burst,
        a.limit_bytes or a.latency, extra, a.chunk_size,
        "; the switch path over IPv6" if getattr(a, "ipv6", False) else ""), file=out)
    print("#  size (B)   gloo (ms) switch (ms)  switch/gloo   ring bound  switch bound"
          "  gloo/bound switch/bound  path", file=out)
    base = results.get("gloo") or results.get("switch") or []
    for i in range(len(base)):
        g = results.get("gloo", [{}] * len(base))[i]
        sw_row = results.get("switch", [{}] * len(base))[i]
        size = (g or sw_row)["bytes"]
        b = wire_bounds(size, a.hosts, rate_bps, a.mtu, a.chunk_size, getattr(a, "ipv6", False))
        row = {"bytes": size, "gloo_us": g.get("time_us"), "switch_us": sw_row.get("time_us"),
               "ring_bound_us": b["ring_s"] * 1e6, "switch_bound_us": b["switch_s"] * 1e6,
               "path": sw_row.get("path"), "host_ops": sw_row.get("host_ops", 0),
               "why": sw_row.get("why", ""),
               "wrong": g.get("wrong", 0) + sw_row.get("wrong", 0),
               "chunks_sent": sw_row.get("chunks_sent", 0),
               "chunks_retransmitted": sw_row.get("chunks_retransmitted", 0),
               "competitive_entries": sw_row.get("competitive_entries", 0),
               "window_trace": sw_row.get("window_trace", [])}  # with --window-trace
        row["speedup"] = (row["gloo_us"] / row["switch_us"]
                          if row["switch_us"] and row["gloo_us"] else None)
        row["gloo_of_bound"] = row["ring_bound_us"] / row["gloo_us"] if row["gloo_us"] else None
        row["switch_of_bound"] = (row["switch_bound_us"] / row["switch_us"]
                                  if row["switch_us"] else None)
        rows.append(row)
        print("%11d %11.2f %11.2f %12.2f %10.2f ms %10.2f ms %11.2f %12.2f  %s" % (
            row["bytes"], (row["gloo_us"] or 0) / 1e3, (row["switch_us"] or 0) / 1e3,
            row["speedup"] or 0, row["ring_bound_us"] / 1e3, row["switch_bound_us"] / 1e3,
            row["gloo_of_bound"] or 0, row["switch_of_bound"] or 0,
            "%s%s" % (row["path"], " (%d on the host path%s)" % (
                row["host_ops"], ": " + row["why"] if row.get("why") else "")
                      if row["host_ops"] else "")),
            file=out)
    if holding:
        print("# slot holding (first contribution to completion, every size, warm-up included): "
              "p50 %.0f us, p99 %.0f us" % (holding["p50_us"], holding["p99_us"]), file=out)
    if len(striped) > 1:
        print("# chunks each switch completed (all sizes, warm-up included): %s" % ", ".join(
            "?" if c is None else str(c) for c in striped), file=out)
    if rows and "switch" in results:
        print("# competitive-mode entries of the ranks' switch paths (all sizes): %d" % (
            rows[-1]["competitive_entries"]), file=out)
    for backend, c in cpu.items():
        print("# cpu during %s (all sizes, warm-up included), share of %d cores: ranks %.0f %%, "
              "inca-switchd %.0f %%,%s softirq %.0f %%, idle %.0f %%" % (
                  backend, c["cores"], 100 * c["ranks"], 100 * c["switchd"],
                  " inca-linkdelay %.0f %%," % (100 * c["linkdelay"]) if c["linkdelay"] else "",
                  100 * c["softirq"], 100 * c["idle"]), file=out)
    res = {"testbed": {"hosts": a.hosts, "rate": a.rate, "host_rate": a.host_rate, "mtu": a.mtu,
                       "loss": a.loss, "delay": a.delay, "jitter": a.jitter,
                       "delay_by": None if tb.netem is None or not a.delay else
                       ("netem" if tb.netem else "inca-linkdelay")},
           "rows": rows, "slot_holding": holding, "cpu": cpu, "switch_completed_chunks": striped}
    if tb.linkdelay_counters:  # the delay lines' own accounting, per host
        res["linkdelay"] = {str(h): c for h, c in sorted(tb.linkdelay_counters.items())}
    print(json.dumps(res), file=out)
    return res


def _parse_tbf_backlogs(text: str) -> Dict[str, int]:
    """Each tbf's backlog, in bytes, by device, from `tc -j -s qdisc show`."""
    try:
        qdiscs = json.loads(text or "[]")
    except ValueError:
        return {}
    return {q["dev"]: int(q.get("backlog", 0)) for q in qdiscs
            if q.get("kind") == "tbf" and "dev" in q}


def tbf_backlogs(ns: str) -> Dict[str, int]:
    """Each tbf's backlog in namespace ns, in bytes, by device, from one
    `tc -json -s -netns NS qdisc show` (exact bytes; the text form rounds
    to KiB, and `ip netns exec` would cost a second exec per sample)."""
    text = subprocess.run(["tc", "-j", "-s", "-n", ns, "qdisc", "show"], capture_output=True,
                          text=True).stdout
    return _parse_tbf_backlogs(text)


class TbfSampler:
    """Reads tbf backlogs in one namespace through a `tc -batch` process
    that stays up, so a sample costs one netlink dump and no fork or exec.
    Sampling a rate step every 20 ms with a tc run per sample cost two
    process starts per sample, CPU taken from the ranks and the switch on a
    2-core machine, which delays them and bunches their packets: the very
    queue being measured. Falls back to a tc run per sample if the batch
    process goes away."""

    def __init__(self, ns: str):
        self.ns = ns
        self.proc: Optional[subprocess.Popen] = None
        with contextlib.suppress(OSError):
            self.proc = subprocess.Popen(["tc", "-j", "-s", "-n", ns, "-batch", "-"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def backlogs(self) -> Dict[str, int]:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write("qdisc show\n")
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
                if line:
                    return _parse_tbf_backlogs(line)
            except (OSError, ValueError):
                pass
            self.close()
        return tbf_backlogs(self.ns)

    def close(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def rate_step(a, out=sys.stdout) -> dict:
    """One inca job on the testbed at a.rate; `a.step_after_ms` after its
    launch (choose it inside the timed iterations) every host link, both
    ways, drops to a quarter of the
    rate (tc change: the queues keep their packets). Samples the switch's
    downlink queues (all of them) and one host's uplink queue (in turn)
    every 20 ms or as fast as tc allows; returns the operations' timeline, the step
    time and the samples, with the settling time and the queue after the
    step in round trips and bandwidth-delay products at the new rate."""
    build = os.environ.get("INCA_BUILD_DIR") or os.path.join(REPO, "build", "release")
    perf_bin = os.path.join(build, "bin", "cais-perf")
    switchd = os.path.join(build, "bin", "inca-switchd")
    if a.jitter or a.loss:
        raise TestbedError("the rate step takes a delay but no jitter or loss")
    shape = LinkShape(rate=a.rate, burst=a.burst, latency=a.latency, limit_bytes=a.limit_bytes,
                      delay=a.delay)
    slow_bps = parse_rate(a.rate) / 4
    slow = "%dkbit" % int(slow_bps / 1000)
    tb = Testbed(a.name, a.hosts, shape=shape, mtu=a.mtu, owner_pid=os.getpid(),
                 ipv6=getattr(a, "ipv6", False))
    a = argparse.Namespace(**vars(a))  # rank 0 reports its window samples
    a.perf_arg = list(a.perf_arg) + ["--window-trace", "200000"]
    samples, stepped = [], None
    with tb:
        with _switch(tb, switchd, a) as switch_addr:
            procs = launch_ranks(tb, perf_bin, "switch", switch_addr, a, store_port())
            drained = _drain(procs, a)
            start = time.monotonic()
            down_tc = TbfSampler(tb.switch_ns)
            up_tc = [TbfSampler(tb.host_ns(i)) for i in range(tb.hosts)]
            try:
                while any(p.poll() is None for p in procs) and time.monotonic() - start < a.timeout:
                    if stepped is None and time.monotonic() - start >= a.step_after_ms / 1e3:
                        for i in range(tb.hosts):
                            for ns, dev, way in ((tb.host_ns(i), "eth0", "up"),
                                                 (tb.switch_ns, "p%d" % i, "down")):
                                subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "change",
                                                "dev", dev] + tb.tbf_parent(i, way) +
                                               ["handle", "10:", "tbf", "rate", slow, "burst",
                                                a.burst, "latency", a.latency], check=True,
                                               capture_output=True)
                        stepped = time.monotonic_ns()
                    # Every downlink (the switch namespace's tc) and one host's
                    # uplink in turn: two netlink dumps per sample.
                    t0 = time.monotonic()
                    down = down_tc.backlogs()
                    up = up_tc[len(samples) % tb.hosts].backlogs().get("eth0", 0)
                    samples.append((time.monotonic_ns(), up,
                                    max(down.get("p%d" % i, 0) for i in range(tb.hosts))))
                    # A 20 ms period where the tc runs allow; the loop ends with the job.
                    time.sleep(max(0.0, 0.02 - (time.monotonic() - t0)))
            finally:
                for sampler in [down_tc] + up_tc:
                    sampler.close()
            rows = collect_rows(procs, "switch", a, out, drained)
    res = {"rate": a.rate, "slow_rate": slow, "delay": a.delay, "stepped_ns": stepped,
           "samples": samples,
           "timeline_ns": rows[0].get("timeline_ns", []), "bytes": rows[0]["bytes"],
           "window_trace": rows[0].get("window_trace", []),
           "path": rows[0]["path"], "wrong": rows[0]["wrong"],
           # Rank 0's chunks over the whole run (both rates).
           "chunks_sent": rows[0].get("chunks_sent"),
           "chunks_retransmitted": rows[0].get("chunks_retransmitted")}
    res.update(step_summary(res, a.chunk_size))
    return res


def _seconds(t: Optional[str]) -> float:
    """A tc time ("500us", "2ms", "1s") in seconds; 0 for None."""
    if not t:
        return 0.0
    for unit, scale in (("us", 1e-6), ("ms", 1e-3), ("s", 1.0)):
        if t.endswith(unit):
            try:
                return float(t[:-len(unit)]) * scale
            except ValueError:
                break
    raise TestbedError("not a time: %r (use us, ms or s)" % t)


def step_summary(res: dict, chunk_size: int) -> dict:
    """After the step: the end of the first operation that started after it
    and ran within 15 % of the post-step median (the settling time, at the
    resolution of one operation), the share of post-step operations within
    that band, and the downlink queue's median, p99 and deepest sample.
    Round trip at the new rate: a chunk serialised up and down plus the
    testbed's delay each way (veth itself adds next to nothing); without a
    delay, 1 BDP = 2 chunks. From rank 0's window
    samples: when its window first came within 25 % of its post-step
    median (or one chunk, if that is more), in ms and in its own smoothed
    round trips (their post-step median), and the share of its post-step
    samples within that band. The queue's deepest sample from 20 round trips
    after the step on is reported apart (queue_*_settled_max_bdp)."""
    t, step = res["timeline_ns"], res["stepped_ns"]
    rtt_s = (2 * (chunk_size + 62 + 42) * 8 / parse_rate(res["slow_rate"]) +
             2 * _seconds(res.get("delay")))
    bdp = parse_rate(res["slow_rate"]) / 8 * rtt_s
    out = {"rtt_ms": rtt_s * 1e3, "bdp_bytes": bdp, "settle_ms": None, "settle_rtts": None,
           "within_band": None, "op_ms": None, "sample_period_ms": None}
    at = [smp[0] for smp in res.get("samples", [])]
    if len(at) > 1:
        gaps = sorted(b - a for a, b in zip(at, at[1:]))
        out["sample_period_ms"] = gaps[len(gaps) // 2] / 1e6
    if step is None or len(t) < 3:
        return out
    ops = [(t[i - 1], t[i]) for i in range(1, len(t)) if t[i - 1] >= step]
    if ops:
        d = sorted(e - s for s, e in ops)
        median = d[len(d) // 2]
        band = [abs((e - s) - median) <= 0.15 * median for s, e in ops]
        out["op_ms"] = median / 1e6
        out["within_band"] = sum(band) / len(band)
        if any(band):
            end = ops[band.index(True)][1]
            out["settle_ms"] = (end - step) / 1e6
            out["settle_rtts"] = out["settle_ms"] / 1e3 / rtt_s
    trace = res.get("window_trace") or []
    post = [(t_, w, s) for t_, w, s in trace if t_ >= step]
    pre = sorted(w for t_, w, _ in trace if step - 1_000_000_000 <= t_ < step)  # the last second
    if post and pre:
        wmed = sorted(w for _, w, _ in post)[len(post) // 2]
        srtt_us = sorted(s for _, _, s in post)[len(post) // 2]
        band = [abs(w - wmed) <= max(0.25 * wmed, 1.0) for _, w, _ in post]
        settled = post[band.index(True)][0] if any(band) else None
        out.update({"window_before": pre[len(pre) // 2], "window_after_median": wmed,
                    "window_srtt_us": srtt_us, "window_samples": len(trace),
                    "window_within_band": sum(band) / len(band)})
        if settled is not None:
            out["window_settle_ms"] = (settled - step) / 1e6
            out["window_settle_rtts"] = (settled - step) / 1e3 / max(1.0, srtt_us)
    # The bar: windows settled within 20 round trips, and from then on
    # the queue within 2 BDP. Before that, the deepest sample is what was in
    # flight at the old rate when the step came, which no sender can recall.
    settled_from = step + int(20 * rtt_s * 1e9)
    for k, way in ((1, "up"), (2, "down")):
        after = sorted(smp[k] for smp in res["samples"] if smp[0] >= step)
        if after:
            out["queue_%s_max_bdp" % way] = after[-1] / bdp
            out["queue_%s_p99_bdp" % way] = after[min(len(after) - 1, int(0.99 * len(after)))] / bdp
            out["queue_%s_median_bdp" % way] = after[len(after) // 2] / bdp
        late = [smp[k] for smp in res["samples"] if smp[0] >= settled_from]
        if late:
            out["queue_%s_settled_max_bdp" % way] = max(late) / bdp
    return out


def _proc_cpu_s(pid: int) -> float:
    """A running process's CPU seconds (utime + stime); 0 when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_sample(tb: Testbed) -> dict:
    """CPU seconds so far: this process's waited-for children (the ranks),
    inca-switchd, the delay lines (inca-linkdelay, where there is no netem),
    and the machine's softirq and idle time (/proc/stat)."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    tick = os.sysconf("SC_CLK_TCK")
    sample = {"t": time.monotonic(), "children": ru.ru_utime + ru.ru_stime,
              "switchd": sum(_proc_cpu_s(p) for p in (getattr(tb, "switchd_pids", None) or
                                                      [tb.switchd_pid])),
              "linkdelay": sum(_proc_cpu_s(p) for p in tb.linkdelay_pids.values())}
    with open("/proc/stat") as f:
        cpu = f.readline().split()[1:]
    sample["idle"] = (int(cpu[3]) + int(cpu[4])) / tick    # idle + iowait
    sample["softirq"] = int(cpu[6]) / tick
    return sample


def cpu_shares(a: dict, b: dict) -> dict:
    """Shares of all cores over the time between two cpu_sample()s."""
    cores = os.cpu_count() or 1
    total = max(1e-9, (b["t"] - a["t"]) * cores)
    return {"cores": cores, "seconds": b["t"] - a["t"],
            "ranks": (b["children"] - a["children"]) / total,
            "switchd": (b["switchd"] - a["switchd"]) / total,
            "linkdelay": (b["linkdelay"] - a["linkdelay"]) / total,
            "softirq": (b["softirq"] - a["softirq"]) / total,
            "idle": (b["idle"] - a["idle"]) / total}


def switch_totals(tb: Testbed, k: int = 0) -> Optional[dict]:
    """Switch k's totals (its /stats.json, read in the switch namespace), or
    None when they cannot be read."""
    return http_totals(tb, tb.switch_ns, tb.endpoint(tb.data_ip(), 9411 + 10 * k))


def http_totals(tb: Testbed, ns: str, endpoint: str) -> Optional[dict]:
    """The totals of the inca-switchd whose /metrics listens at `endpoint`,
    read in namespace `ns`, or None when they cannot be read."""
    url = "http://%s/stats.json" % endpoint
    code = "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(%r, timeout=5)" \
           ".read().decode())" % url
    p = tb.popen(ns, [sys.executable, "-c", code], stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True)
    try:
        o, _ = p.communicate(timeout=15)
        return json.loads(o)["totals"]
    except (subprocess.TimeoutExpired, ValueError, KeyError):
        p.kill()
        return None


def slot_holding(tb: Testbed) -> Optional[dict]:
    """The first switch's slot-holding percentiles over every chunk it
    completed, or None when they cannot be read."""
    totals = switch_totals(tb)
    if totals is None or "slot_holding_p50_us" not in totals:
        return None
    return {"p50_us": totals["slot_holding_p50_us"], "p99_us": totals["slot_holding_p99_us"]}


@contextlib.contextmanager
def _switch(tb: Testbed, switchd: str, a):
    """inca-switchd in the testbed's switch namespace (default flags plus
    --switchd-arg), for the duration of the block; yields its data address.
    With --switches K, K of them (data ports 9410, 9420, ...; control
    50051, 50052, ...; /metrics 9411, 9421, ...) and the comma-separated
    list of their data addresses, which the ranks stripe over."""
    procs, logs, addrs = [], [], []
    try:
        for k in range(max(1, getattr(a, "switches", 1))):
            addr = tb.endpoint(tb.data_ip(), 9410 + 10 * k)
            path = os.path.join(STATE_DIR, "%s-switchd%s.log" % (a.name, k or ""))
            with open(path, "w") as log:
                sw = tb.popen(tb.switch_ns, [switchd, "--listen", addr, "--control-listen",
                                             tb.endpoint(tb.data_ip(), 50051 + k), "--http-listen",
                                             tb.endpoint(tb.data_ip(), 9411 + 10 * k)]
                              + list(a.switchd_arg), stdout=log, stderr=subprocess.STDOUT,
                              preexec_fn=die_with_parent())
            procs.append(sw)
            logs.append(path)
            addrs.append(addr)
            wait_for_log(path, "event=switch_started", sw)
        tb.switchd_pid = procs[0].pid
        tb.switchd_pids = [p.pid for p in procs]
        yield ",".join(addrs)
    except KeyboardInterrupt:
        for path in logs:
            os.unlink(path)  # Ctrl-C or SIGTERM is no failure: nothing to look into
        raise
    finally:
        for sw in procs:
            sw.terminate()
            sw.wait(10)
    for path in logs:
        os.unlink(path)  # kept only when the run failed, for its post-mortem


def wait_for_log(path: str, word: str, proc: subprocess.Popen, timeout_s: float = 10,
                 count: int = 1) -> None:
    """Until `word` is in the log `count` times (a restart appends)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TestbedError("inca-switchd exited: %s" % open(path).read()[-2000:])
        if open(path).read().count(word) >= count:
            return
        time.sleep(0.02)  # polling a log for readiness, bounded by timeout_s
    raise TestbedError("inca-switchd did not start within %.0f s" % timeout_s)


def launch_ranks(tb: Testbed, perf_bin: str, backend: str, switch_addr, a, port: int,
            group: int = 0, placement: Optional[List[int]] = None) -> List[subprocess.Popen]:
    """One cais-perf rank per host namespace for one job: rank r on host
    placement[r] (default r); switch_addr a string, or a function of the
    host giving its switch (a leaf of a tree)."""
    procs = []
    for r in range(tb.hosts):
        h = placement[r] if placement else r
        sw = switch_addr(h) if callable(switch_addr) else switch_addr
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(tb.hosts),
                   MASTER_ADDR=tb.host_ip(placement[0] if placement else 0),
                   MASTER_PORT=str(port), INCA_SWITCH=sw if backend != "gloo" else "none",
                   INCA_BIND_IP=tb.data_ip(h))
        if backend == "gloo":
            # The baseline is plain Gloo: without the description exchange that
            # inca's own host path makes before each operation (check_agreement).
            env["INCA_CHECK_AGREEMENT"] = "0"
        argv = [perf_bin, "--op", "allreduce", "-b", a.min_bytes, "-e", a.max_bytes, "-f",
                str(a.factor), "--iters", str(a.iters), "--warmup", str(a.warmup),
                "--warmup-ms", str(getattr(a, "warmup_ms", 0)),
                "--chunk-size", str(a.chunk_size), "--group-id", str(group),
                "--json"] + list(a.perf_arg)
        if a.window:
            argv += ["--window", str(a.window)]
        if getattr(a, "duration_ms", 0):
            argv += ["--duration-ms", str(a.duration_ms)]
        procs.append(tb.popen(tb.host_ns(h), argv, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent()))
    return procs


def _drain(procs: List[subprocess.Popen], a) -> tuple:
    """Every rank's (stdout, stderr), read concurrently: a rank blocked on a
    full pipe (a long JSON line) would never exit otherwise."""
    import threading
    outs: List[tuple] = [("", "")] * len(procs)

    def read(k: int) -> None:
        outs[k] = procs[k].communicate(timeout=a.timeout)
    threads = [threading.Thread(target=read, args=(k,), daemon=True) for k in range(len(procs))]
    for t in threads:
        t.start()
    return outs, threads


def collect_rows(procs: List[subprocess.Popen], backend: str, a, out=sys.stdout,
             drained=None) -> List[dict]:
    outs, threads = drained or _drain(procs, a)
    for t in threads:
        t.join(a.timeout)
    for r, (p, (o, e)) in enumerate(zip(procs, outs)):
        if p.returncode != 0:
            raise TestbedError("cais-perf rank %d (%s) exited %d: %s" % (
                r, backend, p.returncode, (e.strip().splitlines() or ["?"])[-1]))
    out.write("".join(l + "\n" for l in outs[0][0].splitlines() if not l.startswith("{")))
    lines = [l for l in outs[0][0].splitlines() if l.startswith("{")]
    if not lines:
        raise TestbedError("cais-perf rank 0 printed no JSON")
    return json.loads(lines[-1])["rows"]


def store_port() -> int:
    return 29500 + (os.getpid() % 1000) * 4


def _perf_ranks(tb: Testbed, perf_bin: str, backend: str, switch_addr: str, a,
                out=sys.stdout) -> List[dict]:
    return collect_rows(launch_ranks(tb, perf_bin, backend, switch_addr, a, store_port()),
                        backend, a, out)


def overlap(ta: List[int], tb: List[int]) -> dict:
    """Two timelines (start of the timed loop, then each iteration's end, in
    CLOCK_MONOTONIC ns): the time both ran, and each one's mean operation
    time over the operations wholly inside it (None when there is none)."""
    out = {"overlap_s": 0.0, "ops_a": 0, "ops_b": 0, "mean_a_us": None, "mean_b_us": None}
    if len(ta) < 2 or len(tb) < 2:
        return out
    lo, hi = max(ta[0], tb[0]), min(ta[-1], tb[-1])
    if hi <= lo:
        return out
    out["overlap_s"] = (hi - lo) / 1e9
    for key, t in (("a", ta), ("b", tb)):
        inside = [t[i] - t[i - 1] for i in range(1, len(t)) if t[i - 1] >= lo and t[i] <= hi]
        out["ops_" + key] = len(inside)
        if inside:
            out["mean_%s_us" % key] = sum(inside) / len(inside) / 1e3
    return out


def share(a, second: str, out=sys.stdout) -> dict:
    """Two 4-rank jobs at once on one testbed, one rank of each per host: an
    inca job and a second one (`switch`: another inca job on its own group;
    `gloo`). Returns each job's time per operation, and over the time both
    ran, the fraction of the link each got (its bound alone over its mean
    operation time there; docs/testbed.md)."""
    build = os.environ.get("INCA_BUILD_DIR") or os.path.join(REPO, "build", "release")
    perf_bin = os.path.join(build, "bin", "cais-perf")
    switchd = os.path.join(build, "bin", "inca-switchd")
    shape = LinkShape(rate=a.rate, burst=a.burst, latency=a.latency, limit_bytes=a.limit_bytes)
    tb = Testbed(a.name, a.hosts, shape=shape, mtu=a.mtu, owner_pid=os.getpid(),
                 ipv6=getattr(a, "ipv6", False))
    rate_bps = parse_rate(a.rate)
    with tb:
        with _switch(tb, switchd, a) as switch_addr:
            first = launch_ranks(tb, perf_bin, "switch", switch_addr, a, store_port(), group=0)
            other = launch_ranks(tb, perf_bin, second, switch_addr, a, store_port() + 2, group=1)
            rows_a = collect_rows(first, "switch", a, out)
            rows_b = collect_rows(other, second, a, out)
    res = {"testbed": {"hosts": a.hosts, "rate": a.rate}, "second": second, "rows": []}
    for ra, rb in zip(rows_a, rows_b):
        b = wire_bounds(ra["bytes"], a.hosts, rate_bps, a.mtu, a.chunk_size,
                        getattr(a, "ipv6", False))
        bound_b = b["switch_s"] if second == "switch" else b["ring_s"]
        ta, tl = ra.get("timeline_ns", []), rb.get("timeline_ns", [])
        ov = overlap(ta, tl)
        row = {"bytes": ra["bytes"], "inca_us": ra["time_us"], "second_us": rb["time_us"],
               "paths": [ra["path"], rb["path"]], "overlap_s": ov["overlap_s"],
               "ops_in_overlap": [ov["ops_a"], ov["ops_b"]],
               # Each timed loop's start and end, s after the first start.
               "spans_s": ([[(t[0] - min(ta[0], tl[0])) / 1e9, (t[-1] - min(ta[0], tl[0])) / 1e9]
                            for t in (ta, tl)] if ta and tl else None),
               "competitive_entries": [ra.get("competitive_entries", 0),
                                       rb.get("competitive_entries", 0)],
               "retransmitted": [ra.get("chunks_retransmitted", 0),
                                 rb.get("chunks_retransmitted", 0)]}
        # Over the time both jobs ran: each job's mean time per operation
        # among the operations that lay wholly inside that time.
        row["inca_overlap_us"] = ov["mean_a_us"]
        row["second_overlap_us"] = ov["mean_b_us"]
        row["inca_share"] = (b["switch_s"] * 1e6 / ov["mean_a_us"]) if ov["mean_a_us"] else None
        row["second_share"] = (bound_b * 1e6 / ov["mean_b_us"]) if ov["mean_b_us"] else None
        res["rows"].append(row)
    return res
