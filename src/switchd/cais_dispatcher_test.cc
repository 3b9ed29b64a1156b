// The CAIS dispatcher alone, on a manual clock: what inca-switchd and
// inca-sim both host (cais_dispatcher.h).
#include "switchd/cais_dispatcher.h"

#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "inca/wire/cais.h"
#include "inca/wire/mgmt.h"

namespace inca::switchd {
namespace {

constexpr dp::TimeNs kLease = 1'000 * dp::kNsPerMs;

net::Endpoint Ep(int host) {
  return *net::Endpoint::Parse("10.0.0." + std::to_string(host) + ":1000");
}

struct Recorder final : CaisDispatcher::Output {
  void ToPort(dp::PortId port, std::span<const uint8_t> head, std::span<const uint8_t> payload,
              uint64_t) override {
    std::vector<uint8_t> p(head.begin(), head.end());
    p.insert(p.end(), payload.begin(), payload.end());
    data.push_back({port, p});
  }
  void Reply(std::span<const uint8_t> mgmt) override {
    replies.emplace_back(mgmt.begin(), mgmt.end());
  }
  void Ingress(dp::PortId port, std::span<const uint8_t>) override { ingress.push_back(port); }
  std::vector<std::pair<dp::PortId, std::vector<uint8_t>>> data;
  std::vector<std::vector<uint8_t>> replies;
  std::vector<dp::PortId> ingress;
};

class CaisDispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::off);
    Make({});
  }
  void Make(DispatcherOptions o) {
    o.seq_start = 1000;
    o.lease = kLease;
    d_.reset();
    reducer_ = std::move(*cais::CaisReducer::Create(cais::CaisConfig{}));
    ports_ = std::make_unique<membership::PortTable>();
    d_ = std::make_unique<CaisDispatcher>(reducer_.get(), ports_.get(), o);
  }
  // JOINs ranks 0..n-1 of group 0 (of `world` ranks, default n) from
  // hosts 1..n; the last reply.
  wire::MgmtMessage Form(int n, int world = 0) {
    wire::MgmtMessage last;
    for (int r = 0; r < n; ++r) {
      wire::MgmtMessage m;
      m.type = wire::MgmtType::kJoin;
      m.group_id = 0;
      m.rank = static_cast<uint16_t>(r);
      m.world_size = static_cast<uint16_t>(world > 0 ? world : n);
      m.nonce = 5;
      std::vector<uint8_t> bytes;
      wire::SerializeMgmt(m, &bytes);
      out_.replies.clear();
      d_->OnDatagram(bytes, Ep(r + 1), now_ += 1000, out_);
      EXPECT_EQ(out_.replies.size(), 1u);
      if (!out_.replies.empty()) {
        EXPECT_TRUE(wire::ParseMgmt(out_.replies[0], &last));
      }
    }
    return last;
  }
  std::vector<uint8_t> Chunk(uint32_t seq, float v) {
    wire::CaisHeader h;
    h.seq_num = seq;
    h.payload_len = 4;
    return wire::SerializeCais(h,
                               std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&v), 4));
  }
  static float Value(const std::vector<uint8_t>& p) {
    float v;
    std::memcpy(&v, p.data() + wire::kCaisHeaderBytes, 4);
    return v;
  }

  std::unique_ptr<cais::CaisReducer> reducer_;
  std::unique_ptr<membership::PortTable> ports_;
  std::unique_ptr<CaisDispatcher> d_;
  Recorder out_;
  dp::TimeNs now_ = 0;
};

TEST_F(CaisDispatcherTest, AGroupFormsThroughJoinsAndReducesItsData) {
  const wire::MgmtMessage reply = Form(2);
  ASSERT_EQ(reply.type, wire::MgmtType::kJoinReply);
  ASSERT_EQ(reply.status, wire::MgmtStatus::kOk);
  EXPECT_EQ(d_->counters().mgmt_rx, 2u);
  d_->OnDatagram(Chunk(reply.seq_base, 1.5f), Ep(1), now_ += 1000, out_);
  EXPECT_TRUE(out_.data.empty());  // waits for rank 1
  d_->OnDatagram(Chunk(reply.seq_base, 2.0f), Ep(2), now_ += 1000, out_);
  ASSERT_EQ(out_.data.size(), 2u);  // the result, to both ports
  for (const auto& [port, packet] : out_.data) EXPECT_EQ(Value(packet), 3.5f) << port;
  EXPECT_EQ(out_.ingress.size(), 2u);
  EXPECT_EQ(d_->counters().unknown_sender, 0u);
}

