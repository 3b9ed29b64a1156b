#!/usr/bin/python3
"""Writes the data-parallel section of docs/EVALUATION.md (`cais-dp`) from
inca-sim's results for scenarios/cais/dp-llama2.yaml, run by
scripts/evaluate-dp.sh on a full-bisection fat-tree, on one
oversubscribed 4:1 above the edge switches, with 16 micro-batches a
step, with other traffic, and as four jobs side by side.

  scripts/cais_dp_evaluation.py --dir build/eval-dp [--doc docs/EVALUATION.md]
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import doc_sections  # scripts/, beside this file

RUNS = [("dp-llama2-full", "Full bisection"),
        ("dp-llama2-4to1", "Oversubscribed 4:1 above the edge switches"),
        ("dp-llama2-acc16", "Full bisection, 16 micro-batches a step")]
BACKENDS = [("inca", "inca's tree"), ("tree", "NCCL's tree"), ("ring", "the ring")]
# Full bisection, DP 64: with other traffic; as four jobs; as four jobs on
# switches that do not advise windows, and with 256 slots a switch (inca alone).
SHARED = ["dp-llama2-background", "dp-llama2-jobs", "dp-llama2-jobs-unadvised",
          "dp-llama2-jobs-slots"]


def by_dp(run: dict) -> dict:
    """dp -> {backend: row}, in the run's order."""
    out = {}
    for r in run["rows"]:
        out.setdefault(r["dp"], {})[r["backend"]] = r
    return out


