// A tree of CAIS switches in one process (tree_aggregation_test.cc): the
// ranks JOIN their leaves, the aggregation manager's planner (PlanTrees)
// makes the tree and the ports, the real CaisReducer at every switch gets
// the plan's rule, each rank's transport core (OpCore) runs at its leaf, and links
// with a rate, a delay, a queue and loss on every host link and uplink,
// driven by a discrete-event loop: no sockets, no clock.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/star_test_util.h"
#include "client/transport_core.h"
#include "inca/cais/reducer.h"
#include "inca/tree/planner.h"
#include "inca/tree/topology.h"

namespace inca::tree::testing {

using client::testing::Link;

// `racks` leaves of `hosts` ranks each under one spine (levels 2), or
// under two aggregation switches under the spine (levels 3); rank r sits in
// rack r / hosts.
inline std::string RacksYaml(int racks, int hosts, int levels) {
  std::string y = "switches:\n  - {name: spine, address: \"198.18.0.1:9410\"}\n";
  if (levels == 3) {
    y += "  - {name: agg0, address: \"198.18.0.2:9410\", parent: spine}\n";
    y += "  - {name: agg1, address: \"198.18.0.3:9410\", parent: spine}\n";
  }
  for (int k = 0; k < racks; ++k) {
    const std::string parent = levels == 3 ? absl::StrCat("agg", k * 2 / racks) : "spine";
    y += absl::StrCat("  - {name: leaf", k, ", address: \"198.18.", k + 1,
                      ".1:9410\", parent: ", parent, "}\n");
  }
  y += "hosts:\n";
  for (int k = 0; k < racks; ++k) {
    y += absl::StrCat("  - {at: leaf", k, ", addresses: [");
    for (int h = 0; h < hosts; ++h) y += absl::StrCat(h ? ", " : "", "198.18.", k + 1, ".", 10 + h);
    y += "]}\n";
  }
  return y;
}

struct TreeNetOptions {
  int racks = 2;
  int hosts = 2;
  int levels = 2;
  size_t elements = 20'000;
  bool deterministic = false;
  Link host_link;
  Link uplink;
  uint64_t seed = 42;
  // Groups over the same tree (ids 0..groups-1), each rank in all of them
  // (one transport core per group and rank, over the rank's one link).
  int groups = 1;
  // The root's pending chunks (CaisConfig::max_pending_chunks) and the
  // ranks' largest window.
  uint32_t root_max_pending = 4096;
  uint32_t max_window = 64;
};

class TreeNet {
 public:
  explicit TreeNet(const TreeNetOptions& o) : o_(o), rng_(o.seed) {
    auto topo = Topology::FromYaml(RacksYaml(o.racks, o.hosts, o.levels), "racks.yaml");
    EXPECT_TRUE(topo.ok()) << topo.status();
    const int n = o.racks * o.hosts;
    // Rank r JOINs its leaf, which gives it port hosts + 10 - (r mod hosts): the
    // ports, hence each leaf's reduction order, run against the ranks'.
    std::vector<SwitchView> views;
    for (size_t k = 0; k < topo->switches.size(); ++k)
      views.push_back({static_cast<int>(k), 5, {}, {}});
    for (int r = 0; r < n; ++r) {
      const std::string host = absl::StrCat("198.18.", r / o.hosts + 1, ".", 10 + r % o.hosts);
      SwitchView& v = views[static_cast<size_t>(*topo->SwitchOfHost(host))];
      if (v.forming.empty()) v.forming.push_back({0, 1, n, {}});
      const auto port = static_cast<uint16_t>(o.hosts + 10 - r % o.hosts);
      v.forming[0].ranks.push_back({r, port, host + ":5000"});
      v.ports.push_back({port, host + ":5000"});
      rank_port_.push_back(port);
    }
    const std::vector<PlanOutcome> plans = PlanTrees(*topo, views);
    EXPECT_EQ(plans.size(), 1u);
    EXPECT_TRUE(plans[0].plan.ok()) << plans[0].plan.status();
    plan_ = *plans[0].plan;
    tree_ = plan_.tree;
    for (int g = 0; g < o.groups; ++g) {
      client::TransportConfig c;
      c.group_id = static_cast<uint8_t>(g);
      c.world_size = n;
      c.max_window = o.max_window;
      c.initial_window = std::min(c.initial_window, o.max_window);
      cfgs_.push_back(c);
    }
    for (size_t k = 0; k < tree_.nodes.size(); ++k) AddSwitch(static_cast<int>(k));
    host_links_.assign(static_cast<size_t>(n), {o.host_link, o.host_link});
    for (int g = 0; g < o.groups; ++g) {
      for (int r = 0; r < n; ++r) {
        ranks_.push_back(std::make_unique<Rank>(cfgs_[static_cast<size_t>(g)]));
        ranks_.back()->group = g;
        ranks_.back()->rank = r;
        // A tree's JOIN reply: its leaf's rank ports, blocks in rank order.
        const SwitchInstall& leaf = plan_.installs[static_cast<size_t>(tree_.node_of_rank[r])];
        ranks_.back()->layout =
            client::LayoutFromPorts(leaf.rank_ports, r, wire::BlockOrder::kRanks);
      }
    }
  }

