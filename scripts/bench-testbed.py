#!/usr/bin/python3
"""Switch against Gloo on the multi-host testbed, in one run: writes the
"On the testbed" section of docs/PERFORMANCE.md and docs/eval/testbed-algbw.png.

    sudo scripts/bench-testbed.py            # about 3 minutes on 2 cores
    sudo scripts/bench-testbed.py --quick    # fewer sizes and iterations

Every scenario builds its testbed (scripts/testbed.py), starts inca-switchd
with its default flags in the switch namespace and one cais-perf rank per
host namespace, runs the switch then Gloo, and tears everything down. The
bounds count wire bytes at the shaped rate (docs/testbed.md).
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.append(os.path.join(ROOT, "python"))  # the inca_testbed package
from inca_testbed import cli, net, perf  # noqa: E402
import doc_sections  # noqa: E402  (scripts/, beside this file)

DOC = os.path.join(ROOT, "docs", "PERFORMANCE.md")
PLOT = os.path.join(ROOT, "docs", "eval", "testbed-algbw.png")
BEGIN, END = "<!-- testbed:begin -->", "<!-- testbed:end -->"


def scenarios(quick: bool):
    # Five warm-up operations and at least 3 s per size: the switch's measured offload
    # controller samples a size class on the path it chose and explores the other path
    # twice (min_samples 2, the second explore 1 s after the first has landed; docs/control.md,
    # "Measured decisions") before the timed iterations. A 64 MiB host-path operation at
    # 500 Mbit/s takes 1.9 s, so three warm-ups did not cover both explores.
    it = ["--iters", "3" if quick else "5", "--warmup", "5", "--warmup-ms", "3000"]
    sweep = ["-b", "64K" if quick else "4K", "-e", "64M", "-f", "16" if quick else "4"]
    return [
        ("4 x 1 Gbit/s", ["--hosts", "4", "--rate", "1gbit"] + sweep + it, "sweep4"),
        ("8 x 500 Mbit/s", ["--hosts", "8", "--rate", "500mbit", "-b", "1M", "-e", "64M", "-f",
                            "64" if quick else "4"] + it, "sweep8"),
        ("4 x 1 Gbit/s, host 2 at 500 Mbit/s", ["--hosts", "4", "--rate", "1gbit", "--host-rate",
                                                "2=500mbit", "-b", "16M", "-e", "64M"] + it,
         "slow"),
        ("4 x 1 Gbit/s, 1 % loss each way", ["--hosts", "4", "--rate", "1gbit", "--loss", "1%",
                                            "-b", "16M", "-e", "16M"] + it, "loss"),
        ("4 x 1 Gbit/s, 2 ms ± 1 ms jitter each way", ["--hosts", "4", "--rate", "1gbit",
                                                       "--delay", "2ms", "--jitter", "1ms",
                                                       "-b", "16M", "-e", "16M"] + it, "jitter"),
        ("4 x 500 Mbit/s, 2 ms ± 1 ms jitter each way", ["--hosts", "4", "--rate", "500mbit",
                                                         "--delay", "2ms", "--jitter", "1ms",
                                                         "-b", "16M", "-e", "16M"] + it,
         "jitter500"),
        ("4 x 1.5 Gbit/s", ["--hosts", "4", "--rate", "1500mbit", "-b", "64M", "-e", "64M"] +
         it, "r15"),
        ("4 x 2 Gbit/s", ["--hosts", "4", "--rate", "2gbit", "-b", "64M", "-e", "64M"] + it,
         "r2"),
        ("4 x 4 Gbit/s", ["--hosts", "4", "--rate", "4gbit", "-b", "64M", "-e", "64M"] + it,
         "r4"),
    ]


def human(n: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return "%d %s" % (n // k, unit)
    return "%d B" % n


def table(res: dict) -> str:
    lines = ["| size | Gloo (ms) | switch (ms) | switch / Gloo | Gloo / ring bound | "
             "switch / switch bound | retransmitted | path |",
             "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in res["rows"]:
        again = (100.0 * r["chunks_retransmitted"] / r["chunks_sent"]) if r["chunks_sent"] else 0
        lines.append("| %s | %.2f | %.2f | %.2f× | %.2f | %.2f | %.2f %% | %s |" % (
            human(r["bytes"]), r["gloo_us"] / 1e3, r["switch_us"] / 1e3, r["speedup"],
            r["gloo_of_bound"], r["switch_of_bound"], again,
            r["path"] + (" (%d on Gloo)" % r["host_ops"] if r.get("host_ops") else "")))
    c = (res.get("cpu") or {}).get("switch")
    if c:
        lines.append("\nCPU during the switch run (all sizes, warm-ups included), share of the "
                     "machine's %d cores: the ranks %.0f %%, inca-switchd %.0f %%,%s softirq "
                     "%.0f %%, idle %.0f %%." % (
                         c["cores"], 100 * c["ranks"], 100 * c["switchd"],
                         " inca-linkdelay (the delay line) %.0f %%," % (100 * c["linkdelay"])
                         if c.get("linkdelay") else "", 100 * c["softirq"], 100 * c["idle"]))
    h = res.get("slot_holding")
    if h:
        lines.append("\nSlot holding on the switch (every chunk of this run): p50 %.0f µs, "
                     "p99 %.0f µs." % (h["p50_us"], h["p99_us"]))
    return "\n".join(lines)


def plot(results: dict) -> None:
    try:
        plt = doc_sections.pyplot()
    except ImportError:
        print("bench-testbed: no matplotlib (python3-matplotlib); skipping the plot",
              file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, title, rate in ((axes[0], "sweep4", "4 hosts x 1 Gbit/s", 1e9),
                                 (axes[1], "sweep8", "8 hosts x 500 Mbit/s", 5e8)):
        rows = results[key]["rows"]
        sizes = [r["bytes"] for r in rows]
        ax.plot(sizes, [r["bytes"] / r["gloo_us"] / 1e3 for r in rows], "o-", label="Gloo (ring)")
        ax.plot(sizes, [r["bytes"] / r["switch_us"] / 1e3 for r in rows], "s-",
                label="inca switch")
        ax.plot(sizes, [r["bytes"] / r["ring_bound_us"] / 1e3 for r in rows], ":",
                color="C0", label="ring bound")
        ax.plot(sizes, [r["bytes"] / r["switch_bound_us"] / 1e3 for r in rows], ":",
                color="C1", label="switch bound")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("all-reduce size (bytes, f32 sum)")
        ax.set_ylabel("algbw (GB/s)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(PLOT), exist_ok=True)
    fig.savefig(PLOT, dpi=110)


def r_star(results: dict) -> str:
    """R*, the highest per-host rate whose 64 MiB switch row reaches 0.9 of
    the switch's bound, from the 4-host rows of this run."""
    rows = []
    for key in ("sweep4", "r15", "r2", "r4"):
        res = results.get(key)
        row = next((r for r in (res or {}).get("rows", []) if r["bytes"] == 64 << 20), None)
        if row is not None and row.get("switch_of_bound") is not None:
            rows.append((net.parse_rate(res["testbed"]["rate"]), res["testbed"]["rate"],
                         row["switch_of_bound"]))
    if not rows:
        return ""
    rows.sort()
    ok = [r for r in rows if r[2] >= 0.9]
    sweep = ", ".join("%s %.2f" % (name, f) for _, name, f in rows)
    return ("### R*\n\nThe highest per-host rate at which 64 MiB all-reduces reach 0.9 of the "
            "switch's bound, 4 hosts, from the rows above (%s): **R* = %s**. What limits it "
            "is in the CPU line of the first rate that misses (this machine has %d cores).\n" % (
                sweep, ok[-1][1] if ok else "below %s" % rows[0][1], os.cpu_count() or 1))


