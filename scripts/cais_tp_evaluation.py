#!/usr/bin/python3
"""Writes the tensor-parallel section of docs/EVALUATION.md (`cais-tp`)
and its plots from inca-sim's results for scenarios/cais/tp-gpt3.yaml,
run four ways by scripts/evaluate-cais.sh: a quiet network, background
traffic, stragglers, and sequence parallelism.

  scripts/cais_tp_evaluation.py --dir build/eval-cais [--doc docs/EVALUATION.md]
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import doc_sections  # scripts/, beside this file

# The write-up's section 4.3 (8-way TP, layers of about 200 MB, NCCL).
WRITEUP = {"step": -0.18, "comm": (0.32, 0.14), "p99": (1.8, 1.3)}
# The background run again at TP 8, 100 Gbit/s, with a wider window and
# more slots (inca only).
WIDE = "tp-gpt3-wide-window"
RUNS = [("tp-gpt3-quiet", "A quiet network"),
        ("tp-gpt3", "Background traffic"),
        ("tp-gpt3-stragglers", "Stragglers"),
        ("tp-gpt3-sp", "Sequence parallelism")]


def pairs(run: dict):
    """(tp, rate) -> {backend: row}, in the run's order."""
    out = {}
    for r in run["rows"]:
        out.setdefault((r["tp"], r["link_gbps"]), {})[r["backend"]] = r
    return out


def signed(x: float) -> str:
    """A percentage with a real minus sign, as the write-up's."""
    return ("%+.0f %%" % x).replace("-", "−")


