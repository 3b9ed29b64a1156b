#include "sim/cais_network.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "client/transport_core.h"
#include "sim/fabric.h"
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
  cc.group_share = s.switch_group_share;
  cc.advise_window = s.switch_advise_window;
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
  tc.world_size = s.JobRanks();
  tc.chunk_size = s.mode == "timing" ? sizeof(float) : s.chunk_size;
  tc.max_window = s.window;
  tc.min_window = std::min<uint32_t>(2, s.window);
  tc.initial_window = std::min<uint32_t>(16, s.window);
  if (s.target_floor_us >= 0) tc.target_floor_ns = std::llround(s.target_floor_us * 1e3);
  return tc;
}

// Rank r's `done`: the run counts ranks by their global number, each node
// knows its rank in its job.
RankDone DoneAs(const RankDone& done, int r) {
  return [done, r](int) { done(r); };
}

// inca's rank nodes, one per host, none linked yet: rank r is rank r mod
// m of job r / m (m: JobRanks).
std::vector<CaisRankNode*> AddIncaRanks(const CaisSimScenario& s, int plane, Job* j,
                                        const RankDone& done, const VirtualChunks& virt,
                                        const std::shared_ptr<VirtualLedger>& ledger) {
  const client::TransportConfig tc = IncaTransport(s);
  std::vector<CaisRankNode*> ranks;
  for (int r = 0; r < s.hosts; ++r) {
    ranks.push_back(j->net->Add(std::make_unique<CaisRankNode>(
        absl::StrCat("rank", r, ".", plane), r % s.JobRanks(), tc, DoneAs(done, r), virt, ledger)));
  }
  return ranks;
}

// What the plane does with inca's ranks: each JOINs (job and its switch's
// first seq_base drawn from the seed, as inca-switchd and rank 0 draw them
// at random; `switches` FormGroups first; several jobs: each its own job
// and group id, job q group q) and the operation starts when
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
    std::vector<uint64_t> job(static_cast<size_t>(s.jobs));
    for (uint64_t& id : job) id = draw() | 1;
    auto go = std::make_shared<std::function<void()>>();
    auto joined = std::make_shared<int>(0);
    for (int r = 0; r < s.hosts; ++r) {
      const int q = r / s.JobRanks();
      ranks[static_cast<size_t>(r)]->JoinFirst(
          job[static_cast<size_t>(q)],
          [j, pl, go, joined, n = s.hosts](int) {
            if (++*joined < n) return;
            pl->formed_at = j->sim.now();
            if (*go) (*go)();
          },
          static_cast<uint8_t>(q));
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

// A fabric's addresses (docs/sim.md, "Fabrics"): switch i (Fabric's
// numbering) at 198.19.0.0/16 + i + 1; rank r is
// CaisSwitchNode::HostEndpoint(r) network-wide.
std::string SwitchHost(int index) {
  return absl::StrCat("198.19.", (index + 1) >> 8, ".", (index + 1) & 255);
}
net::Endpoint SwitchAddress(int index) {
  return *net::Endpoint::Parse(absl::StrCat(SwitchHost(index), ":9410"));
}

}  // namespace

tree::Topology FabricTopology(const Fabric& f) {
  tree::Topology t;
  const auto& sws = f.switches();
  for (size_t i = 0; i < sws.size(); ++i) {
    tree::SwitchSpec w;
    w.name = sws[i].name;
    w.address = SwitchAddress(static_cast<int>(i)).ToString();
    w.control = absl::StrCat(SwitchHost(static_cast<int>(i)), ":50051");
    for (int p : sws[i].parents) w.parents.push_back(sws[static_cast<size_t>(p)].name);
    if (!w.parents.empty()) {
      w.parent = w.parents[0];
      w.uplink_bps = sws[i].uplink_bps;
    }
    t.switches.push_back(w);
  }
  for (int r = 0; r < f.ranks(); ++r) {
    const std::string ep = CaisSwitchNode::HostEndpoint(r).ToString();
    t.hosts.push_back({ep.substr(0, ep.rfind(':')), sws[static_cast<size_t>(f.edge_of(r))].name});
  }
  return t;
}

