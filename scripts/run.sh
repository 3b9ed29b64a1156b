#!/usr/bin/env bash
# Quick start, command 1: set up, build, and run the main job on its embedded
# default: 4 ranks all-reduce tensors from 4 KiB to 16 MiB through a real
# inca-switchd process on loopback (started for the run), every element
# checked, nccl-tests-style table. Extra arguments go to cais-perf (see
# `build/release/bin/cais-perf --help`); `build/release/bin/inca-demo` runs
# the pure reduction core alone.
set -euo pipefail
cd "$(dirname "$0")/.."
for a in "$@"; do
  if [[ $a == -h || $a == --help ]]; then
    cat <<'EOF'
usage: scripts/run.sh [cais-perf flags...]

Installs what is missing (apt-get), builds the release tree, starts an
inca-switchd on loopback and all-reduces 4 KiB..16 MiB across 4 ranks
through it (cais-perf --op allreduce --ranks 4 -b 4K -e 16M -f 4), every
element checked. Flags given here are appended and win, e.g.:
  --op allgather|broadcast|reducescatter   --ranks 8   --backend gloo
  --type bf16   -b 1M -e 64M   --iters 20
Once built, `build/release/bin/cais-perf --help` lists every flag.
EOF
    exit 0
  fi
done
scripts/setup.sh release
exec build/release/bin/cais-perf --op allreduce --ranks 4 -b 4K -e 16M -f 4 "$@"
