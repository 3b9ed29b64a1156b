"""Turns the inca-sim results of scripts/evaluate-olaf.sh into docs/EVALUATION.md
and docs/eval/*.png (Debian's matplotlib, /usr/bin/python3)."""
import csv
import json
import os
import statistics
import sys

import matplotlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doc_sections  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

src, docs, seeds = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(os.path.join(docs, "eval"), exist_ok=True)


def load(name):
    with open(os.path.join(src, name + ".json")) as f:
        return json.load(f)


def runs(prefix):
    return [load(f"{prefix}-s{s}") for s in range(1, seeds + 1)]


def ms(vals):
    m = statistics.mean(vals)
    sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return m, sd


def fmt(vals, pct=False, digits=1):
    m, sd = ms(vals)
    if pct:
        return f"{100 * m:.{digits}f} ± {100 * sd:.{digits}f} %"
    return f"{m:.{digits}f} ± {sd:.{digits}f}"


def group_aom(r, clusters):
    return statistics.mean(r["clusters"][c]["mean_aom_ms"] for c in clusters)


a = {p: runs(f"a-{p}") for p in ("fifo", "olaf")}
b = {p: runs(f"b-{p}") for p in ("fifo", "olaf")}
c = {p: runs(f"c-{p}") for p in ("fifo", "olaf", "olaftc")}

# (a) time series of seed 1
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
for ax, p in zip(axes, ("fifo", "olaf")):
    with open(os.path.join(src, f"a-{p}-s1.csv")) as f:
        rows = list(csv.DictReader(f))
    t = [float(r["t_ms"]) for r in rows]
    for k in range(9):
        ax.plot(t, [float(r[f"aom_ms_c{k}"] or "nan") for r in rows], lw=0.6)
    ax.set_title(f"(a) {p.upper()}: AoM at the PS per cluster")
    ax.set_xlabel("time (ms)")
    ax.set_xlim(1000, 2000)
axes[0].set_ylabel("AoM (ms)")
fig.tight_layout()
fig.savefig(os.path.join(docs, "eval", "a-aom-series.png"), dpi=110)

# loss bars
fig, ax = plt.subplots(figsize=(6, 3.2))
labels, vals, errs = [], [], []
for name, d in (("(a) FIFO", a["fifo"]), ("(a) OLAF", a["olaf"]), ("(c) FIFO", c["fifo"]),
                ("(c) OLAF", c["olaf"]), ("(c) Olaf_TC", c["olaftc"])):
    m, sd = ms([r["loss"] for r in d])
    labels.append(name)
    vals.append(100 * m)
    errs.append(100 * sd)
ax.bar(labels, vals, yerr=errs, color=["#bbb", "#2a7", "#bbb", "#2a7", "#27a"])
ax.set_ylabel("update loss (%)")
fig.tight_layout()
fig.savefig(os.path.join(docs, "eval", "loss.png"), dpi=110)

# sweep
fig, ax = plt.subplots(figsize=(6, 3.2))
rates = [10, 20, 40, 80]
for p, color in (("fifo", "#888"), ("olaf", "#2a7")):
    ys = [statistics.mean(load(f"sweep-{p}-s{s}-{g}")["loss"] for s in range(1, seeds + 1)) * 100
          for g in rates]
    ax.plot(rates, ys, "o-", color=color, label=p.upper())
ax.set_xlabel("egress (Gbit/s)")
ax.set_ylabel("update loss (%)")
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(docs, "eval", "sweep-loss.png"), dpi=110)

fast, slow = list(range(5)), list(range(5, 9))
gap = {p: [group_aom(r, slow) - group_aom(r, fast) for r in b[p]] for p in b}
near, far = list(range(5, 9)), list(range(5))

lines = []
w = lines.append
w("# OLAF evaluation on inca-sim")
w("")
w("The OLAF paper (arXiv 2507.05876, section 4) measures its queue on FPGA hardware at 40 Gbit/s. "
  "Here the same OLAF and FIFO queue code that runs in `inca-switchd` (`inca::olaf::OlafSwitch`) is "
  "driven by the discrete-event simulator with the same worker and PS logic as the UDP transport "
  "(`WorkerCore`, `PsCore`). Regenerate everything, this file included, with "
  "`scripts/evaluate-olaf.sh` (about 10 s on the 2-core test VM); scenario files are in "
  "`scenarios/olaf/`; the simulator is described in [sim.md](sim.md).")
w("")
w(f"Every figure is the mean ± standard deviation over {seeds} seeds. AoM is the time-average "
  "Age of Model of a cluster at the PS (now minus the generation time of the freshest update of "
  "the cluster the PS has applied; definitions in [design/olaf-core.md](design/olaf-core.md)), "
  "averaged over clusters, measured after a 1 s warm-up over 9 s. Loss is 1 − (worker updates "
  "carried by the updates the PS applied) / (worker updates generated); a merged update carries "
  "several worker updates.")
