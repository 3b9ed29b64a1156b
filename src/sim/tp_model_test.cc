#include <gtest/gtest.h>

#include "inca/sim/cais_scenario.h"
#include "inca/sim/tp_model.h"
#include "inca/sim/tp_scenario.h"

namespace inca::sim {
namespace {

// GPT-3 175B at TP 8 without randomness: the step is its closed form.
TpModel Quiet() {
  TpModel m;
  m.compute_jitter = 0;
  return m;
}

double ComputeSeconds(const TpModel& m, int tp) {
  return 3.0 * m.layers * (AttentionFlops(m, tp) + MlpFlops(m, tp)) /
         (m.device_tflops * 1e12 * m.mfu);
}

TEST(TpModel, MegatronFlopsAndMessageSize) {
  const TpModel m;  // b 1, s 2048, h 12288
  const double b = 1, s = 2048, h = 12288;
  EXPECT_DOUBLE_EQ(AttentionFlops(m, 8) + MlpFlops(m, 8),
                   (24 * b * s * h * h + 4 * b * s * s * h) / 8);
  EXPECT_DOUBLE_EQ(MlpFlops(m, 1), 16 * b * s * h * h);
  EXPECT_EQ(AllReduceBytes(m), uint64_t{2048} * 12288 * 2);
}

TEST(TpModel, StepWithoutRandomnessIsComputePlusFourAllReducesPerLayer) {
  const TpModel m = Quiet();
  const TpStepStats st = SimulateTpSteps(m, 8, {1000.0}, 20, 1);
  const double compute = ComputeSeconds(m, 8);
  const double comm = 4.0 * m.layers * 1e-3;
  EXPECT_NEAR(st.mean_ms, 1e3 * (compute + comm), 1e-6);
  EXPECT_NEAR(st.compute_ms, 1e3 * compute, 1e-6);
  EXPECT_NEAR(st.comm_share, comm / (compute + comm), 1e-9);
  EXPECT_NEAR(st.p99_over_mean, 1.0, 1e-12);
}

TEST(TpModel, OverlapHidesBackwardAllReducesBehindWeightGradients) {
  TpModel m = Quiet();
  m.overlap = true;
  // 10 us all-reduces: shorter than every weight-gradient GEMM, so the two
  // backward ones per layer vanish and the two forward ones stay.
  const TpStepStats st = SimulateTpSteps(m, 8, {10.0}, 5, 1);
  EXPECT_NEAR(st.mean_ms, 1e3 * ComputeSeconds(m, 8) + 2 * m.layers * 0.010, 1e-6);
}

TEST(TpModel, AStragglerHoldsEveryRankAtEveryAllReduce) {
  TpModel m = Quiet();
  m.straggler_prob = 1;
  m.straggler_slowdown = 2;
  const TpStepStats st = SimulateTpSteps(m, 4, {500.0}, 10, 3);
  EXPECT_NEAR(st.mean_ms, 1e3 * (2 * ComputeSeconds(m, 4) + 4 * m.layers * 500e-6), 1e-6);
}

TEST(TpModel, JitterCostsTheMaximumOfTheRanksAndIsPairedAcrossBackends) {
  TpModel m;
  m.compute_jitter = 0.1;
  const TpStepStats a = SimulateTpSteps(m, 16, {2000.0}, 200, 7);
  const TpStepStats b = SimulateTpSteps(m, 16, {4000.0}, 200, 7);
  const TpStepStats again = SimulateTpSteps(m, 16, {2000.0}, 200, 7);
  // Waiting for the slowest of 16 ranks costs more than the mean rank.
  EXPECT_GT(a.compute_ms, 1e3 * ComputeSeconds(m, 16) * 1.05);
  EXPECT_GT(a.p99_over_mean, 1.0);
  // The same seed draws the same compute whatever the communication.
  EXPECT_DOUBLE_EQ(a.compute_ms, b.compute_ms);
  EXPECT_DOUBLE_EQ(a.mean_ms, again.mean_ms);
  EXPECT_DOUBLE_EQ(a.p99_ms, again.p99_ms);
  // Constant communication adds the same to every step, so its share
  // lowers p99/avg: a tail from compute alone favours the slower network.
  EXPECT_LT(b.p99_over_mean, a.p99_over_mean);
}

TEST(TpModel, CommunicationTailsRaiseP99) {
  const TpModel m = Quiet();
  std::vector<double> ar(99, 1000.0);
  ar.push_back(50000.0);  // one all-reduce in a hundred is 50x slower
  const TpStepStats st = SimulateTpSteps(m, 8, ar, 300, 5);
  EXPECT_GT(st.p99_over_mean, 1.05);
}

TpScenario SmallScenario() {
  // A 4 MiB all-reduce (b 1, s 1024, h 1024, f32) on 100 Gbit/s links.
  auto s = ParseTpScenario(
      "system: cais-tp\nname: small\nhidden: 1024\nseq: 1024\nlayers: 2\nelement_bytes: 4\n"
      "tp: [2, 4]\nlink_gbps: [100]\nsteps: 50\nar_samples: 3\n",
      "test");
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(TpScenario, RunsBothBackendsOnThePacketLevelStar) {
  const TpScenario s = SmallScenario();
  auto r = RunTpScenario(s);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows.size(), 4u);  // tp 2 and 4, inca and ring
  for (const TpRow& x : r->rows) {
    EXPECT_EQ(x.wrong, 0u) << x.backend;
    EXPECT_EQ(x.ar_bytes, uint64_t{4} << 20);
    EXPECT_EQ(x.step.steps, 50);
    EXPECT_NEAR(x.ar_mean_us / x.ar_closed_form_us, 1.0, 0.1) << x.backend << " tp " << x.tp;
  }
  // At tp 4 on 100 Gbit/s the layer is bandwidth-bound: the switch moves
  // S per link where the ring moves 1.5 S.
  const TpRow& inca4 = r->rows[2];
  const TpRow& ring4 = r->rows[3];
  ASSERT_EQ(inca4.backend, "inca");
  ASSERT_EQ(ring4.backend, "ring");
  EXPECT_LT(inca4.step.mean_ms, ring4.step.mean_ms);
  EXPECT_LT(inca4.step.comm_share, ring4.step.comm_share);
  EXPECT_DOUBLE_EQ(inca4.step.compute_ms, ring4.step.compute_ms);
  // Deterministic.
  auto again = RunTpScenario(s);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(TpResultCsv(*r), TpResultCsv(*again));
}

// Sequence parallelism: each all-reduce becomes a reduce-scatter and an
// all-gather. On a star the switch moves the whole tensor on the busier
// link of each (every rank uploads all of a reduce-scatter, and gets all of
// an all-gather back, its own block included), the ring (n-1)/n of it, so
// the ring is ahead where inca was with all-reduces.
TEST(TpScenario, SequenceParallelismRunsReduceScatterAndAllGather) {
  TpScenario s = SmallScenario();
  s.tp = {4};
  s.model.sequence_parallel = true;
  auto r = RunTpScenario(s);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows.size(), 2u);
  const TpRow &inca = r->rows[0], &ring = r->rows[1];
  for (const TpRow* x : {&inca, &ring}) {
    EXPECT_EQ(x->wrong, 0u) << x->backend;
    // The pair of collectives at their closed forms' sum.
    EXPECT_NEAR(x->ar_mean_us / x->ar_closed_form_us, 1.0, 0.1) << x->backend;
  }
  EXPECT_NEAR(ring.ar_mean_us / inca.ar_mean_us, 0.75, 0.05);
  EXPECT_GT(inca.step.mean_ms, ring.step.mean_ms);
  EXPECT_DOUBLE_EQ(inca.step.compute_ms, ring.step.compute_ms);
  // Against all-reduces on the same compute: the ring's pair costs what
  // its all-reduce did; inca's costs twice its all-reduce.
  s.model.sequence_parallel = false;
  auto ar = RunTpScenario(s);
  ASSERT_TRUE(ar.ok()) << ar.status();
  EXPECT_NEAR(ring.ar_mean_us / ar->rows[1].ar_mean_us, 1.0, 0.05);
  EXPECT_NEAR(inca.ar_mean_us / ar->rows[0].ar_mean_us, 2.0, 0.1);
  // (The same compute, drawn in another order: one more draw per sublayer.)
  EXPECT_NEAR(inca.step.compute_ms / ar->rows[0].step.compute_ms, 1.0, 0.01);
  auto bad = ParseTpScenario("system: cais-tp\nsequence_parallel: true\nbackends: [tree]\n", "t");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("the tree runs allreduce only"), std::string::npos);
  auto derived = ParseTpScenario("system: cais-tp\ncollective: all_gather\n", "t.yaml");
  ASSERT_FALSE(derived.ok());
  EXPECT_NE(derived.status().message().find("collective: sequence_parallel"), std::string::npos);
}

