#!/usr/bin/env bash
# Runs the benchmarks on one core and prints throughput with ratios against
# memcpy measured in the same run. Absolute figures are noisy on shared
# machines; the ratios are what docs/PERFORMANCE.md compares.
#
#   scripts/bench.sh [min_time_seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
min_time="${1:-0.5}"
scripts/setup.sh release >/dev/null
out="build/release/bench"
taskset_cmd=()
if command -v taskset >/dev/null; then taskset_cmd=(taskset -c 0); fi

"${taskset_cmd[@]}" "$out/reduce_kernels_benchmark" --benchmark_min_time="$min_time" \
  --benchmark_out="$out/reduce_kernels.json" --benchmark_out_format=json
"${taskset_cmd[@]}" "$out/cais_pipeline_benchmark" --benchmark_min_time="$min_time" \
  --benchmark_out="$out/cais_pipeline.json" --benchmark_out_format=json

echo; echo "== OLAF queue and switch (one core), 9000-byte updates"
"${taskset_cmd[@]}" "$out/olaf_queue_benchmark" --benchmark_min_time="$min_time"

/usr/bin/python3 - "$out/reduce_kernels.json" "$out/cais_pipeline.json" <<'PY'
import json, sys
k = json.load(open(sys.argv[1]))["benchmarks"]
p = json.load(open(sys.argv[2]))["benchmarks"]
bps = {b["name"]: b.get("bytes_per_second", 0) for b in k}
print("\n== reduction kernels (one core), GB/s and ratio to memcpy of the same bytes")
for name, v in bps.items():
    size = name.rsplit("/", 1)[-1]
    base = next((bps[n] for n in bps if n.startswith("BM_Memcpy") and n.endswith("/" + size)), 0)
    ratio = f"{v / base:.2f}x memcpy" if base else ""
    print(f"  {name:45s} {v / 1e9:8.2f} GB/s  {ratio}")
print("\n== whole pipeline (parse, lookup, reduce, emit), one core")
for b in p:
    print(f"  {b['name']:45s} {b['items_per_second'] / 1e6:8.2f} Mpkt/s "
          f"{b['bytes_per_second'] / 1e9:8.2f} GB/s payload")
PY
