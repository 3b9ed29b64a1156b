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

namespace {

// Flows (source rank, destination rank) walked over the fabric as the
// forwarders route them: a flow between racks leaves its leaf on the uplink
// to the spine EcmpPick chooses from its ingress port (the rank's port at
// the leaf: ranks take ports in rank order) and enters the destination's
// leaf from that spine. The most flows on one uplink in one direction.
int MostFlowsOnAnUplink(const CaisSimScenario& s, const std::vector<std::pair<int, int>>& flows) {
  const std::vector<int> host = s.HostOfRank();
  const int per = s.hosts / s.racks;
  std::vector<dp::PortId> port(host.size());
  std::vector<int> taken(static_cast<size_t>(s.racks));
  for (size_t r = 0; r < host.size(); ++r) {
    port[r] = static_cast<dp::PortId>(taken[static_cast<size_t>(host[r] / per)]++);
  }
  // up[k * spines + j]: leaf k to spine j; down[...]: spine j to leaf k.
  const auto links = static_cast<size_t>(s.racks * s.spines);
  std::vector<int> up(links), down(links);
  for (const auto& [src, dst] : flows) {
    const int from = host[static_cast<size_t>(src)] / per,
              to = host[static_cast<size_t>(dst)] / per;
    if (from == to) continue;
    const size_t j = s.spines == 1
                         ? 0
                         : EcmpPick(port[static_cast<size_t>(src)], static_cast<uint32_t>(dst),
                                    static_cast<size_t>(s.spines));
    ++up[static_cast<size_t>(from * s.spines) + j];
    ++down[static_cast<size_t>(to * s.spines) + j];
  }
  return std::max(*std::max_element(up.begin(), up.end()),
                  *std::max_element(down.begin(), down.end()));
}

}  // namespace

int CaisSimScenario::RingCrossings() const {
  if (racks <= 0) return 0;
  std::vector<std::pair<int, int>> flows;
  for (int r = 0; r < hosts; ++r) flows.emplace_back(r, (r + 1) % hosts);
  return MostFlowsOnAnUplink(*this, flows);
}

absl::Status CaisSimScenario::ValidateFabric() const {
  if (racks == 0) {
    if (placement != "rack") return absl::InvalidArgumentError("placement needs racks (a fabric)");
    if (spines != 1) return absl::InvalidArgumentError("spines needs racks (a fabric)");
    return uplink_gbps == 0 ? absl::OkStatus()
                            : absl::InvalidArgumentError("uplink_gbps needs racks (a fabric)");
  }
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (spines < 1 || spines > 16) return bad("spines must be in [1, 16]");
  if (racks < 2 || racks > 64 || hosts % racks != 0 || hosts / racks > 64 - spines) {
    return bad(absl::StrCat("racks must be 0 (a star) or 2..64 dividing hosts ", hosts,
                            " into racks of at most ", 64 - spines, " (a leaf's 64 ports hold ",
                            spines, " uplink", spines > 1 ? "s" : "", ")"));
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

// The most ring or tree flows on one uplink in one direction: the ring's
// rank r to r + 1; each of the double binary tree's edges, both ways (each
// carries its tree's half of the tensor up and down).
int MostCrossings(const CaisSimScenario& s, const std::string& backend) {
  if (backend == "ring") return s.RingCrossings();
  std::vector<std::pair<int, int>> flows;
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < s.hosts; ++r) {
      const int p = TreeRankNode::Parent(s.hosts, t, r);
      if (p < 0) continue;
      flows.emplace_back(r, p);
      flows.emplace_back(p, r);
    }
  }
  return MostFlowsOnAnUplink(s, flows);
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
