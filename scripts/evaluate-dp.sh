#!/usr/bin/env bash
# Issue 49's data-parallel step at scale: scenarios/cais/dp-llama2.yaml on
# inca-sim, on a full-bisection fat-tree, on one oversubscribed 4:1 above
# the edge switches, with 16 micro-batches a step (DP 64 and 256), with
# other traffic (DP 64), and as four jobs side by side (DP 64 each, on
# switches that advise each group's window, that do not, and with as many
# slots as the four windows), then
# the `cais-dp` section of docs/EVALUATION.md. About 30 minutes on 2 cores.
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
# 10 % of every host's downlink in 4 MiB flows from anywhere in the fabric.
"$sim" "$scenario" --out "$out" --set name=dp-llama2-background --set dp=64 \
  --set background_load=0.1 --set background_flow_bytes=4M
# Four DP-64 jobs interleaved over 256 hosts; then inca alone on switches
# that do not advise each group's window (the four windows, 4 x 64 chunks,
# could overrun the 128 slots), and with 256 slots a switch (the four windows).
"$sim" "$scenario" --out "$out" --set name=dp-llama2-jobs --set dp=64 --set jobs=4
"$sim" "$scenario" --out "$out" --set name=dp-llama2-jobs-unadvised --set dp=64 --set jobs=4 \
  --set backends=inca --set switch_advise_window=false
"$sim" "$scenario" --out "$out" --set name=dp-llama2-jobs-slots --set dp=64 --set jobs=4 \
  --set backends=inca --set switch_slots=256
/usr/bin/python3 scripts/cais_dp_evaluation.py --dir "$out"
