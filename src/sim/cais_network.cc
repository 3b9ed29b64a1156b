#include "sim/cais_network.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "client/transport_core.h"
#include "sim/host_collectives.h"

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

absl::Status BuildInca(const CaisSimScenario& s, uint64_t bytes, int plane, Job* j,
                       const RankDone& done) {
  Plane* pl = &j->planes[static_cast<size_t>(plane)];
  cais::CaisConfig cc;
  cc.sram_bytes = static_cast<size_t>(s.switch_sram_mib * 1024 * 1024);
  cc.max_pending_chunks = s.switch_slots;
  cc.max_payload_bytes = s.chunk_size;
  VirtualChunks virt;
  std::shared_ptr<VirtualLedger> ledger;
  const wire::CaisOp op = CollectiveOp(s.collective);
  if (s.mode == "timing") {
    // A reduce-scatter's or all-gather's chunks stand for one block's bytes.
    virt = {s.chunk_size, op == wire::CaisOp::kAllReduce ? bytes : bytes / s.hosts};
    ledger = std::make_shared<VirtualLedger>();
    // One f32 per chunk, and as many slot cells as the real chunks get.
    const size_t cells = cc.sram_bytes / cc.cell_bytes();
    cc.max_payload_bytes = sizeof(float);
    cc.sram_bytes = std::max<size_t>(1, cells) * cc.cell_bytes();
  }
  auto created = CaisSwitchNode::Create(absl::StrCat("switch", plane), cc, s.hosts, ledger,
                                        Pipeline(s, false));
  if (!created.ok()) return created.status();
  auto* sw = j->net->Add(*std::move(created));
  pl->hub = sw;
  // As SwitchTransport sets it from CommunicatorOptions.
  client::TransportConfig tc;
  tc.world_size = s.hosts;
  tc.chunk_size = s.mode == "timing" ? sizeof(float) : s.chunk_size;
  tc.max_window = s.window;
  tc.min_window = std::min<uint32_t>(2, s.window);
  tc.initial_window = std::min<uint32_t>(16, s.window);
  if (s.target_floor_us >= 0) tc.target_floor_ns = std::llround(s.target_floor_us * 1e3);
  std::vector<CaisRankNode*> ranks;
  for (int r = 0; r < s.hosts; ++r) {
    auto* node = j->net->Add(std::make_unique<CaisRankNode>(absl::StrCat("rank", r, ".", plane), r,
                                                            tc, done, virt, ledger));
    j->net->Connect(node, sw, Links(s));  // the switch's port r
    if (absl::Status st = PutOnHost(s, j->net.get(), node, r); !st.ok()) return st;
    ranks.push_back(node);
    pl->ranks.push_back(node);
  }
  if (s.form_groups) {
    // The switch's first seq_base and the job id are drawn from the seed,
    // as inca-switchd and rank 0 draw them at random.
    std::mt19937_64 draw(s.seed ^ 0x6a6f696eULL ^ (static_cast<uint64_t>(plane) << 32));
    sw->FormGroups(static_cast<uint32_t>(draw()));
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

// A host baseline (RingRankNode or TreeRankNode) through the switch as a
// forwarder.
template <typename RankNode>
absl::Status BuildHostBaseline(const CaisSimScenario& s, int plane, Job* j, const RankDone& done) {
  if (absl::Status st = HostCollectiveNode::CheckShape(s.hosts, s.HostPayload()); !st.ok()) {
    return st;
  }
  Plane* pl = &j->planes[static_cast<size_t>(plane)];
  auto* fwd = j->net->Add(
      std::make_unique<ForwarderNode>(absl::StrCat("switch", plane), Pipeline(s, true)));
  pl->hub = fwd;
  std::vector<RankNode*> ranks;
  const auto alpha = static_cast<TimeNs>(std::llround(s.ring_step_latency_us * 1e3));
  for (int r = 0; r < s.hosts; ++r) {
    auto* node = j->net->Add(std::make_unique<RankNode>(absl::StrCat("rank", r, ".", plane), r,
                                                        s.hosts, s.HostPayload(), s.link_gbps * 1e9,
                                                        s.overhead_bytes, alpha, done));
    LinkConfig lossless = Links(s);  // PFC: a full queue holds the sender back, drops nothing
    lossless.queue_packets = UINT32_MAX;
    j->net->Connect(node, fwd, lossless);
    if (absl::Status st = PutOnHost(s, j->net.get(), node, r); !st.ok()) return st;
    ranks.push_back(node);
    pl->ranks.push_back(node);
  }
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
    return BuildInca(s, bytes, plane, j, done);
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
  j->net->Connect(bg, j->planes[static_cast<size_t>(plane)].hub, lc);
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
