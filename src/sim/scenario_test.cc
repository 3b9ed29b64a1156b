#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "inca/sim/olaf_scenario.h"

namespace inca::sim {
namespace {

using ::testing::HasSubstr;

constexpr char kSmall[] = R"(
name: small
seed: 3
duration_s: 2
warmup_s: 0.5
policy: fifo
queue_depth: 8
egress_gbps: 10
aligned_clusters: true
clusters:
  - {count: 9, workers: 8, period_ms: 20, jitter_us: 100}
)";

OlafScenario Small() {
  auto s = ParseOlafScenario(kSmall, "small");
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(OlafScenarioTest, IdenticalSeedsGiveIdenticalOutput) {
  const OlafScenario s = Small();
  auto a = RunOlafScenario(s), b = RunOlafScenario(s);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(ResultJson(*a), ResultJson(*b));
  EXPECT_EQ(SeriesCsv(*a), SeriesCsv(*b));
  OlafScenario other = s;
  other.seed = 4;
  auto c = RunOlafScenario(other);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(ResultJson(*a), ResultJson(*c));
}

TEST(OlafScenarioTest, OlafBeatsFifoWhenTheQueueIsTheBottleneck) {
  OlafScenario s = Small();
  auto fifo = RunOlafScenario(s);
  ASSERT_TRUE(ApplyOverride("policy=olaf", &s).ok());
  auto olaf = RunOlafScenario(s);
  ASSERT_TRUE(fifo.ok() && olaf.ok());
  EXPECT_GT(fifo->loss, 0.3);
  EXPECT_LT(olaf->loss, fifo->loss);
  EXPECT_LT(olaf->mean_aom_ms, fifo->mean_aom_ms);
  EXPECT_EQ(olaf->clusters.size(), 9u);
  EXPECT_GT(olaf->carried, olaf->received);  // merged updates carry several worker updates
  EXPECT_GT(olaf->series.size(), 150u);      // one sample per 10 ms
}

TEST(OlafScenarioTest, TreeTopologyRunsAndReportsEveryCluster) {
  auto s = ParseOlafScenario(R"(
topology: tree
duration_s: 1
warmup_s: 0.2
egress_gbps: 5
tree_ratio: 0.3
send_control: priority
clusters:
  - {count: 2, workers: 4, period_ms: 10, behind_sw2: true}
  - {count: 2, workers: 4, period_ms: 10}
)",
                             "tree");
  ASSERT_TRUE(s.ok()) << s.status();
  auto r = RunOlafScenario(*s);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->clusters.size(), 4u);
  for (const auto& c : r->clusters) EXPECT_GT(c.received, 0u) << c.cluster_id;
  EXPECT_GT(r->jain_aom, 0.0);
  EXPECT_LE(r->jain_aom, 1.0);
  ASSERT_FALSE(r->series.empty());
  EXPECT_EQ(r->series.back().queue.size(), 2u);  // both switches sampled
  // The PS acknowledges every UPDATE datagram it receives (28 bytes each);
  // these scenarios broadcast no model.
  const PsTraffic& t = r->ps_traffic;
  EXPECT_GT(t.update_datagrams, 0u);
  EXPECT_EQ(t.ack_datagrams, t.update_datagrams);
  EXPECT_EQ(t.ack_bytes, 28 * t.ack_datagrams);
  EXPECT_GT(t.update_bytes, 100 * t.ack_bytes);
  EXPECT_EQ(t.model_bytes, 0u);
  EXPECT_NE(ResultJson(*r).find("\"ps_traffic\":{\"update_datagrams\":"), std::string::npos);
}

TEST(OlafScenarioTest, BadScenariosNameTheKey) {
  auto e = [](const char* y) { return std::string(ParseOlafScenario(y, "t").status().message()); };
  EXPECT_THAT(e("policy: lifo\nclusters: [{count: 1}]"), HasSubstr("policy"));
  EXPECT_THAT(e("bogus: 1\nclusters: [{count: 1}]"), HasSubstr("bogus: unknown key"));
  EXPECT_THAT(e("clusters: [{count: 1, wrkers: 3}]"), HasSubstr("clusters[0].wrkers"));
  EXPECT_THAT(e("duration_s: -1\nclusters: [{count: 1}]"), HasSubstr("duration_s"));
  EXPECT_THAT(e("clusters: [{count: 1, behind_sw2: true}]"), HasSubstr("topology tree"));
  EXPECT_THAT(e("clusters: [{count: 1100}]"), HasSubstr("clusters per switch"));
  EXPECT_THAT(e("[1, 2]"), HasSubstr("not a map"));
  OlafScenario s = Small();
  EXPECT_FALSE(ApplyOverride("egress_gbps", &s).ok());
  EXPECT_FALSE(ApplyOverride("egress_gbps=fast", &s).ok());
  EXPECT_TRUE(ApplyOverride("egress_gbps=20", &s).ok());
  EXPECT_DOUBLE_EQ(s.egress_gbps, 20);
}

// Issue 46: every key that sets work has a range that bounds it (a period
// of 1e-6 ms was accepted and grew to gigabytes; count 0 and a negative
// jitter were accepted), and a run stops at its event budget.
TEST(OlafScenarioTest, WorkIsBoundedByKeyRangesAndAnEventBudget) {
  auto e = [](const std::string& y) {
    return std::string(ParseOlafScenario(y, "t").status().message());
  };
  EXPECT_THAT(e("clusters: [{count: 1, period_ms: 0.000001}]"), HasSubstr("period_ms"));
  EXPECT_THAT(e("clusters: [{count: 0}]"), HasSubstr("clusters[].count"));
  EXPECT_THAT(e("clusters: [{count: 1, jitter_us: -1}]"), HasSubstr("jitter_us"));
  EXPECT_THAT(e("sample_ms: 0.000001\nclusters: [{count: 1}]"), HasSubstr("sample_ms"));
  EXPECT_THAT(e("duration_s: 3600\nsample_ms: 0.1\nclusters: [{count: 1}]"), HasSubstr("samples"));
  EXPECT_THAT(e("max_events: 0\nclusters: [{count: 1}]"), HasSubstr("max_events"));
  EXPECT_THAT(e("max_events: 1.5\nclusters: [{count: 1}]"), HasSubstr("whole number"));
  EXPECT_TRUE(ParseOlafScenario("clusters: [{count: 1, period_ms: 0.01}]", "t").ok());

  OlafScenario s = Small();
  EXPECT_EQ(s.max_events, kDefaultMaxEvents);
  ASSERT_TRUE(ApplyOverride("max_events=2e4", &s).ok());
  EXPECT_EQ(s.max_events, 20000u);
  auto r = RunOlafScenario(s, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("budget of 20000 events (max_events)"));
  EXPECT_THAT(r.status().message(), HasSubstr("--set max_events=N"));
  ASSERT_TRUE(ApplyOverride("max_events=1e8", &s).ok());
  auto ok = RunOlafScenario(s, nullptr);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_GT(ok->events, 20000u);
}

TEST(OlafScenarioTest, JainIndex) {
  EXPECT_DOUBLE_EQ(JainIndex({1, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(JainIndex({1, 0, 0, 0}), 0.25);
  EXPECT_DOUBLE_EQ(JainIndex({}), 1.0);
}

}  // namespace
}  // namespace inca::sim
