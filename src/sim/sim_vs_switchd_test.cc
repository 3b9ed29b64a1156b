// The simulator's switch against the real one (issue 19): the datagrams the
// simulated ranks send, replayed in the same order from loopback sockets
// into a running SwitchServer (inca-switchd's program, joined as a real
// client joins), come back as the same datagrams, bit for bit, on every
// port, but for the one field that measures time (a RESULT's `block`: how
// long the port's contribution waited in the switch).
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "inca/sim/simulator.h"
#include "sim/cais_nodes.h"
#include "sim/golden_trace.h"
#include "switchd/switch_server_test_util.h"

namespace inca::sim {
namespace {

using switchd::server_test::Clock;
using switchd::server_test::Host;
using switchd::server_test::kDeadline;

struct Traced {
  std::vector<std::pair<dp::PortId, std::vector<uint8_t>>> ingress;
  std::map<dp::PortId, std::vector<std::vector<uint8_t>>> egress;
};

// An all-reduce of `count` f32 on `ranks` simulated hosts, through a
// switch with the real server's reducer settings; every packet it takes
// and emits.
Traced Simulate(const cais::CaisConfig& cc, int ranks, size_t count, double loss) {
  Simulator s;
  Network net(&s, /*seed=*/3);
  auto* sw = net.Add(*CaisSwitchNode::Create("switch", cc, ranks));
  Traced t;
  sw->set_trace([&t](bool ingress, dp::PortId port, std::span<const uint8_t> p) {
    std::vector<uint8_t> d(p.begin(), p.end());
    if (ingress) {
      t.ingress.emplace_back(port, std::move(d));
    } else {
      t.egress[port].push_back(std::move(d));
    }
  });
  client::TransportConfig tc;
  tc.world_size = ranks;
  tc.chunk_size = static_cast<uint32_t>(cc.max_payload_bytes);
  tc.max_window = 8;
  tc.initial_window = 4;
  tc.min_window = 2;
  int done = 0;
  std::vector<CaisRankNode*> nodes;
  std::vector<std::vector<float>> data(static_cast<size_t>(ranks), std::vector<float>(count));
  LinkConfig lc;
  lc.rate_bps = 10e9;
  lc.delay_ns = 2000;
  lc.loss = loss;
  for (int r = 0; r < ranks; ++r) {
    for (size_t i = 0; i < count; ++i)
      data[static_cast<size_t>(r)][i] = static_cast<float>(r + i % 5);
    nodes.push_back(net.Add(std::make_unique<CaisRankNode>("rank" + std::to_string(r), r, tc,
                                                           [&done](int) { ++done; })));
    net.Connect(nodes.back(), sw, lc);
  }
  net.Start();
  for (int r = 0; r < ranks; ++r)
    nodes[static_cast<size_t>(r)]->Begin(7, &data[static_cast<size_t>(r)]);
  s.RunUntil(TimeNs{10'000'000'000});
  EXPECT_EQ(done, ranks);
  return t;
}

// A copy with a RESULT's switch wait (byte 19) cleared.
std::vector<uint8_t> WithoutWait(std::vector<uint8_t> d) {
  wire::CaisPacketView v;
  if (wire::ParseCais(d, &v) == wire::CaisParseError::kOk &&
      v.header.has_flag(wire::cais_flags::kResult) && d.size() >= wire::kCaisHeaderBytes) {
    d[19] = 0;
  }
  return d;
}

class SimVsSwitchd : public switchd::server_test::SwitchServerTest,
                     public ::testing::WithParamInterface<double> {};

TEST_P(SimVsSwitchd, TheSameDatagramsComeBackBitForBit) {
  switchd::SwitchdConfig config = switchd::server_test::TestConfig();
  // Timers far longer than either run, so that neither switch's clock
  // decides anything: the replay's pace is not the simulation's.
  config.cais.timeout_ns = 60'000 * dp::kNsPerMs;
  config.cais.result_hold_ns = 60'000 * dp::kNsPerMs;
  constexpr int kRanks = 3;
  // 40 chunks of 1,024 bytes (the config's largest payload), the last short.
  const Traced sim = Simulate(config.cais, kRanks, 40 * 256 - 10, GetParam());
  ASSERT_FALSE(sim.ingress.empty());
  size_t resent = 0;
  for (const auto& [port, d] : sim.ingress) {
    wire::CaisPacketView v;
    resent += wire::ParseCais(d, &v) == wire::CaisParseError::kOk &&
              v.header.has_flag(wire::cais_flags::kRetransmit);
  }
  // With loss the replay carries resent chunks and result requests.
  EXPECT_EQ(resent > 0, GetParam() > 0) << resent;
  // What the simulation sent and got is what it was when recorded.
  TraceDigest digest;
  for (const auto& [port, d] : sim.ingress) digest.Add(port, d);
  for (const auto& [port, ds] : sim.egress) {
    for (const auto& d : ds) digest.Add(0x10000u + port, d);
  }
  ExpectGolden(GetParam() > 0 ? "sim_vs_switchd_loss5" : "sim_vs_switchd_loss0", digest.Hex());

  Start(config);
  Host h0, h1, h2;
  std::vector<Host*> hosts = {&h0, &h1, &h2};
  ASSERT_EQ(JoinAll(hosts, /*group=*/0).size(), 3u);
  // In the simulated order, from one thread: on loopback a datagram is in
  // the switch's receive queue when sendto returns, so the switch takes
  // them in that order whichever socket sent them.
  size_t n = 0;
  for (const auto& [port, d] : sim.ingress) {
    ASSERT_LT(port, kRanks);
    hosts[port]->Send(this->port(), d);
    ++n;
  }
  EXPECT_EQ(n, sim.ingress.size());
  for (int r = 0; r < kRanks; ++r) {
    const auto& want = sim.egress.at(static_cast<dp::PortId>(r));
    std::vector<std::vector<uint8_t>> got;
    const auto deadline = Clock::now() + kDeadline;
    while (got.size() < want.size()) {
      auto d = hosts[static_cast<size_t>(r)]->Recv(deadline);
      ASSERT_TRUE(d.has_value()) << "rank " << r << ": " << got.size() << " of " << want.size();
      got.push_back(WithoutWait(*d));
    }
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i], WithoutWait(want[i])) << "rank " << r << ", datagram " << i;
    }
  }
}

// Without loss, and with 5 % of the simulated packets lost (so the replay
// carries retransmissions and result requests, and the switch answers them).
INSTANTIATE_TEST_SUITE_P(Loss, SimVsSwitchd, ::testing::Values(0.0, 0.05));

}  // namespace
}  // namespace inca::sim
