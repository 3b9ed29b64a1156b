#!/bin/bash
# Device-machine measurement: loopback cais-perf, R* before/after on the
# testbed, and bench-testbed.py, on a 16-core machine. Bundle: .devbundle.
set -u
R=$PWD; B=$R/.devbundle; O=${OUT:-/tmp/out}; mkdir -p $O
export PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p build/release/bin && cp -a $B/new/bin/* build/release/bin/
mkdir -p $B/old/build/release && ln -sfn $B/old/bin $B/old/build/release/bin
tar xJf $B/lib.tar.xz -C $B
export LD_LIBRARY_PATH=$B/lib
command -v ip >/dev/null && command -v tc >/dev/null || export PATH=$B/sbin:$PATH
{
  el probe; nproc; uname -r; head -2 /etc/os-release; command -v ip tc python3
  ip -V; tc -V; ldd build/release/bin/cais-perf | grep -i "not found"
  if ldd build/release/bin/cais-perf | grep -q "not found"; then export LD_LIBRARY_PATH=$B/lib:$B/libstd; echo "+libstd"; ldd build/release/bin/cais-perf | grep "not found"; fi
  build/release/bin/cais-perf --help 2>&1 | head -2
  for m in veth bridge sch_tbf sch_netem cls_bpf; do modprobe $m 2>&1 | tail -1; done
  ip netns add incaprobe && ip -n incaprobe link add pa type veth peer name pb && \
    ip netns exec incaprobe tc qdisc add dev pa root tbf rate 1gbit burst 256kb latency 20ms && \
    ip netns exec incaprobe tc qdisc add dev pb root netem delay 1ms && echo "netns+veth+tbf+netem OK"
  ip netns del incaprobe 2>/dev/null
  mkdir -p /run/inca-testbed && cp $B/impair-*.o /run/inca-testbed/ 2>/dev/null; ls /run/inca-testbed
} > $O/probe.txt 2>&1
grep -q "+libstd" $O/probe.txt && export LD_LIBRARY_PATH=$B/lib:$B/libstd
build/release/bin/cais-perf --help >/dev/null 2>&1 || { echo "cais-perf does not run"; cat $O/probe.txt; exit 3; }
P=build/release/bin/cais-perf
{
  for pass in 1 2; do
    for be in switch gloo; do el "loopback 4 ranks $be pass $pass"
      timeout 120 $P --op allreduce --ranks 4 -b 1M -e 64M -f 4 --iters 5 --warmup 1 --backend $be 2>&1 | grep -v "^$"
    done
    el "loopback 4 ranks switch --threads=2 pass $pass"
    timeout 120 $P --op allreduce --ranks 4 -b 1M -e 64M -f 4 --iters 5 --warmup 1 --backend switch --switchd-arg=--threads=2 2>&1
  done
  el "loopback 4 ranks switch --threads=4"
  timeout 120 $P --op allreduce --ranks 4 -b 1M -e 64M -f 4 --iters 5 --warmup 1 --backend switch --switchd-arg=--threads=4 2>&1
  for be in switch gloo; do el "loopback 8 ranks $be"
    timeout 120 $P --op allreduce --ranks 8 -b 1M -e 64M -f 4 --iters 5 --warmup 1 --backend $be 2>&1
  done
} > $O/loopback.txt 2>&1
el loopback-done >> $O/probe.txt
if grep -q "netns+veth+tbf+netem OK\|netns+veth+tbf" $O/probe.txt || true; then
{
  for rate in 1gbit 2gbit 3gbit 4gbit 6gbit 8gbit; do
    for tree in old new; do
      if [ $tree = old ]; then S=$B/old/scripts/testbed.py; BD=$B/old/build/release; else S=scripts/testbed.py; BD=$R/build/release; fi
      el "R* $tree $rate"
      INCA_BUILD_DIR=$BD timeout 90 python3 $S perf --hosts 4 --rate $rate -b 64M -e 64M --iters 3 --warmup 1 --backends switch --switchd-arg=--offload-controller=off 2>&1 | tail -14
    done
  done
  for rate in 1gbit 4gbit; do el "gloo+switch new $rate"
    timeout 120 python3 scripts/testbed.py perf --hosts 4 --rate $rate -b 16M -e 64M -f 4 --iters 3 --warmup 1 2>&1 | tail -14
  done
} > $O/rstar.txt 2>&1
el rstar-done >> $O/probe.txt
timeout 300 python3 scripts/bench-testbed.py > $O/bench.txt 2>&1; echo "bench rc $?" >> $O/bench.txt
el bench-done >> $O/probe.txt
cp docs/eval/testbed.json $O/ 2>/dev/null; cp docs/PERFORMANCE.md $O/ 2>/dev/null
cp docs/eval/testbed-algbw.png $O/ 2>/dev/null
fi
el all-done >> $O/probe.txt
cat $O/probe.txt; grep -h -E "^#|^ +[0-9]|^\[" $O/loopback.txt | head -80