// A leaf of a tree passes each REPORT it keeps up its uplink, unchanged,
// for the root's offload decisions; a REPORT it ignores goes nowhere.
TEST_F(CaisDispatcherTest, ALeafPassesItsRanksReportsUpToTheRoot) {
  EXPECT_EQ(Form(2, 4).status, wire::MgmtStatus::kPending);  // 2 of 4 ranks here
  ASSERT_TRUE(ports_->AddStatic(40, Ep(100)).ok());
  const membership::GroupState* g = d_->groups().group(0);
  const dp::PortId p0 = g->ranks[0]->port, p1 = g->ranks[1]->port;
  ASSERT_TRUE(d_->groups()
                  .InstallTree({0, 0, 4, 77, {p0, p1}, dp::PortId{40}, {p0, p1, 40, 40}}, now_)
                  .ok());
  wire::MgmtMessage m;
  m.type = wire::MgmtType::kReport;
  m.rank = 1;
  m.world_size = 4;
  m.report_bytes = 1 << 20;
  m.report_duration_us = 1000;
  std::vector<uint8_t> bytes;
  wire::SerializeMgmt(m, &bytes);
  out_.data.clear();
  out_.replies.clear();
  d_->OnDatagram(bytes, Ep(2), now_ += 1000, out_);
  ASSERT_EQ(out_.data.size(), 1u);
  EXPECT_EQ(out_.data[0].first, dp::PortId{40});
  EXPECT_EQ(out_.data[0].second, bytes);
  EXPECT_EQ(d_->counters().reports_forwarded, 1u);
  d_->OnDatagram(bytes, Ep(3), now_ += 1000, out_);  // not rank 1's endpoint: ignored
  EXPECT_EQ(out_.data.size(), 1u);
  EXPECT_EQ(d_->counters().reports_forwarded, 1u);
  EXPECT_TRUE(out_.replies.empty());
}

// Each JOIN_REPLY and PONG advises the group's members a window: the
// switch's 128 pending chunks divided among every group here, formed or
// still forming, at most a tree's cap, and nothing when the switch is set
// not to advise.
TEST_F(CaisDispatcherTest, RepliesAdviseEachGroupItsShareOfTheSlots) {
  const auto send = [&](wire::MgmtType type, uint8_t group, uint16_t rank, uint16_t world,
                        int host) {
    wire::MgmtMessage m;
    m.type = type;
    m.group_id = group;
    m.rank = rank;
    m.world_size = world;
    std::vector<uint8_t> bytes;
    wire::SerializeMgmt(m, &bytes);
    out_.replies.clear();
    d_->OnDatagram(bytes, Ep(host), now_ += 1000, out_);
    wire::MgmtMessage reply;
    EXPECT_EQ(out_.replies.size(), 1u);
    EXPECT_TRUE(!out_.replies.empty() && wire::ParseMgmt(out_.replies[0], &reply));
    return reply;
  };
  using T = wire::MgmtType;
  EXPECT_EQ(Form(2).window_chunks, 128);                    // alone
  EXPECT_EQ(send(T::kJoin, 1, 0, 2, 3).window_chunks, 64);  // pending: group 1 forms
  EXPECT_EQ(send(T::kJoin, 2, 0, 4, 4).window_chunks, 42);  // and group 2
  // The first group learns its smaller share from its next PONG.
  EXPECT_EQ(send(T::kPing, 0, 0, 2, 1).window_chunks, 42);
  const wire::MgmtMessage formed = send(T::kJoin, 1, 1, 2, 5);
  EXPECT_EQ(formed.status, wire::MgmtStatus::kOk);
  EXPECT_EQ(formed.window_chunks, 42);
  // A tree's cap (the least share of the switches above) bounds it.
  ASSERT_TRUE(ports_->AddStatic(40, Ep(100)).ok());
  const dp::PortId p = d_->groups().group(2)->ranks[0]->port;
  ASSERT_TRUE(
      d_->groups().InstallTree({2, 0, 4, 77, {p}, dp::PortId{40}, {p, 40, 40, 40}, 10}, now_).ok());
  EXPECT_EQ(send(T::kPing, 2, 0, 4, 4).window_chunks, 10);
  EXPECT_EQ(WindowAdvice(*reducer_, d_->groups(), 2), 10);
  cais::CaisConfig quiet = reducer_->config();
  quiet.advise_window = false;
  ASSERT_TRUE(reducer_->UpdateConfig(quiet).ok());
  EXPECT_EQ(send(T::kPing, 0, 0, 2, 1).window_chunks, 0);
  EXPECT_EQ(send(T::kPing, 0, 0, 2, 9).status, wire::MgmtStatus::kUnknown);  // not a member
}