def table(run: dict, extra: list = ()) -> list:
    """The run's rows, then `extra` (label, row, the ring's row) after them."""
    lines = ["| DP | backend | bucket (ms) | of its closed form | comm a step (ms) "
             "| step (ms) | exposed comm | step against the ring |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    def line(dp, label, r, ring):
        vs = "%.2f×" % (ring["step_ms"] / r["step_ms"]) if ring else "—"
        lines.append("| %d | %s | %.2f | %.3f | %.1f | %.1f | %.0f %% | %s |" % (
            dp, label, r["bucket_us"] / 1e3, r["bucket_closed_form_us"] / r["bucket_us"],
            r["comm_ms"], r["step_ms"], 100 * r["comm_share"], vs))
    for dp, rows in by_dp(run).items():
        for b, _ in BACKENDS:
            if b in rows:
                line(dp, b, rows[b], rows.get("ring"))
    for label, r, ring in extra:
        line(r["dp"], label, r, ring)
    return lines


def human(n: int) -> str:
    """Bytes as MiB, or KiB below one MiB."""
    return "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)


def several_jobs(j: dict, dp: int, inca: dict, deaf: dict) -> str:
    """The finding of the jobs runs: the switches' slots, with and without window advice."""
    head = ("- **Several jobs and the switches' slots.** %d DP-%d jobs, each its own group and "
            "tree, share the switches' %d slots with windows of %d chunks each. Each switch "
            "advises each group's ranks its fair share (its slots over the groups there; the "
            "manager caps a tree at the least share along it), and the ranks keep to it: %d "
            "chunks resent, %d given up to the host path, the bucket %.3f of its closed form" % (
                j["jobs"], dp, j["switch_slots"], j["window"], inca["retransmitted"],
                inca["fallback_chunks"], inca["bucket_closed_form_us"] / inca["bucket_us"]))
    drops = ", ".join("%s %d" % (k, v) for k, v in sorted(deaf.get("switch_drops", {}).items()))
    if deaf["retransmitted"] + deaf["fallback_chunks"] > 0:
        return head + (
            ". Switches that do not advise (`switch_advise_window=false`) drop the chunks and "
            "partials that find no slot without telling their senders, who learn it only by "
            "their timeouts: %d chunks resent, %d given up to the host path (the reducers' "
            "drops: %s), a bucket of %.1f ms, %.1f× the advised one (a lower bound: inca-sim "
            "does not run the host path)." % (
                deaf["retransmitted"], deaf["fallback_chunks"], drops or "none counted",
                deaf["bucket_us"] / 1e3, deaf["bucket_us"] / inca["bucket_us"]))
    return head + (
        ". Here the advice costs: unadvised, no chunk found its switch full (%d resent) and "
        "the bucket is %.2f ms, %.2f× the advised %.2f ms. A slot is held for less than a "
        "rank's round trip (from the chunk's first contribution at that switch to its "
        "result), so windows that add up past the slots can still fit them, and the advice, "
        "which never lets them add up past the slots, holds each below what the round trip "
        "needs. Where windows do overrun the slots the advice is what keeps the job on the "
        "switch (docs/sim.md, \"Several jobs\")." % (
            deaf["retransmitted"], deaf["bucket_us"] / 1e3,
            deaf["bucket_us"] / inca["bucket_us"], inca["bucket_us"] / 1e3))


def shared(runs: dict) -> list:
    """The tables and findings of the runs that share the fabric."""
    b, j = runs["dp-llama2-background"], runs["dp-llama2-jobs"]
    dp_b, dp_j = b["rows"][0]["dp"], j["rows"][0]["dp"]  # one DP size each
    full = by_dp(runs["dp-llama2-full"])
    bg, jobs = by_dp(b)[dp_b], by_dp(j)[dp_j]
    deaf = by_dp(runs["dp-llama2-jobs-unadvised"])[dp_j]["inca"]
    slots_run = runs["dp-llama2-jobs-slots"]
    slots = by_dp(slots_run)[dp_j]["inca"]
    out = ["### Other traffic: %.0f %% of every downlink in %s flows (DP %d, full bisection)"
           % (100 * b["background_load"], human(b["background_flow_bytes"]), dp_b), ""]
    out += table(b) + [""]
    out += ["### %d jobs of DP %d side by side (%d hosts, ranks interleaved; full bisection)"
            % (j["jobs"], dp_j, dp_j * j["jobs"]), ""]
    out += table(j, [("inca, switches not advising windows", deaf, jobs["ring"]),
                     ("inca, %d slots a switch" % slots_run["switch_slots"], slots, jobs["ring"])])
    out += [""]
    quiet = full[dp_b]
    slow = {k: bg[k]["bucket_us"] / quiet[k]["bucket_us"] for k in ("inca", "ring", "tree")}
    findings = [
        "- **Other traffic costs inca the most.** With %.0f %% of every host's downlink taken "
        "by %s flows from anywhere in the fabric, inca's bucket takes %.2f× as long as on "
        "the quiet fabric (%.2f → %.2f ms), the ring's %.2f× and NCCL's tree's %.2f×; inca's "
        "step stays %.2f× shorter than the ring's (%.2f× when quiet). Each of inca's chunks "
        "needs every rank's contribution at every switch, so it runs at the pace of whichever "
        "of the %d downlinks is queueing behind a flow at the time, while the ring's and the "
        "tree's packets wait only for their own hop (as in the tensor-parallel section above). "
        "One seed, one load: a sweep is the next step, not done here." % (
            100 * b["background_load"], human(b["background_flow_bytes"]), slow["inca"],
            quiet["inca"]["bucket_us"] / 1e3, bg["inca"]["bucket_us"] / 1e3, slow["ring"],
            slow["tree"], bg["ring"]["step_ms"] / bg["inca"]["step_ms"],
            quiet["ring"]["step_ms"] / quiet["inca"]["step_ms"], dp_b),
        several_jobs(j, dp_j, jobs["inca"], deaf),
        "- **Each job at a core of its own, then the edge switches' slots.** The manager "
        "roots each job's tree in the tree plane whose switches carry the fewest groups, so "
        "with %d planes (k/2) for %d jobs the trees go up to %s and share the edge "
        "switches, where the jobs' ranks interleave. inca's bucket is %.2f× one job's (%.2f ms) and %.3f of "
        "its closed form: an edge switch holding all %d groups advises each a window of "
        "%d / %d chunks (above). With %d slots a "
        "switch it is %.3f of its closed form and the step %.1f ms against one job's %.1f. "
        "The ring's and NCCL's tree's buckets are %.2f× and %.2f× one job's (ECMP spreads "
        "their flows over the cores). inca's step is %.2f× shorter than the ring's (%.2f× with "
        "%d slots), against %.2f× for one job alone."
        % (j["fat_tree_k"] // 2, j["jobs"],
           "a core each" if j["jobs"] <= j["fat_tree_k"] // 2 else "every core",
           jobs["inca"]["bucket_us"] / full[dp_j]["inca"]["bucket_us"],
           jobs["inca"]["bucket_us"] / 1e3,
           jobs["inca"]["bucket_closed_form_us"] / jobs["inca"]["bucket_us"], j["jobs"],
           j["switch_slots"], j["jobs"], slots_run["switch_slots"],
           slots["bucket_closed_form_us"] / slots["bucket_us"], slots["step_ms"],
           full[dp_j]["inca"]["step_ms"],
           jobs["ring"]["bucket_us"] / full[dp_j]["ring"]["bucket_us"],
           jobs["tree"]["bucket_us"] / full[dp_j]["tree"]["bucket_us"],
           jobs["ring"]["step_ms"] / jobs["inca"]["step_ms"],
           jobs["ring"]["step_ms"] / slots["step_ms"], slots_run["switch_slots"],
           full[dp_j]["ring"]["step_ms"] / full[dp_j]["inca"]["step_ms"]),
    ]
    return out, findings


def span(lo: float, hi: float, fmt: str) -> str:
    """`lo`-`hi` in `fmt`, or one figure when they print alike."""
    a, b = fmt % lo, fmt % hi
    return a if a == b else "%s-%s" % (a, b)


def analysis(runs: dict) -> list:
    full, thin, acc = (runs[name] for name, _ in RUNS)
    out = []
    f, t, c = by_dp(full), by_dp(thin), by_dp(acc)
    dps = sorted(f)
    lo, hi = dps[0], dps[-1]
    compute = full["rows"][0]["compute_ms"]

    def ratio(rows, a, b):
        return rows[b]["step_ms"] / rows[a]["step_ms"]

    out.append(
        "- **Where in-network aggregation wins.** Each rank all-reduces %.2f GB of gradients a "
        "step against %.1f ms of compute. inca's tree sends each bucket up once and gets the "
        "sum down once, whatever the DP size and wherever the scheduler put the ranks: its "
        "bucket time is the bucket at link rate (%s of its closed form), and its buckets "
        "expose %s of the step at full bisection against the ring's %s and NCCL's tree's %s. "
        "The step is %s× shorter than the ring's and %s× shorter than NCCL's tree's over DP "
        "%d-%d." % (
            full["gradient_bytes"] / 1e9, compute,
            span(min(r["inca"]["bucket_closed_form_us"] / r["inca"]["bucket_us"] for r in f.values()),
                 max(r["inca"]["bucket_closed_form_us"] / r["inca"]["bucket_us"] for r in f.values()),
                 "%.3f"),
            *(span(min(r[b]["comm_share"] for r in f.values()) * 100,
                   max(r[b]["comm_share"] for r in f.values()) * 100, "%.0f %%")
              for b in ("inca", "ring", "tree")),
            span(min(ratio(r, "inca", "ring") for r in f.values()),
                 max(ratio(r, "inca", "ring") for r in f.values()), "%.2f"),
            span(min(ratio(r, "inca", "tree") for r in f.values()),
                 max(ratio(r, "inca", "tree") for r in f.values()), "%.2f"), lo, hi))
    out.append(
        "- **Why the ring loses more than its 2(n−1)/n.** The ring's neighbours sit in other "
        "racks under a random placement, so several ring edges hash onto one link between "
        "switches (ECMP by flow), and that link carries each of their shares: the ring's bucket "
        "takes %s× inca's at full bisection, where the ring's bytes alone would make it "
        "about 2×. NCCL's tree moves half the tensor on each of its edges both ways, and "
        "many of its edges cross the same links too." % span(
            min(r["ring"]["bucket_us"] / r["inca"]["bucket_us"] for r in f.values()),
            max(r["ring"]["bucket_us"] / r["inca"]["bucket_us"] for r in f.values()), "%.1f"))
    if f[hi]["ring"]["bucket_closed_form_us"] / f[hi]["ring"]["bucket_us"] < 0.9:
        out.append(
            "- **Where the ring's time is latency.** At DP %d the ring's bucket reads %.2f of its "
            "closed form at full bisection: its 2(n−1) = %d steps each move 1/%d of the bucket "
            "(%.0f KB), and each step's packets cross up to four links between switches, six hops "
            "with a link delay and a store-and-forward each, which the closed form (the busiest "
            "link's bytes, and a star's two hops per step) leaves out." % (
                hi, f[hi]["ring"]["bucket_closed_form_us"] / f[hi]["ring"]["bucket_us"],
                2 * (hi - 1), hi, f[hi]["ring"]["bucket_bytes"] / hi / 1e3))
    out.append(
        "- **Oversubscription.** With the links above the edge switches at a quarter of the "
        "hosts' rate, inca's tree is held to the uplink's rate (its bucket takes %.2f× as long "
        "as at full bisection at DP %d) and the ring's crossings to theirs (%.2f×): the step "
        "stays %s× shorter than the ring's." % (
            t[hi]["inca"]["bucket_us"] / f[hi]["inca"]["bucket_us"], hi,
            t[hi]["ring"]["bucket_us"] / f[hi]["ring"]["bucket_us"],
            span(min(ratio(r, "inca", "ring") for r in t.values()),
                 max(ratio(r, "inca", "ring") for r in t.values()), "%.2f")))
    out.append(
        "- **Where it wins less.** Compute dilutes the difference, and DDP hides little of "
        "it: with %d micro-batches a step (%.0f ms of compute) the buckets still wait for the "
        "last micro-batch's backward and overlap only it, so the exposed communication falls "
        "to %s on inca and %s on the ring, and the step is %s× shorter than the ring's "
        "(DP %s). A step whose buckets all fit in that last backward (each under 1/%d of it, "
        "about %.2f ms) would take the same time on every backend." % (
            acc["accumulation"], acc["rows"][0]["compute_ms"],
            span(min(r["inca"]["comm_share"] for r in c.values()) * 100,
                 max(r["inca"]["comm_share"] for r in c.values()) * 100, "%.0f %%"),
            span(min(r["ring"]["comm_share"] for r in c.values()) * 100,
                 max(r["ring"]["comm_share"] for r in c.values()) * 100, "%.0f %%"),
            span(min(ratio(r, "inca", "ring") for r in c.values()),
                 max(ratio(r, "inca", "ring") for r in c.values()), "%.2f"),
            ", ".join(str(d) for d in sorted(c)), full["rows"][0]["buckets"],
            2 * compute / 3 / full["rows"][0]["buckets"]))
    return out


def main() -> int:
    a = doc_sections.evaluation_args(__doc__, ROOT).parse_args()
    runs = doc_sections.sim_runs(a.dir, [name for name, _ in RUNS] + SHARED,
                                 "cais_dp_evaluation")
    if runs is None:
        return 2
    first = runs[RUNS[0][0]]
    out = ["## CAIS: a data-parallel step across racks (issue 49)", "",
           "Regenerated by `scripts/evaluate-dp.sh` (inca-sim, scenarios/cais/dp-llama2.yaml; "
           "docs/sim.md, \"Data-parallel step\"). %s with tensor parallelism of %d inside each "
           "node: each DP rank all-reduces %.2f GB of bf16 gradients a step in DDP's %d MiB "
           "buckets (%d a step), overlapped with the backward pass as DDP overlaps them; "
           "compute %.1f ms a step (6 × parameters × %d tokens / TP at %g TFLOP/s × %.0f %%). "
           "Each bucket's all-reduce is a packet-level run on a k = %d fat-tree of %g Gbit/s "
           "host links, ranks placed at random, the mean of %d runs after one of warm-up: inca "
           "through the real CaisReducer and client cores up the aggregation manager's tree "
           "(edge, aggregation, core), the ring and NCCL's double binary tree through the "
           "forwarders by ECMP. Parameters come from the sources in the scenario file; none is "
           "tuned toward a result." % (
               first["model"], first["tp"], first["gradient_bytes"] / 1e9,
               first["bucket_bytes"] >> 20, first["rows"][0]["buckets"],
               first["rows"][0]["compute_ms"], first["seq"] * first["micro_batch"],
               first["device_tflops"], 100 * first["mfu"], first["fat_tree_k"],
               first["link_gbps"], first["ar_samples"]), ""]
    for name, title in RUNS:
        r = runs[name]
        out += ["### %s (links between switches %g Gbit/s)" % (title, r["uplink_gbps"]), ""]
        out += table(r) + [""]
    tables, findings = shared(runs)
    out += tables
    out += ["### Where it wins, where it does not, and why", ""] + analysis(runs) + findings
    out += ["", "Not modelled: the optimizer step, the host path's CPU cost (no host model in "
            "this scenario), and the host path itself (chunks a rank gives up to it are not "
            "run: see the four jobs above)."]
    doc_sections.replace_section(a.doc, "cais-dp", "\n".join(out) + "\n")
    print("cais_dp_evaluation: wrote the cais-dp section of %s" % a.doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