w("")
w("## Parameters chosen where the paper is silent")
w("")
w("| parameter | value | why |")
w("|---|---|---|")
w("| workers per cluster | 28 | the paper's largest aggregation (\"up to 28 workers\") |")
w("| update size | 9,000-byte frame (2,233 f32) | the paper's one-jumbo-frame limit |")
w("| update period | 100 ms per worker ((b): 100 ms and 300 ms) | the paper's heterogeneous periods |")
w("| arrival pattern | every cluster on the same step boundary, 200 µs uniform jitter per update | bursts that overflow a depth-8 queue, as the paper's 55.8 % FIFO loss implies |")
w("| ΔT, τ | 400 ms, 100 ms | the paper's ΔT; τ = ΔT/4 (docs/design/olaf-core.md) |")
w("| worker links | 100 Gbit/s, 1 µs | not the bottleneck |")
w("| (c) tree | 5 clusters behind SW2, 4 at SW1; SW1→PS 12 Gbit/s, SW2→SW1 40 Gbit/s (ratio 0.3) | the paper's ratio |")
w("")
w("## (a) FIFO vs OLAF, 40 Gbit/s, queue depth 8, 9 clusters (paper 4.1)")
w("")
w("| | mean AoM (ms) | update loss | updates received | worker updates they carry |")
w("|---|---:|---:|---:|---:|")
for p in ("fifo", "olaf"):
    w(f"| inca {p.upper()} | {fmt([r['mean_aom_ms'] for r in a[p]])} | "
      f"{fmt([r['loss'] for r in a[p]], pct=True)} | {fmt([r['received'] for r in a[p]], digits=0)} | "
      f"{fmt([r['carried'] for r in a[p]], digits=0)} |")
w("| paper FIFO | 1714 | 55.8 % | 6109 | 6109 |")
w("| paper OLAF | 245 | 11 % | 4823 | 4823 + 7204 |")
w("")
w("![AoM per cluster, seed 1](eval/a-aom-series.png)")
w("")
w("![update loss](eval/loss.png) ![loss vs egress rate](eval/sweep-loss.png)")
w("")
w("## (b) heterogeneous clusters: 100 ms vs 300 ms (paper 4.2, table 3)")
w("")
w("| | AoM, 100 ms clusters | AoM, 300 ms clusters | gap | loss |")
w("|---|---:|---:|---:|---:|")
for p in ("fifo", "olaf"):
    w(f"| inca {p.upper()} | {fmt([group_aom(r, fast) for r in b[p]])} | "
      f"{fmt([group_aom(r, slow) for r in b[p]])} | {fmt(gap[p])} | "
      f"{fmt([r['loss'] for r in b[p]], pct=True)} |")
w("| paper | | | FIFO 4241, OLAF 28 | |")
w("")
w("## (c) two-switch tree, SW1:SW2 bandwidth 0.3 (paper 4.3)")
w("")
w("| | AoM, clusters at SW1 (near) | AoM, behind SW2 (far) | Jain's index of cluster AoM | loss |")
w("|---|---:|---:|---:|---:|")
for p, label in (("fifo", "FIFO"), ("olaf", "OLAF"), ("olaftc", "Olaf_TC (send control, v = 1/ΔT)")):
    w(f"| inca {label} | {fmt([group_aom(r, near) for r in c[p]])} | "
      f"{fmt([group_aom(r, far) for r in c[p]])} | {fmt([r['jain_aom'] for r in c[p]], digits=3)} | "
      f"{fmt([r['loss'] for r in c[p]], pct=True)} |")
w("| paper | FIFO 2900 (near) | | FIFO 0.86, Olaf_TC 0.99 | |")
w("")
# The OLAF paper's stated cost of its feedback: ACK bytes against update bytes.
WIRE = 20 + 8 + 14 + 4 + 8 + 12  # IPv4, UDP, Ethernet header + FCS, preamble, gap


def cost(r):
    t = r["ps_traffic"]
    up = t["update_bytes"] + WIRE * t["update_datagrams"]
    ack = t["ack_bytes"] + WIRE * t["ack_datagrams"]
    return t["ack_bytes"] / max(1, t["update_bytes"]), ack / max(1, up), t


w("## The cost of feedback: ACK bytes against update bytes (paper: +15 % downlink)")
w("")
w("The PS answers every UPDATE datagram with a 28-byte ACK (docs/protocol.md); inca-sim counts "
  "both at the PS (`ps_traffic` in each run's JSON: datagrams and UDP payload bytes of UPDATEs "
  f"in, ACKs and MODEL fragments out). On the wire each datagram also costs {WIRE} bytes "
  "(IPv4, UDP, Ethernet header, FCS, preamble and inter-frame gap).")
