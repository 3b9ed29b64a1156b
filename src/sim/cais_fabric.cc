// inca-sim's leaf-spine fabric (docs/sim.md, "Fabrics"): its keys'
// checks, where each rank runs, and what its uplinks carry for the host
// baselines.
#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/sim/cais_scenario.h"
#include "sim/cais_network.h"
#include "sim/host_collectives.h"

namespace inca::sim {

std::vector<int> CaisSimScenario::HostOfRank() const {
  std::vector<int> host(static_cast<size_t>(hosts));
  std::iota(host.begin(), host.end(), 0);
  if (placement == "random") {
    std::mt19937_64 draw(seed ^ 0x706c616365ULL);  // its own stream: the links' stay as they were
    std::shuffle(host.begin(), host.end(), draw);
  }
  return host;
}

int CaisSimScenario::RingCrossings() const {
  if (racks <= 0) return 0;
  const std::vector<int> host = HostOfRank();
  const int per = hosts / racks;
  std::vector<int> up(static_cast<size_t>(racks)), down(static_cast<size_t>(racks));
  for (int r = 0; r < hosts; ++r) {
    const int from = host[static_cast<size_t>(r)] / per;
    const int to = host[static_cast<size_t>((r + 1) % hosts)] / per;
    if (from == to) continue;
    ++up[static_cast<size_t>(from)];
    ++down[static_cast<size_t>(to)];
  }
  return std::max(*std::max_element(up.begin(), up.end()),
                  *std::max_element(down.begin(), down.end()));
}

absl::Status CaisSimScenario::ValidateFabric() const {
  if (racks == 0) {
    if (placement != "rack") return absl::InvalidArgumentError("placement needs racks (a fabric)");
    return uplink_gbps == 0 ? absl::OkStatus()
                            : absl::InvalidArgumentError("uplink_gbps needs racks (a fabric)");
  }
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (racks < 2 || racks > 64 || hosts % racks != 0 || hosts / racks > 63) {
    return bad(absl::StrCat("racks must be 0 (a star) or 2..64 dividing hosts ", hosts,
                            " into racks of at most 63 (a leaf's 64 ports hold its uplink)"));
  }
  if (!(uplink_gbps >= 0) || uplink_gbps > 10000) {
    return bad("uplink_gbps must be in [0, 10000] (0: link_gbps)");
  }
  if (switches != 1) return bad("a fabric (racks) has no stripes: switches must be 1");
  if (background_load > 0) return bad("a fabric (racks) has no background traffic yet");
  if (!form_groups) return bad("a fabric's groups are formed (JOIN and the manager): form_groups");
  return absl::OkStatus();
}

namespace {

// The most ring or tree edges between racks at one rack's uplink in one
// direction: the ring's rank r to r + 1; each of the double binary tree's
// edges, which carries its half of the tensor both ways.
int MostCrossings(const CaisSimScenario& s, const std::string& backend) {
  if (backend == "ring") return s.RingCrossings();
  const std::vector<int> host = s.HostOfRank();
  const int per = s.hosts / s.racks;
  std::vector<int> edges(static_cast<size_t>(s.racks));
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < s.hosts; ++r) {
      const int p = TreeRankNode::Parent(s.hosts, t, r);
      if (p < 0) continue;
      const int a = host[static_cast<size_t>(r)] / per, b = host[static_cast<size_t>(p)] / per;
      if (a == b) continue;
      ++edges[static_cast<size_t>(a)];
      ++edges[static_cast<size_t>(b)];
    }
  }
  return *std::max_element(edges.begin(), edges.end());
}

}  // namespace

double UplinkSeconds(const CaisSimScenario& s, const std::string& backend, uint64_t bytes) {
  const auto n = static_cast<double>(s.hosts);
  double carried = 0, payload = 0, header = 0;  // bytes over the busiest uplink, one way
  if (backend == "inca") {
    // The tensor once each way over every uplink, every collective alike:
    // the spine multicasts each chunk to every leaf.
    carried = static_cast<double>(bytes);
    payload = s.chunk_size;
    header = wire::kCaisHeaderBytes;
  } else {
    // The ring: its per-edge share, 2(n-1)/n of the tensor for an
    // all-reduce and (n-1)/n for a half, on each crossing; the tree: half
    // the tensor on each edge.
    const bool half = CollectiveOp(s.collective) != wire::CaisOp::kAllReduce;
    const double share = backend == "ring" ? (half ? 1.0 : 2.0) * (n - 1) / n : 0.5;
    carried = static_cast<double>(bytes) * share * MostCrossings(s, backend);
    payload = s.HostPayload();
    header = kRingHeaderBytes;
  }
  return carried * (payload + header + s.overhead_bytes) / payload * 8 / (s.UplinkGbps() * 1e9);
}

}  // namespace inca::sim
