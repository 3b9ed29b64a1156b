#!/usr/bin/env bash
# Issue 19's tensor-parallel evaluation: scenarios/cais/tp-gpt3.yaml on
# inca-sim four ways (a quiet network, background traffic, stragglers,
# sequence parallelism), and one row again with a wider window,
# then the `cais-tp` section of docs/EVALUATION.md and
# docs/eval/cais-tp-step.png. About 5 minutes on 2 cores.
#
#   scripts/evaluate-cais.sh [OUT_DIR]       (default build/eval-cais)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${INCA_BUILD_DIR:-build/release}"
out="${1:-build/eval-cais}"
if [[ ! -x "$build/bin/inca-sim" ]]; then
  scripts/setup.sh release
fi
sim="$build/bin/inca-sim"
scenario=scenarios/cais/tp-gpt3.yaml
"$sim" "$scenario" --out "$out" --set name=tp-gpt3-quiet --set background_load=0
"$sim" "$scenario" --out "$out"
"$sim" "$scenario" --out "$out" --set name=tp-gpt3-stragglers --set background_load=0 \
  --set straggler_prob=0.05
"$sim" "$scenario" --out "$out" --set name=tp-gpt3-sp --set background_load=0 \
  --set sequence_parallel=true
# The background run's TP 8, 100 Gbit/s row with a wider window and more
# slots: how much of inca's loss there is the window.
"$sim" "$scenario" --out "$out" --set name=tp-gpt3-wide-window --set tp=8 --set link_gbps=100 \
  --set backends=inca --set window=256 --set switch_slots=1024 --set steps=100
/usr/bin/python3 scripts/cais_tp_evaluation.py --dir "$out"