def table(run: dict) -> list:
    lines = ["| TP | Gbit/s | all-reduce, ring / inca (ms) | step, ring / inca (s) "
             "| step, inca vs ring | comm share, ring → inca | p99/avg, ring → inca |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for (tp, gbps), b in pairs(run).items():
        ring, inca = b["ring"], b["inca"]
        lines.append("| %d | %g | %.2f / %.2f | %.2f / %.2f | %s | %.0f %% → %.0f %% "
                     "| %.3f → %.3f |" % (
                         tp, gbps, ring["ar_mean_us"] / 1e3, inca["ar_mean_us"] / 1e3,
                         ring["step_mean_ms"] / 1e3, inca["step_mean_ms"] / 1e3,
                         signed(100 * (inca["step_mean_ms"] / ring["step_mean_ms"] - 1)),
                         100 * ring["comm_share"], 100 * inca["comm_share"],
                         ring["p99_over_mean"], inca["p99_over_mean"]))
    return lines


def plot(runs: dict, path: str) -> None:
    plt = doc_sections.pyplot()
    shown = [(n, t) for n, t in RUNS if n in runs]
    fig, axes = plt.subplots(1, len(shown), figsize=(4.4 * len(shown), 3.8), sharey=True,
                             constrained_layout=True)
    for ax, (name, title) in zip(axes, shown):
        by = pairs(runs[name])
        for tp in sorted({k[0] for k in by}):
            rates = sorted(g for t, g in by if t == tp)
            ratio = [by[(tp, g)]["inca"]["step_mean_ms"] / by[(tp, g)]["ring"]["step_mean_ms"]
                     for g in rates]
            ax.plot(rates, ratio, marker="o", label="TP %d" % tp)
        ax.axhline(1 + WRITEUP["step"], color="grey", ls="--", lw=1)
        ax.axhline(1.0, color="black", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_xticks([100, 200, 400])
        ax.set_xticklabels(["100", "200", "400"])
        ax.set_xlabel("host link (Gbit/s)")
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel("step time, inca / ring")
    axes[0].legend(fontsize=8)
    axes[-1].text(110, 1 + WRITEUP["step"] + 0.01, "write-up: −18 %", fontsize=8, color="grey")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def at(run: dict, tp: int, gbps: float) -> dict:
    return pairs(run).get((tp, gbps), {})


def analysis(runs: dict) -> list:
    quiet, busy, strag, sp = (runs.get(n) for n, _ in RUNS)
    sp8 = at(sp, 8, 100)
    sp_ratio = [b["inca"]["ar_mean_us"] / b["ring"]["ar_mean_us"] for b in pairs(sp).values()]
    sp_step = [b["inca"]["step_mean_ms"] / b["ring"]["step_mean_ms"] - 1
               for b in pairs(sp).values()]
    q8, b8, s8 = at(quiet, 8, 100), at(busy, 8, 100), at(strag, 8, 100)
    b16 = at(busy, 16, 100)
    wide = at(runs.get(WIDE, {"rows": []}), 8, 100)
    saving = [1 - b["inca"]["step_mean_ms"] / b["ring"]["step_mean_ms"]
              for b in pairs(quiet).values()]
    c0, c1 = WRITEUP["comm"]
    implied_cut = 1 - c1 * (1 + WRITEUP["step"]) / c0
    out = ["### Against the write-up, and why they differ", "",
           "| | write-up (TP 8, ~200 MB layers) | here, TP 8 at 100 Gbit/s: quiet "
           "| background | stragglers |",
           "|---|---:|---:|---:|---:|"]

    def cell(b, f):
        return f(b) if b else "—"

    out.append("| step time, inca vs ring | −18 %% | %s | %s | %s |" % tuple(
        cell(b, lambda b: signed(100 * (b["inca"]["step_mean_ms"] /
                                        b["ring"]["step_mean_ms"] - 1)))
        for b in (q8, b8, s8)))
    out.append("| communication share, ring → inca | 32 %% → 14 %% | %s | %s | %s |" % tuple(
        cell(b, lambda b: "%.0f %% → %.0f %%" % (100 * b["ring"]["comm_share"],
                                                100 * b["inca"]["comm_share"]))
        for b in (q8, b8, s8)))
    out.append("| p99/avg step, ring → inca | 1.8 → 1.3 | %s | %s | %s |" % tuple(
        cell(b, lambda b: "%.2f → %.2f" % (b["ring"]["p99_over_mean"],
                                           b["inca"]["p99_over_mean"]))
        for b in (q8, b8, s8)))
    out += ["",
            "- **Step time.** On a quiet network inca's step is %.0f–%.0f %% shorter than the "
            "ring's. The all-reduce here is %d MiB and bandwidth-bound at every rate: a switch "
            "that reduces at line rate moves S through each host link where the ring moves "
            "2(n−1)/n·S, so inca's all-reduce takes n/(2(n−1)) of the ring's (0.67 at TP 4, "
            "0.57 at 8, 0.53 at 16), and the step gains that on its communication share. "
            "The write-up's −18 %% is inside that range; its model and network are not "
            "stated closely enough to say which of ours it matches." % (
                100 * min(saving), 100 * max(saving), quiet["rows"][0]["ar_bytes"] >> 20),
            "- **Communication share.** Ours is far higher than 32 %%: GPT-3 175B's layer at "
            "micro-batch 1 computes for %.1f ms per rank at TP 8 (H100 at 40 %% of peak) "
            "and sends 4 × 48 MiB, which a 100–400 Gbit/s host link cannot hide; TP is "
            "normally kept inside an NVLink domain for this reason. The write-up's own "
            "32 %% → 14 %% with −18 %% of step time means communication fell to %.0f %% of "
            "its old time, a cut of %.0f %%; a line-rate switch's bandwidth saving alone cuts "
            "a bandwidth-bound all-reduce by %.0f %% at TP 8, so the write-up's cut also needs "
            "the ring to have been slower than its bound (latency, NCCL's protocol), which "
            "our ring, pipelined packet by packet at line rate, is not." % (
                q8["inca"]["compute_layer_ms"] if q8 else 0, 100 * (1 - implied_cut),
                100 * implied_cut, 100 * (1 - 8 / 14)),
            "- **p99/avg.** A step is 384 all-reduces and 384 compute phases; per-phase "
            "jitter (2 %% here) averages out over them, and stragglers in 1 %% of steps sit "
            "at the p99 boundary, so on a quiet network both backends are at %s. When the "
            "tail comes from compute (the stragglers run: 5 %% of steps with one rank 1.5× "
            "slower), the same slow steps add the same milliseconds to both backends, and "
            "p99/avg is *higher* for inca because its mean is smaller (%s). A p99/avg of 1.8 "
            "means the p99 step is 80 %% longer than the mean, far beyond what compute jitter "
            "or rare stragglers give; for inca to bring it to 1.3 the tail must be in the "
            "communication and be removed by the switch: the ring's exposure to the slowest "
            "of its 2(n−1) hops, incast, or loss and retransmission in the host stack." % (
                cell(q8, lambda b: "%.3f/%.3f" % (b["ring"]["p99_over_mean"],
                                                  b["inca"]["p99_over_mean"])),
                cell(s8, lambda b: "ring %.2f, inca %.2f" % (b["ring"]["p99_over_mean"],
                                                             b["inca"]["p99_over_mean"]))),
            "- **Background traffic works against inca here.** With %.0f %% of each downlink "
            "taken by %d MiB flows at line rate, the ring slows by about what the flows take "
            "(its all-reduce at TP 8, 100 Gbit/s: %.2f → %.2f ms) but inca slows far more "
            "(%.2f → %.2f ms); at TP 16 its all-reduce is %s the ring's. No packet is lost and none "
            "resent. Every slot waits for its slowest contributor, and the rank whose "
            "downlink is queueing behind a flow gets its results late and so contributes "
            "late; the ring has no window and its lossless links keep every hop busy. The "
            "window is part of it, not all: with a window of 256 chunks and 1,024 switch "
            "slots the same all-reduce takes %s ms. A switch that serves its results ahead "
            "of other traffic, or a transport that keeps the slowest rank's contributions "
            "flowing while its downlink queues, is what the write-up's p99 claim needs on a "
            "shared network." % (
                100 * busy["background_load"], busy["background_flow_bytes"] >> 20,
                q8["ring"]["ar_mean_us"] / 1e3 if q8 else 0,
                b8["ring"]["ar_mean_us"] / 1e3 if b8 else 0,
                q8["inca"]["ar_mean_us"] / 1e3 if q8 else 0,
                b8["inca"]["ar_mean_us"] / 1e3 if b8 else 0,
                cell(b16, lambda b: "%.2f× as long as" % (
                    b["inca"]["ar_mean_us"] / b["ring"]["ar_mean_us"])),
                cell(wide, lambda b: "%.2f" % (b["inca"]["ar_mean_us"] / 1e3))),
            "- **Sequence parallelism takes the switch's gain away.** With Megatron-LM's "
            "sequence parallelism each all-reduce becomes a reduce-scatter and an all-gather "
            "with a layer norm between them, so the switch cannot do both halves in one "
            "traversal. In a reduce-scatter every rank must send its whole tensor up to the "
            "switch, and in an all-gather, as inca runs it, every rank gets every block back "
            "down, its own included (that copy is its acknowledgement); the ring moves "
            "(n−1)/n of the tensor in each. inca's pair takes %.2f–%.2f× the ring's over the "
            "grid (TP 8 at 100 Gbit/s: %s ms), and its step is %s to %s against the ring's. "
            "Sending the owner a 20-byte acknowledgement in place of its own block would bring "
            "the all-gather level with the ring; the reduce-scatter's n/(n−1) is what a switch "
            "costs there, whatever its speed. The write-up's gain needs Megatron-LM's TP "
            "without sequence parallelism." % (
                min(sp_ratio), max(sp_ratio),
                cell(sp8, lambda b: "%.2f against %.2f" % (b["inca"]["ar_mean_us"] / 1e3,
                                                          b["ring"]["ar_mean_us"] / 1e3)),
                signed(100 * min(sp_step)), signed(100 * max(sp_step)))]
    return out


def main() -> int:
    ap = doc_sections.evaluation_args(__doc__, ROOT)
    ap.add_argument("--plots", default=os.path.join(ROOT, "docs", "eval"))
    a = ap.parse_args()
    runs = doc_sections.sim_runs(a.dir, [name for name, _ in RUNS], "cais_tp_evaluation")
    if runs is None:
        return 2
    if os.path.exists(os.path.join(a.dir, WIDE + ".json")):  # optional
        runs.update(doc_sections.sim_runs(a.dir, [WIDE], "cais_tp_evaluation") or {})
    first = runs[RUNS[0][0]]
    os.makedirs(a.plots, exist_ok=True)
    plot(runs, os.path.join(a.plots, "cais-tp-step.png"))
    out = ["## CAIS: tensor-parallel training steps (write-up section 4.3)", "",
           "Regenerated by `scripts/evaluate-cais.sh` (inca-sim, "
           "scenarios/cais/tp-gpt3.yaml; docs/sim.md, \"Tensor-parallel step\"). "
           "%s (h %d, s %d, %d layers, micro-batch %d, bf16): four all-reduces of %d MiB "
           "per layer and step, compute at %g TFLOP/s × %.0f %% of peak. Each all-reduce is "
           "drawn from %d packet-level runs of that configuration (inca: the real "
           "CaisReducer and the client's transport core; the ring pipelined packet by "
           "packet with NCCL's 9.6 µs per step), %d steps per row, the same compute draws "
           "for both backends. Compute jitter %.0f %% per phase and rank; stragglers: "
           "%.0f %% of steps, one rank %.1f× slower. Parameters come from the sources in the "
           "scenario file, none from the write-up." % (
               first["model"], first["hidden"], first["seq"], first["layers"],
               first["micro_batch"], first["rows"][0]["ar_bytes"] >> 20, first["device_tflops"],
               100 * first["mfu"], first["ar_samples"], first["steps"],
               100 * first["compute_jitter"], 100 * first["straggler_prob"],
               first["straggler_slowdown"]), "",
           "![step time, inca against the ring](eval/cais-tp-step.png)", ""]
    for name, title in RUNS:
        r = runs[name]
        what = {"tp-gpt3-quiet": "no other traffic",
                "tp-gpt3": "flows of %d MiB at link rate load each downlink by %.0f %% "
                           "(Poisson arrivals)" % (r["background_flow_bytes"] >> 20,
                                                   100 * r["background_load"]),
                "tp-gpt3-stragglers": "no other traffic; %.0f %% of steps have a straggler"
                                      % (100 * r["straggler_prob"]),
                "tp-gpt3-sp": "no other traffic; sequence parallelism: the all-reduce "
                              "column is each layer's reduce-scatter and all-gather "
                              "together"}[name]
        out += ["### %s" % title, "", "%s; %d events." % (what[0].upper() + what[1:],
                                                           r["events"]), ""]
        out += table(r) + [""]
    out += analysis(runs)
    doc_sections.replace_section(a.doc, "cais-tp", "\n".join(out))
    print("wrote the cais-tp section of", a.doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
