#include "olafverify/fairness_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

namespace inca::olafverify {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// The OLAF paper's example (section 3.2): ΔT = 400 ms, clusters updating
// every 100 ms and every 300 ms, ε = 0.1.
FairnessConfig SeedExample(int horizon = 32) {
  FairnessConfig cfg;
  cfg.aom_threshold_ms = 400;
  cfg.clusters = {{"c0", 100, 0}, {"c1", 300, 0}};
  cfg.epsilon = 0.1;
  cfg.horizon = horizon;
  return cfg;
}

// A heavy cluster `a` (every 50 ms) and a light one `b` (every 500 ms) on a
// link that serves one update per 40 ms: a alone offers 1.25x capacity.
FairnessConfig Congested() {
  FairnessConfig cfg;
  cfg.aom_threshold_ms = 100;
  cfg.clusters = {{"a", 50, 0}, {"b", 500, 0}};
  cfg.capacity_updates_per_ms = 1.0 / 40;
  cfg.queue_size = 2;
  cfg.epsilon = 0.1;
  cfg.horizon = 2;
  return cfg;
}

// True if some name starts with `prefix` (a constraint family and cluster,
// e.g. "threshold(c0,").
bool HasFamily(const std::vector<std::string>& names, const std::string& prefix) {
  for (const std::string& n : names) {
    if (n.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

void PrintTime(const char* what, const SolveStats& s) {
  std::cout << what << ": solve " << s.solve_ms << " ms, core " << s.core_ms << " ms, "
            << s.encoded_updates << " updates, " << s.rounds << " rounds\n";
}

bool AllFair(const Schedule& s) {
  for (const PairGap& g : s.gaps) {
    if (!g.fair()) return false;
  }
  return true;
}

TEST(OlafVerifyTest, SeedExampleCannotBeFairWithoutHoldingUpdates) {
  // The only way to equalise would be to hold c0's updates ~200 ms; the
  // OLAF queue is work-conserving and the link is nearly idle (a busy period
  // lasts at most 3.6 us), so every update leaves at once: peak AoMs of
  // about 100 and 300 ms. (The earlier model let the queue hold updates and
  // answered yes here.)
  const FairnessConfig cfg = SeedExample();
  absl::StatusOr<FeasibilityResult> r = CheckFeasible(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  PrintTime("seed example, feasible, horizon 32", r->stats);
  EXPECT_FALSE(r->feasible);
  EXPECT_FALSE(r->witness.has_value());
  EXPECT_EQ(r->stats.encoded_updates, 96 + 32);
  const std::vector<std::string>& core = r->conflicting_constraints;
  EXPECT_THAT(core, Contains("fairness(c0,c1)"));
  EXPECT_TRUE(HasFamily(core, "rate(c0,")) << SummarizeConstraints(core);
  EXPECT_THAT(r->static_facts, Contains(StartsWith("no eviction: a busy period")));
  EXPECT_THAT(r->static_facts, Contains(StartsWith("no merge or displacement for c0")));
  EXPECT_EQ(CheckBeforeApply(cfg).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(OlafVerifyTest, SeedExampleIsNotAlwaysFair) {
  const FairnessConfig cfg = SeedExample();
  absl::StatusOr<RobustnessResult> r = CheckAlwaysFair(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  PrintTime("seed example, always, horizon 32", r->stats);
  EXPECT_FALSE(r->always_fair);
  ASSERT_TRUE(r->counterexample.has_value());
  EXPECT_TRUE(CheckSchedule(cfg, *r->counterexample).ok())
      << CheckSchedule(cfg, *r->counterexample);
  EXPECT_FALSE(AllFair(*r->counterexample));
  // Every update is delivered within a busy period (at most two services
  // here) plus its own service of its generation.
  for (const ClusterTrace& t : r->counterexample->clusters) {
    for (const UpdateRecord& u : t.updates) {
      ASSERT_EQ(u.fate, UpdateFate::kDelivered);
      EXPECT_LT(*u.delivered_ms - u.generated_ms, 3 / cfg.capacity_updates_per_ms);
    }
  }
  absl::Status s = CheckBeforeApply(cfg, /*require_always_fair=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("cannot be fair"));
}

TEST(OlafVerifyTest, SeedExampleWithSmallThresholdCannotBeFair) {
  // As at ΔT = 400: no congestion to hold or drop c0's updates.
  FairnessConfig cfg = SeedExample();
  cfg.aom_threshold_ms = 150;
  absl::StatusOr<FeasibilityResult> r = CheckFeasible(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  PrintTime("seed example at ΔT 150, feasible", r->stats);
  EXPECT_FALSE(r->feasible);
  EXPECT_FALSE(r->witness.has_value());
  const std::vector<std::string>& core = r->conflicting_constraints;
  EXPECT_THAT(core, Contains("fairness(c0,c1)"));
  EXPECT_TRUE(HasFamily(core, "rate(c0,")) << SummarizeConstraints(core);
  EXPECT_FALSE(HasFamily(core, "threshold(c1,")) << SummarizeConstraints(core);
  EXPECT_THAT(r->static_facts, Contains(StartsWith("no eviction")));
  EXPECT_THAT(r->static_facts, Contains(StartsWith("no merge or displacement for c1")));

  absl::Status s = CheckBeforeApply(cfg);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("cannot be fair"), HasSubstr("fairness(c0,c1)"),
                                 HasSubstr("rate(c0,n=")));
}

TEST(OlafVerifyTest, SymmetricClustersWithAmpleCapacityAreFair) {
  FairnessConfig cfg;
  cfg.clusters = {{"left", 100, 0}, {"right", 100, 0}};
  cfg.horizon = 16;
  absl::StatusOr<FeasibilityResult> r = CheckFeasible(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible);
  EXPECT_TRUE(CheckSchedule(cfg, *r->witness).ok()) << CheckSchedule(cfg, *r->witness);
  EXPECT_TRUE(AllFair(*r->witness));
}

TEST(OlafVerifyTest, TightThresholdMakesEqualClustersAlwaysFair) {
  // Same period, no jitter, and ΔT = 5 ms leaves every peak in
  // [100 + 1/C, 105] ms: no schedule can open a 10% gap.
  FairnessConfig cfg;
  cfg.aom_threshold_ms = 5;
  cfg.clusters = {{"left", 100, 0}, {"right", 100, 0}};
  cfg.horizon = 32;
  absl::StatusOr<RobustnessResult> r = CheckAlwaysFair(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  PrintTime("equal clusters at ΔT 5, always", r->stats);
  EXPECT_TRUE(r->always_fair);
  EXPECT_FALSE(r->counterexample.has_value());
  EXPECT_TRUE(CheckBeforeApply(cfg, /*require_always_fair=*/true).ok());
}

TEST(OlafVerifyTest, LooseThresholdKeepsEqualClustersFair) {
  // Same clusters with ΔT = 400 ms. The earlier model could hold one
  // cluster's updates longer than the other's and found them drifting
  // apart; the OLAF queue holds nothing back on an idle link, so they stay
  // fair whatever the phases.
  FairnessConfig cfg;
  cfg.clusters = {{"left", 100, 0}, {"right", 100, 0}};
  cfg.horizon = 8;
  absl::StatusOr<RobustnessResult> r = CheckAlwaysFair(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->always_fair);
  EXPECT_FALSE(r->counterexample.has_value());
}

TEST(OlafVerifyTest, CongestedHeavyClusterCannotBeStarvedIntoFairness) {
  // b's AoM is at least its 500 ms period; a's would have to rise to match,
  // which needs most of a's updates dropped. But a drop needs a full queue
  // (tail drop) or a saturated server (eviction), and a keeps neither busy
  // enough: its AoM stays far below b's.
  const FairnessConfig cfg = Congested();
  absl::StatusOr<FeasibilityResult> r = CheckFeasible(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  PrintTime("congested, feasible", r->stats);
  EXPECT_FALSE(r->feasible);
  const std::vector<std::string>& core = r->conflicting_constraints;
  EXPECT_THAT(core, Contains("fairness(a,b)"));
  // The queue's rules take part in the refutation (which ones survive core
  // shrinking depends on the time budget).
  int queue_families = 0;
  for (const char* family :
       {"cap(", "merge(", "displace(", "threshold(", "work_conserving(", "order(", "fifo("}) {
    queue_families += HasFamily(core, family);
  }
  EXPECT_GT(queue_families, 0) << SummarizeConstraints(core);
  EXPECT_THAT(CheckBeforeApply(cfg).message(), HasSubstr("fairness(a,b)"));
}

TEST(OlafVerifyTest, CongestedCounterexampleFollowsTheQueueRules) {
  // Under congestion the queue merges, displaces or evicts; a
  // counterexample satisfies every queue rule and never tail-drops.
  const FairnessConfig cfg = Congested();
  absl::StatusOr<RobustnessResult> r = CheckAlwaysFair(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  PrintTime("congested, always", r->stats);
  ASSERT_FALSE(r->always_fair);
  EXPECT_TRUE(CheckSchedule(cfg, *r->counterexample).ok())
      << CheckSchedule(cfg, *r->counterexample);
  for (const ClusterTrace& t : r->counterexample->clusters) {
    for (const UpdateRecord& u : t.updates) EXPECT_NE(u.fate, UpdateFate::kTailDropped);
  }
  EXPECT_FALSE(AllFair(*r->counterexample));
}

TEST(OlafVerifyTest, JitterAndThreeClusters) {
  FairnessConfig cfg;
  cfg.clusters = {{"a", 100, 10}, {"b", 200, 0}, {"c", 300, 20}};
  cfg.horizon = 6;
  // Nothing is held back (the earlier model found a fair witness by holding
  // a's updates): a stays near 100 ms, c near 300 ms.
  absl::StatusOr<RobustnessResult> r = CheckAlwaysFair(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->always_fair);
  EXPECT_TRUE(CheckSchedule(cfg, *r->counterexample).ok())
      << CheckSchedule(cfg, *r->counterexample);
  EXPECT_EQ(r->counterexample->gaps.size(), 3u);

  // Every pair is unfair (100/200/300 ms), so the core names some pair.
  cfg.aom_threshold_ms = 100;
  absl::StatusOr<FeasibilityResult> no = CheckFeasible(cfg);
  ASSERT_TRUE(no.ok()) << no.status();
  EXPECT_FALSE(no->feasible);
  EXPECT_THAT(no->conflicting_constraints, Contains(StartsWith("fairness(")));
}

TEST(OlafVerifyTest, ThresholdNormaliser) {
  // ε × ΔT = 0.1 × 400 = 40 ms for every pair.
  FairnessConfig cfg = SeedExample(8);
  cfg.norm = FairnessNorm::kThreshold;
  absl::StatusOr<RobustnessResult> r = CheckAlwaysFair(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->counterexample.has_value());
  for (const PairGap& g : r->counterexample->gaps) EXPECT_DOUBLE_EQ(g.bound_ms, 40);
}

TEST(OlafVerifyTest, SeedQueueDynamicsIsRedundant) {
  // Asserting the paper's D(n) >= A(n) + Q(n)/C on top changes no answer.
  for (double dt : {400.0, 150.0}) {
    FairnessConfig cfg = SeedExample(4);
    cfg.aom_threshold_ms = dt;
    absl::StatusOr<FeasibilityResult> plain = CheckFeasible(cfg);
    cfg.assert_queue_dynamics = true;
    absl::StatusOr<FeasibilityResult> with = CheckFeasible(cfg);
    ASSERT_TRUE(plain.ok() && with.ok());
    EXPECT_EQ(plain->feasible, with->feasible) << "ΔT " << dt;
  }
  FairnessConfig cfg = Congested();
  cfg.assert_queue_dynamics = true;
  absl::StatusOr<RobustnessResult> r = CheckAlwaysFair(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->always_fair);
}

TEST(OlafVerifyTest, CheckScheduleNamesTheBrokenConstraint) {
  const FairnessConfig cfg = SeedExample(4);
  absl::StatusOr<RobustnessResult> r = CheckAlwaysFair(cfg);
  ASSERT_TRUE(r.ok() && r->counterexample);
  Schedule s = *r->counterexample;
  ASSERT_TRUE(CheckSchedule(cfg, s).ok());
  UpdateRecord& u = s.clusters[0].updates[2];
  *u.delivered_ms = u.generated_ms + 401;
  EXPECT_THAT(CheckSchedule(cfg, s).message(), HasSubstr("threshold(c0,n=2)"));

  // Held back without cause: the queue would have sent it at once.
  s = *r->counterexample;
  *s.clusters[0].updates[2].delivered_ms += 5;
  EXPECT_THAT(CheckSchedule(cfg, s).message(), HasSubstr("work_conserving(c0,n=2)"));

  // A fate the queue would not choose.
  s = *r->counterexample;
  s.clusters[1].updates[0].fate = UpdateFate::kEvicted;
  s.clusters[1].updates[0].delivered_ms.reset();
  EXPECT_THAT(CheckSchedule(cfg, s).message(), HasSubstr("queue(c1,n=0)"));

  s = *r->counterexample;
  s.clusters[1].updates[1].generated_ms += 50;
  EXPECT_THAT(CheckSchedule(cfg, s).message(),
              AnyOf(HasSubstr("rate(c1,n=0)"), HasSubstr("period(c1,n=1)")));
}

TEST(OlafVerifyTest, SolverTimeoutIsReported) {
  // A hard congested instance with a 50 ms budget cannot be answered.
  FairnessConfig cfg = Congested();
  cfg.horizon = 8;
  cfg.solver_timeout_ms = 50;
  absl::StatusOr<FeasibilityResult> r = CheckFeasible(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(), HasSubstr("solver_timeout_ms"));
}

// --- bad input -------------------------------------------------------------

void ExpectRejected(const FairnessConfig& cfg, const std::string& field) {
  absl::Status v = Validate(cfg);
  EXPECT_EQ(v.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_THAT(v.message(), HasSubstr(field));
  absl::StatusOr<FeasibilityResult> f = CheckFeasible(cfg);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<RobustnessResult> a = CheckAlwaysFair(cfg);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckBeforeApply(cfg).code(), absl::StatusCode::kInvalidArgument);
}

TEST(OlafVerifyValidateTest, SeedExampleIsValid) {
  EXPECT_TRUE(Validate(SeedExample()).ok());
}

TEST(OlafVerifyValidateTest, NegativePeriod) {
  FairnessConfig cfg = SeedExample();
  cfg.clusters[1].update_period_ms = -300;
  ExpectRejected(cfg, "clusters[1] (c1): update_period_ms must be > 0 (got -300)");
  cfg.clusters[1].update_period_ms = 0;
  ExpectRejected(cfg, "update_period_ms must be > 0");
  cfg.clusters[1].update_period_ms = std::numeric_limits<double>::quiet_NaN();
  ExpectRejected(cfg, "update_period_ms must be > 0");
}

TEST(OlafVerifyValidateTest, EpsilonOutOfRange) {
  for (double eps : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    FairnessConfig cfg = SeedExample();
    cfg.epsilon = eps;
    ExpectRejected(cfg, "epsilon must be in [0, 1]");
  }
  FairnessConfig cfg = SeedExample();
  cfg.epsilon = 0;
  EXPECT_TRUE(Validate(cfg).ok());
  cfg.epsilon = 1;
  EXPECT_TRUE(Validate(cfg).ok());
}

TEST(OlafVerifyValidateTest, MissingClusters) {
  FairnessConfig cfg = SeedExample();
  cfg.clusters.clear();
  ExpectRejected(cfg, "give at least two (got 0)");
  cfg.clusters = {{"only", 100, 0}};
  ExpectRejected(cfg, "give at least two (got 1)");
}

TEST(OlafVerifyValidateTest, HorizonBounds) {
  FairnessConfig cfg = SeedExample();
  cfg.horizon = 0;
  ExpectRejected(cfg, "horizon must be in [1, 256]");
  cfg.horizon = kMaxHorizon + 1;
  ExpectRejected(cfg, "horizon must be in [1, 256]");
  // In range, but the fast cluster would need 100 x 100 updates.
  cfg.clusters = {{"fast", 1, 0}, {"slow", 100, 0}};
  cfg.horizon = 100;
  ExpectRejected(cfg, "cluster 'fast' alone has 10000");
}

TEST(OlafVerifyValidateTest, QueueCapacityThresholdJitterNames) {
  FairnessConfig cfg = SeedExample();
  cfg.queue_size = 0;
  ExpectRejected(cfg, "queue_size must be >= 1");
  cfg = SeedExample();
  cfg.capacity_updates_per_ms = 0;
  ExpectRejected(cfg, "capacity_updates_per_ms (C) must be in (0, 1e6]");
  cfg.capacity_updates_per_ms = 1e7;
  ExpectRejected(cfg, "capacity_updates_per_ms (C) must be in (0, 1e6]");
  cfg = SeedExample();
  cfg.aom_threshold_ms = -1;
  ExpectRejected(cfg, "aom_threshold_ms (ΔT) must be a finite number > 0");
  cfg = SeedExample();
  cfg.clusters[0].jitter_ms = 100;
  ExpectRejected(cfg, "clusters[0] (c0): jitter_ms must be in [0, update_period_ms = 100)");
  cfg = SeedExample();
  cfg.clusters[1].name = "c0";
  ExpectRejected(cfg, "duplicate cluster name 'c0'");
  cfg.clusters[1].name = "bad name";
  ExpectRejected(cfg, "name 'bad name' must be 1-64 characters");
  cfg = SeedExample();
  cfg.solver_timeout_ms = -5;
  ExpectRejected(cfg, "solver_timeout_ms must be >= 0");
  cfg = SeedExample();
  cfg.max_transit_ms = 400;  // an update that old is dropped stale on arrival: not modelled
  ExpectRejected(cfg, "max_transit_ms must be in [0, ΔT = 400)");
  cfg.max_transit_ms = -1;
  ExpectRejected(cfg, "max_transit_ms must be in [0, ΔT = 400)");
}

TEST(OlafVerifyValidateTest, ParseClusterSpec) {
  absl::StatusOr<ClusterSpec> c = ParseClusterSpec("fast:100");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->name, "fast");
  EXPECT_EQ(c->update_period_ms, 100);
  EXPECT_EQ(c->jitter_ms, 0);
  c = ParseClusterSpec("slow:300:12.5");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->jitter_ms, 12.5);
  EXPECT_THAT(ParseClusterSpec("fast").status().message(),
              HasSubstr("expected NAME:PERIOD_MS[:JITTER_MS]"));
  EXPECT_THAT(ParseClusterSpec("fast:x").status().message(),
              HasSubstr("period 'x' is not a number"));
  EXPECT_THAT(ParseClusterSpec("a:1:2:3").status().message(), HasSubstr("expected NAME"));
}

TEST(OlafVerifyFormatTest, SummarizeConstraintsGroupsRuns) {
  EXPECT_EQ(SummarizeConstraints({"threshold(c0,n=2)", "fairness(c0,c1)", "threshold(c0,n=0)",
                                  "threshold(c0,n=1)", "threshold(c0,n=7)", "period(c1,n=3)"}),
            "fairness(c0,c1); period(c1,n=3); threshold(c0,n=0..2,7)");
  EXPECT_EQ(SummarizeConstraints({}), "");
}

TEST(OlafVerifyFormatTest, CapacityFromLinkAndJson) {
  EXPECT_NEAR(CapacityFromLink(40, 9000), 555.5556, 1e-3);
  const FairnessConfig cfg = SeedExample(2);
  EXPECT_THAT(ToJson(cfg), AllOf(StartsWith("{\"aom_threshold_ms\":400.000000"),
                                 HasSubstr("\"name\":\"c1\""), HasSubstr("\"updates\":2")));
  absl::StatusOr<FeasibilityResult> f = CheckFeasible(cfg);
  ASSERT_TRUE(f.ok());
  EXPECT_THAT(ToJson(*f), AllOf(StartsWith("{\"question\":\"feasible\",\"feasible\":false"),
                                HasSubstr("\"conflicting_constraints\":[\"fairness(c0,c1)\"")));
  absl::StatusOr<RobustnessResult> r = CheckAlwaysFair(cfg);
  ASSERT_TRUE(r.ok());
  const std::string j = ToJson(*r);
  EXPECT_THAT(j, AllOf(StartsWith("{\"question\":\"always\",\"always_fair\":false"),
                       HasSubstr("\"fate\":\"delivered\""), HasSubstr("\"solve_ms\":")));
  EXPECT_THAT(j, Not(HasSubstr("nan")));
  EXPECT_THAT(FormatSchedule(*r->counterexample), HasSubstr("c0 vs c1: |avg gap|"));
}

}  // namespace
}  // namespace inca::olafverify
