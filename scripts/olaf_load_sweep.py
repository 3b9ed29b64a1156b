"""The OLAF load sweep (issue 20): scenarios (a), (b) and (c) at offered
loads rho in LOADS, FIFO and OLAF, workers on a fixed send grid (open loop)
and workers that wait for a newer model (closed loop), from the inca-sim
runs of scripts/evaluate-olaf.sh. Writes the `olaf-load` section of
docs/EVALUATION.md and docs/eval/olaf-load-aom.png.

  olaf_load_sweep.py RESULTS_DIR DOCS_DIR LOAD_SEEDS EGRESS_SEEDS

(EGRESS_SEEDS: the seeds of the egress-rate sweep, for the 20 Gbit/s claim.)
"""
import json
import os
import statistics
import sys

import doc_sections  # scripts/, beside this file

plt = doc_sections.pyplot()

LOADS = ["0.5", "1", "1.5", "2.26", "3"]
POLICIES = ("fifo", "olaf")
LOOPS = ("open", "closed")
FAST, SLOW = range(5), range(5, 9)  # (b): 100 ms and 300 ms clusters
PAPER = {  # the OLAF paper's figures, set beside rho = 2.26
    "a": "FIFO 1714 ms, OLAF 245 ms (0.14×); loss 55.8 % → 11 %",
    "b": "gap FIFO 4241 ms, OLAF 28 ms",
    "c": "Jain FIFO 0.86, Olaf_TC 0.99",
}


