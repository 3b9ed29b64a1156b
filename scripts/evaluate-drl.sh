#!/usr/bin/env bash
# Regenerates the OLAF paper's training comparison (arXiv 2507.05876 §4.2:
# LunarLander-v3, FIFO vs OLAF vs OLAF with worker send control) on
# inca-sim: `olaf-train sim` per configuration and seed, two runs at a time;
# then the "Training" section of docs/EVALUATION.md and docs/eval/drl-*.png.
# With --real it also runs FIFO and OLAF once each as real processes
# through inca-switchd (olaf-train run) and adds them to the write-up.
#
#   scripts/evaluate-drl.sh [--real] [seeds] [simulated seconds]
#
# Time on the 2-core dev VM: ~18 min for the default 5 seeds x 5
# configurations x 300 simulated s (each run ~70 s of CPU, two at a time),
# plus ~6 min with --real.
set -euo pipefail
cd "$(dirname "$0")/.."
real=0
if [[ "${1:-}" == "--real" ]]; then
  real=1
  shift
fi
seeds="${1:-5}"
duration="${2:-300}"
scripts/setup.sh release >/dev/null
train=build/release/bin/olaf-train
out=build/eval-drl
rm -rf "$out"
mkdir -p "$out"
jobs=()
for seed in $(seq 1 "$seeds"); do
  jobs+=("--set policy=fifo --set name=fifo-s$seed --set seed=$seed")
  jobs+=("--set policy=olaf --set name=olaf-s$seed --set seed=$seed")
  jobs+=("--set policy=olaf --set send_control=priority --set name=olaftc-s$seed --set seed=$seed")
  # OLAF with a short merge decay: merges average rather than keep the queued gradient.
  jobs+=("--set policy=olaf --set tau_ms=10 --set name=olaftau10-s$seed --set seed=$seed")
  # Reference: the same workers with an egress far above their load.
  jobs+=("--set policy=fifo --set egress_mbps=1000 --set name=free-s$seed --set seed=$seed")
done
printf '%s\n' "${jobs[@]}" |
  xargs -P 2 -I{} sh -c "$train sim {} --set duration_s=$duration --set lr_anneal_s=$duration --quiet --out $out"
if ((real)); then
  for p in fifo olaf; do
    $train run --program "$p" --duration 180 --out "$out/real-$p"
  done
fi
/usr/bin/python3 scripts/drl_evaluation.py "$out" docs "$seeds" "$real"