namespace {

// Links the ranks and switches of `f` (nodes by Fabric's numbering) in the
// order Fabric numbers their ports: host links `host`, links between
// switches `up`.
void LinkFabric(const Fabric& f, const std::vector<Node*>& ranks,
                const std::vector<PipelinedSwitch*>& sws, const LinkConfig& host,
                const LinkConfig& up, Network* net) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    net->Connect(ranks[r], sws[static_cast<size_t>(f.edge_of(static_cast<int>(r)))], host);
  }
  for (const auto& [a, b] : f.links()) {
    net->Connect(sws[static_cast<size_t>(a)], sws[static_cast<size_t>(b)], up);
  }
}

// inca on a fabric: a CaisSwitchNode per switch, each behind the control
// API inca-switchd serves (SwitchControl), and the aggregation manager
// over them, ticking until every rank has joined. The topology names each
// switch's parent on inca's trees (Fabric): one tree per group, as the
// manager builds them; the switches off it carry none of it.
absl::Status BuildIncaFabric(const CaisSimScenario& s, uint64_t bytes, Job* j,
                             const RankDone& done) {
  Plane* pl = &j->planes[0];
  VirtualChunks virt;
  std::shared_ptr<VirtualLedger> ledger;
  const cais::CaisConfig cc = IncaSwitchConfig(s, bytes, &virt, &ledger);
  const Fabric f(s);
  std::vector<CaisSwitchNode*> sws;
  for (size_t i = 0; i < f.switches().size(); ++i) {
    const Fabric::Switch& w = f.switches()[i];
    cais::CaisConfig c = cc;
    // Below the root a switch waits longer than the one above it, which
    // decides: half the root's timeout more per tier.
    c.timeout_ns = cc.timeout_ns * (2 + w.depth) / 2;
    auto created =
        CaisSwitchNode::Create(w.name, c, static_cast<int>(f.ports(static_cast<int>(i)).size()),
                               ledger, Pipeline(s, false));
    if (!created.ok()) return created.status();
    sws.push_back(j->net->Add(*std::move(created)));
  }
  pl->switches.assign(sws.begin(), sws.end());
  const std::vector<CaisRankNode*> ranks = AddIncaRanks(s, 0, j, done, virt, ledger);
  LinkConfig up = Links(s);
  up.rate_bps = s.UplinkGbps() * 1e9;
  LinkFabric(f, std::vector<Node*>(ranks.begin(), ranks.end()), pl->switches, Links(s), up,
             j->net.get());
  for (size_t i = 0; i < sws.size(); ++i) {
    std::vector<net::Endpoint> peers;
    for (const Fabric::Port& p : f.ports(static_cast<int>(i))) {
      peers.push_back(p.rank >= 0 ? CaisSwitchNode::HostEndpoint(p.rank) : SwitchAddress(p.peer));
    }
    sws[i]->SetPeers(peers, SwitchAddress(static_cast<int>(i)));
    sws[i]->SetRoutes(f.routes(static_cast<int>(i)));
  }
  std::vector<control::ControlPlane*> planes;
  for (CaisSwitchNode* sw : sws) {
    j->controls.push_back(std::make_unique<switchd::SwitchControl>(sw, 0));
    planes.push_back(j->controls.back().get());
  }
  tree::ManagerConfig mc;
  mc.window_chunks = s.window;
  j->manager = std::make_unique<tree::AggregationManager>(FabricTopology(f), std::move(planes), mc,
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

// A host baseline (RingRankNode or TreeRankNode) through the switch as a
// forwarder.
template <typename RankNode>
absl::Status BuildHostBaseline(const CaisSimScenario& s, int plane, Job* j, const RankDone& done) {
  const int m = s.JobRanks();  // rank r is rank r mod m of job r / m
  if (absl::Status st = HostCollectiveNode::CheckShape(m, s.HostPayload()); !st.ok()) {
    return st;
  }
  Plane* pl = &j->planes[static_cast<size_t>(plane)];
  // The ring's fabric is lossless: PFC holds a sender back at a full
  // queue, drops nothing.
  LinkConfig lossless = Links(s);
  lossless.queue_packets = UINT32_MAX;
  // The one forwarder, or the fabric's: each routes by the fabric's
  // shortest paths, ECMP over the equal ones.
  std::unique_ptr<Fabric> f = s.IsFabric() ? std::make_unique<Fabric>(s) : nullptr;
  const size_t switches = f ? f->switches().size() : 1;
  for (size_t i = 0; i < switches; ++i) {
    auto* fw = j->net->Add(std::make_unique<ForwarderNode>(
        f ? f->switches()[i].name : absl::StrCat("switch", plane), Pipeline(s, true)));
    if (f) fw->SetRoutes(f->routes(static_cast<int>(i)));
    pl->switches.push_back(fw);
  }
  std::vector<Node*> nodes;
  const auto alpha = static_cast<TimeNs>(std::llround(s.ring_step_latency_us * 1e3));
  for (int r = 0; r < s.hosts; ++r) {
    auto* node = j->net->Add(std::make_unique<RankNode>(absl::StrCat("rank", r, ".", plane), r % m,
                                                        m, s.HostPayload(), s.link_gbps * 1e9,
                                                        s.overhead_bytes, alpha, DoneAs(done, r)));
    node->set_rank_base(r - r % m);
    if (!f) j->net->Connect(node, pl->switches[0], lossless);
    if (absl::Status st = PutOnHost(s, j->net.get(), node, r); !st.ok()) return st;
    nodes.push_back(node);
    pl->ranks.push_back(node);
  }
  if (f) {
    LinkConfig up = lossless;
    up.rate_bps = s.UplinkGbps() * 1e9;
    LinkFabric(*f, nodes, pl->switches, lossless, up, j->net.get());
  }
  const wire::CaisOp op = CollectiveOp(s.collective);
  pl->begin = [nodes, op](int r, std::vector<float>* data, std::vector<float>*, size_t count) {
    // The scenario's collective, checked against the backend when read.
    static_cast<RankNode*>(nodes[static_cast<size_t>(r)])->Begin(data, count, op).IgnoreError();
  };
  return absl::OkStatus();
}

}  // namespace

absl::Status BuildPlane(const CaisSimScenario& s, const std::string& backend, uint64_t bytes,
                        int plane, Job* j, const RankDone& done) {
  if (backend == "inca") {
    return s.IsFabric() ? BuildIncaFabric(s, bytes, j, done) : BuildInca(s, bytes, plane, j, done);
  } else if (backend == "ring") {
    return BuildHostBaseline<RingRankNode>(s, plane, j, done);
  }
  return BuildHostBaseline<TreeRankNode>(s, plane, j, done);
}

absl::StatusOr<std::vector<BackgroundNode*>> AddBackground(const CaisSimScenario& s, int plane,
                                                           Job* j) {
  std::vector<BackgroundNode*> out;
  if (s.background_load <= 0) return out;
  Plane& pl = j->planes[static_cast<size_t>(plane)];
  // Each source: the switch it joins and its hosts (a star: all of them).
  std::vector<std::pair<size_t, int>> sources;
  if (s.IsFabric()) {
    const Fabric f(s);
    for (size_t i = 0; i < f.switches().size(); ++i) {
      const auto& ports = f.ports(static_cast<int>(i));
      const auto hosts = std::count_if(ports.begin(), ports.end(),
                                       [](const Fabric::Port& p) { return p.rank >= 0; });
      if (hosts > 0) sources.emplace_back(i, static_cast<int>(hosts));
    }
  } else {
    sources.emplace_back(0, s.hosts);
  }
  for (const auto& [sw, hosts] : sources) {
    BackgroundTraffic t{s.background_load, s.background_flow_bytes, s.background_gbps * 1e9,
                        static_cast<double>(hosts) / s.hosts};
    auto node = BackgroundNode::Create(
        absl::StrCat("background", plane, ".", sw), s.hosts, s.link_gbps * 1e9, t, s.chunk_size,
        s.overhead_bytes, s.seed + 1 + static_cast<uint64_t>(plane) + (uint64_t{sw} << 32));
    if (!node.ok()) return node.status();
    auto* bg = j->net->Add(*std::move(node));
    LinkConfig lc = Links(s);
    lc.rate_bps *= hosts;
    lc.loss = 0;
    lc.queue_packets = UINT32_MAX;
    j->net->Connect(bg, pl.switches[sw], lc);
    out.push_back(bg);
  }
  return out;
}

double HostSeconds(const CaisSimScenario& s, const std::string& backend, uint64_t bytes) {
  if (s.host_packet_ns <= 0 && s.host_byte_ps <= 0) return 0;
  const auto n = static_cast<uint64_t>(s.JobRanks());
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