def main():
    src, docs, seeds, egress_seeds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    def runs(scen, policy, loop, load):
        out = []
        for s in range(1, seeds + 1):
            with open(os.path.join(src, f"load-{scen}-{policy}-{loop}-s{s}-{load}.json")) as f:
                out.append(json.load(f))
        return out

    def mean(vals):
        return statistics.mean(vals)

    def fmt(vals, digits=1, pct=False):
        m = mean(vals)
        sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
        k = 100 if pct else 1
        unit = " %" if pct else ""
        return f"{k * m:.{digits}f} ± {k * sd:.{digits}f}{unit}"

    def peak(r):
        return max(c["peak_aom_ms"] for c in r["clusters"])

    def group(r, clusters):
        return mean(r["clusters"][c]["mean_aom_ms"] for c in clusters)

    lines = []
    w = lines.append
    w("## The load sweep: offered load ρ from 0.5 to 3 (issue 20)")
    w("")
    w("ρ is the workers' nominal offered rate (every worker one 9,000-byte update per period, "
      "counted as the switch's egress counts frames) over the PS link's rate. The sweep moves the "
      "PS link's rate (`load: ρ` sets `egress_gbps` = offered / ρ) and keeps the workers, so "
      "every ρ simulates the same events. Other choices the paper leaves open:")
    w("")
    w("- **Phases.** Each cluster starts at a random phase (`aligned_clusters: false`); the 28 "
      "workers of a cluster share it (they step together), with 200 µs of jitter per update.")
    w("- **Models.** The PS sends its model to the cluster of every update it applies "
      "(`models: true`), so workers know which model they used.")
    w("- **Two kinds of worker.** *Open loop*: a fixed send grid, one update per period. "
      "*Closed loop* (`closed_loop: true`): after sending, a worker waits for a model newer "
      "than the one its update used (at most ΔT = 400 ms), then rolls out for one period. "
      "Its measured ρ is below the nominal one by the wait.")
    w(f"- **Figures.** Mean ± standard deviation over {seeds} seeds; ρ measured from the bytes "
      "workers sent after warm-up. *Starved* counts clusters (of 9 per run, summed over seeds) "
      "whose age at the PS passed 10 periods: they went a second without one update. A cluster "
      "that never delivers is given the whole run (10 s) as its age, a lower bound.")
    w("")
    w("Regenerate: `scripts/evaluate-olaf.sh` (this sweep is 300 of its runs).")
    w("")
    for loop in LOOPS:
        w(f"### (a) 9 clusters × 28 workers, depth 8, {loop} loop")
        w("")
        w("| ρ (measured) | FIFO mean AoM (ms) | OLAF mean AoM (ms) | OLAF/FIFO | FIFO peak | "
          "OLAF peak | FIFO loss | OLAF loss | updates at the PS, FIFO → OLAF | starved, FIFO / OLAF |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for load in LOADS:
            f, o = runs("a", "fifo", loop, load), runs("a", "olaf", loop, load)
            ratio = mean(r["mean_aom_ms"] for r in o) / mean(r["mean_aom_ms"] for r in f)
            w(f"| {load} ({mean(r['rho'] for r in f):.2f}) | {fmt([r['mean_aom_ms'] for r in f])} | "
              f"{fmt([r['mean_aom_ms'] for r in o])} | {ratio:.2f} | "
              f"{mean(peak(r) for r in f):.0f} | {mean(peak(r) for r in o):.0f} | "
              f"{fmt([r['loss'] for r in f], pct=True)} | {fmt([r['loss'] for r in o], pct=True)} | "
              f"{mean(r['received'] for r in f):.0f} → {mean(r['received'] for r in o):.0f} | "
              f"{sum(r['starved'] for r in f)} / {sum(r['starved'] for r in o)} |")
        w(f"| paper (ρ ≈ 2.26) | 1714 | 245 | 0.14 | | | 55.8 % | 11 % | 6109 → 4823 | |")
        w("")
    w("### Where the age comes from: (a), open loop")
    w("")
    w("The time-average age splits exactly as Σ(D·Y + Y²/2)/T over the updates that make a "
      "cluster's age younger (D the age such an update arrives with, Y the time to the next one; "
      "`aom_parts` in each run's JSON): **queueing** ΣD·Y/T, **period** the half period a "
      "lossless cluster would have, and **gaps** the rest of ΣY²/2T (loss, starvation, waits; "
      "negative when a cluster's updates arrive several times a period, as FIFO's unmerged ones "
      "do). The last column is the paper's own AoM: for each applied update, the time between "
      "the PS's current model and the model the update was computed on.")
    w("")
    w("| ρ | policy | queueing (ms) | period (ms) | gaps (ms) | sum | measured | paper's AoM (ms) |")
    w("|---|---|---:|---:|---:|---:|---:|---:|")
    for load in LOADS:
        for p in POLICIES:
            rs = runs("a", p, "open", load)
            q = mean(r["aom_parts"]["queueing_ms"] for r in rs)
            per = mean(r["aom_parts"]["period_ms"] for r in rs)
            g = mean(r["aom_parts"]["gaps_ms"] for r in rs)
            w(f"| {load} | {p.upper()} | {q:.1f} | {per:.1f} | {g:.1f} | {q + per + g:.1f} | "
              f"{mean(r['mean_aom_ms'] for r in rs):.1f} | {mean(r['paper_aom_ms'] for r in rs):.1f} |")
    w("")
    w("### (b) 100 ms and 300 ms clusters, and (c) the two-switch tree")
    w("")
    w("| ρ | loop | (b) gap, FIFO | (b) gap, OLAF | (c) Jain, FIFO | (c) Jain, OLAF | "
      "(c) mean AoM, FIFO | (c) mean AoM, OLAF |")
    w("|---|---|---:|---:|---:|---:|---:|---:|")
    for load in LOADS:
        for loop in LOOPS:
            gaps = {p: [group(r, SLOW) - group(r, FAST) for r in runs("b", p, loop, load)]
                    for p in POLICIES}
            c = {p: runs("c", p, loop, load) for p in POLICIES}
            w(f"| {load} | {loop} | {fmt(gaps['fifo'])} | {fmt(gaps['olaf'])} | "
              f"{fmt([r['jain_aom'] for r in c['fifo']], 3)} | "
              f"{fmt([r['jain_aom'] for r in c['olaf']], 3)} | "
              f"{fmt([r['mean_aom_ms'] for r in c['fifo']])} | "
              f"{fmt([r['mean_aom_ms'] for r in c['olaf']])} |")
    w(f"| paper (≈ 2.26) | | {PAPER['b']} | | {PAPER['c']} | | FIFO 2900 (near) | |")
    w("")
    merged = [r["max_merged"] for r in runs("a", "olaf", "open", "2.26")]
    w("### The paper's Table 1 and Fig. 6 claims")
    w("")
    w(f"- **Up to 28 worker updates merged into one**: at ρ = 2.26, (a), the most one applied "
      f"update carried was {min(merged)}–{max(merged)} over the seeds (28 workers per cluster).")
    red = []
    for s in range(1, egress_seeds + 1):
        with open(os.path.join(src, f"sweep-olaf-s{s}-20.json")) as f:
            o = json.load(f)
        with open(os.path.join(src, f"sweep-fifo-s{s}-20.json")) as f:
            ff = json.load(f)
        red.append((1 - o["received"] / max(1, o["sent"]), 1 - o["received"] / max(1, ff["received"])))
    w(f"- **73 % fewer updates at the PS with 20 Gbit/s egress**: in (a) at 20 Gbit/s the PS "
      f"received {fmt([x[0] for x in red], pct=True)} fewer updates than workers sent, and "
      f"{fmt([x[1] for x in red], pct=True)} fewer than under FIFO.")
    w("")
    w(sweep_findings(runs, mean))
    lines.append("")
    doc_sections.replace_section(os.path.join(docs, "EVALUATION.md"), "olaf-load", "\n".join(lines))
    plot(runs, mean, peak, os.path.join(docs, "eval", "olaf-load-aom.png"))
    print("wrote the olaf-load section of", os.path.join(docs, "EVALUATION.md"))


def sweep_findings(runs, mean):
    f = runs("a", "fifo", "open", "2.26")
    o = runs("a", "olaf", "open", "2.26")
    fc = runs("a", "fifo", "closed", "2.26")
    ratio = mean(r["mean_aom_ms"] for r in o) / mean(r["mean_aom_ms"] for r in f)
    starved = sum(r["starved"] for r in f)
    hit = [r["mean_aom_ms"] for r in f if r["starved"]]
    clean = [r["mean_aom_ms"] for r in f if not r["starved"]]
    seeds_line = (f"In the {len(hit)} of {len(f)} seeds with a starved cluster FIFO's mean AoM is "
                  f"{min(hit):.0f}–{max(hit):.0f} ms" if hit else "No seed starved a cluster")
    clean_line = (f"; in the others {min(clean):.1f}–{max(clean):.1f} ms, within a few ms of "
                  "OLAF's." if clean else ".")
    return "\n".join([
        "### What the sweep says",
        "",
        f"- **OLAF/FIFO mean AoM at ρ = 2.26, (a), open loop: {ratio:.2f}** (target ≤ 0.5, "
        f"paper 0.14), and the mean hides the mechanism. FIFO's mean is set by starvation: "
        f"{starved} of {9 * len(f)} clusters over the seeds went the whole run without a "
        "single update, because the fixed send grid locks their burst to a moment when the "
        f"queue is still full of another cluster's burst. {seeds_line}{clean_line} A cluster "
        "that never delivers counts as the whole 10 s run, a lower bound, so this ratio falls "
        "with the run's length and is not a property of the queue alone. OLAF starved no "
        "cluster at any ρ: a cluster with an update queued keeps its entry and its later "
        "workers merge into it.",
        "- **Without starvation, AoM is the period.** Both policies sit at half the period plus "
        "milliseconds of queueing; OLAF's queueing term is about a quarter of FIFO's, and "
        "neither can go below the half period. The paper's 245 ms for OLAF, about five times "
        "our half period, cannot come from the queue alone.",
        f"- **Closed-loop workers do not starve here.** Waiting for a model shifts a cluster's "
        f"phase every round, which breaks the lock: {sum(r['starved'] for r in fc)} starved "
        "clusters at ρ = 2.26, and FIFO's mean AoM stays near the half period.",
        "- **(b) and (c) follow (a).** In the open loop FIFO's starved clusters dominate both: "
        "the (b) gap (300 ms clusters minus 100 ms ones) turns negative when a 100 ms cluster "
        "starves, and (c)'s Jain index falls. OLAF keeps the gap at the difference of the "
        "half periods, 100 ms, which no queue can close.",
        "- **Where the paper's figure could come from.** The decomposition allows seconds only "
        "in the gaps term, so the paper's 1714 ms FIFO figure requires clusters that go seconds "
        "without an update: starvation by phase lock, as here, or updates of many frames of "
        "which FIFO drops one (a lost fragment loses the whole update; not modelled, since the "
        "sweep's updates are one frame). The paper's own AoM (model staleness, last column of "
        "the decomposition) is about one period under both policies here.",
        "- **Training at the same ρ**: `scripts/drl_at_rho.py` reruns the training comparison "
        "with the egress at the workers' measured rate / 2.26 (section below the training one).",
    ])


def plot(runs, mean, peak, path):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    xs = [float(x) for x in LOADS]
    for ax, loop in zip(axes, LOOPS):
        for p, color in (("fifo", "#888"), ("olaf", "#2a7")):
            ax.plot(xs, [mean(r["mean_aom_ms"] for r in runs("a", p, loop, x)) for x in LOADS],
                    "o-", color=color, label=f"{p.upper()} mean")
            ax.plot(xs, [mean(r["aom_parts"]["queueing_ms"] for r in runs("a", p, loop, x))
                         for x in LOADS], "s--", color=color, label=f"{p.upper()} queueing part")
        ax.set_yscale("log")
        ax.set_xlabel("offered load ρ")
        ax.set_title(f"(a), {loop} loop")
    axes[0].set_ylabel("AoM at the PS (ms)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
