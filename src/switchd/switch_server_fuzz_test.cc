// SwitchServer under hostile and lossy traffic: random and malformed datagrams,
// and the switch's own injected ingress/egress loss.
// Over real loopback UDP, as switch_server_test.cc.
#include <random>
#include <vector>

#include "switchd/switch_server_test_util.h"

namespace inca::switchd {
namespace {

using namespace ::inca::switchd::server_test;  // NOLINT(build/namespaces)

TEST_F(SwitchServerTest, SocketFuzzKeepsServingAndCountersAddUp) {
  Start();
  Host j0, j1, j2, u0, u1;
  std::vector<Host*> joined = {&j0, &j1, &j2};
  std::vector<Host*> all = {&j0, &j1, &j2, &u0, &u1};
  auto ok = JoinAll(joined, 0);
  ASSERT_EQ(ok.size(), 3u);

  std::mt19937_64 rng(20240601);
  auto uniform = [&](uint64_t n) { return rng() % n; };
  constexpr uint16_t kFreshLayer = 4242;  // never used by the fuzz below
  constexpr int kDatagrams = 4000;
  for (int i = 0; i < kDatagrams; ++i) {
    const size_t from = uniform(all.size());
    const bool from_member = from < joined.size();
    std::vector<uint8_t> d;
    switch (uniform(4)) {
      case 0: {  // random bytes (never management from members: a valid LEAVE would end the test)
        d.resize(uniform(600));
        for (auto& byte : d) byte = static_cast<uint8_t>(rng());
        if (!d.empty() && d[0] == wire::kMgmtMagic && from_member) d[0] = 0;
        break;
      }
      case 1: {  // a valid packet cut short
        CaisHeader h;
        h.group_id = 0;
        h.layer_id = static_cast<uint16_t>(uniform(8));
        h.seq_num = static_cast<uint32_t>(rng());
        h.payload_len = 4 * static_cast<uint32_t>(1 + uniform(64));
        std::vector<uint8_t> payload(h.payload_len, 0x3f);
        d = CaisPacket(h, payload);
        d.resize(uniform(d.size()));
        break;
      }
      case 2: {  // a well-formed header with hostile values
        CaisHeader h;
        h.op = static_cast<CaisOp>(uniform(5));  // 4 is unknown
        h.group_id = uniform(4) == 0 ? static_cast<uint8_t>(rng()) : 0;
        h.layer_id = static_cast<uint16_t>(uniform(3) == 0 ? rng() % 65535 : uniform(4));
        if (h.layer_id == kFreshLayer) h.layer_id = 0;
        h.total_chunks = static_cast<uint16_t>(uniform(3) == 0 ? 65535 : 1 + uniform(4));
        h.chunk_id = static_cast<uint16_t>(uniform(2) == 0 ? h.total_chunks - 1 - uniform(2)
                                                           : uniform(70000));
        h.seq_num = uniform(2) == 0 ? 0xFFFFFFFFu - static_cast<uint32_t>(uniform(3))
                                    : static_cast<uint32_t>(rng());
        h.reduce_op = static_cast<wire::ReduceOp>(uniform(5));
        h.dtype = static_cast<wire::DType>(uniform(5));
        const uint8_t flags[] = {0,
                                 wire::cais_flags::kResult,
                                 wire::cais_flags::kFallback,
                                 wire::cais_flags::kRetransmit,
                                 0x05,
                                 0xFF};
        h.flags = flags[uniform(std::size(flags))];
        h.block = static_cast<uint8_t>(rng());
        size_t payload = uniform(3) == 0 ? 0 : 2 * uniform(700);  // up to past max_payload_bytes
        h.payload_len =
            uniform(4) == 0 ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(payload);
        std::vector<uint8_t> bytes(payload);
        for (auto& byte : bytes) byte = static_cast<uint8_t>(rng());
        d = CaisPacket(h, bytes);
        break;
      }
      default: {
        if (from_member) {  // a clean contribution for a random chunk: fills slots, times out
          CaisHeader h;
          h.op = uniform(2) == 0 ? CaisOp::kAllReduce : static_cast<CaisOp>(uniform(4));
          h.group_id = 0;
          h.layer_id = static_cast<uint16_t>(uniform(4));
          h.seq_num = static_cast<uint32_t>(uniform(50));
          h.payload_len = 16;
          h.flags = uniform(3) == 0 ? wire::cais_flags::kRetransmit : 0;
          std::vector<uint8_t> payload(16, 0x40);
          d = CaisPacket(h, payload);
        } else {  // malformed (or valid) management from non-members
          MgmtMessage m =
              JoinMsg(static_cast<uint8_t>(uniform(4)), static_cast<uint16_t>(uniform(4)),
                      static_cast<uint16_t>(uniform(5)));
          m.type = static_cast<MgmtType>(1 + uniform(6));
          wire::SerializeMgmt(m, &d);
          switch (uniform(3)) {  // never valid: non-members must stay unknown
            case 0: d.resize(uniform(d.size())); break;
            case 1: d[1] = static_cast<uint8_t>(2 + uniform(250)); break;  // version
            default: d.push_back(0); break;                                // trailing byte
          }
        }
      }
    }
    all[from]->Send(port(), d);
    if (i % 50 == 49) Barrier(*all[from], port());  // pace, so the kernel loses nothing
  }

  // Time passes (no traffic): every fuzz chunk times out, every result ages out.
  const uint64_t sent = SentBy(all);
  ASSERT_TRUE(WaitFor(*server_,
                      [&](const counters::SwitchCounters& k) {
                        return k.datagrams_rx == sent && k.sram.pending_chunks == 0 &&
                               k.sram.retained_chunks == 0 && k.sram.cells_pending == 0 &&
                               k.sram.cells_retained == 0;
                      }))
      << server_->counters().ToJson() << " sent=" << sent;

  counters::SwitchCounters k = server_->counters();
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
  EXPECT_GT(k.unknown_sender, 0u);
  EXPECT_GT(k.mgmt_malformed, 0u);
  EXPECT_GT(k.reducer.dropped, 0u);
  EXPECT_GT(k.reducer.aggregated, 0u);
  EXPECT_GT(k.cais.timeouts, 0u);
  EXPECT_EQ(k.groups_formed, 1u);  // group 0 survived

  // The switch still reduces a fresh chunk correctly.
  for (Host* h : all) h->Drain();
  ReduceAndCheck(joined, 0, kFreshLayer, 1, {{1, -2, 3}, {4, 5, -6}, {0.5f, 0.25f, 0.125f}});

  ASSERT_TRUE(WaitFor(*server_, [](const counters::SwitchCounters& c) {
    return c.sram.pending_chunks == 0 && c.sram.retained_chunks == 0;
  }));
  k = server_->counters();
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
  ASSERT_TRUE(running_->Join().ok());
  // After Run returns the snapshot is final and still adds up.
  EXPECT_TRUE(server_->counters().Conserved());
}

TEST_F(SwitchServerTest, IngressLossOneDropsEveryDataDatagram) {
  SwitchdConfig c = TestConfig();
  c.ingress_loss = 1.0;
  Start(c);
  Host a;
  ASSERT_EQ(JoinAll({&a}, 2).size(), 1u);  // management is never dropped
  constexpr int kN = 200;
  for (int i = 0; i < kN; ++i) a.Send(port(), F32Packet(2, 0, static_cast<uint32_t>(i), {1}));
  ASSERT_TRUE(WaitFor(
      *server_, [&](const counters::SwitchCounters& k) { return k.datagrams_rx == a.sent(); }));
  counters::SwitchCounters k = server_->counters();
  EXPECT_EQ(k.injected_ingress_loss, static_cast<uint64_t>(kN));
  EXPECT_EQ(k.reducer.rx_packets, 0u);
  EXPECT_EQ(k.datagrams_tx, 0u);
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
  EXPECT_FALSE(a.Recv(Clock::now() + milliseconds(50)).has_value());
}

TEST_F(SwitchServerTest, EgressLossOneDropsEveryResult) {
  SwitchdConfig c = TestConfig();
  c.egress_loss = 1.0;
  Start(c);
  Host a;
  ASSERT_EQ(JoinAll({&a}, 2).size(), 1u);
  for (uint32_t i = 0; i < 10; ++i) a.Send(port(), F32Packet(2, 0, i, {1, 2}));
  ASSERT_TRUE(WaitFor(*server_, [](const counters::SwitchCounters& k) {
    return k.injected_egress_loss == 10;  // world 1: every contribution completes a chunk
  })) << server_->counters().ToJson();
  counters::SwitchCounters k = server_->counters();
  EXPECT_EQ(k.cais.completed_chunks, 10u);
  EXPECT_EQ(k.datagrams_tx, 0u);
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
}

TEST_F(SwitchServerTest, PartialLossIsSeededAndCounted) {
  SwitchdConfig c = TestConfig();
  c.ingress_loss = 0.5;
  c.loss_seed = 99;
  Start(c);
  Host a;
  ASSERT_EQ(JoinAll({&a}, 2).size(), 1u);
  constexpr uint64_t kN = 400;
  for (uint32_t i = 0; i < kN; ++i) a.Send(port(), F32Packet(2, 0, i, {1}));
  ASSERT_TRUE(WaitFor(
      *server_, [&](const counters::SwitchCounters& k) { return k.datagrams_rx == a.sent(); }));
  counters::SwitchCounters k = server_->counters();
  EXPECT_EQ(k.injected_ingress_loss + k.reducer.rx_packets, kN);
  EXPECT_GT(k.injected_ingress_loss, kN / 4);
  EXPECT_LT(k.injected_ingress_loss, 3 * kN / 4);
  EXPECT_TRUE(k.Conserved());
}

}  // namespace
}  // namespace inca::switchd
