#include "sim/fabric.h"

#include <algorithm>
#include <deque>
#include <limits>

#include "absl/strings/str_cat.h"

namespace inca::sim {

int Fabric::AddSwitch(std::string name, bool edge) {
  Switch w;
  w.name = std::move(name);
  w.edge = edge;
  switches_.push_back(std::move(w));
  return static_cast<int>(switches_.size()) - 1;
}

// Spine 0 (switch 0), leaves 1..racks, spines racks + j; each leaf linked
// to every spine in spine order, its parents in plane order.
void Fabric::LeafSpine(const CaisSimScenario& s) {
  AddSwitch("spine", false);
  for (int k = 0; k < s.racks; ++k) AddSwitch(absl::StrCat("leaf", k), true);
  for (int j = 1; j < s.spines; ++j) AddSwitch(absl::StrCat("spine", j), false);
  for (int k = 1; k <= s.racks; ++k) {
    for (int j = 0; j < s.spines; ++j) {
      links_.emplace_back(k, j == 0 ? 0 : s.racks + j);
      switches_[static_cast<size_t>(k)].parents.push_back(j == 0 ? 0 : s.racks + j);
    }
  }
}

// Core 0 (switch 0), the edge switches pod by pod, the aggregation
// switches pod by pod, cores 1 on. An edge switch's parents are its pod's
// aggregation switches; aggregation switch a's the cores a mod h x h + c:
// in plane j every edge goes up to its pod's aggregation switch j mod h,
// which goes up to core (j mod h)(h + 1), the same from every pod.
void Fabric::FatTree(const CaisSimScenario& s) {
  const int h = s.fat_tree_k / 2, edges = s.hosts / h, pods = (edges + h - 1) / h;
  const int core0 = AddSwitch("core0", false);
  std::vector<int> edge, agg, core{core0};
  for (int e = 0; e < edges; ++e)
    edge.push_back(AddSwitch(absl::StrCat("edge", e / h, ".", e % h), true));
  for (int a = 0; a < pods * h; ++a)
    agg.push_back(AddSwitch(absl::StrCat("agg", a / h, ".", a % h), false));
  for (int c = 1; c < h * h; ++c) core.push_back(AddSwitch(absl::StrCat("core", c), false));
  for (int e = 0; e < edges; ++e) {
    for (int a = 0; a < h; ++a) {
      links_.emplace_back(edge[static_cast<size_t>(e)], agg[static_cast<size_t>(e / h * h + a)]);
      switches_[static_cast<size_t>(edge[static_cast<size_t>(e)])].parents.push_back(
          agg[static_cast<size_t>(e / h * h + a)]);
    }
  }
  for (int a = 0; a < pods * h; ++a) {
    for (int c = 0; c < h; ++c) {
      links_.emplace_back(agg[static_cast<size_t>(a)], core[static_cast<size_t>(a % h * h + c)]);
      switches_[static_cast<size_t>(agg[static_cast<size_t>(a)])].parents.push_back(
          core[static_cast<size_t>(a % h * h + c)]);
    }
  }
}

Fabric::Fabric(const CaisSimScenario& s) {
  if (s.fat_tree_k > 0) {
    FatTree(s);
  } else {
    LeafSpine(s);
  }
  ports_.resize(switches_.size());
  std::vector<int> edges;
  for (size_t i = 0; i < switches_.size(); ++i) {
    Switch& w = switches_[i];
    if (w.edge) edges.push_back(static_cast<int>(i));
    if (!w.parents.empty()) w.uplink_bps = s.UplinkGbps() * 1e9;
  }
  for (Switch& w : switches_) {  // parents come before their children or after: walk up
    for (const Switch* p = &w; !p->parents.empty();
         p = &switches_[static_cast<size_t>(p->parents[0])])
      ++w.depth;
  }
  const int per = s.hosts / static_cast<int>(edges.size());
  const std::vector<int> host = s.HostOfRank();
  for (size_t r = 0; r < host.size(); ++r) {
    const int e = edges[static_cast<size_t>(host[r] / per)];
    edge_of_.push_back(e);
    port_of_.push_back(static_cast<dp::PortId>(ports_[static_cast<size_t>(e)].size()));
    ports_[static_cast<size_t>(e)].push_back({static_cast<int>(r), -1, 0});
  }
  for (const auto& [a, b] : links_) {
    auto& pa = ports_[static_cast<size_t>(a)];
    auto& pb = ports_[static_cast<size_t>(b)];
    pa.push_back({-1, b, static_cast<dp::PortId>(pb.size())});
    pb.push_back({-1, a, static_cast<dp::PortId>(pa.size() - 1)});
  }
  Route();
}

// Breadth-first from each edge switch: at every switch the ports toward
// an edge switch are those one hop nearer to it; toward a rank of its own,
// that rank's port.
void Fabric::Route() {
  const size_t n = switches_.size();
  std::vector<int> edges;
  std::vector<uint32_t> edge_index(n, std::numeric_limits<uint32_t>::max());
  for (size_t i = 0; i < n; ++i) {
    if (!switches_[i].edge) continue;
    edge_index[i] = static_cast<uint32_t>(edges.size());
    edges.push_back(static_cast<int>(i));
  }
  std::vector<ForwarderRoutes> routes(n);
  for (ForwarderRoutes& r : routes) r.sets.resize(edges.size());
  std::vector<int> dist(n);
  for (size_t e = 0; e < edges.size(); ++e) {
    std::fill(dist.begin(), dist.end(), -1);
    std::deque<int> next{edges[e]};
    dist[static_cast<size_t>(edges[e])] = 0;
    while (!next.empty()) {
      const int x = next.front();
      next.pop_front();
      for (const Port& p : ports_[static_cast<size_t>(x)]) {
        if (p.peer < 0 || dist[static_cast<size_t>(p.peer)] >= 0) continue;
        dist[static_cast<size_t>(p.peer)] = dist[static_cast<size_t>(x)] + 1;
        next.push_back(p.peer);
      }
    }
    for (size_t x = 0; x < n; ++x) {
      const auto& ports = ports_[x];
      for (size_t p = 0; p < ports.size(); ++p) {
        if (ports[p].peer >= 0 && dist[static_cast<size_t>(ports[p].peer)] == dist[x] - 1) {
          routes[x].sets[e].push_back(static_cast<dp::PortId>(p));
        }
      }
    }
  }
  for (size_t x = 0; x < n; ++x) {
    ForwarderRoutes& r = routes[x];
    r.set_of_rank.resize(edge_of_.size());
    for (size_t rank = 0; rank < edge_of_.size(); ++rank) {
      r.set_of_rank[rank] = edge_index[static_cast<size_t>(edge_of_[rank])];
    }
    const auto& ports = ports_[x];
    for (size_t p = 0; p < ports.size(); ++p) {
      if (ports[p].rank < 0) continue;
      r.set_of_rank[static_cast<size_t>(ports[p].rank)] = static_cast<uint32_t>(r.sets.size());
      r.sets.push_back({static_cast<dp::PortId>(p)});
    }
    routes_.push_back(std::make_shared<const ForwarderRoutes>(std::move(r)));
  }
}

int Fabric::MostFlowsOnALink(const std::vector<std::pair<int, int>>& flows) const {
  std::vector<std::vector<int>> count(ports_.size());
  for (size_t x = 0; x < ports_.size(); ++x) count[x].resize(ports_[x].size());
  int most = 0;
  for (const auto& [src, dst] : flows) {
    int x = edge_of(src);
    dp::PortId in = port_of_[static_cast<size_t>(src)];
    // At most a fat-tree's four hops between edge switches.
    for (int hops = 0; x != edge_of(dst) && hops < 8; ++hops) {
      const dp::PortId out = routes_[static_cast<size_t>(x)]->Pick(in, static_cast<uint32_t>(dst));
      most = std::max(most, ++count[static_cast<size_t>(x)][out]);
      const Port& p = ports_[static_cast<size_t>(x)][out];
      in = p.peer_port;
      x = p.peer;
    }
  }
  return most;
}

}  // namespace inca::sim