TEST(TpScenario, KeysAreCheckedWithOneLineErrors) {
  auto derived = ParseTpScenario("system: cais-tp\nhosts: 4\n", "t.yaml");
  ASSERT_FALSE(derived.ok());
  EXPECT_NE(derived.status().message().find("hosts: set by the scenario"), std::string::npos);
  auto unknown = ParseTpScenario("system: cais-tp\nhiden: 4\n", "t.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown key; known:"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("background_load"), std::string::npos);
  auto badtp = ParseTpScenario("system: cais-tp\ntp: [1]\n", "t.yaml");
  ASSERT_FALSE(badtp.ok());
  EXPECT_NE(badtp.status().message().find("tp: 1"), std::string::npos);
  auto quote = ParseTpScenario("system: cais-tp\nmodel: 'a\"b'\n", "t.yaml");
  EXPECT_FALSE(quote.ok());
  TpScenario s = SmallScenario();
  ASSERT_TRUE(ApplyTpOverride("tp=8,16", &s).ok());
  EXPECT_EQ(s.tp, (std::vector<int>{8, 16}));
  ASSERT_TRUE(ApplyTpOverride("background_load=0.2", &s).ok());
  EXPECT_DOUBLE_EQ(s.net.background_load, 0.2);
  EXPECT_FALSE(ApplyTpOverride("mfu=0", &s).ok());
  EXPECT_TRUE(IsTpScenario("system: cais-tp\n"));
  EXPECT_FALSE(IsTpScenario("system: cais\n"));
}