TEST_F(CaisDispatcherTest, DataFromAnEndpointWithoutAPortIsDroppedAndCounted) {
  const wire::MgmtMessage reply = Form(2);
  d_->OnDatagram(Chunk(reply.seq_base, 1), Ep(9), now_ += 1000, out_);
  EXPECT_EQ(d_->counters().unknown_sender, 1u);
  EXPECT_TRUE(out_.ingress.empty());
  EXPECT_EQ(reducer_->counters().rx_packets, 0u);
  // Malformed management: counted, no reply.
  const std::vector<uint8_t> junk = {0xCA, 1, 2};
  out_.replies.clear();
  d_->OnDatagram(junk, Ep(1), now_ += 1000, out_);
  EXPECT_EQ(d_->counters().mgmt_malformed, 1u);
  EXPECT_TRUE(out_.replies.empty());
}

TEST_F(CaisDispatcherTest, InjectedLossIsCountedEachWay) {
  Make({.ingress_loss = 1.0});
  wire::MgmtMessage reply = Form(2);
  d_->OnDatagram(Chunk(reply.seq_base, 1), Ep(1), now_ += 1000, out_);
  EXPECT_EQ(d_->counters().injected_ingress_loss, 1u);
  EXPECT_EQ(reducer_->counters().rx_packets, 0u);
  Make({.egress_loss = 1.0});
  reply = Form(2);
  d_->OnDatagram(Chunk(reply.seq_base, 1), Ep(1), now_ += 1000, out_);
  d_->OnDatagram(Chunk(reply.seq_base, 1), Ep(2), now_ += 1000, out_);
  EXPECT_TRUE(out_.data.empty());
  EXPECT_EQ(d_->counters().injected_egress_loss, 2u);
}

// A group whose members fall silent for a lease is dissolved on a tick, and
// its ports are free again: their data is then from unknown senders.
TEST_F(CaisDispatcherTest, ALeaseThatRunsOutOnATickDissolvesTheGroup) {
  const wire::MgmtMessage reply = Form(2);
  ASSERT_NE(d_->groups().group(0), nullptr);
  d_->OnTick(now_ + kLease / 2, out_);
  EXPECT_NE(d_->groups().group(0), nullptr);
  d_->OnTick(now_ + 2 * kLease, out_);
  EXPECT_EQ(d_->groups().group(0), nullptr);
  EXPECT_EQ(d_->groups().leases_expired(), 1u);
  d_->OnDatagram(Chunk(reply.seq_base, 1), Ep(1), now_ + 2 * kLease + 1, out_);
  EXPECT_EQ(d_->counters().unknown_sender, 1u);
}

// Data renews its senders' leases: a group that keeps sending outlives the
// lease counted from its JOINs.
TEST_F(CaisDispatcherTest, DataKeepsTheGroupsLease) {
  const wire::MgmtMessage reply = Form(2);
  const dp::TimeNs late = now_ + kLease * 3 / 4;
  d_->OnDatagram(Chunk(reply.seq_base, 1), Ep(1), late, out_);
  d_->OnDatagram(Chunk(reply.seq_base, 1), Ep(2), late, out_);
  d_->OnTick(now_ + kLease + kLease / 2, out_);
  EXPECT_NE(d_->groups().group(0), nullptr);
  d_->OnTick(late + 2 * kLease, out_);
  EXPECT_EQ(d_->groups().group(0), nullptr);
}

// A chunk one rank never sends times out on a tick, without traffic: the
// reducer's hand-back reaches the rank that did send.
TEST_F(CaisDispatcherTest, ATickTimesOutAChunkWithoutTraffic) {
  const wire::MgmtMessage reply = Form(2);
  d_->OnDatagram(Chunk(reply.seq_base, 1), Ep(1), now_ += 1000, out_);
  EXPECT_TRUE(out_.data.empty());
  d_->Advance(now_ + cais::CaisConfig{}.timeout_ns + 1, out_);
  EXPECT_FALSE(out_.data.empty());
}

}  // namespace
}  // namespace inca::switchd