  const Tree& tree() const { return tree_; }
  const TreePlan& plan() const { return plan_; }
  cais::CaisReducer& reducer(int node) { return *switches_[static_cast<size_t>(node)]->reducer; }
  Link& uplink_up(int node) { return switches_[static_cast<size_t>(node)]->up; }
  Link& uplink_down(int node) { return switches_[static_cast<size_t>(node)]->down; }
  // A dead switch takes every datagram and answers none.
  void Kill(int node) { switches_[static_cast<size_t>(node)]->dead = true; }
  // Rank r reaches each operation late_ns after the others.
  void SetLate(int rank, int64_t late_ns) {
    for (auto& rk : ranks_) {
      if (rk->rank == rank) rk->late = late_ns;
    }
  }
  // A datagram reaching switch `node` on `port` at time `at` (a hostile
  // peer's, for example), and the port child switch `node` has at its
  // parent.
  void Inject(int node, int port, std::vector<uint8_t> bytes, int64_t at) {
    Push(at, kAtSwitch, node, port, std::move(bytes));
  }
  int PortAtParent(int node) const { return switches_[static_cast<size_t>(node)]->port_at_parent; }
  // Transport cores: group g's rank r is core g * world_size + r.
  int cores() const { return static_cast<int>(ranks_.size()); }
  const client::SwitchPhaseResult& result(int r) const {
    return ranks_[static_cast<size_t>(r)]->result;
  }
  const std::vector<float>& data(int r) const { return ranks_[static_cast<size_t>(r)]->data; }
  int64_t now() const { return now_; }

  // Each rank's input for operation k: non-integers of several magnitudes,
  // so that the order of a floating-point sum shows in its bits.
  static float Input(int rank, int k, size_t i) {
    const auto x =
        static_cast<float>((i * 7 + static_cast<size_t>(rank) * 13 + static_cast<size_t>(k)) % 101);
    return x * 0.37f * static_cast<float>(1 + rank % 3 * 100) + 1e-3f * static_cast<float>(rank);
  }

  // The tree's reference result for element i of operation k: at each
  // switch, its members in port order (the plan's: its ranks as their
  // JOIN ports order them, then its children's partials), summed left to
  // right in f32 (the deterministic reducer's order).
  float Reference(int node, int k, size_t i) const {
    std::vector<float> lanes;
    for (const PlannedMember& m : plan_.installs[static_cast<size_t>(node)].members) {
      lanes.push_back(m.rank >= 0 ? Input(m.rank, k, i) : Reference(NodeOf(m.child_switch), k, i));
    }
    float acc = lanes[0];
    for (size_t m = 1; m < lanes.size(); ++m) acc += lanes[m];
    return acc;
  }

  // Rank r's buffers after an operation: AllReduce and Broadcast in
  // place (data), ReduceScatter's block and AllGather's blocks (out).
  const std::vector<float>& out(int r) const { return ranks_[static_cast<size_t>(r)]->out; }