def machine_speed() -> dict:
    """How fast this machine moves datagrams right now (switchd-bench, 8,952 B):
    the switch path is CPU-bound here, so its rows follow this figure."""
    exe = os.path.join(ROOT, "build", "release", "bin", "switchd-bench")
    p = subprocess.run([exe, "--packets", "100000", "--max-seconds", "4"], capture_output=True,
                       text=True, timeout=120)
    rates = re.findall(r"(udp-forwarder|inca-switchd)\s+(\d+) pkt/s", p.stdout)
    big = rates[-2:] if len(rates) >= 4 else []
    return {name: int(v) for name, v in big}


def share_text(res: dict, title: str, second: str, extra: list, note: str) -> str:
    """The paragraph for one shared-testbed run."""
    sh = res["rows"][0]
    fmt = lambda v: "n/a" if v is None else "%.2f" % v  # noqa: E731
    other = "the second inca job" if second == "switch" else "Gloo"
    head = ("### %s\n\n%sTwo 4-rank jobs, one rank of each per host, started together, 16 MiB "
            "all-reduces, defaults everywhere%s. " % (
                title, note, " but `cais-perf --no-competitive` for both jobs' ranks (Gloo's "
                "ignore it)" if extra else ""))
    spans = sh.get("spans_s")
    if sh["overlap_s"] <= 0:
        # No overlap says something too: one job's timed loop began only once
        # the other's had ended (its warm-up was held back meanwhile).
        when = ("" if not spans else
                " (inca's from %.1f to %.1f s after the first began, %s's from %.1f to %.1f s)"
                % (spans[0][0], spans[0][1], other, spans[1][0], spans[1][1]))
        late = ("inca" if spans and spans[0][0] >= spans[1][1] else other) if spans else None
        return head + (
            "The two timed loops did not overlap%s%s, so there is no share to report. Each "
            "alone: inca %.1f ms per operation, %s %.1f ms. Paths %s.\n" % (
                when, "" if late is None else
                ": %s's warm-up (3 operations and 1.5 s) did not end until the other's timed "
                "loop had" % late,
                sh["inca_us"] / 1e3, other, sh["second_us"] / 1e3, " and ".join(sh["paths"])))
    return head + (
        "Over the %.1f s both ran (%d and %d operations wholly inside it): inca %.1f ms per "
        "operation, %s %.1f ms; inca got %s of the link (its switch bound alone over its "
        "time), %s %s (its own bound alone: %s). Paths %s.\n" % (
            sh["overlap_s"], sh["ops_in_overlap"][0], sh["ops_in_overlap"][1],
            (sh["inca_overlap_us"] or 0) / 1e3, other, (sh["second_overlap_us"] or 0) / 1e3,
            fmt(sh["inca_share"]), other, fmt(sh["second_share"]),
            "the switch's" if second == "switch" else "the ring's", " and ".join(sh["paths"])))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="print, do not touch docs/")
    ap.add_argument("--from-json", action="store_true",
                    help="rewrite the docs from docs/eval/testbed.json, measuring nothing")
    ap.add_argument("--only", default="",
                    help="measure only these scenarios (comma-separated keys of "
                         "docs/eval/testbed.json, e.g. share-gloo-1gbit-delay-only,rate_step); "
                         "the others come from that file, and each rerun row says when")
    a = ap.parse_args()
    only = set(k for k in a.only.split(",") if k)
    net.interrupt_on_sigterm()  # a kill tears the testbed down as Ctrl-C does
    saved = os.path.join(ROOT, "docs", "eval", "testbed.json")
    results = {}
    text = []
    if a.from_json or only:
        with open(saved) as f:
            results = json.load(f)
        unknown = only - set(results) - {"rate_step"}
        if unknown:
            print("bench-testbed: --only: no scenario %s in %s" % (", ".join(sorted(unknown)),
                                                                   saved), file=sys.stderr)
            return 2
    if not a.from_json:
        try:
            net.require_root()
        except net.TestbedError as e:
            print("bench-testbed: %s" % e, file=sys.stderr)
            return 2
    today = datetime.date.today().isoformat()
    if not a.from_json and not only:
        results["machine"] = machine_speed()
        results["date"] = today
    elif only:
        rerun_machine = machine_speed()

    def measure(key: str) -> bool:
        """Whether to measure `key` in this run."""
        return not a.from_json and (not only or key in only)

    def stamp(key: str) -> None:
        """A scenario rerun with --only carries its own date and machine speed."""
        if only and key in only:
            results[key]["rerun"] = {"date": today, "machine": rerun_machine}

    def rerun_note(key: str) -> str:
        r = results.get(key, {}).get("rerun")
        if not r:
            return ""
        m = r.get("machine", {})
        return ("Rerun alone on %s (`--only`; `switchd-bench` then: plain forwarder %s pkt/s, "
                "inca-switchd %s pkt/s).\n\n" % (r["date"], m.get("udp-forwarder", "?"),
                                                  m.get("inca-switchd", "?")))
    for title, argv, key in scenarios(a.quick):
        if measure(key):
            print("=== %s" % title, flush=True)
            log = io.StringIO()
            res = perf.perf(cli.perf_options(argv + ["--name", "bench"]), out=log)
            print("\n".join(l for l in log.getvalue().splitlines() if not l.startswith("{")),
                  flush=True)
            results[key] = res
            stamp(key)
        text.append("### %s\n\n%s%s\n" % (title, rerun_note(key), table(results[key])))
    text.append(r_star(results))
    shares = [("switch", "1gbit", "Two inca jobs sharing 4 x 1 Gbit/s", []),
              ("switch", "500mbit", "Two inca jobs sharing 4 x 500 Mbit/s", []),
              ("gloo", "1gbit", "An inca job beside a Gloo job on 4 x 1 Gbit/s", []),
              ("gloo", "1gbit", "An inca job with competitive mode off beside a Gloo job on "
               "4 x 1 Gbit/s", ["--perf-arg=--no-competitive"])]
    for second, rate, title, extra in shares:
        key = "share-%s-%s%s" % (second, rate, "-delay-only" if extra else "")
        if measure(key):
            print("=== %s" % title, flush=True)
            # Each job times about 6 s per size (cais-perf --duration-ms), so
            # that the two overlap whatever their start-up; the shares are
            # taken over the time both ran (docs/testbed.md).
            opts = cli.perf_options(["--name", "bench", "--hosts", "4", "--rate", rate, "-b",
                                         "16M", "-e", "16M", "--iters", "5", "--warmup", "3",
                                         "--warmup-ms", "1500", "--duration-ms",
                                         "3000" if a.quick else "6000"] + extra)
            results[key] = perf.share(opts, second, out=io.StringIO())
            stamp(key)
        if key not in results:
            continue
        text.append(share_text(results[key], title, second, extra, rerun_note(key)))
    if measure("rate_step"):
        print("=== rate step 4 x 1 Gbit/s -> 250 Mbit/s", flush=True)
        opts = cli.perf_options(["--name", "bench", "--hosts", "4", "--rate", "1gbit", "-b",
                                     "1M", "-e", "1M", "--iters", "5", "--warmup", "3",
                                     "--warmup-ms", "1500", "--duration-ms",
                                     "4000" if a.quick else "8000",
                                     "--switchd-arg=--offload-controller=off"])
        opts.step_after_ms = 3500 if a.quick else 5500
        st = perf.rate_step(opts, out=io.StringIO())
        st.pop("window_trace", None)  # summarised above; tens of thousands of samples
        st["step_after_ms"] = opts.step_after_ms
        results["rate_step"] = st
        stamp("rate_step")
    if "rate_step" in results:
        st = results["rate_step"]
        if a.from_json:  # every figure again from the stored timeline and queue samples
            q = {k: v for k, v in st.items() if k.startswith("queue_")}
            st.update(perf.step_summary(dict(st, samples=st.get("samples", [])), 8952))
            if not st.get("samples"):
                st.update(q)  # an older file without its queue samples
        t, step = st["timeline_ns"], st["stepped_ns"]
        pre = sorted(t[i] - t[i - 1] for i in range(1, len(t)) if t[i] < step)
        post = sorted(t[i] - t[i - 1] for i in range(1, len(t)) if t[i - 1] >= step)
        med = lambda d: d[len(d) // 2] / 1e6 if d else float("nan")  # noqa: E731
        b1 = perf.wire_bounds(st["bytes"], 4, 1e9, 9000, 8952)["switch_s"] * 1e3
        b4 = b1 * 4
        fmt = lambda v, f="%.1f": "n/a" if v is None else f % v  # noqa: E731
        text.append(
            "### Rate step: 4 x 1 Gbit/s to 250 Mbit/s mid-run\n\n" + rerun_note("rate_step") +
            "One inca job, 1 MiB all-reduces back to back (controller off: this is about the "
            "transport); %.1f s after launch every host link, both ways, drops to a quarter "
            "(`tc qdisc change`, the queues keep their packets). Median operation %.1f ms "
            "before (switch bound %.1f ms, %d operations) and %.1f ms after (bound %.1f ms, "
            "%d operations). The first operation that started after the step and ran within "
            "15 %% of that median ended %s ms after the step, about %s round trips of %.2f ms "
            "at the new rate (a chunk serialised up and down); the resolution is one "
            "operation. %s of the operations after the step ran within that band. The host "
            "links' queues (tbf backlog: at each sample the deepest of the switch's downlinks "
            "and one host's uplink, the hosts in turn, read through a `tc -batch` process per "
            "namespace that stays up, so that sampling starts no process) sampled every %s ms "
            "(median) after the "
            "step, in bandwidth-delay products at the new rate (1 BDP = %.0f B): uplinks "
            "median %s, p99 %s, deepest %s; the switch's downlinks median %s, p99 %s, deepest "
            "%s; from 20 round trips after the step on (the settling allowed), the deepest was "
            "%s up and %s down (1 BDP is %.1f chunks of 8,952 B here, so a queue is read in "
            "steps of a chunk). "
            "Rank 0's congestion window (`cais-perf --window-trace`: a sample at most "
            "every quarter round trip): median %s chunks over the last second before the "
            "step, median %s after; it first came within 25 %% of that "
            "median (or one chunk) %s ms after the step, %s of its own smoothed round trips "
            "(median %s µs after the step, queueing and the hosts' scheduling included), and "
            "%s of its samples after the step lie in that band.%s Results exact: %s.\n" % (
                st["step_after_ms"] / 1e3, med(pre), b1, len(pre), med(post), b4, len(post),
                fmt(st["settle_ms"], "%.0f"), fmt(st["settle_rtts"], "%.0f"), st["rtt_ms"],
                fmt(None if st["within_band"] is None else 100 * st["within_band"], "%.0f %%"),
                fmt(st.get("sample_period_ms"), "%.0f"), st["bdp_bytes"],
                *[fmt(st.get("queue_%s_%s_bdp" % (way, k)), "%.2f")
                  for way in ("up", "down") for k in ("median", "p99", "max")],
                *[fmt(st.get("queue_%s_settled_max_bdp" % way), "%.2f") for way in ("up", "down")],
                st["bdp_bytes"] / 8952,
                fmt(st.get("window_before")), fmt(st.get("window_after_median")),
                fmt(st.get("window_settle_ms")), fmt(st.get("window_settle_rtts"), "%.0f"),
                fmt(st.get("window_srtt_us"), "%.0f"),
                fmt(None if st.get("window_within_band") is None
                    else 100 * st["window_within_band"], "%.0f %%"),
                " The window was at its floor of 2 chunks before the step already: at this "
                "rate a round trip is mostly the hosts' own processing (a few hundred µs), so "
                "the quarter rate shows in the round trip and the queue, not in the window, and "
                "this run does not test how fast a larger window comes down (the simulated "
                "test does: docs/design/cais-client.md)."
                if (st.get("window_before") or 99) <= 2.5 else "",
                "yes" if st["wrong"] == 0 else "NO"))
    if a.no_write:
        return 0
    plot(results)
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                         capture_output=True, text=True).stdout.strip()
    section = "\n".join([
        BEGIN,
        "## On the testbed: switch against Gloo where links are the bottleneck",
        "",
        "Regenerated by `sudo scripts/bench-testbed.py` on %s (%d cores, %s). "
        "Every row: `scripts/testbed.py perf` with that scenario's flags, inca-switchd with "
        "its default flags (embedded offload controller deciding from measured times, 500 ms chunk timeout), the client's "
        "defaults (chunk 8952 B, congestion window capped at 64), f32 sum, median-free mean of "
        "the timed iterations; both backends in the same run on the same testbed (MTU 9000, "
        "tbf burst 256 KB, 20 ms queue, both directions of every host link; the switch's own "
        "port unshaped). Bounds on wire bytes, headers included (docs/testbed.md): the "
        "switch's is 1.5x the ring's at 4 hosts, 1.75x at 8. Retransmitted: chunks sent again "
        "over chunks sent, all ranks.%s" % (
            results.get("date", today), os.cpu_count(), cpu or "unknown CPU",
            (" Machine speed at the start of this run (`switchd-bench`, 8,952 B datagrams on "
             "loopback): plain forwarder %d pkt/s, inca-switchd %d pkt/s; the switch path is "
             "CPU-bound on a 2-core machine, so its rows follow these figures (on 2026-12-03 "
             "another VM measured 114,000-243,000 pkt/s for inca-switchd, and the same "
             "scenarios read 0.53-0.94 of the switch's bound from 1 MiB up)."
             % (
                 results["machine"]["udp-forwarder"], results["machine"]["inca-switchd"]))
            if results.get("machine", {}).get("udp-forwarder") else ""),
        "",
        "![algbw against size](eval/testbed-algbw.png)",
        "",
    ] + text + [
        "### Reading these figures",
        "",
        "- Below the tbf burst (256 KB) packets leave at veth speed, so neither bound applies "
        "and a fraction above 1 is no violation; the bounds hold from about 1 MiB up.",
        "- Gloo here is inca's host path (`cais-perf --backend gloo`: Gloo's ring through "
        "inca's HostGroup, the transport torch's ProcessGroupGloo uses too). Below 1 MiB "
        "its times are set by a spin in Gloo's transport, not by the links: Gloo's device "
        "thread waits in epoll_wait on level-triggered EPOLLIN, and its "
        "Pair::handleEvents returns without reading when the calling thread holds the "
        "pair's mutex (try_to_lock), so the device thread spins until the lock is "
        "released and, on two cores shared by four ranks, takes the core the lock holder "
        "needs. With the spin broken by a diagnostic shim (`scripts/diag/gloo-spin.sh`; "
        "docs/performance-log.md, \"Gloo's small-size floor\") Gloo's 4 KiB all-reduce on this "
        "testbed took 1.8-1.9 ms instead of 4.0-4.5 ms on 2026-12-05, and 1 MiB and 16 "
        "MiB did not move. The switch path does 4 KiB in about 0.2 ms, so it beats Gloo "
        "from 4 KiB either way; the small-size ratios in the tables are against Gloo as "
        "shipped.",
        "- The rows at 2 and 4 Gbit/s show where the switch path stops scaling on this 2-core "
        "machine (R*): the four ranks, inca-switchd and the kernel's softirq work share two "
        "cores, and the switch path tops out (the CPU line: ranks, switch and softirq leave "
        "little idle). Where the switch path is then slower than Gloo, the measured "
        "controller sends operations back to Gloo (a `host/mixed` row is that decision, not "
        "a fault). Each table's CPU line shows where the two cores went during its switch "
        "run.",
        "- A size class is decided once it has two samples on each path, by the best of "
        "each path's last four (docs/control.md). An operation that ran while another "
        "inca job sent data from the same hosts is not a sample, and such a group is not "
        "explored (docs/control.md, \"Contended samples\"): one job's Gloo explore, TCP, "
        "used to take the links from the other's switch traffic, so Gloo looked faster and "
        "both jobs ended on it at about a third of the link each. A declined operation "
        "costs Gloo plus one agreement round, so a mixed row can be slower than either "
        "path alone.",
        "- Two inca jobs share the links about equally on the switch path (the sharing "
        "rows). At 1 Gbit/s they ask 2 Gbit/s per host of the switch path, about what this "
        "2-core machine moves (the R* rows). The shares are taken over the time both "
        "jobs ran; when one job's start-up eats most of the other's run (an overlap under "
        "a second, a few operations), the row says little.",
        "- Beside Gloo, whose TCP fills the 20 ms tbf queue, a delay-based window alone "
        "yields and sits near its floor (the row with competitive mode off). Competitive "
        "mode, on by default (docs/design/cais-client.md), switches to AIMD on loss while "
        "the queue is someone else's; inca's share is then bounded by its window cap, 64 "
        "chunks over a round trip of tens of ms. Its entry test leaves out the time a rank "
        "waited in the switch for slower ranks, which used to look like that queue. The "
        "switch does not see a Gloo job, so the measured controller compares paths as "
        "usual and may send some operations to Gloo (path host/mixed); on the host path "
        "inca moves the ring's 1.5 S per host link, so even an equal share of the link "
        "reads as 0.33 of the switch's bound in the share column.",
        "- `host/mixed (N on Gloo)`: N of the timed operations of that size and the check "
        "that follows them ran on the host path. "
        "The embedded offload controller decides from the times rank 0 reports for each size "
        "class on both paths (docs/control.md, \"Measured decisions\"); its first sample and "
        "its explorations of the other path fall in the warm-up (5 operations and at "
        "least 3 s per size: two samples on each path, the second explore 1 s after the "
        "first has landed), which the path column does not count. Figures move by a few "
        "per cent between runs.",
        "- Slot holding: the switch's own percentiles of the time a chunk held its slot, "
        "first contribution to completion (`inca_cais_slot_holding_p50_seconds`, "
        "docs/monitoring.md), over every chunk of the switch run of that scenario, all sizes "
        "and warm-ups included.",
        "- Jitter: 2 ms ± 1 ms each way, uniform, which reorders (a datagram every 72 µs at "
        "1 Gbit/s). This kernel has no netem, so `inca-linkdelay` does it in user space "
        "(docs/testbed.md) and takes its CPU share from the same two cores (the CPU line). "
        "At 1 Gbit/s that share and the ranks' scheduling delays stretch the round trips "
        "the window sees, so the row is a lower bound for a machine with netem; at 500 Mbit/s "
        "the links ask half as much of the switch path. The delay line splits UDP GSO "
        "packets into their datagrams first, as a NIC would put them on the wire, so each "
        "datagram is delayed on its own (docs/testbed.md).",
        "- Loss: the impairment drops IP packets before any segmentation, so with GSO (the "
        "default, docs/design/net.md) one loss takes up to seven consecutive datagrams, "
        "burstier than a wire at the same rate (docs/testbed.md). A flight lost whole is "
        "found by the client's tail probe, which asks the switch which contributions it "
        "lacks (docs/design/cais-client.md); before it, the 5 ms retransmission timeout "
        "held every rank's window and the row read 0.47 of the bound, host/mixed. The "
        "retransmitted column counts every resent chunk, lost ones included.",
        "",
        END])
    doc = open(DOC).read()
    if BEGIN in doc:
        doc = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: section, doc,
                     flags=re.S)
    else:
        doc = doc.rstrip("\n") + "\n\n" + section + "\n"
    with open(DOC, "w") as f:
        f.write(doc)
    if not a.from_json:  # --only merges its reruns into the stored file
        with open(saved, "w") as f:
            json.dump(results, f, indent=1)
    print("wrote %s, %s" % (DOC, PLOT))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("bench-testbed: interrupted; the testbed it was using was removed", file=sys.stderr)
        sys.exit(130)
