// The client's session core on a manual clock, against the switch's own
// dispatcher (switchd/cais_dispatcher.h) and reducer: formation, a late
// JOIN, a lost JOIN_REPLY, the lease and its keep-alive, a switch that
// restarts, data that arrives before its operation, striping over two
// switches. No socket, thread or wall clock: every datagram goes through
// the Fabric below, in order, with zero delay.
#include "client/session_core.h"

#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/cais/reducer.h"
#include "switchd/cais_dispatcher.h"

namespace inca::client {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kLease = 1'000 * kMs;
constexpr uint32_t kChunk = 64;  // bytes: 16 f32 per chunk

// One member's datagram in flight, or the switch's reply to one.
struct Datagram {
  bool to_switch = true;
  int member = 0;  // the member that sent it, or that it goes to
  std::vector<uint8_t> bytes;
};

// Switches (the dispatcher, the reducer and a port table, as inca-switchd
// hosts them) and members (one SessionCore each, with the OpCore of the
// operation it runs), joined by a FIFO of datagrams delivered at once.
class Fabric {
 public:
  struct Member;

  // A member's outgoing datagrams, management and data.
  class Out final : public MgmtSink, public DatagramSink {
   public:
    Out(Fabric* f, int member) : f_(f), member_(member) {}
    void Send(std::span<const uint8_t> d) override {
      f_->queue_.push_back(Datagram{true, member_, {d.begin(), d.end()}});
    }
    void Send(const wire::CaisHeader& h, std::span<const uint8_t> payload) override {
      f_->queue_.push_back(Datagram{true, member_, wire::SerializeCais(h, payload)});
    }

   private:
    Fabric* f_;
    int member_;
  };

  struct Member {
    int sw = 0;
    net::Endpoint endpoint;
    SessionCore session;
    std::unique_ptr<Out> out;
    PathState path;
    SwitchOp op;
    SwitchPhaseResult result;
    std::unique_ptr<OpCore> core;
    bool keep_alive = true;
    Member(int s, net::Endpoint ep, const SessionConfig& c)
        : sw(s), endpoint(ep), session(c), path(c.transport) {}
  };

  struct Switch {
    std::unique_ptr<cais::CaisReducer> reducer;
    std::unique_ptr<membership::PortTable> ports;
    std::unique_ptr<switchd::CaisDispatcher> dispatcher;
  };

  explicit Fabric(int switches) {
    spdlog::set_level(spdlog::level::off);
    for (int s = 0; s < switches; ++s) Restart(s, /*seq_start=*/1000 * (s + 1));
  }

  // Switch `s` starts afresh (a restart: no groups, no ports).
  void Restart(int s, uint32_t seq_start) {
    if (switches_.size() <= static_cast<size_t>(s)) switches_.resize(static_cast<size_t>(s) + 1);
    Switch& sw = switches_[static_cast<size_t>(s)];
    sw.dispatcher.reset();
    sw.reducer = std::move(*cais::CaisReducer::Create(cais::CaisConfig{}));
    sw.ports = std::make_unique<membership::PortTable>();
    sw.dispatcher = std::make_unique<switchd::CaisDispatcher>(
        sw.reducer.get(), sw.ports.get(),
        switchd::DispatcherOptions{.seq_start = seq_start, .lease = kLease});
  }

  // Member `rank` of a group of `world` at switch `s`; returns its index.
  int Add(int s, int rank, int world, uint64_t job = 7, uint8_t group = 0) {
    SessionConfig c;
    c.transport.group_id = group;
    c.transport.world_size = world;
    c.transport.chunk_size = kChunk;
    c.rank = rank;
    c.job = job;
    c.first_nonce = static_cast<uint32_t>(100 * (members_.size() + 1));
    const auto ep = *net::Endpoint::Parse(absl::StrCat("198.18.", s, ".", rank + 1, ":7000"));
    members_.push_back(std::make_unique<Member>(s, ep, c));
    const int i = static_cast<int>(members_.size()) - 1;
    members_.back()->out = std::make_unique<Out>(this, i);
    return i;
  }

