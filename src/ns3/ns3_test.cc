// inca's cores inside ns-3 against inca-sim (docs/ns3.md): the same counts
// on the constant-rate star, the same AoM on the OLAF paper's scenario (a).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "inca/ns3/cais_ns3.h"
#include "inca/ns3/olaf_ns3.h"
#include "inca/sim/cais_scenario.h"
#include "inca/sim/cbr_star.h"
#include "inca/sim/olaf_scenario.h"
#include "util/file.h"

namespace inca {
namespace {

sim::CbrStarConfig Star(sim::CbrSwitch sw) {
  sim::CbrStarConfig c;
  c.sw = sw;
  c.payload = 8972;  // one OLAF update per datagram
  c.duration_s = 0.1;
  return c;
}

void ExpectSameCounts(sim::CbrSwitch sw) {
  const sim::CbrStarConfig c = Star(sw);
  auto a = sim::RunCbrStar(c);
  auto b = RunCbrStarOnNs3(c);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->offered, a->offered);
  EXPECT_EQ(b->delivered, a->delivered);
  EXPECT_EQ(b->dropped, a->dropped);
  EXPECT_EQ(b->merged, a->merged);
  // 9 x 6 Gbit/s into 40: a quarter of the offered cannot be carried.
  EXPECT_GT(b->dropped + b->merged, b->offered / 5);
  EXPECT_EQ(b->offered, b->delivered + b->dropped + b->merged);
}

TEST(Ns3CbrStar, Inca_sFifoQueueGivesTheSameCountsOnNs3AsInIncaSim) {
  ExpectSameCounts(sim::CbrSwitch::kFifo);
}

TEST(Ns3CbrStar, Inca_sOlafQueueGivesTheSameCountsOnNs3AsInIncaSim) {
  ExpectSameCounts(sim::CbrSwitch::kOlaf);
}

sim::OlafScenario ScenarioA() {
  const auto text = util::ReadSmallFile(INCA_SOURCE_DIR "/scenarios/olaf/a-star.yaml",
                                        util::kMaxConfigFileBytes, "scenario");
  EXPECT_TRUE(text.ok()) << text.status();
  auto s = sim::ParseOlafScenario(*text, "a-star.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

void ExpectSameAgeOfModel(const sim::OlafScenario& s) {
  auto a = sim::RunOlafScenario(s);
  auto b = RunOlafScenarioOnNs3(s);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->clusters.size(), a->clusters.size());
  EXPECT_NEAR(b->mean_aom_ms / a->mean_aom_ms, 1.0, 0.02)
      << "ns-3 " << b->mean_aom_ms << " ms, inca-sim " << a->mean_aom_ms << " ms";
  uint64_t received_a = 0, received_b = 0;
  for (size_t c = 0; c < a->clusters.size(); ++c) {
    received_a += a->clusters[c].received;
    received_b += b->clusters[c].received;
    EXPECT_GT(b->clusters[c].received, 0u);
  }
  EXPECT_NEAR(static_cast<double>(received_b) / static_cast<double>(received_a), 1.0, 0.02);
}

TEST(Ns3Olaf, ScenarioAHasTheSameAgeOfModelOnNs3AsInIncaSim) {
  ExpectSameAgeOfModel(ScenarioA());
}

// Where queueing sets the age: FIFO at 2 Gbit/s holds updates for tens of
// ms (the AoM rises from 50 to about 73 ms), and both simulators agree.
TEST(Ns3Olaf, ACongestedFifoHasTheSameAgeOfModelOnNs3AsInIncaSim) {
  sim::OlafScenario s = ScenarioA();
  s.policy = olaf::QueuePolicy::kFifo;
  s.egress_gbps = 2;
  auto a = sim::RunOlafScenario(s);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_GT(a->mean_aom_ms, 60);  // queueing, not the period, sets it
  ExpectSameAgeOfModel(s);
}

TEST(Ns3Olaf, AScenarioTheAdapterDoesNotModelIsAOneLineError) {
  sim::OlafScenario s = ScenarioA();
  s.models = true;
  auto r = RunOlafScenarioOnNs3(s);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), testing::HasSubstr("models is not modelled on ns-3"));
}

// CaisRankApp and CaisSwitchApp: every rank JOINs and holds the exact sums,
// in the time inca-sim gives the same star (ns-3's framing on both).
TEST(Ns3Cais, AnAllReduceOnNs3IsExactAndTakesInca_SimsTime) {
  CaisNs3Config c;
  c.hosts = 6;
  c.link_gbps = 10;
  c.bytes = uint64_t{2} << 20;
  auto b = RunCaisAllReduceOnNs3(c);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->exact);
  EXPECT_EQ(b->completed, c.hosts);
  sim::CaisSimScenario s;
  s.backends = {"inca"};
  s.hosts = c.hosts;
  s.link_gbps = c.link_gbps;
  s.overhead_bytes = 30;
  s.sizes = {c.bytes};
  s.ops = 1;
  auto a = sim::RunCaisSimScenario(s);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->rows.size(), 1u);
  EXPECT_NEAR(b->time_ms / (a->rows[0].mean_us / 1e3), 1.0, 0.02);
}

TEST(Ns3Cais, AConfigurationOutOfRangeIsAOneLineError) {
  CaisNs3Config c;
  c.chunk_size = 10;
  auto r = RunCaisAllReduceOnNs3(c);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), testing::HasSubstr("chunk_size must be a multiple of 4"));
}

TEST(Ns3CbrStarDeathTest, AQueueDiscConfigurationTheProgramRefusesStopsWithItsReason) {
  sim::CbrStarConfig c = Star(sim::CbrSwitch::kOlaf);
  c.queue = 100000;  // beyond the program's 65,536 entries
  EXPECT_DEATH(RunCbrStarOnNs3(c).IgnoreError(), "inca::OlafQueueDisc: depth 100000 must be in");
}

}  // namespace
}  // namespace inca
