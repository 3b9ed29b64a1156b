#!/usr/bin/env bash
# Issue 49's data-parallel step at scale: scenarios/cais/dp-llama2.yaml on
# inca-sim, on a full-bisection fat-tree, on one oversubscribed 4:1 above
# the edge switches, and with 16 micro-batches a step (DP 64 and 256), then
# the `cais-dp` section of docs/EVALUATION.md. About 20 minutes on 2 cores.
#
#   scripts/evaluate-dp.sh [OUT_DIR]       (default build/eval-dp)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${INCA_BUILD_DIR:-build/release}"
out="${1:-build/eval-dp}"
if [[ ! -x "$build/bin/inca-sim" ]]; then
  scripts/setup.sh release
fi
sim="$build/bin/inca-sim"
scenario=scenarios/cais/dp-llama2.yaml
"$sim" "$scenario" --out "$out" --set name=dp-llama2-full
"$sim" "$scenario" --out "$out" --set name=dp-llama2-4to1 --set uplink_gbps=100
"$sim" "$scenario" --out "$out" --set name=dp-llama2-acc16 --set accumulation=16 --set dp=64,256
/usr/bin/python3 scripts/cais_dp_evaluation.py --dir "$out"