  Member& m(int i) { return *members_[static_cast<size_t>(i)]; }
  const membership::GroupManager& groups(int s) const {
    return switches_[static_cast<size_t>(s)].dispatcher->groups();
  }
  int64_t now() const { return now_; }

  void Join(int i) { m(i).session.StartJoin(now_, *m(i).out); }
  void StartOp(int i, const SwitchOp& op) {
    Member& x = m(i);
    x.op = op;
    x.result = SwitchPhaseResult{};
    x.core = x.session.StartOp(x.op, &x.path, &x.result, now_);
  }

  // Runs until `until` in steps of 1 ms: each step every member's session
  // (JOIN resends, keep-alive) and operation core are driven, then every
  // datagram is delivered (dropped where `drop` says so), then the
  // switches' timers and leases run.
  void RunUntil(int64_t until) {
    while (now_ < until) {
      now_ += kMs;
      for (auto& x : members_) {
        if (x->session.state() == SessionCore::State::kJoining) x->session.JoinTick(now_, *x->out);
        if (x->session.formed() && x->keep_alive && (!x->core || x->core->Finished())) {
          x->session.KeepAlive(now_, *x->out);
        }
        if (x->core && !x->core->Finished()) x->core->Pump(now_, *x->out);
      }
      Deliver();
      for (auto& s : switches_) s.dispatcher->OnTick(now_, replies_);
      Deliver();
    }
  }

  std::function<bool(const Datagram&)> drop;
  std::vector<Datagram> seen;  // everything delivered or dropped, in order

 private:
  // The dispatcher's output: to the member behind a port, or back to the
  // source of the management datagram being handled.
  class Replies final : public switchd::CaisDispatcher::Output {
   public:
    explicit Replies(Fabric* f) : f_(f) {}
    void ToPort(dp::PortId port, std::span<const uint8_t> head, std::span<const uint8_t> payload,
                uint64_t) override {
      const net::Endpoint* ep = f_->switches_[static_cast<size_t>(sw)].ports->endpoint(port);
      if (ep == nullptr) return;
      std::vector<uint8_t> d(head.begin(), head.end());
      d.insert(d.end(), payload.begin(), payload.end());
      for (size_t i = 0; i < f_->members_.size(); ++i) {
        if (f_->members_[i]->sw == sw && f_->members_[i]->endpoint == *ep) {
          f_->queue_.push_back(Datagram{false, static_cast<int>(i), std::move(d)});
          return;
        }
      }
    }
    void Reply(std::span<const uint8_t> mgmt) override {
      f_->queue_.push_back(Datagram{false, from, {mgmt.begin(), mgmt.end()}});
    }
    int sw = 0;
    int from = 0;

   private:
    Fabric* f_;
  };

  void Deliver() {
    while (!queue_.empty()) {
      Datagram d = std::move(queue_.front());
      queue_.pop_front();
      seen.push_back(d);
      if (drop && drop(d)) continue;
      Member& x = m(d.member);
      if (d.to_switch) {
        replies_.sw = x.sw;
        replies_.from = d.member;
        switches_[static_cast<size_t>(x.sw)].dispatcher->OnDatagram(d.bytes, x.endpoint, now_,
                                                                    replies_);
      } else {
        x.session.OnDatagram(d.bytes, now_, x.core.get());
      }
    }
  }

