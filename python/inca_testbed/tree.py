"""`scripts/testbed.py perf --racks R --hosts-per-rack H`: the two-tier
testbed (docs/testbed.md, "Racks"). Each rack is a leaf namespace with its
inca-switchd, the spine namespace holds the root and the aggregation manager
(inca-controller --topology); host links are shaped at --rate, leaf-spine
links at --uplink-rate. Backends, in one run on the same hosts:

  tree    every rank JOINs its own leaf; the manager builds the tree
  gloo    Gloo's ring, ranks in rank order over the placement
  flat    every rank JOINs the spine switch (no tree): all traffic crosses
          the uplinks, as one switch above the racks would see it

Bounds on wire bytes per link (perf.wire_bounds' headers): the tree moves
the tensor S once each way over each host link and each uplink; the ring
2(n-1)/n S over each host link and, over each uplink, that times the ring
edges leaving (entering) the rack; flat H x S over each uplink."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

from . import perf as P
from .net import REPO, STATE_DIR, LinkShape, TestbedError, die_with_parent, parse_rate
from .racks import RackTestbed

CONTROL_PORT = 50051
DATA_PORT = 9410
HTTP_PORT = 9411


def placement_of(a, hosts: int) -> List[int]:
    """Rank r runs on host placement[r]: rack order, or shuffled (a
    scheduler's placement) with --placement random."""
    order = list(range(hosts))
    if getattr(a, "placement", "rack") == "random":
        random.Random(getattr(a, "seed", 1)).shuffle(order)
    return order


def ring_crossings(placement: List[int], hosts_per_rack: int, racks: int) -> int:
    """The most ring edges (rank r -> r+1 mod n) leaving any one rack: how
    many times the ring's per-edge bytes cross that rack's uplink each way."""
    out = [0] * racks
    n = len(placement)
    for r in range(n):
        a, b = placement[r] // hosts_per_rack, placement[(r + 1) % n] // hosts_per_rack
        if a != b:
            out[a] += 1
    return max(out)


def tree_bounds(size: int, a, crossings: int) -> dict:
    """Seconds each backend needs at least: the slowest link's wire bytes
    over its rate."""
    n = a.racks * a.hosts_per_rack
    rate, up = parse_rate(a.rate), parse_rate(a.uplink_rate)
    one = P.wire_bounds(size, n, 1.0, a.mtu, a.chunk_size)  # bits at 1 bit/s
    return {"tree_s": max(one["switch_s"] / rate, one["switch_s"] / up),
            "ring_s": max(one["ring_s"] / rate, crossings * one["ring_s"] / up),
            "flat_s": max(one["switch_s"] / rate, a.hosts_per_rack * one["switch_s"] / up)}


def _topology(tb: RackTestbed) -> str:
    """The manager's topology file: the spine, each rack's leaf and hosts."""
    at = tb.data_ip()
    lines = ["switches:", '  - {name: spine, address: "%s", control: "%s"}'
             % (tb.endpoint(at, DATA_PORT), tb.endpoint(at, CONTROL_PORT))]
    for k in range(tb.racks):
        at = tb.leaf_data_ip(k)
        lines.append('  - {name: leaf%d, address: "%s", control: "%s", parent: spine}'
                     % (k, tb.endpoint(at, DATA_PORT), tb.endpoint(at, CONTROL_PORT)))
    lines.append("hosts:")
    for k in range(tb.racks):
        ips = ['"%s"' % tb.data_ip(i) for i in range(tb.hosts) if tb.rack_of(i) == k]
        lines.append("  - {at: leaf%d, addresses: [%s]}" % (k, ", ".join(ips)))
    f = tempfile.NamedTemporaryFile("w", dir=STATE_DIR, prefix="%s-" % tb.name,
                                    suffix="-topology.yaml", delete=False)
    f.write("\n".join(lines) + "\n")
    f.close()
    return f.name


class TreeNetwork:
    """inca-switchd at the spine (switch 0) and at every leaf (switch k+1;
    the root decides: the leaves' chunk timeout exceeds the root's), and the
    aggregation manager in the spine's namespace. A switch can be killed and
    started again (the fault suite). Logs are removed on a clean close and
    kept when the run failed."""

    def __init__(self, tb: RackTestbed, build: str, name: str, switchd_args: List[str]) -> None:
        self.tb, self.build, self.name, self.args = tb, build, name, list(switchd_args)
        self.switches: List[Optional[subprocess.Popen]] = [None] * (tb.racks + 1)
        self.starts = [0] * (tb.racks + 1)
        self.logs = [os.path.join(STATE_DIR, "%s-switchd-%s.log" % (
            name, "spine" if k == 0 else "leaf%d" % (k - 1))) for k in range(tb.racks + 1)]
        self.manager_log = os.path.join(STATE_DIR, "%s-manager.log" % name)
        self.manager: Optional[subprocess.Popen] = None
        self.topo = _topology(tb)
        for path in self.logs:
            open(path, "w").close()

    def address(self, k: int) -> str:
        return self.tb.data_ip() if k == 0 else self.tb.leaf_data_ip(k - 1)

    def namespace(self, k: int) -> str:
        return self.tb.switch_ns if k == 0 else self.tb.leaf_ns(k - 1)

    def start_switch(self, k: int) -> None:
        ip = self.address(k)
        with open(self.logs[k], "a") as log:
            p = self.tb.popen(self.namespace(k), [
                os.path.join(self.build, "bin", "inca-switchd"), "--listen",
                self.tb.endpoint(ip, DATA_PORT), "--control-listen",
                self.tb.endpoint(ip, CONTROL_PORT), "--http-listen",
                self.tb.endpoint(ip, HTTP_PORT),
                "--timeout-ms", "500" if k == 0 else "750"] + self.args,
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent())
        self.switches[k] = p
        self.starts[k] += 1
        P.wait_for_log(self.logs[k], "event=switch_started", p, count=self.starts[k])

    def kill_switch(self, k: int) -> None:
        p = self.switches[k]
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(10)

    def __enter__(self) -> "TreeNetwork":
        try:
            for k in range(len(self.switches)):
                self.start_switch(k)
            self.tb.switchd_pids = [p.pid for p in self.switches if p is not None]
            with open(self.manager_log, "w") as log:
                self.manager = self.tb.popen(
                    self.tb.switch_ns, [os.path.join(self.build, "bin", "inca-controller"),
                                        "--topology", self.topo, "--period-ms", "50"],
                    stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent())
            P.wait_for_log(self.manager_log, "event=manager_started", self.manager)
        except BaseException:
            self._stop()
            raise
        return self

    def _stop(self) -> None:
        for p in self.switches + [self.manager]:
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(10)
        os.unlink(self.topo)

    def __exit__(self, kind, value, tb) -> None:
        self._stop()
        if kind is None:
            for path in self.logs + [self.manager_log]:
                os.unlink(path)  # kept only when the run failed


def _holding(tb: RackTestbed) -> Dict[str, Optional[dict]]:
    """Slot-holding percentiles at the root and at leaf 0 (every chunk each
    completed so far)."""
    out = {}
    for name, ns, ip in (("root", tb.switch_ns, tb.data_ip()),
                         ("leaf0", tb.leaf_ns(0), tb.leaf_data_ip(0))):
        t = P.http_totals(tb, ns, tb.endpoint(ip, HTTP_PORT))
        out[name] = None if not t or "slot_holding_p50_us" not in t else {
            "p50_us": t["slot_holding_p50_us"], "p99_us": t["slot_holding_p99_us"],
            "completed_chunks": t.get("completed_chunks"),
            "uplink_partials": t.get("uplink_partials")}
    return out


def tree_perf(a, out=sys.stdout) -> dict:
    """Builds R racks x H hosts, runs each backend in turn on the same hosts,
    prints every size's rows with the bounds and fractions; returns them."""
    build = os.environ.get("INCA_BUILD_DIR") or os.path.join(REPO, "build", "release")
    for b in ("cais-perf", "inca-switchd", "inca-controller"):
        if not os.path.exists(os.path.join(build, "bin", b)):
            raise TestbedError("%s not found in %s/bin: build it or set INCA_BUILD_DIR"
                               % (b, build))
    n = a.racks * a.hosts_per_rack
    a.hosts = n
    shape = LinkShape(rate=a.rate, burst=a.burst, latency=a.latency, limit_bytes=a.limit_bytes)
    uplink = LinkShape(rate=a.uplink_rate, burst=a.burst, latency=a.latency,
                       limit_bytes=a.limit_bytes)
    # --loss and --duplicate: rack 0's uplink, each way.
    lossy = LinkShape(rate=a.uplink_rate, burst=a.burst, latency=a.latency,
                      limit_bytes=a.limit_bytes, loss=a.loss, duplicate=a.duplicate)
    tb = RackTestbed(a.name, n, a.racks, shape=shape, uplink_shape=uplink,
                     uplink_shapes={0: lossy}, mtu=a.mtu, owner_pid=os.getpid(), ipv6=a.ipv6)
    placement = placement_of(a, n)
    crossings = ring_crossings(placement, a.hosts_per_rack, a.racks)
    perf_bin = os.path.join(build, "bin", "cais-perf")
    results: Dict[str, List[dict]] = {}
    cpu: Dict[str, dict] = {}
    holding = None
    with tb:
        with TreeNetwork(tb, build, a.name, a.switchd_arg):
            for backend in a.backends.split(","):
                if backend not in ("tree", "gloo", "flat"):
                    raise TestbedError("backend %r: a testbed of racks runs tree, gloo, flat"
                                       % backend)
                def switch_of(h: int, backend=backend) -> str:
                    ip = tb.data_ip() if backend == "flat" else tb.leaf_data_ip(tb.rack_of(h))
                    return tb.endpoint(ip, DATA_PORT)
                before = P.cpu_sample(tb)
                procs = P.launch_ranks(tb, perf_bin, backend, switch_of, a, P.store_port(),
                                  placement=placement)
                results[backend] = P.collect_rows(procs, backend, a, out)
                cpu[backend] = P.cpu_shares(before, P.cpu_sample(tb))
                if backend == "tree":
                    holding = _holding(tb)
    return _report(a, results, cpu, holding, placement, crossings, out)


def _report(a, results, cpu, holding, placement, crossings, out) -> dict:
    print("# racks: %d x %d hosts, host links %s, uplinks %s%s, MTU %d, chunk %d B, placement %s"
          " (the ring crosses an uplink %d times each way)" % (
              a.racks, a.hosts_per_rack, a.rate, a.uplink_rate,
              ", uplink loss %s" % a.loss if a.loss else "", a.mtu, a.chunk_size,
              "rack order" if placement == sorted(placement) else placement, crossings),
          file=out)
    print("#  size (B)   tree (ms)   gloo (ms)   flat (ms)  tree/gloo  tree/bound  gloo/bound"
          "  flat/bound  path", file=out)
    base = next(iter(results.values()), [])
    rows = []
    for i in range(len(base)):
        got = {b: results[b][i] for b in results}
        size = base[i]["bytes"]
        bd = tree_bounds(size, a, crossings)
        row = {"bytes": size, "bounds_us": {k: v * 1e6 for k, v in bd.items()},
               "wrong": sum(r.get("wrong", 0) for r in got.values())}
        for b, key in (("tree", "tree_s"), ("gloo", "ring_s"), ("flat", "flat_s")):
            r = got.get(b)
            row[b] = None if r is None else {
                "time_us": r["time_us"], "of_bound": bd[key] * 1e6 / r["time_us"],
                "path": r.get("path"), "host_ops": r.get("host_ops", 0)}
        t, g = row["tree"], row["gloo"]
        row["tree_vs_gloo"] = g["time_us"] / t["time_us"] if t and g else None
        rows.append(row)

        def ms(x):
            return x["time_us"] / 1e3 if x else 0.0

        def frac(x):
            return x["of_bound"] if x else 0.0
        print("%11d %11.2f %11.2f %11.2f %10.2f %11.2f %11.2f %11.2f  %s" % (
            size, ms(t), ms(g), ms(row["flat"]), row["tree_vs_gloo"] or 0, frac(t), frac(g),
            frac(row["flat"]), (t or {}).get("path")), file=out)
    if holding:
        for name, h in holding.items():
            if h:
                print("# slot holding at the %s (every chunk, warm-up included): p50 %.0f us, "
                      "p99 %.0f us" % (name, h["p50_us"], h["p99_us"]), file=out)
    for backend, c in cpu.items():
        print("# cpu during %s, share of %d cores: ranks %.0f %%, inca-switchd (all) %.0f %%, "
              "softirq %.0f %%, idle %.0f %%" % (backend, c["cores"], 100 * c["ranks"],
                                                 100 * c["switchd"], 100 * c["softirq"],
                                                 100 * c["idle"]), file=out)
    res = {"testbed": {"racks": a.racks, "hosts_per_rack": a.hosts_per_rack, "rate": a.rate,
                       "uplink_rate": a.uplink_rate, "loss": a.loss, "placement": placement,
                       "ring_crossings": crossings},
           "rows": rows, "slot_holding": holding, "cpu": cpu}
    print(json.dumps(res), file=out)
    return res
