// inca-sim's fabrics (docs/sim.md, "Fabrics"): their keys' checks, where
// each rank runs, and what the links between switches carry for each
// backend (the closed forms' part; fabric.h builds the graph).
#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/sim/cais_scenario.h"
#include "inca/tree/topology.h"
#include "sim/cais_network.h"
#include "sim/fabric.h"
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
  if (!IsFabric()) return 0;
  std::vector<std::pair<int, int>> flows;
  const int m = JobRanks();
  for (int r = 0; r < hosts; ++r) flows.emplace_back(r, r - r % m + (r % m + 1) % m);
  return Fabric(*this).MostFlowsOnALink(flows);
}

int CaisSimScenario::MostTreesOnALink() const {
  if (!IsFabric()) return 0;
  const Fabric f(*this);
  const tree::Topology t = FabricTopology(f);
  // The jobs' trees as the manager plans them in one round (tree::
  // PlanTrees): in group order, each in the plane whose switches carry the
  // fewest groups, each job counted at the edge switches its ranks join
  // and then at the other switches of its tree.
  const int m = JobRanks();
  std::vector<int> load(t.switches.size(), 0);
  std::vector<std::vector<tree::Member>> groups;
  for (int base = 0; base < hosts; base += m) {
    std::vector<tree::Member>& members = groups.emplace_back();
    std::vector<char> at(t.switches.size(), 0);
    for (int r = base; r < base + m; ++r) {
      members.push_back({r - base, t.hosts[static_cast<size_t>(r)].address});
      at[static_cast<size_t>(f.edge_of(r))] = 1;
    }
    for (size_t i = 0; i < at.size(); ++i) load[i] += at[i];
  }
  std::map<std::pair<int, int>, int> trees;  // (switch, its parent): jobs whose tree uses the link
  for (const std::vector<tree::Member>& members : groups) {
    const absl::StatusOr<tree::Tree> tr = tree::LeastLoadedTree(t, members, load);
    if (!tr.ok()) continue;  // the run refuses it
    for (const tree::TreeNode& n : tr->nodes) {
      if (n.ranks.empty()) ++load[static_cast<size_t>(n.switch_index)];
      if (n.parent >= 0) {
        ++trees[{n.switch_index, tr->nodes[static_cast<size_t>(n.parent)].switch_index}];
      }
    }
  }
  int most = 0;
  for (const auto& [link, n] : trees) most = std::max(most, n);
  return most;
}

absl::Status CaisSimScenario::ValidateFabric() const {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (!IsFabric()) {
    if (placement != "rack") return bad("placement needs a fabric (racks or fat_tree_k)");
    if (spines != 1) return bad("spines needs racks (a leaf-spine)");
    return uplink_gbps == 0 ? absl::OkStatus()
                            : bad("uplink_gbps needs a fabric (racks or fat_tree_k)");
  }
  if (spines < 1 || spines > 16) return bad("spines must be in [1, 16]");
  if (fat_tree_k != 0) {
    const int k = fat_tree_k;
    if (racks != 0) return bad("racks and fat_tree_k are two fabrics: set one");
    if (spines != 1) return bad("spines is a leaf-spine's: a fat-tree has (k/2)^2 cores");
    if (k < 4 || k > 64 || k % 2 != 0) return bad("fat_tree_k must be even, in [4, 64]");
    if (hosts % (k / 2) != 0 || hosts < k || hosts > k * k * k / 4) {
      return bad(absl::StrCat("fat_tree_k ", k, " holds a multiple of ", k / 2, " hosts (", k / 2,
                              " on each edge switch) from ", k, " to ", k * k * k / 4,
                              ", not hosts ", hosts));
    }
  } else if (racks < 2 || racks > 64 || hosts % racks != 0 || hosts / racks > 64 - spines) {
    return bad(absl::StrCat("racks must be 0 (a star) or 2..64 dividing hosts ", hosts,
                            " into racks of at most ", 64 - spines, " (a leaf's 64 ports hold ",
                            spines, " uplink", spines > 1 ? "s" : "", ")"));
  }
  if (!(uplink_gbps >= 0) || uplink_gbps > 10000) {
    return bad("uplink_gbps must be in [0, 10000] (0: link_gbps)");
  }
  if (switches != 1) return bad("a fabric has no stripes: switches must be 1");
  if (!form_groups) return bad("a fabric's groups are formed (JOIN and the manager): form_groups");
  return absl::OkStatus();
}

absl::Status CaisSimScenario::ValidateJobs() const {
  if (jobs == 1) return absl::OkStatus();
  if (jobs < 1 || jobs > 255 || hosts % jobs != 0 || hosts / jobs < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "jobs must divide hosts ", hosts, " into jobs of at least 2 ranks (at most 255 jobs)"));
  }
  if (collective != "allreduce") {
    return absl::InvalidArgumentError("jobs: several jobs run allreduce only");
  }
  if (!form_groups) {
    return absl::InvalidArgumentError("jobs: several jobs form their groups (form_groups)");
  }
  return absl::OkStatus();
}

namespace {

// The most ring or tree flows on one uplink in one direction: the ring's
// rank r to r + 1; each of the double binary tree's edges, both ways (each
// carries its tree's half of the tensor up and down).
int MostCrossings(const CaisSimScenario& s, const std::string& backend) {
  if (backend == "ring") return s.RingCrossings();
  std::vector<std::pair<int, int>> flows;
  const int m = s.JobRanks();
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < s.hosts; ++r) {
      const int base = r - r % m, p = TreeRankNode::Parent(m, t, r % m);
      if (p < 0) continue;
      flows.emplace_back(r, base + p);
      flows.emplace_back(base + p, r);
    }
  }
  return Fabric(s).MostFlowsOnALink(flows);
}

}  // namespace

double UplinkSeconds(const CaisSimScenario& s, const std::string& backend, uint64_t bytes) {
  const auto n = static_cast<double>(s.JobRanks());
  double carried = 0, payload = 0, header = 0;  // bytes over the busiest uplink, one way
  if (backend == "inca") {
    // The tensor once each way over every link of a tree, every collective
    // alike (the spine multicasts each chunk to every leaf), once per job
    // whose tree shares the link.
    carried = static_cast<double>(bytes) * s.MostTreesOnALink();
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
