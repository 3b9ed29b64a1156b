// The tail probe (docs/design/cais-client.md, "Tail probe") on one OpCore,
// packet by packet, with no network: what it sends after a quiet spell and
// what it does with the switch's PENDING answers. The core on a simulated
// star is transport_core_test.cc.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "client/transport_core.h"

namespace inca::client {
namespace {

// The tail probe on one rank, packet by packet: after a quiet spell it asks
// (20-byte result requests for the oldest and newest overdue chunk) rather
// than resending; "held" answers resend nothing (a slower rank is late) and
// the probes back off, and a "not held" answer resends the overdue chunks.
TEST(TailProbeTest, AsksTheSwitchAndResendsOnlyWhatItLacks) {
  struct Capture final : DatagramSink {
    std::vector<std::pair<wire::CaisHeader, size_t>> sent;
    void Send(const wire::CaisHeader& h, std::span<const uint8_t> payload) override {
      sent.emplace_back(h, payload.size());
    }
  };
  TransportConfig c;
  c.world_size = 2;
  c.initial_window = 4;
  c.max_window = 4;
  GroupLayout layout{0, {0, 1}, {0, 1}};
  std::vector<float> data(8 * (8952 / 4), 1.0f);  // 8 chunks
  SwitchOp op;
  op.data = reinterpret_cast<uint8_t*>(data.data());
  op.count = data.size();
  op.seq = 7;
  PathState path(c);
  path.OnRtt(200'000, 0, 0);  // srtt 200 us: probe after 400 us, RTO 5 ms
  SwitchPhaseResult r;
  OpCore core(c, layout, op, &path, &r);
  auto answer = [&](uint16_t chunk, uint8_t flags, uint8_t block) {
    wire::CaisHeader h;
    h.chunk_id = chunk;
    h.total_chunks = 8;
    h.seq_num = 7;
    h.flags = flags;
    h.block = block;
    h.payload_len = 0;
    std::vector<uint8_t> d(wire::kCaisHeaderBytes);
    wire::SerializeCaisHeader(h, d);
    return d;
  };
  Capture out;
  core.Start(1'000'000);
  core.Pump(1'000'000, out);
  ASSERT_EQ(out.sent.size(), 4u);  // the window: chunks 0-3
  out.sent.clear();
  // Quiet past the probe timeout: two requests, no data.
  const int64_t probe_at = core.NextDeadline();
  EXPECT_LT(probe_at, 1'000'000 + 1'000'000);
  core.Pump(probe_at, out);
  ASSERT_EQ(out.sent.size(), 2u);
  for (const auto& [h, len] : out.sent) {
    EXPECT_EQ(len, 0u);
    EXPECT_TRUE(h.has_flag(wire::cais_flags::kRetransmit));
  }
  EXPECT_EQ(out.sent[0].first.chunk_id, 0);
  EXPECT_EQ(out.sent[1].first.chunk_id, 3);
  EXPECT_EQ(r.tail_probes, 1u);
  out.sent.clear();
  // Both held: the other rank is late. However late (here over 20 ms, four
  // RTOs), nothing is resent: each answer "held" restarts the timer, and the
  // next probe comes later each time, under half the RTO (issue 46).
  const uint8_t pending = wire::cais_flags::kResult | wire::cais_flags::kPending;
  int64_t now = probe_at + 50'000;
  int64_t asked = probe_at;
  std::vector<int64_t> gaps;
  for (int round = 0; round < 12; ++round) {
    core.OnDatagram(answer(0, pending, 1), now);
    core.OnDatagram(answer(3, pending, 1), now);
    core.Pump(now, out);
    EXPECT_TRUE(out.sent.empty());
    now = core.NextDeadline();
    core.Pump(now, out);
    ASSERT_EQ(out.sent.size(), 2u) << "round " << round;  // the next probe, not data
    for (const auto& [h, len] : out.sent) EXPECT_EQ(len, 0u);
    out.sent.clear();
    gaps.push_back(now - asked);
    asked = now;
    now += 50'000;
  }
  EXPECT_EQ(r.retransmitted, 0u);
  EXPECT_GT(now, probe_at + 20'000'000);
  EXPECT_GT(gaps[2], gaps[0]);  // backing off
  for (int64_t g : gaps) EXPECT_LE(g, 50'000 + 5'000'000 / 2);
  // Progress (chunk 1 completes), then another quiet spell whose answer is
  // "not held": every overdue chunk not yet resent goes again.
  std::vector<uint8_t> result(wire::kCaisHeaderBytes + 8952);
  wire::CaisHeader rh;
  rh.chunk_id = 1;
  rh.total_chunks = 8;
  rh.seq_num = 7;
  rh.flags = wire::cais_flags::kResult;
  rh.payload_len = 8952;
  wire::SerializeCaisHeader(rh, result);
  const int64_t t = now + 100'000;
  core.OnDatagram(result, t);
  core.Pump(t, out);
  ASSERT_EQ(out.sent.size(), 1u);  // chunk 4 fills the window
  out.sent.clear();
  const int64_t again = core.NextDeadline();
  core.Pump(again, out);
  ASSERT_EQ(out.sent.size(), 2u);  // requests for the oldest and newest overdue
  EXPECT_EQ(out.sent[0].first.chunk_id, 0);
  EXPECT_EQ(out.sent[1].first.chunk_id, 4);
  out.sent.clear();
  core.OnDatagram(answer(0, pending, 0), again + 50'000);
  core.Pump(again + 50'000, out);
  std::vector<uint16_t> resent;
  for (const auto& [h, len] : out.sent) {
    EXPECT_EQ(len, 8952u);
    resent.push_back(h.chunk_id);
  }
  EXPECT_EQ(resent, (std::vector<uint16_t>{0, 2, 3, 4}));
  EXPECT_EQ(r.retransmitted, 4u);
}

}  // namespace
}  // namespace inca::client
