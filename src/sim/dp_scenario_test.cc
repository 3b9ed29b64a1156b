// The data-parallel step (docs/sim.md, "Data-parallel step"): DDP's
// bucket overlap by hand, and a small scenario whose buckets run on a
// fat-tree through every backend.
#include "inca/sim/dp_scenario.h"

#include <gtest/gtest.h>

#include <string>

namespace inca::sim {
namespace {

// Forward 1 ms, backward 2 ms; 4 GB of f32 gradients in 4 buckets of 1 GB.
DpModel HandModel() {
  DpModel m;
  m.params = 1e9;
  m.seq = 1000;
  m.tp = 1;
  m.grad_bytes = 4;
  m.bucket_bytes = 1'000'000'000;
  m.device_tflops = 2000;
  m.mfu = 1;
  return m;
}

TEST(DpStep, BucketsOverlapTheBackwardAsDdpRunsThem) {
  DpModel m = HandModel();
  ASSERT_TRUE(m.Validate().ok()) << m.Validate();
  EXPECT_EQ(GradientBytes(m), 4'000'000'000u);
  EXPECT_NEAR(ForwardSeconds(m), 1e-3, 1e-12);
  // Buckets ready at 1.5, 2, 2.5 and 3 ms: 0.1 ms each leaves only the
  // last one's after the backward.
  DpStep fast = DdpStep(m, 100, 100);
  EXPECT_EQ(fast.buckets, 4);
  EXPECT_NEAR(fast.compute_ms, 3, 1e-9);
  EXPECT_NEAR(fast.comm_ms, 0.4, 1e-9);
  EXPECT_NEAR(fast.step_ms, 3.1, 1e-9);
  EXPECT_NEAR(fast.comm_share, 1 - 3 / 3.1, 1e-9);
  // 1 ms each: back to back from the first, 1.5 + 4 ms.
  DpStep slow = DdpStep(m, 1000, 1000);
  EXPECT_NEAR(slow.step_ms, 5.5, 1e-9);
  // A short last bucket ends it sooner.
  EXPECT_NEAR(DdpStep(m, 1000, 200).step_ms, 4.7, 1e-9);
  // Two micro-batches: the buckets wait for the second one's backward.
  m.accumulation = 2;
  DpStep acc = DdpStep(m, 1000, 1000);
  EXPECT_NEAR(acc.compute_ms, 6, 1e-9);
  EXPECT_NEAR(acc.step_ms, 8.5, 1e-9);
  // No communication: the step is its compute.
  EXPECT_NEAR(DdpStep(m, 0, 0).comm_share, 0, 1e-12);
}

DpScenario Small() {
  DpScenario s;
  s.model.params = 32e6;  // 64 MB of bf16 gradients: 3 buckets, the last short
  s.model.tp = 1;
  s.model.bucket_bytes = 25 << 20;
  s.dp = {16};
  s.net.fat_tree_k = 4;
  s.net.backends = {"inca", "ring", "tree"};
  s.net.placement = "random";
  return s;
}

// Each backend's buckets on a k = 4 fat-tree: all of inca's sums right,
// every bucket at its closed form, and the step ordered as the buckets
// are: inca's tree below NCCL's tree below the ring (whose neighbours
// cross the fabric several times under a random placement).
TEST(DpScenario, EachBackendsBucketsRunOnTheFabric) {
  const DpScenario s = Small();
  auto r = RunDpScenario(s);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows.size(), 3u);
  for (const DpRow& x : r->rows) {
    SCOPED_TRACE(x.backend);
    EXPECT_EQ(x.dp, 16);
    EXPECT_EQ(x.step.buckets, 3);
    EXPECT_EQ(x.bucket_bytes, 25u << 20);
    EXPECT_EQ(x.last_bytes, 64'000'000u - 2 * (25u << 20));
    EXPECT_LT(x.last_us, x.bucket_us);
    EXPECT_EQ(x.wrong + x.fallback_chunks + x.dropped, 0u);
    EXPECT_GE(x.bucket_closed_form_us / x.bucket_us, 0.97);
    EXPECT_LE(x.bucket_closed_form_us / x.bucket_us, 1.001);
    EXPECT_NEAR(x.step.comm_ms, (2 * x.bucket_us + x.last_us) / 1e3, 1e-9);
  }
  EXPECT_LT(r->rows[0].step.step_ms, r->rows[2].step.step_ms);
  EXPECT_LT(r->rows[2].step.step_ms, r->rows[1].step.step_ms);
  EXPECT_NE(DpResultJson(s, *r).find("\"backend\":\"ring\",\"dp\":16"), std::string::npos);
  EXPECT_NE(DpResultCsv(*r).find("backend,dp,bucket_bytes"), std::string::npos);
}

TEST(DpScenario, KeysAreCheckedWithOneLineErrors) {
  auto ok = ParseDpScenario("system: cais-dp\nfat_tree_k: 8\ndp: [16, 64]\n", "t.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->dp, (std::vector<int>{16, 64}));
  const struct {
    const char* yaml;
    const char* says;
  } cases[] = {
      {"system: cais-dp\nhosts: 4\n", "hosts: set by the scenario"},
      {"system: cais-dp\ngrad_bytes: 3\n", "grad_bytes must be 2 (bf16) or 4 (f32)"},
      {"system: cais-dp\ndp: [1]\n", "dp: 1 is not in [2, 8192]"},
      {"system: cais-dp\nfat_tree_k: 4\ndp: [24]\n", "dp 24: fat_tree_k 4 holds"},
      {"system: cais-dp\nbucket_bytes: 1000\n", "bucket_bytes must be in [1 MiB, 1 GiB]"},
      {"system: cais-dp\nmodel: 'a\"b'\n", "model must be a name"},
      {"system: cais-dp\nbukcet_bytes: 1\n", "unknown key; known:"},
      {"system: cais-tp\n", "a data-parallel scenario has system cais-dp"},
  };
  for (const auto& c : cases) {
    auto s = ParseDpScenario(c.yaml, "t.yaml");
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_NE(s.status().message().find(c.says), std::string::npos) << s.status();
  }
  DpScenario s = Small();
  ASSERT_TRUE(ApplyDpOverride("dp=16,8", &s).ok());
  EXPECT_EQ(s.dp, (std::vector<int>{16, 8}));
  EXPECT_FALSE(ApplyDpOverride("dp=3", &s).ok());  // 2 hosts on each edge switch
  EXPECT_TRUE(IsDpScenario("system: cais-dp\n"));
  EXPECT_FALSE(IsDpScenario("system: cais-tp\n"));
}

}  // namespace
}  // namespace inca::sim
