#include "inca/sim/simulator.h"

#include <gtest/gtest.h>

#include <string>
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

// Records what arrives, and when.
class Sink final : public Node {
 public:
  explicit Sink(std::string n) : Node(std::move(n)) {}
  void Receive(dp::PortId port, Packet p) override { got.push_back({sim().now(), port, p.size()}); }
  void SendNow(dp::PortId port, size_t bytes) { Send(port, Packet(bytes, 0)); }
  struct Arrival {
    TimeNs t;
    dp::PortId port;
    size_t bytes;
  };
  std::vector<Arrival> got;
};

TEST(NetworkTest, PacketsOnTheWireDoNotCountAgainstTheQueue) {
  Simulator sim;
  Network net(&sim);
  auto* a = net.Add(std::make_unique<Sink>("a"));
  auto* b = net.Add(std::make_unique<Sink>("b"));
  // 1 Gbit/s with 1 ms of propagation, a queue of 2: packets sent one
  // serialisation apart never wait, however many are on the wire.
  LinkConfig lc{1e9, 1'000'000, 9000, 34, 2};
  auto [pa, pb] = net.Connect(a, b, lc);
  (void)pb;
  for (int i = 0; i < 50; ++i) {
    sim.Schedule(i * 8000, [a, pa = pa] { a->SendNow(pa, 966); });
  }
  sim.RunUntil(10'000'000);
  EXPECT_EQ(b->got.size(), 50u);
  EXPECT_EQ(net.link(a, pa).dropped_queue, 0u);
}

TEST(NetworkTest, LossIsDrawnFromTheSeedAndCounted) {
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
    const LinkCounters& c = net.link(a, pa);
    EXPECT_EQ(c.delivered + c.dropped_loss, 2000u);
    EXPECT_EQ(b->got.size(), c.delivered);
    return c.dropped_loss;
  };
  const uint64_t lost = run(1);
  EXPECT_GT(lost, 150u);  // 10 % of 2,000, within a wide margin
  EXPECT_LT(lost, 250u);
  EXPECT_EQ(run(1), lost);  // the same seed, the same losses
}

TEST(NetworkTest, LinksSerialiseAtTheirRateThenAddTheirDelay) {
  Simulator sim;
  Network net(&sim);
  auto* a = net.Add(std::make_unique<Sink>("a"));
  auto* b = net.Add(std::make_unique<Sink>("b"));
  // 1 Gbit/s, 1 us, 34 bytes of framing: a 966-byte packet takes 8 us.
  LinkConfig lc{1e9, 1000, 9000, 34, 4};
  auto [pa, pb] = net.Connect(a, b, lc);
  EXPECT_EQ(pa, 0);
  EXPECT_EQ(pb, 0);
  for (int i = 0; i < 6; ++i) a->SendNow(pa, 966);  // queue bound 4: two dropped
  sim.RunUntil(1'000'000);
  ASSERT_EQ(b->got.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(b->got[i].t, static_cast<TimeNs>(8000 * (i + 1) + 1000));
  const LinkCounters& c = net.link(a, pa);
  EXPECT_EQ(c.sent, 6u);
  EXPECT_EQ(c.delivered, 4u);
  EXPECT_EQ(c.dropped_queue, 2u);
  // Over the MTU: dropped and counted; the other direction is independent.
  b->SendNow(pb, 9001);
  b->SendNow(pb, 100);
  sim.RunUntil(2'000'000);
  EXPECT_EQ(net.link(b, pb).dropped_mtu, 1u);
  ASSERT_EQ(a->got.size(), 1u);
  EXPECT_EQ(a->got[0].bytes, 100u);
}

TEST(NetworkTest, InfiniteRateLinksOnlyDelay) {
  Simulator sim;
  Network net(&sim);
  auto* a = net.Add(std::make_unique<Sink>("a"));
  auto* b = net.Add(std::make_unique<Sink>("b"));
  net.Connect(a, b, LinkConfig{0, 500, 9000, 0, 1});
  for (int i = 0; i < 3; ++i) a->SendNow(0, 8000);
  sim.RunUntil(10'000);
  ASSERT_EQ(b->got.size(), 3u);
  for (const auto& g : b->got) EXPECT_EQ(g.t, 500);
}

}  // namespace
}  // namespace inca::sim
