#include "inca/sim/simulator.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace inca::sim {
namespace {

TEST(SimulatorTest, EventsRunInTimeThenInsertionOrder) {
  Simulator sim;
  std::vector<std::string> log;
  sim.Schedule(20, [&] { log.push_back("b@20"); });
  sim.Schedule(10, [&] { log.push_back("a@10"); });
  sim.Schedule(20, [&] { log.push_back("c@20"); });
  sim.Schedule(10, [&] {
    log.push_back("d@10");
    sim.Schedule(10, [&] { log.push_back("e@10 (scheduled at 10)"); });
    sim.ScheduleIn(0, [&] { log.push_back("f@10"); });
  });
  EXPECT_EQ(sim.RunUntil(15), 4u);
  EXPECT_EQ(sim.now(), 15);
  EXPECT_EQ(sim.RunUntil(100), 2u);
  EXPECT_EQ(log, (std::vector<std::string>{"a@10", "d@10", "e@10 (scheduled at 10)", "f@10", "b@20",
                                           "c@20"}));
  EXPECT_EQ(sim.events_run(), 6u);
  EXPECT_EQ(sim.now(), 100);
}

TEST(SimulatorTest, PastTimesRunNowNotBackwards) {
  Simulator sim;
  sim.RunUntil(50);
  TimeNs seen = -1;
  sim.Schedule(10, [&] { seen = sim.now(); });
  sim.RunUntil(60);
  EXPECT_EQ(seen, 50);
}

// Issue 46: a run never goes past its event budget; what is left stays
// queued, and the clock stays at the last event run.
TEST(SimulatorTest, TheEventBudgetIsNeverExceeded) {
  Simulator sim;
  int ran = 0;
  for (int i = 0; i < 10; ++i) sim.Schedule(10 * (i + 1), [&] { ++ran; });
  sim.set_event_budget(4);
  EXPECT_FALSE(sim.budget_spent());
  EXPECT_EQ(sim.RunUntil(1000), 4u);
  EXPECT_EQ(ran, 4);
  EXPECT_TRUE(sim.budget_spent());
  EXPECT_EQ(sim.now(), 40);
  EXPECT_EQ(sim.RunUntil(1000), 0u);  // spent: nothing more
  EXPECT_EQ(sim.pending(), 6u);
  sim.set_event_budget(UINT64_MAX);
  EXPECT_EQ(sim.RunUntil(1000), 6u);
}

// Records what arrives, and when.
class Sink final : public Node {
 public:
  explicit Sink(std::string n) : Node(std::move(n)) {}
  void Receive(dp::PortId port, Packet p) override { got.push_back({sim().now(), port, p.size()}); }
  void SendNow(dp::PortId port, size_t bytes, uint32_t extra_wire_bytes = 0) {
    Send(port, Packet(bytes, 0), extra_wire_bytes);
  }
  struct Arrival {
    TimeNs t;
    dp::PortId port;
    size_t bytes;
  };
  std::vector<Arrival> got;
};

// Two sinks a and b on one network.
class TwoSinks : public ::testing::Test {
 protected:
  Simulator sim;
  Network net{&sim};
  Sink* a = net.Add(std::make_unique<Sink>("a"));
  Sink* b = net.Add(std::make_unique<Sink>("b"));
};
class NetworkTest : public TwoSinks {};

TEST_F(NetworkTest, PacketsOnTheWireDoNotCountAgainstTheQueue) {
  // 1 Gbit/s with 1 ms of propagation, a queue of 2: packets sent one
  // serialisation apart never wait, however many are on the wire.
  LinkConfig lc{1e9, 1'000'000, 9000, 34, 2};
  auto [pa, pb] = net.Connect(a, b, lc);
  (void)pb;
  for (int i = 0; i < 50; ++i) {
    sim.Schedule(i * 8000, [a = a, pa = pa] { a->SendNow(pa, 966); });
  }
  sim.RunUntil(10'000'000);
  EXPECT_EQ(b->got.size(), 50u);
  EXPECT_EQ(net.link(a, pa)->dropped_queue, 0u);
}

TEST(NetworkSeedTest, LossIsDrawnFromTheSeedAndCounted) {
  auto run = [](uint64_t seed) {
    Simulator sim;
    Network net(&sim, seed);
    auto* a = net.Add(std::make_unique<Sink>("a"));
    auto* b = net.Add(std::make_unique<Sink>("b"));
    LinkConfig lc{0, 1000, 9000, 34, 4};
    lc.loss = 0.1;
    auto [pa, pb] = net.Connect(a, b, lc);
    (void)pb;
    for (int i = 0; i < 2000; ++i) a->SendNow(pa, 100);
    sim.RunUntil(1'000'000);
    const LinkCounters& c = *net.link(a, pa);
    EXPECT_EQ(c.delivered + c.dropped_loss, 2000u);
    EXPECT_EQ(b->got.size(), c.delivered);
    return c.dropped_loss;
  };
  const uint64_t lost = run(1);
  EXPECT_GT(lost, 150u);  // 10 % of 2,000, within a wide margin
  EXPECT_LT(lost, 250u);
  EXPECT_EQ(run(1), lost);  // the same seed, the same losses
}

TEST_F(NetworkTest, LinksSerialiseAtTheirRateThenAddTheirDelay) {
  // 1 Gbit/s, 1 us, 34 bytes of framing: a 966-byte packet takes 8 us.
  LinkConfig lc{1e9, 1000, 9000, 34, 4};
  auto [pa, pb] = net.Connect(a, b, lc);
  EXPECT_EQ(pa, 0);
  EXPECT_EQ(pb, 0);
  for (int i = 0; i < 6; ++i) a->SendNow(pa, 966);  // queue bound 4: two dropped
  sim.RunUntil(1'000'000);
  ASSERT_EQ(b->got.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(b->got[i].t, static_cast<TimeNs>(8000 * (i + 1) + 1000));
  const LinkCounters& c = *net.link(a, pa);
  EXPECT_EQ(c.sent, 6u);
  EXPECT_EQ(c.delivered, 4u);
  EXPECT_EQ(c.dropped_queue, 2u);
  // Over the MTU: dropped and counted; the other direction is independent.
  b->SendNow(pb, 9001);
  b->SendNow(pb, 100);
  sim.RunUntil(2'000'000);
  EXPECT_EQ(net.link(b, pb)->dropped_mtu, 1u);
  ASSERT_EQ(a->got.size(), 1u);
  EXPECT_EQ(a->got[0].bytes, 100u);
}

TEST_F(NetworkTest, InfiniteRateLinksOnlyDelay) {
  net.Connect(a, b, LinkConfig{0, 500, 9000, 0, 1});
  for (int i = 0; i < 3; ++i) a->SendNow(0, 8000);
  sim.RunUntil(10'000);
  ASSERT_EQ(b->got.size(), 3u);
  for (const auto& g : b->got) EXPECT_EQ(g.t, 500);
}

// A zero-delay, infinitely fast link: only the hosts' CPUs take time.
const LinkConfig kInstant{0, 0, 9000, 0, 1024};

// Two nodes, a and b, on a fresh network.
class HostTest : public TwoSinks {};

TEST_F(HostTest, SendCostPacesPacketsInOrder) {
  net.Connect(a, b, kInstant);
  ASSERT_TRUE(net.SetHost(a, 0, HostCost{1000, 0, 1}).ok());
  for (size_t i = 0; i < 10; ++i) a->SendNow(0, 100 + i);  // sizes tell the order
  sim.RunUntil(100'000);
  ASSERT_EQ(b->got.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(b->got[i].t, static_cast<TimeNs>(1000 * (i + 1)));
    EXPECT_EQ(b->got[i].bytes, 100 + i);
  }
}

TEST_F(HostTest, SentPacketsReachTheQueueWhenTheCpuIsDone) {
  // 8 us a packet on the wire, a queue of 1: sent together, four of five
  // would be dropped; a CPU 10 us a packet spaces them so that none is.
  net.Connect(a, b, LinkConfig{1e9, 1000, 9000, 34, 1});
  ASSERT_TRUE(net.SetHost(a, 0, HostCost{10'000, 0, 1}).ok());
  for (int i = 0; i < 5; ++i) a->SendNow(0, 966);
  a->SendNow(0, 9001);  // over the MTU: still costs the CPU, then dropped and counted
  sim.RunUntil(1'000'000);
  ASSERT_EQ(b->got.size(), 5u);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(b->got[i].t, static_cast<TimeNs>(10'000 * (i + 1) + 9000));
  const LinkCounters& c = *net.link(a, 0);
  EXPECT_EQ(c.sent, 6u);
  EXPECT_EQ(c.dropped_queue, 0u);
  EXPECT_EQ(c.dropped_mtu, 1u);
  EXPECT_EQ(net.host(0)->sent, 6u);
  EXPECT_EQ(net.host(0)->busy_ns, 60'000);
}

TEST_F(HostTest, ReceiveCostSpacesPacketsThatArriveTogether) {
  net.Connect(a, b, LinkConfig{0, 1000, 9000, 0, 1024});
  ASSERT_TRUE(net.SetHost(b, 3, HostCost{300, 0, 1}).ok());
  for (size_t i = 0; i < 5; ++i) a->SendNow(0, 100 + i);
  // All five are on b's side of the wire at 1000 ns, none received yet.
  sim.RunUntil(1000);
  EXPECT_EQ(net.link(a, 0)->delivered, 5u);
  EXPECT_EQ(net.link(a, 1), nullptr);  // a has one port
  EXPECT_EQ(net.link(nullptr, 0), nullptr);
  EXPECT_TRUE(b->got.empty());
  sim.RunUntil(100'000);
  ASSERT_EQ(b->got.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(b->got[i].t, static_cast<TimeNs>(1000 + 300 * (i + 1)));
    EXPECT_EQ(b->got[i].bytes, 100 + i);
  }
}

TEST(HostSharingTest, NodesOfOneHostShareItsCores) {
  for (int cores : {1, 2}) {
    SCOPED_TRACE(cores);
    Simulator sim;
    Network net(&sim);
    auto* a = net.Add(std::make_unique<Sink>("a"));
    auto* b = net.Add(std::make_unique<Sink>("b"));
    auto* c = net.Add(std::make_unique<Sink>("c"));
    auto [pa, pca] = net.Connect(a, c, kInstant);
    auto [pb, pcb] = net.Connect(b, c, kInstant);
    ASSERT_TRUE(net.SetHost(a, 7, HostCost{5, 0, 1}).ok());
    ASSERT_TRUE(
        net.SetHost(b, 7, HostCost{1000, 0, cores}).ok());  // the last cost for host 7 is a's too
    for (int i = 0; i < 5; ++i) {
      a->SendNow(pa, 10 + i);
      b->SendNow(pb, 20 + i);
    }
    sim.RunUntil(100'000);
    ASSERT_EQ(c->got.size(), 10u);
    for (size_t k = 0; k < 10; ++k) {
      // One core: one packet every 1000 ns; two: two at a time. Either way
      // in the order they were sent.
      const size_t slot = cores == 1 ? k + 1 : k / 2 + 1;
      EXPECT_EQ(c->got[k].t, static_cast<TimeNs>(1000 * slot));
      EXPECT_EQ(c->got[k].port, k % 2 == 0 ? pca : pcb);
      EXPECT_EQ(c->got[k].bytes, (k % 2 == 0 ? 10 : 20) + k / 2);
    }
  }
}

TEST_F(HostTest, CoresWorkInParallelButReleaseInOrder) {
  net.Connect(a, b, kInstant);
  ASSERT_TRUE(net.SetHost(a, 0, HostCost{0, 1000, 2}).ok());  // 1 ns a byte
  a->SendNow(0, 3000);                                        // core 0: 0..3000
  a->SendNow(0, 1000);                                        // core 1: 0..1000, held until 3000
  a->SendNow(0, 500);                                         // core 1: 1000..1500, held until 3000
  a->SendNow(0, 2000);                                        // core 1: 1500..3500
  sim.RunUntil(100'000);
  ASSERT_EQ(b->got.size(), 4u);
  const std::vector<std::pair<TimeNs, size_t>> want{
      {3000, 3000}, {3000, 1000}, {3000, 500}, {3500, 2000}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(b->got[i].t, want[i].first);
    EXPECT_EQ(b->got[i].bytes, want[i].second);
  }
}

TEST_F(HostTest, PayloadBytesCostByteTimesInPicoseconds) {
  auto* c = net.Add(std::make_unique<Sink>("c"));
  auto [pab, pba] = net.Connect(a, b, kInstant);
  auto [pac, pca] = net.Connect(a, c, kInstant);
  (void)pba;
  (void)pca;
  ASSERT_TRUE(net.SetHost(a, 0, HostCost{200, 500, 1}).ok());
  a->SendNow(pab, 1000);     // 200 + 1000 × 0.5 = 700 ns
  a->SendNow(pab, 10, 990);  // a timing-mode packet standing for 1000 bytes: 700 more
  sim.RunUntil(10'000);
  ASSERT_EQ(b->got.size(), 2u);
  EXPECT_EQ(b->got[0].t, 700);
  EXPECT_EQ(b->got[1].t, 1400);
  // 0.3 ns a packet adds up in picoseconds: all three are done within 1 ns.
  ASSERT_TRUE(net.SetHost(a, 0, HostCost{0, 300, 1}).ok());
  for (int i = 0; i < 3; ++i) a->SendNow(pac, 1);
  sim.RunUntil(20'000);
  ASSERT_EQ(c->got.size(), 3u);
  for (const auto& g : c->got) EXPECT_EQ(g.t, 10'001);
}

TEST(HostSharingTest, ZeroCostHostsChangeNothing) {
  // Serialisation, a bounded queue, loss and replies: the same times and
  // the same number of events with zero-cost hosts as with none.
  auto run = [](bool hosts) {
    Simulator sim;
    Network net(&sim, 5);
    auto* a = net.Add(std::make_unique<Sink>("a"));
    auto* b = net.Add(std::make_unique<Sink>("b"));
    LinkConfig lc{1e9, 1000, 9000, 34, 4};
    lc.loss = 0.2;
    net.Connect(a, b, lc);
    if (hosts) {
      EXPECT_TRUE(net.SetHost(a, 0, HostCost{0, 0, 1}).ok());
      EXPECT_TRUE(net.SetHost(b, 0, HostCost{0, 0, 3}).ok());
    }
    for (int i = 0; i < 100; ++i) {
      sim.Schedule(i * 3000, [a] { a->SendNow(0, 966); });
      sim.Schedule(i * 5000, [b] { b->SendNow(0, 466, 500); });
    }
    sim.RunUntil(10'000'000);
    std::vector<TimeNs> times;
    for (const auto& g : b->got) times.push_back(g.t);
    for (const auto& g : a->got) times.push_back(-g.t);
    if (hosts) {
      EXPECT_EQ(net.host(0)->sent, 200u);
      EXPECT_EQ(net.host(0)->received, a->got.size() + b->got.size());
      EXPECT_EQ(net.host(0)->busy_ns, 0);
    }
    return std::make_pair(times, sim.events_run());
  };
  const auto none = run(false);
  EXPECT_GT(none.first.size(), 50u);
  EXPECT_EQ(run(true), none);
}

// A packet sent out of a port the node does not have is dropped and
// counted, never an exception.
TEST_F(NetworkTest, APacketToAPortThatDoesNotExistIsCountedAndDropped) {
  auto [pa, pb] = net.Connect(a, b, kInstant);
  a->SendNow(static_cast<dp::PortId>(pa + 1), 10);
  a->SendNow(pa, 10);
  sim.RunUntil(1'000'000);
  EXPECT_EQ(net.unrouted(), 1u);
  EXPECT_EQ(b->got.size(), 1u);
  (void)pb;
}

TEST_F(HostTest, InvalidArgumentsAreRefusedWithAStatus) {
  EXPECT_EQ(net.SetHost(a, -1, HostCost{}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(net.SetHost(a, 0, HostCost{0, 0, 0}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(net.SetHost(a, 0, HostCost{-1, 0, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(net.SetHost(a, 0, HostCost{0, -0.5, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(net.SetHost(nullptr, 0, HostCost{}).code(), absl::StatusCode::kInvalidArgument);
  Simulator sim2;
  Network other(&sim2);
  auto* stranger = other.Add(std::make_unique<Sink>("x"));
  EXPECT_EQ(net.SetHost(stranger, 0, HostCost{}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(net.host(0), nullptr);  // the rejected calls made no host
  ASSERT_TRUE(net.SetHost(a, 0, HostCost{}).ok());
  EXPECT_EQ(net.host(0)->sent, 0u);
  EXPECT_EQ(net.host(1), nullptr);
}

TEST_F(HostTest, CountersCountPacketsAndWork) {
  net.Connect(a, b, kInstant);
  ASSERT_TRUE(net.SetHost(a, 1, HostCost{100, 10, 1}).ok());  // 100 + 100 × 0.01 = 101 ns a packet
  ASSERT_TRUE(net.SetHost(b, 2, HostCost{50, 0, 1}).ok());
  for (int i = 0; i < 3; ++i) a->SendNow(0, 100);
  b->SendNow(0, 100);
  sim.RunUntil(10'000);
  EXPECT_EQ(b->got.size(), 3u);
  EXPECT_EQ(a->got.size(), 1u);
  const HostCounters& h1 = *net.host(1);
  EXPECT_EQ(h1.sent, 3u);
  EXPECT_EQ(h1.received, 1u);
  EXPECT_EQ(h1.busy_ns, 4 * 101);
  const HostCounters& h2 = *net.host(2);
  EXPECT_EQ(h2.sent, 1u);
  EXPECT_EQ(h2.received, 3u);
  EXPECT_EQ(h2.busy_ns, 4 * 50);
}

}  // namespace
}  // namespace inca::sim