  std::vector<Switch> switches_;
  std::vector<std::unique_ptr<Member>> members_;
  std::deque<Datagram> queue_;
  Replies replies_{this};
  int64_t now_ = 0;
};

bool IsMgmt(const Datagram& d, wire::MgmtType type) {
  wire::MgmtMessage m;
  return wire::ParseMgmt(d.bytes, &m) && m.type == type;
}

// A group of `n` at switch 0, every member joining at time 0.
std::vector<int> Group(Fabric& f, int n, int sw = 0) {
  std::vector<int> ids;
  for (int r = 0; r < n; ++r) ids.push_back(f.Add(sw, r, n));
  return ids;
}

// A group of n members at switch 0, each of which has started to JOIN.
std::vector<int> Joining(Fabric& f, int n) {
  const std::vector<int> ids = Group(f, n);
  for (int i : ids) f.Join(i);
  return ids;
}

TEST(SessionCoreTest, FormsAGroupAndAgreesOnItsEpochAndLayout) {
  Fabric f(1);
  const std::vector<int> ids = Joining(f, 4);
  f.RunUntil(30 * kMs);
  const membership::GroupState* g = f.groups(0).group(0);
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(g->formed);
  for (int i : ids) {
    EXPECT_TRUE(f.m(i).session.formed()) << i;
    EXPECT_EQ(f.m(i).session.seq_base(), g->seq_base);
    EXPECT_EQ(f.m(i).session.lease_ms(), kLease / kMs);
    // The layout is the switch's port order.
    EXPECT_EQ(f.m(i).session.layout().my_index,
              f.m(i).session.layout().index_of_rank[static_cast<size_t>(i)]);
    // The last to join is answered at once; the others ask once more.
    EXPECT_LE(f.m(i).session.joins_sent(), 2u);
  }
}

TEST(SessionCoreTest, ALateJoinFormsTheGroupWhenItComes) {
  Fabric f(1);
  const std::vector<int> ids = Group(f, 3);
  f.Join(ids[0]);
  f.Join(ids[1]);
  f.RunUntil(200 * kMs);
  for (int i : {ids[0], ids[1]}) {
    EXPECT_EQ(f.m(i).session.state(), SessionCore::State::kJoining);
    EXPECT_GE(f.m(i).session.joins_sent(), 9u);  // every 20 ms
  }
  f.Join(ids[2]);
  f.RunUntil(225 * kMs);
  for (int i : ids) EXPECT_TRUE(f.m(i).session.formed()) << i;
}

TEST(SessionCoreTest, ALostJoinReplyIsAskedForAgainWithTheSameNonce) {
  Fabric f(1);
  const std::vector<int> ids = Group(f, 2);
  // Every reply to member 1 is lost for the first 50 ms.
  f.drop = [&](const Datagram& d) {
    return !d.to_switch && d.member == ids[1] && f.now() <= 50 * kMs;
  };
  for (int i : ids) f.Join(i);
  f.RunUntil(50 * kMs);
  EXPECT_FALSE(f.m(ids[1]).session.formed());
  f.RunUntil(80 * kMs);
  EXPECT_TRUE(f.m(ids[1]).session.formed());
  std::vector<uint32_t> nonces;
  for (const Datagram& d : f.seen) {
    wire::MgmtMessage m;
    if (d.to_switch && d.member == ids[1] && wire::ParseMgmt(d.bytes, &m))
      nonces.push_back(m.nonce);
  }
  ASSERT_GE(nonces.size(), 3u);
  for (uint32_t n : nonces) EXPECT_EQ(n, nonces[0]);
  EXPECT_EQ(f.m(ids[1]).session.seq_base(), f.m(ids[0]).session.seq_base());
}

TEST(SessionCoreTest, AReplyOutsideAJoinAttemptChangesNothing) {
  Fabric f(1);
  const std::vector<int> ids = Group(f, 2);
  std::vector<wire::MgmtMessage> replies;  // what member 1's attempt was answered
  f.drop = [&](const Datagram& d) {
    wire::MgmtMessage m;
    if (!d.to_switch && d.member == ids[1] && wire::ParseMgmt(d.bytes, &m)) replies.push_back(m);
    return false;
  };
  for (int i : ids) f.Join(i);
  f.RunUntil(30 * kMs);
  SessionCore& s = f.m(ids[1]).session;
  ASSERT_TRUE(s.formed());
  ASSERT_FALSE(replies.empty());
  const uint32_t seq_base = s.seq_base();
  const std::vector<int> order = s.layout().rank_at_index;
  // The last OK reply again, late (a duplicate from the network), with
  // another epoch and the ports swapped: the operation under way keeps the
  // session it started with.
  wire::MgmtMessage late = replies.back();
  ASSERT_EQ(late.status, wire::MgmtStatus::kOk);
  late.seq_base += 7;
  std::swap(late.rank_ports[0], late.rank_ports[1]);
  std::vector<uint8_t> bytes;
  wire::SerializeMgmt(late, &bytes);
  EXPECT_TRUE(s.OnDatagram(bytes, f.now(), nullptr));
  EXPECT_EQ(s.seq_base(), seq_base);
  EXPECT_EQ(s.layout().rank_at_index, order);
  EXPECT_TRUE(s.formed());
}

// A JOIN_REPLY's rank ports at a leaf of a tree: ranks 0, 1 and 3 beyond
// its uplink (port 7), rank 2 at port 3. By port (one switch's order) the
// tied ranks keep rank order; under a tree (block order ranks) the blocks
// are the ranks', whatever the ports.
TEST(LayoutTest, ATreeOrdersBlocksByRankAndTiedPortsKeepRankOrder) {
  const std::vector<uint16_t> ports = {7, 7, 3, 7};
  const GroupLayout by_port = LayoutFromPorts(ports, 3, wire::BlockOrder::kPorts);
  EXPECT_EQ(by_port.rank_at_index, (std::vector<int>{2, 0, 1, 3}));
  EXPECT_EQ(by_port.my_index, 3);
  const GroupLayout by_rank = LayoutFromPorts(ports, 2, wire::BlockOrder::kRanks);
  EXPECT_EQ(by_rank.rank_at_index, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(by_rank.index_of_rank, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(by_rank.my_index, 2);
}

TEST(SessionCoreTest, KeepAliveHoldsTheGroupPastItsLease) {
  Fabric f(1);
  const std::vector<int> ids = Joining(f, 2);
  f.RunUntil(5 * kLease);  // idle: nothing but keep-alives
  ASSERT_NE(f.groups(0).group(0), nullptr);
  EXPECT_TRUE(f.groups(0).group(0)->formed);
  size_t pings = 0;
  for (const Datagram& d : f.seen) pings += d.to_switch && IsMgmt(d, wire::MgmtType::kPing);
  // A quarter of the lease apart, per member: about 20 in 5 leases each.
  EXPECT_GE(pings, 2u * 16);
  EXPECT_LE(pings, 2u * 21);
  for (int i : ids) EXPECT_TRUE(f.m(i).session.formed());
}

// The switch's window advice: a group that formed alone is advised all
// 128 pending chunks; when two more groups form it learns a third of them
// from a PING a quarter lease on, though its data keeps the lease alive
// (as does the group that formed second, with half), and its next
// operation's window keeps to it.
TEST(SessionCoreTest, AMemberKeepsItsWindowToTheSwitchsAdviceAsGroupsArrive) {
  Fabric f(1);
  const std::vector<int> first = Joining(f, 2);
  f.RunUntil(30 * kMs);
  for (int i : first) EXPECT_EQ(f.m(i).session.window_chunks(), 128);
  std::vector<int> later;
  for (int g : {1, 2}) {
    for (int r = 0; r < 2; ++r)
      later.push_back(f.Add(0, r, 2, static_cast<uint64_t>(7 + g), static_cast<uint8_t>(g)));
  }
  for (int i : later) f.Join(i);
  f.RunUntil(60 * kMs);
  // Group 1's rank 1 completed it before group 2's ranks came (64 of
  // 128); its rank 0 heard of it at its next JOIN, as did group 2 (42).
  const uint16_t advised[] = {42, 64, 42, 42};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(f.m(later[k]).session.window_chunks(), advised[k]) << k;
  }
  // Busy: data to the switch every millisecond renews the lease, so only
  // the advice's age makes the member ask.
  const int64_t busy_until = f.now() + kLease / 4 + 5 * kMs;
  while (f.now() < busy_until) {
    for (int i : first) f.m(i).session.NoteSent(f.now());
    f.RunUntil(f.now() + kMs);
  }
  for (int i : first) EXPECT_EQ(f.m(i).session.window_chunks(), 42) << i;
  for (int i : later) EXPECT_EQ(f.m(i).session.window_chunks(), 42) << i;
  const size_t count = 4 * kChunk / sizeof(float);
  std::vector<float> in(count, 1.0f), out(count);
  SwitchOp op;
  op.count = count;
  op.in = reinterpret_cast<const uint8_t*>(in.data());
  op.out = reinterpret_cast<uint8_t*>(out.data());
  op.seq = f.m(first[0]).session.seq_base() + 1;
  f.StartOp(first[0], op);
  EXPECT_EQ(f.m(first[0]).path.max_window(), 42u);
  EXPECT_LE(f.m(first[0]).path.window_chunks(), 42u);
}

TEST(SessionCoreTest, ASilentMemberLosesTheGroupAndTheSessionNoticesOnItsNextPing) {
  Fabric f(1);
  const std::vector<int> ids = Joining(f, 2);
  f.RunUntil(30 * kMs);
  f.m(ids[1]).keep_alive = false;
  f.RunUntil(3 * kLease);
  EXPECT_EQ(f.groups(0).group(0), nullptr);  // expired with its silent member
  // Member 0 kept pinging: the switch answered "unknown", so its session
  // is stale and will join again before its next operation.
  EXPECT_FALSE(f.m(ids[0]).session.formed());
}

TEST(SessionCoreTest, RejoinsAfterTheSwitchRestarts) {
  Fabric f(1);
  const std::vector<int> ids = Joining(f, 2);
  f.RunUntil(30 * kMs);
  const uint32_t before = f.m(ids[0]).session.seq_base();
  f.Restart(0, /*seq_start=*/50'000);
  f.RunUntil(30 * kMs + kLease / 2);  // past a PING: the new switch knows no group
  for (int i : ids) EXPECT_FALSE(f.m(i).session.formed()) << i;
  for (int i : ids) f.Join(i);
  f.RunUntil(30 * kMs + kLease / 2 + 30 * kMs);
  for (int i : ids) {
    EXPECT_TRUE(f.m(i).session.formed()) << i;
    EXPECT_NE(f.m(i).session.seq_base(), before);
    EXPECT_EQ(f.m(i).session.seq_base(), f.groups(0).group(0)->seq_base);
  }
}

TEST(SessionCoreTest, DataBeforeItsOperationIsKeptAndReplayed) {
  Fabric f(1);
  const std::vector<int> ids = Joining(f, 2);
  f.RunUntil(30 * kMs);
  // AllGather of 4 chunks per block; member 0 starts 10 ms before member 1,
  // whose session receives member 0's blocks with no operation under way.
  const size_t count = 4 * kChunk / sizeof(float);
  std::vector<std::vector<float>> in(2, std::vector<float>(count)),
      out(2, std::vector<float>(2 * count));
  for (int r = 0; r < 2; ++r) {
    for (size_t e = 0; e < count; ++e) in[r][e] = static_cast<float>(100 * r + e);
  }
  auto op_of = [&](int r) {
    SwitchOp op;
    op.op = wire::CaisOp::kAllGather;
    op.count = count;
    op.in = reinterpret_cast<const uint8_t*>(in[r].data());
    op.out = reinterpret_cast<uint8_t*>(out[r].data());
    op.block_stride_bytes = count * sizeof(float);
    op.seq = f.m(ids[r]).session.seq_base() + 1;
    return op;
  };
  f.StartOp(ids[0], op_of(0));
  f.RunUntil(40 * kMs);
  EXPECT_EQ(f.m(ids[1]).session.early_kept(), 4u);
  f.StartOp(ids[1], op_of(1));
  EXPECT_EQ(f.m(ids[1]).session.early_kept(), 0u);
  f.RunUntil(60 * kMs);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(f.m(ids[r]).result.complete) << r;
    for (size_t e = 0; e < 2 * count; ++e) {
      EXPECT_EQ(out[r][e], static_cast<float>(100 * (e / count) + e % count)) << r << " " << e;
    }
  }
  EXPECT_EQ(f.m(ids[1]).result.requests, 0u);  // nothing asked for again
}

TEST(SessionCoreTest, StripesAnOperationOverTwoSwitches) {
  Fabric f(2);
  // Each rank is a member at both switches (one session each).
  std::vector<std::vector<int>> at(2);  // at[switch][rank]
  for (int s = 0; s < 2; ++s) at[s] = Group(f, 2, s);
  for (int s = 0; s < 2; ++s) {
    for (int i : at[s]) f.Join(i);
  }
  f.RunUntil(30 * kMs);
  const size_t count = 8 * kChunk / sizeof(float);
  std::vector<std::vector<float>> data(2, std::vector<float>(count));
  for (int r = 0; r < 2; ++r) {
    for (size_t e = 0; e < count; ++e) data[r][e] = static_cast<float>((r + 1) * e);
  }
  std::vector<std::vector<Stripe>> stripes(2);
  for (int r = 0; r < 2; ++r) {
    SwitchOp whole;
    whole.count = count;
    whole.data = reinterpret_cast<uint8_t*>(data[r].data());
    stripes[r] = StripeOp(whole, kChunk, 2);
    ASSERT_EQ(stripes[r].size(), 2u);
    for (int s = 0; s < 2; ++s) {
      SwitchOp op = stripes[r][s].op;
      op.seq = f.m(at[s][r]).session.seq_base() + 1;  // operation 1 of each switch's epoch
      f.StartOp(at[s][r], op);
    }
  }
  f.RunUntil(60 * kMs);
  for (int r = 0; r < 2; ++r) {
    SwitchOp whole;
    whole.count = count;
    const SwitchPhaseResult merged =
        MergeStripes(whole, kChunk, 2, stripes[r], {f.m(at[0][r]).result, f.m(at[1][r]).result});
    EXPECT_TRUE(merged.complete) << r;
    EXPECT_EQ(merged.sent, 8u);  // each switch carried its half
    for (size_t e = 0; e < count; ++e) EXPECT_EQ(data[r][e], static_cast<float>(3 * e)) << e;
  }
  // Each switch reduced its own stripe, in its own epoch.
  EXPECT_NE(f.m(at[0][0]).session.seq_base(), f.m(at[1][0]).session.seq_base());
}

TEST(SessionCoreTest, ReportsAreRateLimitedPerPathAndSizeClass) {
  Fabric f(1);
  const int i = f.Add(0, 0, 1);
  struct Count final : MgmtSink {
    void Send(std::span<const uint8_t>) override { ++n; }
    int n = 0;
  } out;
  SessionCore& s = f.m(i).session;
  s.Report(1 << 20, 1000, wire::ReportPath::kSwitch, 10 * kMs, out);
  s.Report(1 << 20, 1000, wire::ReportPath::kSwitch, 12 * kMs, out);  // too soon
  s.Report(1 << 20, 1000, wire::ReportPath::kHost, 12 * kMs, out);    // the other path
  s.Report(64, 1000, wire::ReportPath::kSwitch, 12 * kMs, out);       // another size class
  s.Report(1 << 20, 1000, wire::ReportPath::kSwitch, 15 * kMs, out);  // 5 ms on
  s.Report(0, 1000, wire::ReportPath::kSwitch, 30 * kMs, out);        // nothing to report
  EXPECT_EQ(out.n, 4);
}

TEST(SessionCoreTest, PiecesCoverTheOperationInSlicesOfEveryBlock) {
  SwitchOp whole;
  whole.op = wire::CaisOp::kAllGather;
  whole.count = 300'000;
  std::vector<uint8_t> in(whole.count * 4), out(4 * whole.count * 4);
  whole.in = in.data();
  whole.out = out.data();
  const size_t piece = PieceElements(whole, 64, 4);
  EXPECT_EQ(piece, (kMaxPieceChunks / 4) * 16);
  const SwitchOp p = PieceOf(whole, piece, 10);
  EXPECT_EQ(p.count, 10u);
  EXPECT_EQ(p.in, in.data() + piece * 4);
  EXPECT_EQ(p.out, out.data() + piece * 4);
  EXPECT_EQ(p.block_stride_bytes, whole.block_stride_bytes);
  whole.op = wire::CaisOp::kAllReduce;
  EXPECT_EQ(PieceElements(whole, 64, 4), kMaxPieceChunks * 16);
}

}  // namespace
}  // namespace inca::client