// Background flows share the ranks' downlinks: both backends slow down,
// results stay exact, and the switch forwards what is not CAIS.
TEST(CaisBackground, FlowsShareTheDownlinksOfBothBackends) {
  auto base = ParseCaisSimScenario(
      "system: cais\nhosts: 4\nlink_gbps: 100\nsizes: [4M]\nops: 3\nbackends: [inca, ring]\n"
      "mode: timing\n",
      "test");
  ASSERT_TRUE(base.ok()) << base.status();
  CaisSimScenario loaded = *base;
  ASSERT_TRUE(ApplyCaisOverride("background_load=0.3", &loaded).ok());
  ASSERT_TRUE(ApplyCaisOverride("background_flow_bytes=1M", &loaded).ok());
  auto quiet = RunCaisSimScenario(*base);
  auto busy = RunCaisSimScenario(loaded);
  ASSERT_TRUE(quiet.ok() && busy.ok());
  for (size_t i = 0; i < 2; ++i) {
    const CaisSimRow& q = quiet->rows[i];
    const CaisSimRow& b = busy->rows[i];
    EXPECT_EQ(q.background_packets, 0u);
    EXPECT_GT(b.background_packets, 100u) << b.backend;
    EXPECT_EQ(b.wrong, 0u) << b.backend;
    EXPECT_GT(b.mean_us, q.mean_us * 1.05) << b.backend;
    EXPECT_EQ(b.op_us.size(), 3u);
  }
  EXPECT_FALSE(ApplyCaisOverride("background_load=1", &loaded).ok());
}

// Shallow queues under bursts of other traffic: inca's results are dropped,
// chunks are resent, and the switch hands some back to the host path. The
// simulator counts those apart (a real rank finishes them on its host
// collective); nothing it does finish is wrong.
TEST(CaisBackground, ChunksLeftToTheHostPathAreCountedNotWrong) {
  auto s = ParseCaisSimScenario(
      "system: cais\nhosts: 8\nlink_gbps: 100\nsizes: [48M]\nops: 2\nbackends: [inca]\n"
      "mode: timing\nqueue_packets: 32\nbackground_load: 0.1\nbackground_flow_bytes: 4M\n",
      "test");
  ASSERT_TRUE(s.ok()) << s.status();
  auto r = RunCaisSimScenario(*s);
  ASSERT_TRUE(r.ok()) << r.status();
  const CaisSimRow& x = r->rows[0];
  EXPECT_GT(x.fallback_chunks, 0u);
  EXPECT_LT(x.fallback_chunks, uint64_t{8} * 2 * x.checked);
  EXPECT_GT(x.retransmitted, 0u);
  EXPECT_GT(x.dropped, 0u);
  EXPECT_EQ(x.wrong, 0u);
  EXPECT_NE(CaisResultCsv(*r).find(",fallback_chunks,"), std::string::npos);
}

}  // namespace
}  // namespace inca::sim
