#!/usr/bin/env bash
# inca-sim against ns-3 on the same workload (issue 19; docs/sim.md,
# "Against ns-3"): the OLAF paper's star, 9 senders of constant-rate
# 9,000-byte UDP datagrams at 6 Gbit/s each into a 40 Gbit/s bottleneck
# with an 8-packet drop-tail queue, 10 simulated seconds, on both
# simulators in one run; then inca-sim's event rate on a 16-host,
# 400 Gbit/s, 200 MB all-reduce. Writes docs/eval/sim-vs-ns3.json and the
# `sim-vs-ns3` section of docs/PERFORMANCE.md. Installs Debian's
# libns3-dev (ns-3.37) when missing: it is this benchmark's dependency,
# not the build's. About 3 minutes.
#
#   scripts/bench-sim-vs-ns3.sh [--duration-s S]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=10
if [[ "${1:-}" == "--duration-s" && -n "${2:-}" ]]; then duration="$2"; fi
build="${INCA_BUILD_DIR:-build/release}"
if [[ ! -x "$build/bin/sim-cbr-star" || ! -x "$build/bin/inca-sim" ]]; then
  scripts/setup.sh release
fi
if [[ ! -f /usr/include/ns3/core-module.h ]]; then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo=sudo; fi
  $sudo apt-get install -y -q --no-install-recommends libns3-dev </dev/null
fi
mkdir -p build/ns3
ns3="build/ns3/ns3-cbr-star"
if [[ ! -x "$ns3" || tools/sim-cbr-star/ns3_cbr_star.cc -nt "$ns3" ]]; then
  g++ -O2 -std=c++17 tools/sim-cbr-star/ns3_cbr_star.cc -o "$ns3" -lns3-core -lns3-network \
    -lns3-internet -lns3-point-to-point -lns3-applications -lns3-traffic-control
fi
args=(--sources 9 --rate-gbps 6 --bottleneck-gbps 40 --queue 8 --payload 9000 \
  --duration-s "$duration")
ns3_args=()
for ((i = 0; i < ${#args[@]}; i += 2)); do ns3_args+=("${args[i]}=${args[i + 1]}"); done
echo "== inca-sim"
inca=$("$build/bin/sim-cbr-star" "${args[@]}")
echo "$inca"
echo "== ns-3"
ns3_out=$("$ns3" "${ns3_args[@]}")
echo "$ns3_out"
echo "== inca-sim: 16 hosts x 400 Gbit/s, 200 MB all-reduce"
allreduce=$("$build/bin/inca-sim" scenarios/cais/star-allreduce.yaml --out build/ns3/allreduce \
  --set name=events-16x400 --set hosts=16 --set link_gbps=400 --set sizes=200M --set ops=1)
echo "$allreduce"
/usr/bin/python3 scripts/sim_vs_ns3.py --inca "$inca" --ns3 "$ns3_out" \
  --allreduce build/ns3/allreduce/events-16x400.json --allreduce-log "$allreduce" \
  --duration-s "$duration"
