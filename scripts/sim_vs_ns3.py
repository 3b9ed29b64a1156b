#!/usr/bin/python3
"""The `sim-vs-ns3` section of docs/PERFORMANCE.md and docs/eval/sim-vs-ns3.json
from one run of scripts/bench-sim-vs-ns3.sh: both simulators' JSON lines for
the same star workload, and inca-sim's 16-host all-reduce result.

  scripts/sim_vs_ns3.py --inca JSON --ns3 JSON --allreduce FILE --allreduce-log TEXT
                        --duration-s S
                        [--doc docs/PERFORMANCE.md] [--json docs/eval/sim-vs-ns3.json]
"""
import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import doc_sections  # scripts/, beside this file


def diff(a: float, b: float) -> float:
    return abs(a - b) / max(1.0, max(a, b))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inca", required=True, help="sim-cbr-star's JSON line")
    ap.add_argument("--ns3", required=True, help="ns3-cbr-star's JSON line")
    ap.add_argument("--allreduce", required=True, help="inca-sim's JSON for the all-reduce")
    ap.add_argument("--allreduce-log", required=True, help="inca-sim's output for it")
    ap.add_argument("--duration-s", type=float, required=True)
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "PERFORMANCE.md"))
    ap.add_argument("--json", default=os.path.join(ROOT, "docs", "eval", "sim-vs-ns3.json"))
    a = ap.parse_args()
    try:
        inca, ns3 = json.loads(a.inca), json.loads(a.ns3)
        with open(a.allreduce) as f:
            ar = json.load(f)
        m = re.search(r"(\d+) events in ([0-9.]+) s", a.allreduce_log)
        if not m:
            raise ValueError("no 'N events in S s' line in the all-reduce's output")
        ar_wall = float(m.group(2))
        for r in (inca, ns3):
            for k in ("offered", "delivered", "dropped", "events", "wall_s"):
                if k not in r:
                    raise ValueError("a result has no %r" % k)
    except (OSError, ValueError) as e:
        print("sim_vs_ns3: %s" % e, file=sys.stderr)
        return 2
    d_del, d_drop = diff(inca["delivered"], ns3["delivered"]), diff(inca["dropped"],
                                                                   ns3["dropped"])
    speed = ns3["wall_s"] / max(inca["wall_s"], 1e-9)
    out = {"duration_s": a.duration_s, "inca_sim": inca, "ns3": ns3,
           "delivered_diff": d_del, "dropped_diff": d_drop, "wall_ratio": speed,
           "allreduce": {"hosts": ar["hosts"], "link_gbps": ar["link_gbps"],
                         "events": ar["events"], "wall_s": ar_wall, "rows": ar["rows"]}}
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
    lines = ["## inca-sim against ns-3 (`scripts/bench-sim-vs-ns3.sh`)", "",
             "The same workload on both simulators in one run: the OLAF paper's star, 9 "
             "senders of constant-rate 9,000-byte UDP datagrams at 6 Gbit/s each (evenly "
             "staggered starts) on 100 Gbit/s links into a 40 Gbit/s bottleneck with an "
             "8-packet drop-tail queue, %g simulated seconds. ns-3.37 (Debian's libns3-dev) "
             "runs it on point-to-point links with IPv4 and UDP, no queue discipline "
             "(inca-ns3 cbr-star, tools/inca-ns3); inca-sim's engine with the same framing "
             "on the wire (tools/sim-cbr-star/main.cc)." % a.duration_s, "",
             "| | offered | delivered | dropped | events | wall (s) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, r in (("inca-sim", inca), ("ns-3.37", ns3)):
        lines.append("| %s | %d | %d | %d | %d | %.2f |" % (
            name, r["offered"], r["delivered"], r["dropped"], r["events"], r["wall_s"]))
    lines += ["",
              "Delivered packets differ by %.3f %%, dropped by %.3f %% (aim: within 1 %%); "
              "inca-sim ran %.0f× faster than ns-3 in wall time (aim: 30×): ns-3 ran %.1f× "
              "the events (its IPv4 and UDP layers, application and device queue objects) "
              "at %.0f× the cost each; inca-sim moves a packet over a link in one event." % (
                  100 * d_del, 100 * d_drop, speed,
                  ns3["events"] / max(1, inca["events"]),
                  (ns3["wall_s"] / max(1, ns3["events"])) /
                  max(1e-12, inca["wall_s"] / max(1, inca["events"]))), ""]
    lines.append("inca-sim on a CAIS all-reduce: %d hosts × %g Gbit/s, %d MiB, timing mode, "
                 "backends %s: %d events in %.2f s, %.1f million events per second "
                 "(`inca-sim scenarios/cais/star-allreduce.yaml --set hosts=16 "
                 "--set link_gbps=400 --set sizes=200M --set ops=1`)." % (
                     ar["hosts"], ar["link_gbps"], ar["rows"][0]["bytes"] >> 20,
                     ", ".join(r["backend"] for r in ar["rows"]), ar["events"],
                     ar_wall, ar["events"] / max(ar_wall, 1e-9) / 1e6))
    doc_sections.replace_section(a.doc, "sim-vs-ns3", "\n".join(lines))
    print("wrote the sim-vs-ns3 section of", a.doc, "and", a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
