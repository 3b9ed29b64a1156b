#!/usr/bin/env bash
# inca-sim against ns-3 on the same workload (issue 19; docs/sim.md,
# "Against ns-3"): the OLAF paper's star, 9 senders of constant-rate
# 9,000-byte UDP datagrams at 6 Gbit/s each into a 40 Gbit/s bottleneck
# with an 8-packet drop-tail queue, 10 simulated seconds, on both
# simulators in one run; then inca-sim's event rate on a 16-host,
# 400 Gbit/s, 200 MB all-reduce. Writes docs/eval/sim-vs-ns3.json and the
# `sim-vs-ns3` section of docs/PERFORMANCE.md. The ns-3 side is inca-ns3
# cbr-star (ns-3's own drop-tail queue and UdpClient sources), built
# against Debian's libns3-dev (ns-3.37; docs/ns3.md). About 3 minutes.
#
#   scripts/bench-sim-vs-ns3.sh [--duration-s S]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=10
if [[ "${1:-}" == "--duration-s" && -n "${2:-}" ]]; then duration="$2"; fi
build="${INCA_BUILD_DIR:-build/release}"
if [[ ! -f /usr/include/ns3/core-module.h || ! -x "$build/bin/inca-ns3" ||
      ! -x "$build/bin/sim-cbr-star" || ! -x "$build/bin/inca-sim" ]]; then
  scripts/setup.sh release  # installs libns3-dev and builds inca-ns3 against it
fi
mkdir -p build/ns3
args=(--sources 9 --rate-gbps 6 --bottleneck-gbps 40 --queue 8 --payload 9000 \
  --duration-s "$duration")
echo "== inca-sim"
inca=$("$build/bin/sim-cbr-star" "${args[@]}")
echo "$inca"
echo "== ns-3"
ns3_out=$("$build/bin/inca-ns3" cbr-star "${args[@]}")
echo "$ns3_out"
echo "== inca-sim: 16 hosts x 400 Gbit/s, 200 MB all-reduce"
allreduce=$("$build/bin/inca-sim" scenarios/cais/star-allreduce.yaml --out build/ns3/allreduce \
  --set name=events-16x400 --set hosts=16 --set link_gbps=400 --set sizes=200M --set ops=1)
echo "$allreduce"
/usr/bin/python3 scripts/sim_vs_ns3.py --inca "$inca" --ns3 "$ns3_out" \
  --allreduce build/ns3/allreduce/events-16x400.json --allreduce-log "$allreduce" \
  --duration-s "$duration"