  // Runs operation k (an f32 sum all-reduce) on every rank to its end.
  void RunOp(int k) { RunCollective(k, wire::CaisOp::kAllReduce); }
  // Operation k as `op` (f32, sum): each rank's input element i of block b
  // is Input(rank, k, b * elements + i) (one block but for ReduceScatter's
  // world_size); a Broadcast's from `root`, the others' buffers zero.
  void RunCollective(int k, wire::CaisOp op, int root = 0) {
    collective_ = op;
    root_ = root;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      Rank& rk = *ranks_[r];
      rk.core.reset();
      rk.started = false;
      rk.wake_at = INT64_MAX;
      Push(now_ + rk.late, kStart, static_cast<int>(r), 0, {});
    }
    op_ = k;
    while (true) {
      bool done = true;
      for (const auto& rk : ranks_) done = done && rk->started && rk->core->Finished();
      if (done) break;
      Step();
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

 private:
  enum Kind { kAtSwitch, kAtRank, kWake, kStart };
  struct Switch {
    std::unique_ptr<cais::CaisReducer> reducer;
    Link up, down;  // toward the parent and back
    bool dead = false;
    std::map<uint16_t, PlannedMember> members;  // by port
    uint16_t port_at_parent = 0;
  };
  int NodeOf(int switch_index) const {
    for (size_t k = 0; k < tree_.nodes.size(); ++k) {
      if (tree_.nodes[k].switch_index == switch_index) return static_cast<int>(k);
    }
    return -1;
  }
  struct Rank {
    explicit Rank(const client::TransportConfig& c) : path(c) {}
    client::PathState path;
    client::GroupLayout layout;
    int group = 0, rank = 0;
    int64_t late = 0;
    int64_t wake_at = INT64_MAX;  // the pending kWake's time
    bool started = false;
    std::vector<float> data, out;
    client::SwitchOp op;
    client::SwitchPhaseResult result;
    std::unique_ptr<client::OpCore> core;
  };
  struct Event {
    int64_t t;
    uint64_t id;
    Kind kind;
    int who;   // a node (kAtSwitch) or a rank
    int port;  // kAtSwitch: the ingress port
    std::vector<uint8_t> bytes;
    bool operator>(const Event& e) const { return t != e.t ? t > e.t : id > e.id; }
  };

  void AddSwitch(int node) {
    const TreeNode& t = tree_.nodes[static_cast<size_t>(node)];
    int level = 0;
    for (int p = t.parent; p >= 0; p = tree_.nodes[static_cast<size_t>(p)].parent) ++level;
    cais::CaisConfig c;
    c.sram_bytes = size_t{64} << 20;
    c.max_pending_chunks = t.parent < 0 ? o_.root_max_pending : 4096;
    c.deterministic = o_.deterministic;
    // Below the root a switch waits longer than its parent, which decides.
    c.timeout_ns = (500 + 100 * level) * dp::kNsPerMs;
    auto s = std::make_unique<Switch>();
    s->reducer = *cais::CaisReducer::Create(c);
    // The plan's install here; every group of the harness shares the tree.
    const SwitchInstall& in = plan_.installs[static_cast<size_t>(node)];
    cais::PortMask ports;
    for (const PlannedMember& m : in.members) {
      ports.add(m.port);
      s->members[m.port] = m;
    }
    for (int g = 0; g < o_.groups; ++g) {
      cais::Rule rule{cais::RuleKey{static_cast<uint8_t>(g), std::nullopt, std::nullopt}, ports,
                      ports, std::nullopt};
      if (in.uplink) rule.uplink = *in.uplink;
      rule.rank_ports.assign(in.rank_ports.begin(), in.rank_ports.end());
      EXPECT_TRUE(s->reducer->rules().Add(rule).ok());
    }
    if (t.parent >= 0) {
      for (const PlannedMember& m : plan_.installs[static_cast<size_t>(t.parent)].members) {
        if (m.child_switch == t.switch_index) s->port_at_parent = m.port;
      }
    }
    s->up = s->down = o_.uplink;
    switches_.push_back(std::move(s));
  }

  void Push(int64_t t, Kind kind, int who, int port, std::vector<uint8_t> bytes) {
    events_.push(Event{t, next_id_++, kind, who, port, std::move(bytes)});
  }
  void Carry(Link& link, Kind kind, int who, int port, std::span<const uint8_t> d) {
    const int64_t at = link.Enqueue(now_, d.size(), rng_);
    if (at >= 0) Push(at, kind, who, port, std::vector<uint8_t>(d.begin(), d.end()));
  }

  // A switch's emissions: to a member (a rank or a child switch) or up.
  class FromSwitch final : public dp::PacketSink {
   public:
    FromSwitch(TreeNet* net, int node) : net_(net), node_(node) {}
    void Emit(dp::PortId port, std::span<const uint8_t> p) override {
      const TreeNode& t = net_->tree_.nodes[static_cast<size_t>(node_)];
      Switch& s = *net_->switches_[static_cast<size_t>(node_)];
      const auto& uplink = net_->plan_.installs[static_cast<size_t>(node_)].uplink;
      if (uplink && port == *uplink) {
        net_->Carry(s.up, kAtSwitch, t.parent, s.port_at_parent, p);
        return;
      }
      const PlannedMember& m = s.members.at(port);
      if (m.rank >= 0) {
        net_->Carry(net_->host_links_[static_cast<size_t>(m.rank)].second, kAtRank, m.rank, 0, p);
      } else {
        const int c = net_->NodeOf(m.child_switch);
        net_->Carry(net_->switches_[static_cast<size_t>(c)]->down, kAtSwitch, c,
                    *net_->plan_.installs[static_cast<size_t>(c)].uplink, p);
      }
    }
    TreeNet* net_;
    int node_;
  };
  class ToLeaf final : public client::DatagramSink {
   public:
    ToLeaf(TreeNet* net, int r) : net_(net), r_(r) {}
    void Send(const wire::CaisHeader& h, std::span<const uint8_t> payload) override {
      const std::vector<uint8_t> d = wire::SerializeCais(h, payload);
      const int leaf = net_->tree_.node_of_rank[static_cast<size_t>(r_)];
      net_->Carry(net_->host_links_[static_cast<size_t>(r_)].first, kAtSwitch, leaf,
                  net_->rank_port_[static_cast<size_t>(r_)], d);
    }
    TreeNet* net_;
    int r_;
  };

  void Start(int r) {
    Rank& rk = *ranks_[static_cast<size_t>(r)];
    const size_t e = o_.elements;
    const auto n = static_cast<size_t>(tree_.world_size);
    const size_t blocks = collective_ == wire::CaisOp::kReduceScatter ? n : 1;
    rk.data.assign(e * blocks, 0.0f);
    if (collective_ != wire::CaisOp::kBroadcast || rk.rank == root_) {
      for (size_t i = 0; i < rk.data.size(); ++i) rk.data[i] = Input(rk.rank, op_, i);
    }
    if (collective_ == wire::CaisOp::kAllReduce) {
      rk.core = client::testing::StartSumAllReduce(cfgs_[static_cast<size_t>(rk.group)], rk.layout,
                                                   rk.data, static_cast<uint32_t>(op_), now_,
                                                   &rk.path, &rk.op, &rk.result);
    } else {
      rk.out.assign(collective_ == wire::CaisOp::kAllGather ? e * n : e, -1.0f);
      rk.op = client::SwitchOp{};
      rk.op.op = collective_;
      rk.op.seq = static_cast<uint32_t>(op_);
      rk.op.count = e;
      rk.op.root = root_;
      rk.op.data = reinterpret_cast<uint8_t*>(rk.data.data());
      rk.op.in = rk.op.data;
      rk.op.out = reinterpret_cast<uint8_t*>(rk.out.data());
      rk.op.block_stride_bytes = e * sizeof(float);
      rk.result = client::SwitchPhaseResult{};
      rk.core = std::make_unique<client::OpCore>(cfgs_[static_cast<size_t>(rk.group)], rk.layout,
                                                 rk.op, &rk.path, &rk.result);
      rk.core->Start(now_);
    }
    rk.started = true;
    Pump(r);
  }
  void Pump(int r) {
    Rank& rk = *ranks_[static_cast<size_t>(r)];
    ToLeaf sink(this, rk.rank);
    rk.core->Pump(now_, sink);
    // One wake-up pending per rank, the earliest: a datagram's Pump must
    // not start a chain of its own (an operation held for seconds would
    // pile them up).
    const int64_t next = rk.core->Finished() ? INT64_MAX : rk.core->NextDeadline();
    if (next < rk.wake_at) {
      rk.wake_at = next;
      Push(next, kWake, r, 0, {});
    }
  }

  void Step() {
    Event e{};
    if (!client::testing::NextEvent(events_, &now_, &e)) return;
    if (e.kind == kStart) return Start(e.who);
    if (e.kind == kAtSwitch) {
      Switch& s = *switches_[static_cast<size_t>(e.who)];
      if (s.dead) return;
      FromSwitch out(this, e.who);
      s.reducer->Advance(now_, out);
      s.reducer->Process(e.bytes, static_cast<dp::PortId>(e.port), now_, out);
      return;
    }
    // A datagram reaches the core of its group (byte 1) at that rank.
    const int core = e.kind == kAtRank ? e.bytes[1] * tree_.world_size + e.who : e.who;
    Rank& rk = *ranks_[static_cast<size_t>(core)];
    if (e.kind == kWake) {
      if (e.t != rk.wake_at) return;  // superseded by an earlier one
      rk.wake_at = INT64_MAX;
    }
    if (!rk.core || rk.core->Finished()) return;
    if (e.kind == kAtRank) rk.core->OnDatagram(e.bytes, now_);
    Pump(core);
  }

  TreeNetOptions o_;
  TreePlan plan_;
  Tree tree_;
  std::vector<uint16_t> rank_port_;                // each rank's port at its leaf
  std::vector<client::TransportConfig> cfgs_;      // per group
  std::vector<std::pair<Link, Link>> host_links_;  // per rank: to its leaf, back
  std::vector<std::unique_ptr<Switch>> switches_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t next_id_ = 0;
  int64_t now_ = 0;
  int op_ = 0;
  wire::CaisOp collective_ = wire::CaisOp::kAllReduce;
  int root_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace inca::tree::testing
