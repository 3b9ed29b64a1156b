#include "sim/cais_network.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "client/transport_core.h"
#include "sim/host_collectives.h"
#include "switchd/switch_control.h"
#include "util/spdlog_event_log.h"

namespace inca::sim {

wire::CaisOp CollectiveOp(const std::string& c) {
  return c == "reduce_scatter" ? wire::CaisOp::kReduceScatter
         : c == "all_gather"   ? wire::CaisOp::kAllGather
                               : wire::CaisOp::kAllReduce;
}

namespace {

// The ring's fabric is lossless (PFC holds the senders back), so its
// packets wait for the pipeline however many there are.
SwitchPipeline Pipeline(const CaisSimScenario& s, bool lossless) {
  return SwitchPipeline{s.switch_mpps * 1e6, lossless ? UINT32_MAX : s.switch_queue_packets};
}

// Rank r's node on host r's CPU, when the scenario has a host model.
absl::Status PutOnHost(const CaisSimScenario& s, Network* net, Node* node, int r) {
  if (s.host_packet_ns <= 0 && s.host_byte_ps <= 0) return absl::OkStatus();
  return net->SetHost(
      node, r,
      HostCost{static_cast<TimeNs>(std::llround(s.host_packet_ns)), s.host_byte_ps, s.host_cores});
}

LinkConfig Links(const CaisSimScenario& s) {
  LinkConfig lc;
  lc.rate_bps = s.link_gbps * 1e9;
  lc.delay_ns = static_cast<TimeNs>(std::llround(s.link_delay_us * 1e3));
  lc.mtu_bytes = s.mtu;
  lc.overhead_bytes = s.overhead_bytes;
  lc.queue_packets = s.queue_packets;
  lc.loss = s.loss;
  return lc;
}

// inca's switch configuration for operations of `bytes`; in timing mode
// also the chunks' stand-in (`virt`) and the ledger the switches charge by.
cais::CaisConfig IncaSwitchConfig(const CaisSimScenario& s, uint64_t bytes, VirtualChunks* virt,
                                  std::shared_ptr<VirtualLedger>* ledger) {
  cais::CaisConfig cc;
  cc.sram_bytes = static_cast<size_t>(s.switch_sram_mib * 1024 * 1024);
  cc.max_pending_chunks = s.switch_slots;
  cc.max_payload_bytes = s.chunk_size;
  if (s.mode == "timing") {
    // A reduce-scatter's or all-gather's chunks stand for one block's bytes.
    *virt = {s.chunk_size,
             CollectiveOp(s.collective) == wire::CaisOp::kAllReduce ? bytes : bytes / s.hosts};
    *ledger = std::make_shared<VirtualLedger>();
    // One f32 per chunk, and as many slot cells as the real chunks get.
    const size_t cells = cc.sram_bytes / cc.cell_bytes();
    cc.max_payload_bytes = sizeof(float);
    cc.sram_bytes = std::max<size_t>(1, cells) * cc.cell_bytes();
  }
  return cc;
}

// As SwitchTransport sets it from CommunicatorOptions.
client::TransportConfig IncaTransport(const CaisSimScenario& s) {
  client::TransportConfig tc;
  tc.world_size = s.hosts;
  tc.chunk_size = s.mode == "timing" ? sizeof(float) : s.chunk_size;
  tc.max_window = s.window;
  tc.min_window = std::min<uint32_t>(2, s.window);
  tc.initial_window = std::min<uint32_t>(16, s.window);
  if (s.target_floor_us >= 0) tc.target_floor_ns = std::llround(s.target_floor_us * 1e3);
  return tc;
}

// inca's rank nodes, one per host, none linked yet.
std::vector<CaisRankNode*> AddIncaRanks(const CaisSimScenario& s, int plane, Job* j,
                                        const RankDone& done, const VirtualChunks& virt,
                                        const std::shared_ptr<VirtualLedger>& ledger) {
  const client::TransportConfig tc = IncaTransport(s);
  std::vector<CaisRankNode*> ranks;
  for (int r = 0; r < s.hosts; ++r) {
    ranks.push_back(j->net->Add(std::make_unique<CaisRankNode>(absl::StrCat("rank", r, ".", plane),
                                                               r, tc, done, virt, ledger)));
  }
  return ranks;
}

// What the plane does with inca's ranks: each JOINs (job and its switch's
// first seq_base drawn from the seed, as inca-switchd and rank 0 draw them
// at random; `switches` FormGroups first) and the operation starts when
// all have; each operation starts on every rank; results and resends are
// read from them.
absl::Status WireIncaPlane(const CaisSimScenario& s, int plane, Job* j,
                           const std::vector<CaisRankNode*>& ranks,
                           const std::vector<CaisSwitchNode*>& switches) {
  Plane* pl = &j->planes[static_cast<size_t>(plane)];
  for (int r = 0; r < s.hosts; ++r) {
    CaisRankNode* node = ranks[static_cast<size_t>(r)];
    if (absl::Status st = PutOnHost(s, j->net.get(), node, r); !st.ok()) return st;
    pl->ranks.push_back(node);
  }
  if (s.form_groups) {
    std::mt19937_64 draw(s.seed ^ 0x6a6f696eULL ^ (static_cast<uint64_t>(plane) << 32));
    for (CaisSwitchNode* sw : switches) sw->FormGroups(static_cast<uint32_t>(draw()));
    const uint64_t job = draw() | 1;
    auto go = std::make_shared<std::function<void()>>();
    auto joined = std::make_shared<int>(0);
    for (CaisRankNode* rank : ranks) {
      rank->JoinFirst(job, [j, pl, go, joined, n = s.hosts](int) {
        if (++*joined < n) return;
        pl->formed_at = j->sim.now();
        if (*go) (*go)();
      });
    }
    pl->when_ready = [go](std::function<void()> f) { *go = std::move(f); };
  }
  const wire::CaisOp op = CollectiveOp(s.collective);
  pl->begin = [ranks, op](int r, std::vector<float>* data, std::vector<float>* block, size_t) {
    CaisRankNode* rank = ranks[static_cast<size_t>(r)];
    // Pieces take sequence numbers of their own.
    // The scenario's collective, checked when the plane was built.
    const absl::Status st = op == wire::CaisOp::kAllGather
                                ? rank->Begin(rank->next_seq(), op, block, data)
                                : rank->Begin(rank->next_seq(), op, data, block);
    st.IgnoreError();
  };
  // A reduce-scatter's or all-gather's chunks are numbered over all blocks
  // of each piece: a rank either completed the operation or is taken to
  // have handed all of it to the host path.
  pl->has = [ranks, op](int r, size_t c) {
    const auto& res = ranks[static_cast<size_t>(r)]->result();
    if (op != wire::CaisOp::kAllReduce) return res.complete;
    return c < res.have.size() && res.have[c] != 0;
  };
  pl->retransmitted = [ranks] {
    uint64_t n = 0;
    for (const auto* r : ranks) n += r->result().retransmitted;
    return n;
  };
  return absl::OkStatus();
}

absl::Status BuildInca(const CaisSimScenario& s, uint64_t bytes, int plane, Job* j,
                       const RankDone& done) {
  Plane* pl = &j->planes[static_cast<size_t>(plane)];
  VirtualChunks virt;
  std::shared_ptr<VirtualLedger> ledger;
  const cais::CaisConfig cc = IncaSwitchConfig(s, bytes, &virt, &ledger);
  auto created = CaisSwitchNode::Create(absl::StrCat("switch", plane), cc, s.hosts, ledger,
                                        Pipeline(s, false));
  if (!created.ok()) return created.status();
  auto* sw = j->net->Add(*std::move(created));
  pl->switches = {sw};
  const std::vector<CaisRankNode*> ranks = AddIncaRanks(s, plane, j, done, virt, ledger);
  for (CaisRankNode* node : ranks) j->net->Connect(node, sw, Links(s));  // the switch's port r
  return WireIncaPlane(s, plane, j, ranks, {sw});
}

// A fabric's addresses (docs/sim.md, "Fabrics"): switch 0 the spine that
// roots the trees, k + 1 leaf k, racks + j spine j (j >= 1); rank r is
// CaisSwitchNode::HostEndpoint(r) network-wide.
net::Endpoint SwitchAddress(int index) {
  return *net::Endpoint::Parse(absl::StrCat("198.19.0.", index + 1, ":9410"));
}

// The aggregation manager's topology of the fabric: what inca-controller
// --topology would read for it.
tree::Topology FabricTopology(const CaisSimScenario& s) {
  tree::Topology t;
  const int per = s.hosts / s.racks;
  for (int k = 0; k < s.racks + s.spines; ++k) {
    tree::SwitchSpec w;
    w.name = k == 0         ? "spine"
             : k <= s.racks ? absl::StrCat("leaf", k - 1)
                            : absl::StrCat("spine", k - s.racks);
    w.address = SwitchAddress(k).ToString();
    w.control = absl::StrCat("198.19.0.", k + 1, ":50051");
    if (k > 0 && k <= s.racks) {  // a leaf: its tree goes up to spine 0
      w.parent = "spine";
      w.uplink_bps = s.UplinkGbps() * 1e9;
    }
    t.switches.push_back(w);
  }
  const std::vector<int> host = s.HostOfRank();
  for (int r = 0; r < s.hosts; ++r) {
    const std::string ep = CaisSwitchNode::HostEndpoint(r).ToString();
    t.hosts.push_back(
        {ep.substr(0, ep.rfind(':')), absl::StrCat("leaf", host[static_cast<size_t>(r)] / per)});
  }
  return t;
}

// inca on a leaf-spine fabric: a CaisSwitchNode per leaf and spine, each
// behind the control API inca-switchd serves (SwitchControl), and the
// aggregation manager over them, ticking until every rank has joined. The
// topology names spine 0 every leaf's parent: one tree per group, as the
// manager builds them; the other spines carry none of it.
absl::Status BuildIncaFabric(const CaisSimScenario& s, uint64_t bytes, Job* j,
                             const RankDone& done) {
  Plane* pl = &j->planes[0];
  VirtualChunks virt;
  std::shared_ptr<VirtualLedger> ledger;
  const cais::CaisConfig cc = IncaSwitchConfig(s, bytes, &virt, &ledger);
  const int per = s.hosts / s.racks;
  std::vector<CaisSwitchNode*> sws;
  for (int k = 0; k < s.racks + s.spines; ++k) {
    const bool leaf = k > 0 && k <= s.racks;
    cais::CaisConfig c = cc;
    // Below the root a switch waits longer than the root, which decides.
    if (leaf) c.timeout_ns = cc.timeout_ns * 3 / 2;
    auto created =
        CaisSwitchNode::Create(k == 0 ? "spine"
                               : leaf ? absl::StrCat("leaf", k - 1)
                                      : absl::StrCat("spine", k - s.racks),
                               c, leaf ? per + s.spines : s.racks, ledger, Pipeline(s, false));
    if (!created.ok()) return created.status();
    sws.push_back(j->net->Add(*std::move(created)));
  }
  pl->switches.assign(sws.begin(), sws.end());
  const std::vector<CaisRankNode*> ranks = AddIncaRanks(s, 0, j, done, virt, ledger);
  LinkConfig up = Links(s);
  up.rate_bps = s.UplinkGbps() * 1e9;
  const std::vector<int> host = s.HostOfRank();
  std::vector<int> rank_on(host.size());  // each host's rank
  for (size_t r = 0; r < host.size(); ++r)
    rank_on[static_cast<size_t>(host[r])] = static_cast<int>(r);
  std::vector<net::Endpoint> children;
  for (int k = 0; k < s.racks; ++k) {
    CaisSwitchNode* leaf = sws[static_cast<size_t>(k) + 1];
    std::vector<net::Endpoint> peers;
    for (int i = 0; i < per; ++i) {  // leaf port i: the rank on the rack's host i
      const int r = rank_on[static_cast<size_t>(k * per + i)];
      j->net->Connect(ranks[static_cast<size_t>(r)], leaf, Links(s));
      peers.push_back(CaisSwitchNode::HostEndpoint(r));
    }
    for (int sp = 0; sp < s.spines; ++sp) {  // leaf port per + sp, spine port k
      const int at = sp == 0 ? 0 : s.racks + sp;
      j->net->Connect(leaf, sws[static_cast<size_t>(at)], up);
      peers.push_back(SwitchAddress(at));
    }
    leaf->SetPeers(peers, SwitchAddress(k + 1));
    children.push_back(SwitchAddress(k + 1));
  }
  for (int sp = 0; sp < s.spines; ++sp) {
    const int at = sp == 0 ? 0 : s.racks + sp;
    sws[static_cast<size_t>(at)]->SetPeers(children, SwitchAddress(at));
  }
  std::vector<control::ControlPlane*> planes;
  for (CaisSwitchNode* sw : sws) {
    j->controls.push_back(std::make_unique<switchd::SwitchControl>(sw, 0));
    planes.push_back(j->controls.back().get());
  }
  tree::ManagerConfig mc;
  mc.window_chunks = s.window;
  j->manager = std::make_unique<tree::AggregationManager>(FabricTopology(s), std::move(planes), mc,
                                                          &ProcessEventLog());
  if (absl::Status st = WireIncaPlane(s, 0, j, ranks, sws); !st.ok()) return st;
  // inca-controller's rounds, until every rank has joined its leaf's tree.
  constexpr TimeNs kManagerPeriodNs = 10 * dp::kNsPerMs;
  j->manager_tick = [j, pl] {
    j->manager->Tick(j->sim.now());
    if (pl->formed_at == 0) j->sim.ScheduleIn(kManagerPeriodNs, j->manager_tick);
  };
  j->sim.ScheduleIn(kManagerPeriodNs, j->manager_tick);
  return absl::OkStatus();
}

// The host baselines' fabric: the spines' forwarders (switch 0, then
// racks + 1 on), each leaf's (switches 1..racks, the ranks on its hosts
// already linked: rank r on port port_at_leaf[r]) linked to every spine at
// the uplink rate, losslessly (PFC), its uplinks on ports per.. in spine
// order; routes: a rank on one of the leaf's hosts out of its port, any
// other up any uplink (ECMP); a spine toward the leaf of the rank's host.
void LinkRacks(const CaisSimScenario& s, const std::vector<int>& host,
               const std::vector<dp::PortId>& port_at_leaf, Network* net, Plane* pl) {
  const int per = s.hosts / s.racks;
  LinkConfig up = Links(s);
  up.rate_bps = s.UplinkGbps() * 1e9;
  up.queue_packets = UINT32_MAX;
  for (int j = 1; j < s.spines; ++j) {
    pl->switches.push_back(
        net->Add(std::make_unique<ForwarderNode>(absl::StrCat("spine", j), Pipeline(s, true))));
  }
  auto spine = [&](int j) { return pl->switches[j == 0 ? 0 : static_cast<size_t>(s.racks + j)]; };
  for (int k = 0; k < s.racks; ++k) {
    auto* leaf = static_cast<ForwarderNode*>(pl->switches[static_cast<size_t>(k) + 1]);
    std::vector<dp::PortId> uplinks;
    for (int j = 0; j < s.spines; ++j) uplinks.push_back(net->Connect(leaf, spine(j), up).first);
    std::vector<std::vector<dp::PortId>> routes;
    for (size_t r = 0; r < host.size(); ++r) {
      routes.push_back(host[r] / per == k ? std::vector<dp::PortId>{port_at_leaf[r]} : uplinks);
    }
    leaf->SetRoutes(std::move(routes));
  }
  std::vector<std::vector<dp::PortId>> down;
  for (int h : host) down.push_back({static_cast<dp::PortId>(h / per)});
  for (int j = 0; j < s.spines; ++j) static_cast<ForwarderNode*>(spine(j))->SetRoutes(down);
}

// A host baseline (RingRankNode or TreeRankNode) through the switch as a
// forwarder.
template <typename RankNode>
absl::Status BuildHostBaseline(const CaisSimScenario& s, int plane, Job* j, const RankDone& done) {
  if (absl::Status st = HostCollectiveNode::CheckShape(s.hosts, s.HostPayload()); !st.ok()) {
    return st;
  }
  Plane* pl = &j->planes[static_cast<size_t>(plane)];
  // The switch each rank hangs off: the one forwarder, or its rack's leaf.
  const int racks = std::max(1, s.racks), per = s.hosts / racks;
  for (int k = 0; k < (s.racks > 0 ? racks + 1 : 1); ++k) {
    pl->switches.push_back(j->net->Add(std::make_unique<ForwarderNode>(
        k == 0 ? absl::StrCat("switch", plane) : absl::StrCat("leaf", k - 1), Pipeline(s, true))));
  }
  std::vector<RankNode*> ranks;
  const auto alpha = static_cast<TimeNs>(std::llround(s.ring_step_latency_us * 1e3));
  const std::vector<int> host = s.HostOfRank();
  std::vector<dp::PortId> port_at_leaf;  // each rank's, in a fabric
  for (int r = 0; r < s.hosts; ++r) {
    auto* node = j->net->Add(std::make_unique<RankNode>(absl::StrCat("rank", r, ".", plane), r,
                                                        s.hosts, s.HostPayload(), s.link_gbps * 1e9,
                                                        s.overhead_bytes, alpha, done));
    LinkConfig lossless = Links(s);  // PFC: a full queue holds the sender back, drops nothing
    lossless.queue_packets = UINT32_MAX;
    const size_t at = s.racks > 0 ? 1 + static_cast<size_t>(host[static_cast<size_t>(r)] / per) : 0;
    port_at_leaf.push_back(j->net->Connect(node, pl->switches[at], lossless).second);
    if (absl::Status st = PutOnHost(s, j->net.get(), node, r); !st.ok()) return st;
    ranks.push_back(node);
    pl->ranks.push_back(node);
  }
  if (s.racks > 0) LinkRacks(s, host, port_at_leaf, j->net.get(), pl);
  const wire::CaisOp op = CollectiveOp(s.collective);
  pl->begin = [ranks, op](int r, std::vector<float>* data, std::vector<float>*, size_t count) {
    // The scenario's collective, checked against the backend when read.
    ranks[static_cast<size_t>(r)]->Begin(data, count, op).IgnoreError();
  };
  return absl::OkStatus();
}

}  // namespace

absl::Status BuildPlane(const CaisSimScenario& s, const std::string& backend, uint64_t bytes,
                        int plane, Job* j, const RankDone& done) {
  if (backend == "inca") {
    return s.racks > 0 ? BuildIncaFabric(s, bytes, j, done) : BuildInca(s, bytes, plane, j, done);
  } else if (backend == "ring") {
    return BuildHostBaseline<RingRankNode>(s, plane, j, done);
  }
  return BuildHostBaseline<TreeRankNode>(s, plane, j, done);
}

absl::StatusOr<BackgroundNode*> AddBackground(const CaisSimScenario& s, int plane, Job* j) {
  if (s.background_load <= 0) return nullptr;
  const BackgroundTraffic t{s.background_load, s.background_flow_bytes, s.background_gbps * 1e9};
  auto node = BackgroundNode::Create(absl::StrCat("background", plane), s.hosts, s.link_gbps * 1e9,
                                     t, s.chunk_size, s.overhead_bytes,
                                     s.seed + 1 + static_cast<uint64_t>(plane));
  if (!node.ok()) return node.status();
  auto* bg = j->net->Add(*std::move(node));
  LinkConfig lc = Links(s);
  lc.rate_bps *= s.hosts;
  lc.loss = 0;
  lc.queue_packets = UINT32_MAX;
  j->net->Connect(bg, j->planes[static_cast<size_t>(plane)].switches[0], lc);  // the star's switch
  return bg;
}

double HostSeconds(const CaisSimScenario& s, const std::string& backend, uint64_t bytes) {
  if (s.host_packet_ns <= 0 && s.host_byte_ps <= 0) return 0;
  const auto n = static_cast<uint64_t>(s.hosts);
  const wire::CaisOp kind = CollectiveOp(s.collective);
  double packets = 0, carried = 0;
  if (backend == "inca") {
    const uint64_t c = s.chunk_size, h = wire::kCaisHeaderBytes;
    const uint64_t block = bytes / n, cpb = (block + c - 1) / c, all = (bytes + c - 1) / c;
    switch (kind) {
      case wire::CaisOp::kReduceScatter:  // all blocks up; its own block and n-1 ACKs down
        packets = static_cast<double>(2 * n * cpb);
        carried = static_cast<double>(bytes + block + 2 * n * cpb * h);
        break;
      case wire::CaisOp::kAllGather:  // its block up, every block down
        packets = static_cast<double>((n + 1) * cpb);
        carried = static_cast<double>(block + bytes + (n + 1) * cpb * h);
        break;
      default:  // every chunk up and its result down
        packets = static_cast<double>(2 * all);
        carried = static_cast<double>(2 * (bytes + all * h));
    }
  } else {
    // The ring: 2(n-1) steps (n-1 for a half), a block each way per step;
    // the tree: no closed count, its bound is the network's.
    if (backend != "ring") return 0;
    const uint64_t p = s.HostPayload(), block = (bytes / 4 + n - 1) / n * 4;
    const double steps =
        (kind == wire::CaisOp::kAllReduce ? 2.0 : 1.0) * static_cast<double>(n - 1);
    const double per_block = static_cast<double>((block + p - 1) / p);
    packets = 2 * steps * per_block;
    carried = 2 * steps * (static_cast<double>(block) + per_block * kRingHeaderBytes);
  }
  return (packets * s.host_packet_ns + carried * s.host_byte_ps / 1e3) * 1e-9 / s.host_cores;
}

}  // namespace inca::sim
