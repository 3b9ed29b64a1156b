#!/usr/bin/env bash
# Quick start, command 1: set up, build, and run the main job on its embedded
# default: 4 ranks all-reduce tensors from 4 KiB to 16 MiB through a real
# inca-switchd process on loopback (started for the run), every element
# checked, nccl-tests-style table. Extra arguments go to cais-perf (see
# `build/release/bin/cais-perf --help`); `build/release/bin/inca-demo` runs
# the pure reduction core alone.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh release
exec build/release/bin/cais-perf --op allreduce --ranks 4 -b 4K -e 16M -f 4 "$@"
