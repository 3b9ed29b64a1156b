#!/usr/bin/env bash
# Regenerates the OLAF evaluation (OLAF paper, arXiv 2507.05876, section 4)
# on inca-sim: scenarios (a) star FIFO vs OLAF, (b) heterogeneous clusters,
# (c) two-switch tree with FIFO, OLAF and OLAF + worker send control
# (Olaf_TC), three seeds each, an egress-rate sweep for (a); the load sweep
# (issue 20: (a), (b), (c) at offered loads 0.5..3, FIFO and OLAF, open- and
# closed-loop workers, load_seeds seeds); then writes docs/EVALUATION.md and
# the plots in docs/eval/. About 3 minutes on the 2-core VM.
#
#   scripts/evaluate-olaf.sh [seeds [load_seeds]]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="${1:-3}"
load_seeds="${2:-5}"
scripts/setup.sh release >/dev/null
sim=build/release/bin/inca-sim
out=build/eval
rm -rf "$out"
mkdir -p "$out"
for seed in $(seq 1 "$seeds"); do
  for p in fifo olaf; do
    $sim scenarios/olaf/a-star.yaml --set policy=$p --set seed=$seed --set name=a-$p-s$seed --out "$out"
    $sim scenarios/olaf/b-hetero.yaml --set policy=$p --set seed=$seed --set name=b-$p-s$seed --out "$out"
    $sim scenarios/olaf/c-tree.yaml --set policy=$p --set seed=$seed --set name=c-$p-s$seed --out "$out"
  done
  $sim scenarios/olaf/c-tree.yaml --set policy=olaf --set send_control=priority --set seed=$seed \
    --set name=c-olaftc-s$seed --out "$out"
  for p in fifo olaf; do
    $sim scenarios/olaf/a-star.yaml --set policy=$p --set seed=$seed --set name=sweep-$p-s$seed \
      --sweep egress_gbps=10,20,40,80 --out "$out"
  done
done
loads=0.5,1,1.5,2.26,3
for seed in $(seq 1 "$load_seeds"); do
  for sc in a-star b-hetero c-tree; do
    for p in fifo olaf; do
      for loop in open closed; do
        closed=false
        [[ $loop == closed ]] && closed=true
        $sim scenarios/olaf/$sc.yaml --set policy=$p --set seed=$seed --set aligned_clusters=false \
          --set models=true --set closed_loop=$closed --set name=load-${sc%%-*}-$p-$loop-s$seed \
          --sweep load=$loads --out "$out" >/dev/null
      done
    done
  done
done
/usr/bin/python3 scripts/olaf_evaluation.py "$out" docs "$seeds"
/usr/bin/python3 scripts/olaf_load_sweep.py "$out" docs "$load_seeds" "$seeds"
