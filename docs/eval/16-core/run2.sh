#!/bin/bash
# Device run 2: loopback with more switch threads, the window cap at R*,
# and the README's testbed sweeps with the measured controller (borrowing).
set -u
R=$PWD; B=$R/.devbundle; O=${OUT:-/tmp/out}; mkdir -p $O
export PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p build/release/bin && cp -a $B/new/bin/* build/release/bin/
tar xJf $B/lib.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib PATH=$B/sbin:$PATH
build/release/bin/cais-perf --help >/dev/null 2>&1 || { echo "cais-perf does not run"; exit 3; }
P=build/release/bin/cais-perf
{
  for pass in 1 2; do
    for t in 4 8; do el "loopback 4 ranks switch --threads=$t pass $pass"
      timeout 60 $P --op allreduce --ranks 4 -b 1M -e 64M -f 4 --iters 5 --warmup 1 --backend switch --switchd-arg=--threads=$t 2>&1 | grep -E "^ +[0-9]|wrong|error"
    done
    el "loopback 4 ranks gloo pass $pass"
    timeout 60 $P --op allreduce --ranks 4 -b 1M -e 64M -f 4 --iters 5 --warmup 1 --backend gloo 2>&1 | grep -E "^ +[0-9]|error"
  done
} > $O/loopback2.txt 2>&1
{
  for rate in 4gbit 6gbit; do for w in 64 128 256; do
    el "window $w rate $rate"
    timeout 60 python3 scripts/testbed.py perf --hosts 4 --rate $rate -b 64M -e 64M --iters 3 --warmup 1 --backends switch --window $w --switchd-arg=--offload-controller=off 2>&1 | grep -E "^ +67108864 +0.00|cpu during"
  done; done
} > $O/window.txt 2>&1
{
  el "README sweep 1M..64M -f 2 defaults"
  timeout 150 python3 scripts/testbed.py perf --hosts 4 --rate 1gbit -b 1M -e 64M -f 2 2>&1 | grep -v "^{" | tail -14
  el "16M..64M defaults"
  timeout 100 python3 scripts/testbed.py perf --hosts 4 --rate 1gbit -b 16M -e 64M 2>&1 | grep -v "^{" | tail -8
} > $O/sweep.txt 2>&1
el done
cat $O/loopback2.txt $O/window.txt $O/sweep.txt