w("")
w("| scenario | UPDATE datagrams at the PS | ACK bytes / UPDATE bytes (payload) | on the wire |")
w("|---|---:|---:|---:|")
for label, group in (("(a) FIFO", a["fifo"]), ("(a) OLAF", a["olaf"]), ("(c) OLAF", c["olaf"]),
                     ("(c) Olaf_TC", c["olaftc"])):
    ratios = [cost(r) for r in group]
    w(f"| {label} | {fmt([x[2]['update_datagrams'] for x in ratios], digits=0)} | "
      f"{fmt([x[0] for x in ratios], pct=True, digits=2)} | "
      f"{fmt([x[1] for x in ratios], pct=True, digits=2)} |")
w("")
w("Against the update traffic the ACKs cost about 1 % on the wire, one 94-byte frame per "
  "9,038-byte one. These scenarios broadcast no model (model traffic is not part of the "
  "paper's network evaluation), so the downlink here carries ACKs only and a downlink share "
  "cannot be formed. The paper's +15 % is a share of its downlink, whose other traffic it does "
  "not state: for ACKs of this size to add 15 % to it, the rest of the downlink would carry "
  "about 7 % of the uplink's bytes. `olaf-train sim` reports the same `ps_traffic`, models "
  "included, in its JSON (docs/rl.md); its PS sends the updated cluster a model after every "
  "update, so its downlink carries about as many bytes as its uplink and the ACKs add under "
  "1 % to it (`olaf-train sim --set duration_s=2 --set clusters=2x2x1 --set hidden=16`: "
  "ACK bytes 0.76 % of MODEL bytes).")
w("")
w("## Where we agree, where we differ, and why")
w("")
la, lo = ms([r["loss"] for r in a["fifo"]])[0], ms([r["loss"] for r in a["olaf"]])[0]
w(f"- **Update loss reproduces and exceeds the paper's claim.** FIFO loses {100 * la:.1f} % of "
  f"worker updates in (a) (paper 55.8 %); OLAF loses {100 * lo:.1f} % (paper 11 %): "
  "ratio well under the 0.2 asked for. OLAF's per-cluster merge turns a burst that would "
  "overflow the queue into fewer, merged updates, so the PS receives fewer packets than with "
  "FIFO but they carry about twice as many worker updates — the paper's \"4823 + 7204\" "
  "pattern. The sweep shows FIFO loss falling as the egress rate grows and OLAF staying near 0.")
w("- **Mean AoM does not reproduce.** In every scenario both policies give about half the update "
  "period (≈ 50 ms for 100 ms periods): every cluster gets at least one update through every "
  "period under FIFO too, because tail drop admits whichever update arrives after each departure "
  "and 28 workers per cluster keep arriving throughout a burst. AoM is bounded below by half the "
  "update period whatever the queue does, and a depth-8 queue at 40 Gbit/s adds at most 8 × 1.8 µs "
  "of delay. The paper's seconds-scale FIFO AoM (1714 ms, 4241 ms, 2900 ms) therefore needs "
  "clusters that starve for many periods, which needs something our model does not have: the "
  "paper does not give its arrival process, and its AoM may count the model's age at the "
  "workers (PS version vs the version a gradient used), not only the network. We did not tune "
  "the workload until FIFO starved; the 0.31 × AoM and ≥ 0.99 Jain claims are therefore not "
  "reached (nothing to improve: Jain's index is ≈ 1 for every policy).")
w("- **(b)**: the gap between 100 ms and 300 ms clusters is ≈ 100 ms under both policies — the "
  "difference of their half-periods; no queue can close it, so the paper's 28 ms cannot be "
  "an AoM gap in the sense defined here.")
w("- **(c)**: the near/far split matters for loss (SW1 is the bottleneck); worker send control "
  "(Olaf_TC) lowers what workers send when ACKs report a full queue, which here shows up as "
  "suppressed updates (counted as lost in the loss column) without an AoM change.")
w("- What is real: the queue, merge, eviction, pacing and ACK stamping code is the code that runs "
  "in `inca-switchd`. Where queueing delay is milliseconds rather than microseconds, AoM does "
  "separate: the loopback integration test (`tests/integration/olaf_integration_test.cc`, 18 "
  "workers through a real `inca-switchd` paced at 20 Mbit/s, 3.2 ms per update) measured FIFO "
  "60.5 ms vs OLAF 33.6 ms mean AoM and 62.1 % vs 2.9 % loss in one run. The simulator is validated against M/D/1, M/G/1 and the "
  "M/M/1 Age-of-Information closed form (`src/sim/queueing_test.cc`).")
w("")
# Other generators' sections (the training comparison of
# scripts/evaluate-drl.sh, CAIS simulated against the testbed) stay.
path = os.path.join(docs, "EVALUATION.md")
kept = []
if os.path.exists(path):
    with open(path) as f:
        kept = list(doc_sections.marked(f.read()).values())
with open(path, "w") as f:
    f.write("\n".join(lines) + "".join("\n" + k + "\n" for k in kept))
print("wrote", os.path.join(docs, "EVALUATION.md"))
