"""`scripts/testbed.py olaf`: OLAF training (olaf-train run) across the
namespace testbed (docs/testbed.md, "OLAF on the testbed").

Host 0 holds the PS, hosts 1..H the workers (round robin), the switch
namespace inca-switchd (--program olaf or fifo). The bottleneck toward the
PS is one of:

  switch  the switch's paced egress (--egress-mbps = --rate); links unshaped.
          What a Tofino's queue toward the PS port does: OLAF's queue *is*
          the bottleneck queue, so its replacement and merging act on every
          excess update.
  link    host 0's link shaped by tbf at --rate (both directions), the switch
          unpaced. The bottleneck queue is the kernel's (FIFO, tail drop)
          behind the switch: OLAF's queue only ever holds what arrives in
          one burst, so this shows how much of OLAF's effect needs the switch
          to own the bottleneck.
  both    both (the link's queue behind the switch's paced one).

Writes olaf-train's files to --out plus testbed.json (the run's summary,
the bottleneck, what the PS link's tbf queue sent and dropped when it is
shaped, and the bytes and packets the PS's interface received) and prints
that JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from typing import List

from .net import REPO, LinkShape, Testbed, TestbedError, parse_rate

BOTTLENECKS = ("switch", "link", "both")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default="olaf")
    p.add_argument("--hosts", type=int, default=3, help="worker hosts (the PS gets one more)")
    p.add_argument("--bottleneck", choices=BOTTLENECKS, default="switch")
    p.add_argument("--rate", default="20mbit", help="the bottleneck's rate (tc syntax)")
    p.add_argument("--link-latency", default="20ms",
                   help="tbf queue of the shaped PS link, in time at --rate")
    p.add_argument("--program", choices=("olaf", "fifo"), default="olaf")
    p.add_argument("--send-control", choices=("off", "priority", "fairness"), default="off")
    p.add_argument("--clusters", type=int, default=3)
    p.add_argument("--workers-per-cluster", type=int, default=2)
    p.add_argument("--duration", type=float, default=30, help="seconds of training")
    p.add_argument("--out", default="olaf-testbed-out")
    p.add_argument("--build", default=os.environ.get("INCA_BUILD_DIR",
                                                     os.path.join(REPO, "build", "release")))
    p.add_argument("--olaf-train-arg", action="append", default=[],
                   help="extra olaf-train run flag (repeat), e.g. --olaf-train-arg=--hidden=32")
    p.add_argument("--timeout", type=float, default=0,
                   help="seconds before the run is killed (0: --duration + 300)")


def _link_mbps(rate: str) -> float:
    return parse_rate(rate) / 1e6


def run(a: argparse.Namespace) -> dict:
    if not 1 <= a.hosts <= 32:
        raise TestbedError("--hosts must be 1..32")
    if a.duration <= 0 or a.duration > 3600:
        raise TestbedError("--duration must be in (0, 3600] seconds")
    olaf_train = os.path.join(a.build, "bin", "olaf-train")
    if not os.access(olaf_train, os.X_OK):
        raise TestbedError("%s not found: build it (cmake --build build/release) or --build" %
                           olaf_train)
    mbps = _link_mbps(a.rate)
    shaped = a.bottleneck in ("link", "both")
    host_shapes = {0: LinkShape(rate=a.rate, latency=a.link_latency)} if shaped else {}
    os.makedirs(a.out, exist_ok=True)
    with Testbed(a.name, a.hosts + 1, host_shapes=host_shapes, owner_pid=os.getpid()) as tb:
        workers = ",".join("%s@%s" % (tb.host_ns(i), tb.host_ip(i))
                           for i in range(1, a.hosts + 1))
        argv: List[str] = [
            olaf_train, "run", "--program", a.program, "--send-control", a.send_control,
            "--clusters", str(a.clusters), "--workers-per-cluster", str(a.workers_per_cluster),
            "--duration", str(a.duration), "--out", a.out,
            "--egress-mbps", str(mbps if a.bottleneck in ("switch", "both") else 0),
            "--switchd", os.path.join(a.build, "bin", "inca-switchd"),
            "--place-ps", "%s@%s" % (tb.host_ns(0), tb.host_ip(0)),
            "--place-switch", "%s@%s" % (tb.switch_ns, tb.switch_ip),
            "--place-workers", workers] + list(a.olaf_train_arg)
        proc = subprocess.run(argv, capture_output=True, text=True,
                              timeout=a.timeout or a.duration + 300)
        stats = tb.link_stats()
        ps_rx = tb.popen(tb.host_ns(0), ["cat", "/sys/class/net/eth0/statistics/rx_bytes",
                                         "/sys/class/net/eth0/statistics/rx_packets"],
                         stdout=subprocess.PIPE, text=True).communicate(timeout=30)[0].split()
    ps_down = next(s for s in stats if s["host"] == 0 and s["direction"] == "down")
    try:
        with open(os.path.join(a.out, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError):
        raise TestbedError("olaf-train run wrote no summary (exit %d): %s" % (
            proc.returncode, (proc.stderr or proc.stdout).strip()[-2000:]))
    res = {"bottleneck": a.bottleneck, "rate_mbps": mbps, "hosts": a.hosts + 1,
           "olaf_train_exit": proc.returncode, "ps_link_down": ps_down,
           "ps_rx_bytes": int(ps_rx[0]) if len(ps_rx) == 2 else None,
           "ps_rx_packets": int(ps_rx[1]) if len(ps_rx) == 2 else None,
           "ps_link_queue_drops": ps_down["dropped"] if shaped else None,
           "result_line": proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "",
           "summary": summary}
    with open(os.path.join(a.out, "testbed.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res))
    if proc.returncode != 0:
        raise TestbedError("olaf-train run exited with %d: %s" % (
            proc.returncode, proc.stderr.strip()[-2000:]))
    return res
