// The closed forms of a CAIS scenario's backends (cais_scenario.h;
// docs/sim.md, "CAIS").
#include <algorithm>
#include <cstdint>
#include <utility>

#include "inca/sim/cais_scenario.h"
#include "inca/wire/cais.h"
#include "sim/host_collectives.h"

namespace inca::sim {

namespace {

double PacketSeconds(uint64_t payload, uint32_t header, uint32_t overhead, double rate_bps) {
  return static_cast<double>(payload + header + overhead) * 8 / rate_bps;
}

// A block of `bytes` in chunks of `chunk`, back to back, and its last
// chunk's time.
std::pair<double, double> ChunkTrain(uint64_t bytes, uint32_t chunk, double rate_bps,
                                     uint32_t overhead) {
  const uint64_t full = bytes / chunk, rest = bytes % chunk;
  const double t_full = PacketSeconds(chunk, wire::kCaisHeaderBytes, overhead, rate_bps);
  const double t_rest = rest ? PacketSeconds(rest, wire::kCaisHeaderBytes, overhead, rate_bps) : 0;
  return {static_cast<double>(full) * t_full + t_rest, rest ? t_rest : t_full};
}

// The ring's 2(n-1) steps (`halves` 2) or n-1 (1).
double RingSeconds(int hosts, uint64_t bytes, uint32_t payload, double rate_bps, uint32_t overhead,
                   double delay_s, double step_latency_s, int halves) {
  // One block (the largest) per step: B, its packets back to back; t0 and
  // tl, its first and last packet's serialisation. A packet reaches the next
  // rank L = 2 t + 2 delay after it starts (up to the switch, down again).
  const uint64_t n = static_cast<uint64_t>(hosts);
  const uint64_t count = bytes / sizeof(float);
  const uint64_t block = (count + n - 1) / n * sizeof(float);
  const uint64_t per = payload / sizeof(float) * sizeof(float);
  const uint64_t full = block / per, rest = block % per;
  const double t0 = PacketSeconds(full ? per : rest, kRingHeaderBytes, overhead, rate_bps);
  const double tl = PacketSeconds(rest ? rest : per, kRingHeaderBytes, overhead, rate_bps);
  const double b =
      static_cast<double>(full) * PacketSeconds(per, kRingHeaderBytes, overhead, rate_bps) +
      (rest ? tl : 0);
  const double steps = halves * static_cast<double>(n - 1);
  const double hop = step_latency_s + 2 * t0 + 2 * delay_s;
  // Either the sender never idles (a block outlasts a hop: bandwidth-bound),
  // or each step's first packet waits for the previous step's (latency-bound).
  const double last_start = std::max(steps * b - tl, (steps - 1) * hop + b - tl);
  return step_latency_s + last_start + 2 * tl + 2 * delay_s;
}

}  // namespace

double SwitchAllReduceSeconds(int hosts, uint64_t bytes, uint32_t chunk, double rate_bps,
                              uint32_t overhead, double delay_s) {
  (void)hosts;  // every rank's uplink carries the tensor once, in parallel
  // Every chunk up at line rate, pipelined; the last one's result down.
  const auto [train, last] = ChunkTrain(bytes, chunk, rate_bps, overhead);
  return train + last + 2 * delay_s;
}

double SwitchReduceScatterSeconds(int hosts, uint64_t bytes, uint32_t chunk, double rate_bps,
                                  uint32_t overhead, double delay_s) {
  // Every block up (the uplink is the busier way: a rank gets its own block
  // and a 20-byte ACK for each other chunk), and the last result down.
  const auto [train, last] =
      ChunkTrain(bytes / static_cast<uint64_t>(hosts), chunk, rate_bps, overhead);
  return hosts * train + last + 2 * delay_s;
}

double SwitchAllGatherSeconds(int hosts, uint64_t bytes, uint32_t chunk, double rate_bps,
                              uint32_t overhead, double delay_s) {
  // The first chunk up, then every block down, the rank's own included (the
  // switch sends each chunk to all ports: to its owner it is the ACK).
  const uint64_t block = bytes / static_cast<uint64_t>(hosts);
  const double train = ChunkTrain(block, chunk, rate_bps, overhead).first;
  const double first =
      PacketSeconds(std::min<uint64_t>(block, chunk), wire::kCaisHeaderBytes, overhead, rate_bps);
  return first + hosts * train + 2 * delay_s;
}

double RingAllReduceSeconds(int hosts, uint64_t bytes, uint32_t payload, double rate_bps,
                            uint32_t overhead, double delay_s, double step_latency_s) {
  return RingSeconds(hosts, bytes, payload, rate_bps, overhead, delay_s, step_latency_s, 2);
}

double RingHalfSeconds(int hosts, uint64_t bytes, uint32_t payload, double rate_bps,
                       uint32_t overhead, double delay_s, double step_latency_s) {
  return RingSeconds(hosts, bytes, payload, rate_bps, overhead, delay_s, step_latency_s, 1);
}

double TreeAllReduceSeconds(int hosts, uint64_t bytes, uint32_t payload, double rate_bps,
                            uint32_t overhead, double delay_s, double step_latency_s) {
  // Each half of the tensor goes up one tree and down again. Bandwidth: the
  // busiest rank's link carries, per tree, the half up to its parent and
  // down to each child (and as much the other way). Latency: the first
  // packet climbs the deeper tree and comes down it, a hop each level, and
  // the half's other packets follow it. Both are lower bounds; the time is
  // the larger (the bandwidth one plus the last packet's trip).
  const uint64_t count = bytes / sizeof(float);
  const uint64_t per = payload / sizeof(float);
  double half_s[2] = {0, 0}, first_s[2] = {0, 0};
  for (int tree = 0; tree < 2; ++tree) {
    const uint64_t len = tree == 0 ? count / 2 : count - count / 2;
    const uint64_t packets = (len + per - 1) / per;
    half_s[tree] =
        static_cast<double>(len * sizeof(float) + packets * (kRingHeaderBytes + overhead)) * 8 /
        rate_bps;
    if (len) {
      first_s[tree] =
          PacketSeconds(std::min(per, len) * sizeof(float), kRingHeaderBytes, overhead, rate_bps);
    }
  }
  double busiest = 0, latency = 0, trip = 0;
  for (int tree = 0; tree < 2; ++tree) {
    if (half_s[tree] == 0) continue;
    const double hop = step_latency_s + 2 * first_s[tree] + 2 * delay_s;
    trip = std::max(trip, hop - first_s[tree]);
    int depth = 0;
    for (int r = 0; r < hosts; ++r) {
      int d = 0;
      for (int q = r; TreeRankNode::Parent(hosts, tree, q) >= 0;
           q = TreeRankNode::Parent(hosts, tree, q)) {
        ++d;
      }
      depth = std::max(depth, d);
    }
    latency = std::max(latency, 2.0 * depth * hop + half_s[tree] - first_s[tree]);
  }
  for (int r = 0; r < hosts; ++r) {
    double load = 0;
    for (int tree = 0; tree < 2; ++tree) {
      load += half_s[tree] * static_cast<double>(TreeRankNode::Children(hosts, tree, r).size() +
                                                 (TreeRankNode::Parent(hosts, tree, r) >= 0));
    }
    busiest = std::max(busiest, load);
  }
  return std::max(busiest + trip, latency);
}

}  // namespace inca::sim
