"""`scripts/testbed.py reflect`: the switch namespace's I/O paths against each
other on one testbed link (issue 16: "AF_XDP and io_uring measured on this
path, adopted only where they win").

A one-host testbed, its link unshaped. In the switch namespace, in turn,
udp-forwarder reflects every datagram for --port back to its sender:

  mmsg  recvmmsg/sendmmsg on a UDP socket (inca-switchd's --io mmsg path)
  gso   the same with UDP GSO sends and GRO receives (inca-switchd's default)
  uring io_uring, one datagram per request (src/switchd/uring_reflector.h)
  xdp   an AF_XDP socket on the switch's port p0, below the UDP stack: frames
        reflected in place from the UMEM (src/switchd/xsk_reflector.h)

and switchd-bench --target in host 0 keeps --window datagrams of --payload
bytes in flight to it, once per client I/O path (mmsg, gso). Each row:
datagrams per second, per CPU-second of the reflector process, and per
CPU-second of the whole machine (softirq and the load generator included:
below the socket layer much of the work is softirq, charged to no process).
--rounds alternates the reflectors that many times, so that a slow spell of
the machine shows as spread rather than as a difference.

The AF_XDP reflector takes one buffer per frame (Debian 12's libxdp has no
multi-buffer), so frames must fit a 4 KiB UMEM frame: the default MTU here
is 1,500 (payload 1,452 B, the client's chunk for that MTU).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
from typing import Dict, List

from .net import REPO, Testbed, TestbedError

REFLECTORS = ("mmsg", "gso", "uring", "xdp")
ROW_RE = re.compile(r"^\s+\S+\s+([0-9.]+) pkt/s \(([0-9.]+) Gbit/s\), ([0-9.]+) pkt per target "
                    r"CPU-second, ([0-9.]+) per machine CPU-second")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default="reflect")
    p.add_argument("--mtu", type=int, default=1500)
    p.add_argument("--payload", type=int, default=1452, help="datagram payload bytes")
    p.add_argument("--window", type=int, default=64, help="datagrams in flight")
    p.add_argument("--packets", type=int, default=500000, help="replies per measurement")
    p.add_argument("--max-seconds", type=float, default=4, help="time limit per measurement")
    p.add_argument("--rounds", type=int, default=2, help="passes over the reflectors")
    p.add_argument("--reflectors", default=",".join(REFLECTORS),
                   help="comma-separated, in order: " + ", ".join(REFLECTORS))
    p.add_argument("--port", type=int, default=9420)
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--build", default=os.environ.get("INCA_BUILD_DIR",
                                                     os.path.join(REPO, "build", "release")))


def start(tb: Testbed, build: str, reflector: str, port: int) -> subprocess.Popen:
    """udp-forwarder in the switch namespace, returned once it says it runs."""
    argv = [os.path.join(build, "bin", "udp-forwarder"), "--listen",
            "%s:%d" % (tb.switch_ip, port)]
    argv += ["--io", "xdp", "--interface", "p0"] if reflector == "xdp" else ["--io", reflector]
    p = tb.popen(tb.switch_ns, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()  # its first line: running, or why not
    if "reflecting" not in line and "listening" not in line:
        p.kill()
        rest = p.communicate()[1]
        raise TestbedError("udp-forwarder --io %s: %s" % (
            reflector, (line + rest).strip().splitlines()[-1] if (line + rest).strip()
            else "exited %s" % p.returncode))
    return p


def stop(p: subprocess.Popen) -> dict:
    """SIGTERM; the counters it prints as it exits."""
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=10)
    for line in out.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise TestbedError("udp-forwarder printed no counters: %s" % err.strip())


def measure(tb: Testbed, a, reflector: str) -> List[dict]:
    """One reflector: a row per client I/O path."""
    p = start(tb, a.build, reflector, a.port)
    try:
        # The namespaces share the machine's PID space: this pid is the
        # reflector's own (ip netns exec execs it).
        bench = [os.path.join(a.build, "bin", "switchd-bench"), "--target",
                 "%s:%d" % (tb.switch_ip, a.port), "--target-pid", str(p.pid),
                 "--payload", str(a.payload), "--window", str(a.window), "--packets",
                 str(a.packets), "--max-seconds", str(a.max_seconds), "--io", "mmsg", "--io",
                 "gso"]
        r = subprocess.run(["ip", "netns", "exec", tb.host_ns(0)] + bench, capture_output=True,
                           text=True, timeout=4 * a.max_seconds + 30)
    finally:
        counters = stop(p)
    if r.returncode != 0:
        raise TestbedError("switchd-bench against --io %s: %s" % (
            reflector, (r.stderr.strip().splitlines() or ["exited %d" % r.returncode])[-1]))
    rows = []
    for io, m in zip(("mmsg", "gso"), filter(None, map(ROW_RE.match, r.stdout.splitlines()))):
        rows.append({"reflector": reflector, "client_io": io, "pps": float(m.group(1)),
                     "gbit": float(m.group(2)), "per_reflector_cpu_s": float(m.group(3)),
                     "per_machine_cpu_s": float(m.group(4)), "counters": counters})
    if len(rows) != 2:
        raise TestbedError("switchd-bench printed %d rows: %s" % (len(rows), r.stdout))
    return rows


def run(a) -> List[dict]:
    reflectors = [r for r in a.reflectors.split(",") if r]
    bad = [r for r in reflectors if r not in REFLECTORS]
    if bad or not reflectors:
        raise TestbedError("--reflectors %r: choose from %s" % (a.reflectors,
                                                                ", ".join(REFLECTORS)))
    if a.rounds < 1:
        raise TestbedError("--rounds %d must be at least 1" % a.rounds)
    rows: List[dict] = []
    with Testbed(a.name, 1, mtu=a.mtu, owner_pid=os.getpid()) as tb:
        for k in range(a.rounds):
            for refl in reflectors:
                for row in measure(tb, a, refl):
                    row["round"] = k
                    rows.append(row)
                    print("round %d  %-5s client %-4s %9.0f pkt/s %6.2f Gbit/s %9.0f per "
                          "reflector CPU-s %9.0f per machine CPU-s" % (
                              k, refl, row["client_io"], row["pps"], row["gbit"],
                              row["per_reflector_cpu_s"], row["per_machine_cpu_s"]), flush=True)
    _summary(rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


def _summary(rows: List[dict]) -> None:
    """Each reflector against the gso forwarder, per client path, over the
    rounds (the median round's ratio)."""
    by: Dict[tuple, List[dict]] = {}
    for r in rows:
        by.setdefault((r["reflector"], r["client_io"]), []).append(r)
    for (refl, io), rs in sorted(by.items()):
        base = by.get(("gso", io))
        if refl == "gso" or not base:
            continue
        ratios = sorted(x["pps"] / max(1.0, b["pps"]) for x, b in zip(rs, base))
        machine = sorted(x["per_machine_cpu_s"] / max(1.0, b["per_machine_cpu_s"])
                         for x, b in zip(rs, base))
        print("%-5s / gso forwarder, client %-4s: %s x pkt/s, %s x per machine CPU-s" % (
            refl, io, ", ".join("%.2f" % v for v in ratios),
            ", ".join("%.2f" % v for v in machine)))
