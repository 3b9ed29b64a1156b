// CAIS on inca-sim: the real CaisReducer and client transport core on a
// simulated star, and the packet-level ring over the same links, against
// their closed forms; determinism, loss and scenario errors.
#include <gtest/gtest.h>

#include <string>

#include "inca/sim/cais_scenario.h"
#include "inca/sim/simulator.h"
#include "sim/cais_nodes.h"
#include "sim/host_collectives.h"

namespace inca::sim {
namespace {

CaisSimScenario Star(int hosts, double gbps, double delay_us) {
  CaisSimScenario s;
  s.hosts = hosts;
  s.link_gbps = gbps;
  s.link_delay_us = delay_us;
  s.ops = 2;
  return s;
}

const CaisSimRow& Row(const CaisSimResult& r, const std::string& backend, uint64_t bytes) {
  for (const CaisSimRow& x : r.rows) {
    if (x.backend == backend && x.bytes == bytes) return x;
  }
  ADD_FAILURE() << "no row " << backend << " " << bytes;
  return r.rows.front();
}

// The nodes refuse what they cannot run with an error, not an exception.
// The one row of a one-backend, one-size scenario; a failure when the run
// fails or its result is wrong.
CaisSimRow OnlyRow(const CaisSimScenario& s) {
  auto r = RunCaisSimScenario(s);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || r->rows.empty()) return CaisSimRow{};
  EXPECT_EQ(r->rows[0].wrong, 0u);
  return r->rows[0];
}

TEST(CaisSimTest, NodesRefuseABadConfigurationWithAStatus) {
  cais::CaisConfig bad;
  bad.sram_usage_limit = 2;  // outside (0, 1]
  auto sw = CaisSwitchNode::Create("switch", bad, 4);
  EXPECT_EQ(sw.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CaisSwitchNode::Create("switch", cais::CaisConfig{}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CaisSwitchNode::Create("switch", cais::CaisConfig{}, 65).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CaisSwitchNode::Create("switch", cais::CaisConfig{}, 64).ok());
  auto bg = BackgroundNode::Create("bg", 4, 1e9, BackgroundTraffic{.load = 0.5, .flow_bytes = 0},
                                   8952, 0, 1);
  EXPECT_EQ(bg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      BackgroundNode::Create("bg", 4, 1e9, BackgroundTraffic{.load = 0.5}, 3, 0, 1).status().code(),
      absl::StatusCode::kInvalidArgument);
  CaisRankNode rank("rank", 0, client::TransportConfig{}, [](int) {});
  std::vector<float> in(4), out(4);
  EXPECT_EQ(rank.Begin(1, wire::CaisOp::kBroadcast, &in, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rank.Begin(1, wire::CaisOp::kAllGather, &in, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CaisSimTest, BothBackendsGiveTheExactSumAndNeverBeatTheirLinks) {
  CaisSimScenario s = Star(4, 100, 1);
  s.sizes = {64 << 10, 1 << 20, 4 << 20};
  auto r = RunCaisSimScenario(s);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows.size(), 6u);
  for (const CaisSimRow& x : r->rows) {
    EXPECT_EQ(x.wrong, 0u) << x.backend << " " << x.bytes;
    EXPECT_EQ(x.dropped, 0u) << x.backend << " " << x.bytes;
    EXPECT_EQ(x.ops, 2);
    // Nothing crosses a link faster than its rate: a row faster than its
    // closed form would be a bug in the model (more than 1 % for the ns
    // rounding of each packet's serialisation).
    EXPECT_LE(x.of_closed_form, 1.01) << x.backend << " " << x.bytes;
  }
  // 4 MiB at 100 Gbit/s is bandwidth-bound: the switch moves S per link,
  // the ring 2(n-1)/n S, so the switch is about 1.5x faster.
  const CaisSimRow& inca = Row(*r, "inca", 4 << 20);
  const CaisSimRow& ring = Row(*r, "ring", 4 << 20);
  EXPECT_GT(ring.mean_us / inca.mean_us, 1.3);
  EXPECT_LT(ring.mean_us / inca.mean_us, 1.6);
}

// Issue 46: the event budget covers the scenario's backends and sizes; a
// run that reaches it is one error naming max_events.
TEST(CaisSimTest, ARunStopsAtItsEventBudget) {
  CaisSimScenario s = Star(4, 100, 1);
  s.sizes = {1 << 20};
  auto full = RunCaisSimScenario(s);
  ASSERT_TRUE(full.ok()) << full.status();
  s.max_events = full->events / 2;
  auto cut = RunCaisSimScenario(s);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(cut.status().message().find("(max_events)"), std::string::npos) << cut.status();
  s.max_events = full->events;
  EXPECT_TRUE(RunCaisSimScenario(s).ok());
  EXPECT_TRUE(ApplyCaisOverride("max_events=3e9", &s).ok());
  EXPECT_EQ(s.max_events, 3'000'000'000u);
  EXPECT_FALSE(ApplyCaisOverride("max_events=-1", &s).ok());
}

TEST(CaisSimTest, TheRingMatchesItsClosedFormWhenBandwidthOrLatencyBound) {
  // 16 MiB: every block outlasts a hop (bandwidth-bound). 64 KiB with a
  // 20 us step latency: each step waits for the one before (latency-bound).
  for (const auto& [bytes, alpha] :
       {std::pair<uint64_t, double>{16 << 20, 0}, std::pair<uint64_t, double>{64 << 10, 20}}) {
    CaisSimScenario s = Star(8, 200, 2);
    s.backends = {"ring"};
    s.sizes = {bytes};
    s.ring_step_latency_us = alpha;
    const CaisSimRow x = OnlyRow(s);
    EXPECT_NEAR(x.of_closed_form, 1.0, 0.01)
        << bytes << " B, alpha " << alpha << " us: " << x.mean_us << " us vs " << x.closed_form_us;
  }
  // The closed form itself: 2(n-1)/n of the wire bytes in the bandwidth-bound
  // limit (4 hosts, 4 packets of 1,000 B per block, no delay): 6 steps x 4
  // packets x (1000 + 16 + 66) B, plus the last packet's trip.
  const double t = (1000 + 16 + 66) * 8 / 1e9;
  EXPECT_NEAR(RingAllReduceSeconds(4, 16000, 1000, 1e9, 66, 0, 0), 24 * t - t + 2 * t, 1e-12);
  // And latency-bound: one packet per block, 6 hops of alpha + 2 t + 2 d.
  EXPECT_NEAR(RingAllReduceSeconds(4, 4000, 1000, 1e9, 66, 1e-6, 1e-5), 6 * (1e-5 + 2 * t + 2e-6),
              1e-12);
}

TEST(CaisSimTest, TheTreeIsExactAndNeverBeatsItsBound) {
  // Odd and even n (for odd n the two trees share an inner rank), one
  // packet per half and many: the sum is exact, nothing is lost, and the
  // closed form (a lower bound: the busiest link, or the deeper tree's
  // climb) is met where one of them is all there is.
  for (int n : {2, 3, 4, 8, 9}) {
    CaisSimScenario s = Star(n, 100, 1);
    s.backends = {"tree"};
    s.sizes = {8 << 10, 1 << 20, 16 << 20};
    auto r = RunCaisSimScenario(s);
    ASSERT_TRUE(r.ok()) << n << ": " << r.status();
    for (const CaisSimRow& x : r->rows) {
      EXPECT_EQ(x.wrong, 0u) << n << " " << x.bytes;
      EXPECT_EQ(x.dropped, 0u) << n << " " << x.bytes;
      EXPECT_LE(x.of_closed_form, 1.001) << n << " " << x.bytes;
      EXPECT_GE(x.of_closed_form, 0.7) << n << " " << x.bytes;
    }
    // Bandwidth-bound: the busiest link's bytes, to 1 %.
    EXPECT_GE(Row(*r, "tree", 16 << 20).of_closed_form, 0.99) << n;
  }
  // 2 ranks, 4 packets of 1,000 B per half, no delay: each link carries
  // both halves (8 packets), plus the last one's trip, t.
  const double t = (1000 + 16 + 66) * 8 / 1e9;
  EXPECT_NEAR(TreeAllReduceSeconds(2, 8000, 1000, 1e9, 66, 0, 0), 9 * t, 1e-12);
  // The trees: rank r at heap position r in tree 0 and n-1-r in tree 1.
  EXPECT_EQ(TreeRankNode::Parent(8, 0, 0), -1);
  EXPECT_EQ(TreeRankNode::Parent(8, 0, 5), 2);
  EXPECT_EQ(TreeRankNode::Parent(8, 1, 7), -1);
  EXPECT_EQ(TreeRankNode::Children(8, 1, 7), (std::vector<int>{6, 5}));
  // For even n the inner ranks of one tree are leaves of the other.
  for (int r = 0; r < 8; ++r) {
    EXPECT_FALSE(!TreeRankNode::Children(8, 0, r).empty() &&
                 !TreeRankNode::Children(8, 1, r).empty())
        << r;
  }
}

TEST(CaisSimTest, TheSwitchClosedFormIsOneTraversalOfEveryChunk) {
  const double t = (8952 + 20 + 66) * 8 / 100e9;
  // 10 chunks up back to back, the last one's result down, a delay each way.
  EXPECT_NEAR(SwitchAllReduceSeconds(4, 10 * 8952, 8952, 100e9, 66, 1e-6), 11 * t + 2e-6, 1e-12);
}

TEST(CaisSimTest, TheSameSeedGivesTheSameBytes) {
  CaisSimScenario s = Star(4, 100, 1);
  s.sizes = {1 << 20};
  s.loss = 0.002;
  s.backends = {"inca"};
  auto a = RunCaisSimScenario(s);
  auto b = RunCaisSimScenario(s);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(CaisResultJson(s, *a), CaisResultJson(s, *b));
  EXPECT_EQ(CaisResultCsv(*a), CaisResultCsv(*b));
  s.seed = 2;  // other losses
  auto c = RunCaisSimScenario(s);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(CaisResultJson(s, *a), CaisResultJson(s, *c));
}

TEST(CaisSimTest, LossIsRecoveredExactlyByTheRealTransport) {
  CaisSimScenario s = Star(4, 100, 5);
  s.sizes = {4 << 20};
  s.loss = 0.01;
  s.backends = {"inca"};
  const CaisSimRow x = OnlyRow(s);
  EXPECT_GT(x.dropped, 0u);
  EXPECT_GE(x.retransmitted, x.dropped / 2);  // lost contributions and results come back
}

TEST(CaisSimTest, TimingModeTakesTheTimeOfTheExactMode) {
  // 300,000 B ends in a short chunk (33 of 8,952 B and one of 4,584 B).
  for (const double loss : {0.0, 0.005}) {
    CaisSimScenario s = Star(4, 100, 2);
    s.sizes = {1 << 20, 300000};
    s.loss = loss;
    if (loss > 0) s.backends = {"inca"};
    auto exact = RunCaisSimScenario(s);
    s.mode = "timing";
    auto timing = RunCaisSimScenario(s);
    ASSERT_TRUE(exact.ok() && timing.ok());
    ASSERT_EQ(exact->rows.size(), timing->rows.size());
    for (size_t i = 0; i < exact->rows.size(); ++i) {
      const CaisSimRow &e = exact->rows[i], &t = timing->rows[i];
      EXPECT_NEAR(t.mean_us / e.mean_us, 1.0, 0.005) << e.backend << " " << e.bytes;
      EXPECT_EQ(t.dropped, e.dropped) << e.backend << " " << e.bytes;
      EXPECT_EQ(t.wrong, 0u);
      EXPECT_EQ(e.checked, e.bytes / 4);
      // inca still reduces one f32 per chunk and checks it; the ring carries none.
      EXPECT_EQ(t.checked, e.backend == "inca" ? (e.bytes + 8951) / 8952 : 0);
    }
  }
}

TEST(CaisSimTest, TimingModeRunsLargeOperationsAtTheExpectedRatio) {
  // 8 hosts at 400 Gbit/s, 64 MiB: held in no memory; bandwidth-bound, so
  // the ring moves 2(n-1)/n = 1.75 times the switch's bytes per link.
  CaisSimScenario s = Star(8, 400, 1);
  s.mode = "timing";
  s.sizes = {64 << 20};
  s.ops = 1;
  auto r = RunCaisSimScenario(s);
  ASSERT_TRUE(r.ok()) << r.status();
  const CaisSimRow& inca = Row(*r, "inca", 64 << 20);
  const CaisSimRow& ring = Row(*r, "ring", 64 << 20);
  EXPECT_EQ(inca.wrong, 0u);
  EXPECT_NEAR(ring.of_closed_form, 1.0, 0.01);
  EXPECT_GT(inca.of_closed_form, 0.9);
  EXPECT_LE(inca.of_closed_form, 1.01);
  EXPECT_NEAR(ring.mean_us / inca.mean_us, 1.75, 0.15);
}

TEST(CaisSimTest, ASwitchOfLimitedPacketRateSetsThePace) {
  // A software switch of 1 Mpps at 100 Gbit/s: the pipeline, not the links,
  // is the bottleneck. inca: every chunk's 4 contributions pass it; the
  // ring: 2(n-1) blocks of 118 packets per rank.
  CaisSimScenario s = Star(4, 100, 1);
  s.sizes = {4 << 20};
  s.switch_mpps = 1;
  s.switch_queue_packets = 256;
  auto r = RunCaisSimScenario(s);
  ASSERT_TRUE(r.ok()) << r.status();
  const CaisSimRow& inca = Row(*r, "inca", 4 << 20);
  const CaisSimRow& ring = Row(*r, "ring", 4 << 20);
  const double chunks = (4 << 20) / 8952 + 1;  // 469
  EXPECT_EQ(inca.wrong, 0u);
  EXPECT_EQ(ring.wrong, 0u);
  EXPECT_GE(inca.mean_us, 4 * chunks);  // 1 us per packet
  EXPECT_LT(inca.mean_us, 1.3 * 4 * chunks);
  EXPECT_GE(ring.mean_us, 4 * 6 * 118);
  EXPECT_LT(ring.mean_us, 1.1 * 4 * 6 * 118);
  // The links alone would allow far less: the closed forms do not see the
  // switch's rate.
  EXPECT_LT(inca.of_closed_form, 0.3);
  EXPECT_EQ(ring.dropped, 0u);  // the ring's fabric is lossless
  // A pipeline queue of 64 packets (64 us) overflows before the round trip
  // reaches the delay target's 300 us slack: the pipeline drops, the
  // transport recovers every loss exactly (docs/sim.md: slower, though).
  s.switch_queue_packets = 64;
  s.backends = {"inca"};
  auto shallow = RunCaisSimScenario(s);
  ASSERT_TRUE(shallow.ok()) << shallow.status();
  EXPECT_EQ(shallow->rows[0].wrong, 0u);
  EXPECT_GT(shallow->rows[0].dropped, 0u);
  EXPECT_GE(shallow->rows[0].retransmitted, shallow->rows[0].dropped);
  // With the slack's floor below what the queue holds, delay control keeps
  // it from overflowing.
  s.target_floor_us = 20;
  auto low = RunCaisSimScenario(s);
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_EQ(low->rows[0].dropped, 0u);
  EXPECT_LT(low->rows[0].mean_us, shallow->rows[0].mean_us);
}

TEST(CaisSimTest, ScenarioErrorsNameTheKey) {
  struct Case {
    const char* yaml;
    const char* words;
  } cases[] = {
      {"system: cais\nhosts: 1\n", "hosts must be in [2, 256]"},
      {"system: cais\nlink_gbps: fast\n", "link_gbps: cannot read 'fast'"},
      {"system: cais\nsizes: [1M, 2X]\n", "size '2X' is not like"},
      {"system: cais\nbackground_load: 1\n", "background_load must be in [0, 1)"},
      {"system: cais\nbackends: [nccl]\n", "'nccl': use inca, ring and/or tree"},
      {"system: cais\nloss: 0.01\n", "the ring and the tree assume a lossless fabric"},
      {"system: cais\nchunk_size: 9000\n", "exceeds mtu 9000"},
      {"system: cais\ncolour: red\n", "unknown key; known: system, sweep, name, seed"},
      {"system: olaf\n", "a CAIS scenario has system cais"},
      {"system: cais\nmode: fast\n", "'fast': use exact or timing"},
      {"system: cais\nsizes: [512M]\nhosts: 16\n", "over 4 GiB of tensors (mode: timing"},
      {"system: cais\nhost_cores: 0\n", "host_cores must be in [1, 1024]"},
      {"system: cais\nswitches: 0\n", "switches must be in [1, 16]"},
      {"system: cais\nswitches: 2\ncollective: all_gather\nsizes: [36]\nhosts: 3\n",
       "36 B is not 6 blocks of f32 (hosts x switches"},
      {"system: cais\ncollective: gather\n", "'gather': use allreduce, reduce_scatter or"},
      {"system: cais\ncollective: all_gather\nbackends: [tree]\n", "the tree runs allreduce"},
      {"system: cais\ncollective: reduce_scatter\nhosts: 3\nsizes: [16]\n",
       "16 B is not 3 blocks of f32"},
  };
  for (const Case& c : cases) {
    auto s = ParseCaisSimScenario(c.yaml, "t.yaml");
    ASSERT_FALSE(s.ok()) << c.yaml;
    const std::string m(s.status().message());
    EXPECT_NE(m.find(c.words), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_TRUE(IsCaisScenario("system: cais\n"));
  EXPECT_FALSE(IsCaisScenario("name: x\n"));
  EXPECT_FALSE(IsCaisScenario("{{{"));
  CaisSimScenario s;
  EXPECT_TRUE(ApplyCaisOverride("sizes=4K,1M", &s).ok());
  EXPECT_EQ(s.sizes, (std::vector<uint64_t>{4096, 1 << 20}));
  EXPECT_FALSE(ApplyCaisOverride("hosts", &s).ok());
}

// An operation of more than 65,535 chunks runs in pieces, as the
// Communicator runs it: exact in both modes, and the timing mode takes the
// exact mode's time.
TEST(CaisSimTest, OperationsOverChunkIdsRunInPieces) {
  // 66,536 chunks of 64 bytes: a piece of 65,535, then one of 1,001; and
  // those two pieces as operations of their own.
  auto s = ParseCaisSimScenario(
      "system: cais\nhosts: 2\nlink_gbps: 100\nchunk_size: 64\n"
      "sizes: [4258304, 4194240, 64064]\nops: 1\nwindow: 1024\nswitch_slots: 4096\n"
      "backends: [inca]\nmode: exact\n",
      "test");
  ASSERT_TRUE(s.ok()) << s.status();
  auto exact = RunCaisSimScenario(*s);
  ASSERT_TRUE(exact.ok()) << exact.status();
  CaisSimScenario t = *s;
  t.mode = "timing";
  auto timing = RunCaisSimScenario(t);
  ASSERT_TRUE(timing.ok()) << timing.status();
  for (const auto* r : {&*exact, &*timing}) {
    for (const CaisSimRow& x : r->rows) {
      EXPECT_EQ(x.wrong, 0u);
      EXPECT_EQ(x.fallback_chunks, 0u);
    }
    // The pieces run one after the other: the whole takes the first
    // piece's time and the second's at least at line rate, and less than
    // the two as operations of their own (the second piece starts with the
    // window the first one grew).
    const CaisSimRow &whole = r->rows[0], &first = r->rows[1], &second = r->rows[2];
    EXPECT_GT(whole.mean_us, first.mean_us + 0.9 * second.closed_form_us);
    EXPECT_LT(whole.mean_us, first.mean_us + second.mean_us);
  }
  EXPECT_EQ(timing->rows[0].checked, 66536u);
  EXPECT_NEAR(timing->rows[0].mean_us / exact->rows[0].mean_us, 1.0, 0.005);
}

// Reduce-scatter and all-gather, the halves of an all-reduce that
// sequence parallelism runs: exact on both backends (3 ranks, blocks that
// end in a short chunk, and in pieces), the timing mode at the exact
// mode's time, each at its closed form. Bandwidth-bound, the switch moves
// the whole tensor on the busier link of each (up for a reduce-scatter,
// down for an all-gather) against the ring's (n-1)/n of it: the ring is
// ahead by n/(n-1).
TEST(CaisSimTest, ReduceScatterAndAllGatherAreExactAtTheirClosedForms) {
  for (const char* collective : {"reduce_scatter", "all_gather"}) {
    CaisSimScenario s = Star(3, 100, 1);
    s.collective = collective;
    s.chunk_size = 1024;
    s.sizes = {3 * 1000 * 4, 3 * 100'000 * 4};  // blocks of 1,000 and 100,000 f32
    s.window = 256;
    s.switch_slots = 1024;
    auto exact = RunCaisSimScenario(s);
    ASSERT_TRUE(exact.ok()) << exact.status();
    CaisSimScenario t = s;
    t.mode = "timing";
    auto timing = RunCaisSimScenario(t);
    ASSERT_TRUE(timing.ok()) << timing.status();
    ASSERT_EQ(exact->rows.size(), 4u);
    for (size_t i = 0; i < exact->rows.size(); ++i) {
      const CaisSimRow &x = exact->rows[i], &y = timing->rows[i];
      SCOPED_TRACE(std::string(collective) + " " + x.backend + " " + std::to_string(x.bytes));
      EXPECT_EQ(x.wrong + y.wrong, 0u);
      EXPECT_EQ(x.fallback_chunks, 0u);
      // A reduce-scatter leaves a block per rank; an all-gather the tensor.
      EXPECT_EQ(x.checked, s.collective == "reduce_scatter" ? x.bytes / 12 : x.bytes / 4);
      EXPECT_NEAR(y.mean_us / x.mean_us, 1.0, 0.005);
      EXPECT_LE(x.of_closed_form, 1.01);
      EXPECT_GE(x.of_closed_form, x.bytes > 100'000 ? 0.97 : 0.9);
    }
    const double ring_over_inca =
        Row(*exact, "ring", 1'200'000).mean_us / Row(*exact, "inca", 1'200'000).mean_us;
    EXPECT_NEAR(ring_over_inca, 2.0 / 3.0, 0.03) << collective;
  }
  // More than 65,535 chunks over all blocks: two pieces, still exact.
  CaisSimScenario p = Star(4, 100, 1);
  p.backends = {"inca"};
  p.collective = "reduce_scatter";
  p.chunk_size = 64;
  p.sizes = {4 * 17'000 * 64};  // 68,000 chunks: pieces of 4 x 16,383 and 4 x 617
  p.ops = 1;
  p.window = 1024;
  p.switch_slots = 4096;
  for (const char* mode : {"exact", "timing"}) {
    p.mode = mode;
    auto r = RunCaisSimScenario(p);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->rows[0].wrong, 0u) << mode;
    EXPECT_EQ(r->rows[0].fallback_chunks, 0u) << mode;
  }
}

// Group formation as inca-switchd does it: the ranks JOIN the simulated
// switch's GroupManager before their first operation (PENDING until the
// last one, so the others learn OK at their next JOIN, 20 ms on), take
// their layout and sequence numbers from its reply, and data from a link
// that joined nothing is dropped and counted. Ranks whose JOINs arrive out
// of rank order get ports out of rank order; an all-gather, whose blocks
// follow the ports, is still exact.
TEST(CaisSimTest, RanksFormTheirGroupThroughTheSwitchsGroupManager) {
  constexpr int kRanks = 3;
  Simulator sim;
  Network net(&sim, 1);
  cais::CaisConfig cc;
  cc.max_payload_bytes = 1024;
  // Links 0-2: the group's ranks; link 3: a host that never joins.
  auto* sw = net.Add(*CaisSwitchNode::Create("switch", cc, kRanks + 1));
  sw->FormGroups(/*seq_start=*/5000);
  client::TransportConfig tc;
  tc.world_size = kRanks;
  tc.chunk_size = 1024;
  std::vector<CaisRankNode*> ranks;
  int joined = 0, done = 0;
  TimeNs formed = -1;
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(net.Add(std::make_unique<CaisRankNode>("rank" + std::to_string(r), r, tc,
                                                           [&done](int) { ++done; })));
    LinkConfig lc;
    lc.rate_bps = 10e9;
    lc.delay_ns = 1000 * (kRanks - r);  // rank 2's JOIN arrives first
    net.Connect(ranks.back(), sw, lc);
    ranks.back()->JoinFirst(/*job=*/77, [&](int) {
      if (++joined == kRanks) formed = sim.now();
    });
  }
  auto* stranger = net.Add(std::make_unique<CaisRankNode>("stranger", 0, tc, [](int) {}));
  net.Connect(stranger, sw, LinkConfig{});
  std::vector<float> lost(256, 1.0F);
  net.Start();
  sim.RunUntil(100 * dp::kNsPerMs);
  ASSERT_EQ(joined, kRanks);
  // The last JOIN completes the group; the others hear OK 20 ms later.
  EXPECT_GE(formed, 20 * dp::kNsPerMs);
  EXPECT_LT(formed, 21 * dp::kNsPerMs);
  const membership::GroupState* g = sw->groups()->group(0);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->formed);
  EXPECT_EQ(g->rank_ports(), (std::vector<uint16_t>{2, 1, 0}));
  for (CaisRankNode* r : ranks) {
    EXPECT_TRUE(r->joined());
    EXPECT_EQ(r->seq_base(), g->seq_base);
    EXPECT_EQ(r->next_seq(), g->seq_base + 1);
  }
  // Every rank's block i holds i + 10 x rank: gathered exactly, blocks in
  // rank order although the ports are in reverse.
  constexpr size_t kBlock = 1000;  // 4 chunks, the last short
  std::vector<std::vector<float>> in(kRanks), out(kRanks, std::vector<float>(kRanks * kBlock));
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < kBlock; ++i) in[r].push_back(static_cast<float>(i + 10 * r));
    ASSERT_TRUE(
        ranks[r]->Begin(ranks[r]->next_seq(), wire::CaisOp::kAllGather, &in[r], &out[r]).ok());
  }
  sim.RunUntil(sim.now() + 100 * dp::kNsPerMs);
  ASSERT_EQ(done, kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (int q = 0; q < kRanks; ++q) {
      for (size_t i = 0; i < kBlock; ++i) {
        ASSERT_EQ(out[r][q * kBlock + i], static_cast<float>(i + 10 * q)) << r << " " << q;
      }
    }
  }
  // The host that never joined: its data is dropped, counted.
  EXPECT_EQ(sw->unknown_sender(), 0u);
  stranger->Begin(1, &lost);
  sim.RunUntil(sim.now() + 10 * dp::kNsPerMs);
  EXPECT_GT(sw->unknown_sender(), 0u);
  EXPECT_EQ(sw->reducer().totals().completed_chunks, 12u);
}

// Four jobs of two ranks on one switch: four groups formed by JOIN, each
// rank's result its own job's sum, every job at the two-rank closed form
// (a rank's link is its own); each job's time reported.
TEST(CaisSimTest, SeveralJobsOnOneSwitchAreEachTheirOwnGroup) {
  CaisSimScenario s = Star(8, 100, 1);
  s.jobs = 4;
  s.backends = {"inca", "ring"};
  s.sizes = {256 << 10};
  auto r = RunCaisSimScenario(s);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const CaisSimRow& x : r->rows) {
    SCOPED_TRACE(x.backend);
    EXPECT_GT(x.checked, 0u);
    EXPECT_EQ(x.wrong + x.fallback_chunks, 0u);
    EXPECT_EQ(x.job_mean_us.size(), 4u);
    EXPECT_NEAR(x.of_closed_form, 1.0, 0.05);
    const double delay = s.link_delay_us * 1e-6;
    EXPECT_NEAR(x.closed_form_us,
                1e6 * (x.backend == "inca" ? SwitchAllReduceSeconds(2, x.bytes, s.chunk_size, 100e9,
                                                                    s.overhead_bytes, delay)
                                           : RingAllReduceSeconds(2, x.bytes, s.chunk_size, 100e9,
                                                                  s.overhead_bytes, delay, 0)),
                1e-6 * x.closed_form_us);
  }
  EXPECT_NE(CaisResultJson(s, *r).find("\"job_mean_us\":["), std::string::npos);
}

// In a scenario (form_groups, the default) the operations start once the
// group is formed and take the time they take with a static rule.
TEST(CaisSimTest, ScenariosFormTheGroupFirstAndTimeTheOperationsAlike) {
  CaisSimScenario s = Star(4, 100, 1);
  s.backends = {"inca"};
  s.sizes = {1 << 20};
  auto formed = RunCaisSimScenario(s);
  ASSERT_TRUE(formed.ok()) << formed.status();
  s.form_groups = false;
  auto fixed = RunCaisSimScenario(s);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_GE(formed->rows[0].formation_us, 20'000);
  EXPECT_EQ(fixed->rows[0].formation_us, 0);
  EXPECT_EQ(formed->rows[0].op_us, fixed->rows[0].op_us);
  EXPECT_NE(CaisResultJson(s, *formed).find("\"formation_us\":"), std::string::npos);
  // With loss, JOINs and replies are lost too, and asked again.
  s.form_groups = true;
  s.loss = 0.05;
  s.seed = 4;
  auto lossy = RunCaisSimScenario(s);
  ASSERT_TRUE(lossy.ok()) << lossy.status();
  EXPECT_EQ(lossy->rows[0].wrong, 0u);
  EXPECT_GE(lossy->rows[0].formation_us, 20'000);
}

// The host model: when each packet costs the rank's CPU more than the
// wire, every backend runs at its CPU bound, and the switch's saving is
// the same 2(n-1)/n in packets handled as in bytes on the links; a second
// core halves the time.
TEST(CaisSimTest, HostsThatPayPerPacketSetThePaceOfEveryBackend) {
  CaisSimScenario s = Star(4, 100, 1);
  s.mode = "timing";
  s.sizes = {4 << 20};
  s.host_packet_ns = 2000;  // 0.5 Mpps per core, against 1.4 Mpps on the wire
  s.host_byte_ps = 20;
  auto one = RunCaisSimScenario(s);
  ASSERT_TRUE(one.ok()) << one.status();
  s.host_cores = 2;
  auto two = RunCaisSimScenario(s);
  ASSERT_TRUE(two.ok()) << two.status();
  for (size_t i = 0; i < 2; ++i) {
    const CaisSimRow &a = one->rows[i], &b = two->rows[i];
    SCOPED_TRACE(a.backend);
    EXPECT_EQ(a.wrong, 0u);
    EXPECT_NEAR(a.of_closed_form, 1.0, 0.01);
    EXPECT_NEAR(a.host_busy_us / a.mean_us, 1.0, 0.01);  // the CPU never idles
    EXPECT_NEAR(b.mean_us / a.mean_us, 0.5, 0.05);
  }
  EXPECT_NEAR(one->rows[1].mean_us / one->rows[0].mean_us, 1.5, 0.02);
  // Free hosts: the links' pace, as without a host model.
  s.host_packet_ns = 0;
  s.host_byte_ps = 0;
  auto free = RunCaisSimScenario(s);
  ASSERT_TRUE(free.ok());
  EXPECT_LT(free->rows[0].mean_us, 0.4 * one->rows[0].mean_us);
  EXPECT_EQ(free->rows[0].host_busy_us, 0);
}

// Striping over switches: every host has a link to each, and each
// operation's tensor is cut into one stripe per switch. Every backend is
// exact on uneven stripes, and bandwidth-bound the time falls as 1/k. The
// planes share each host's CPU: hosts that are the bottleneck gain nothing.
TEST(CaisSimTest, StripingOverSwitchesSplitsTheTensorAndSharesTheHosts) {
  CaisSimScenario s = Star(4, 100, 1);
  s.backends = {"inca", "ring", "tree"};
  s.sizes = {4 * 1'000'003, 64 << 10};  // stripes of unequal length
  s.switches = 3;
  auto three = RunCaisSimScenario(s);
  ASSERT_TRUE(three.ok()) << three.status();
  for (const CaisSimRow& x : three->rows) {
    EXPECT_EQ(x.wrong, 0u) << x.backend << " " << x.bytes;
    EXPECT_EQ(x.checked, x.bytes / 4) << x.backend;
    EXPECT_LE(x.of_closed_form, 1.01) << x.backend << " " << x.bytes;
  }
  s.switches = 1;
  auto one = RunCaisSimScenario(s);
  ASSERT_TRUE(one.ok()) << one.status();
  for (const char* b : {"inca", "ring"}) {
    EXPECT_NEAR(Row(*three, b, 4'000'012).mean_us / Row(*one, b, 4'000'012).mean_us, 1.0 / 3, 0.02)
        << b;
  }
  // CPU-bound hosts: the second switch's links stand idle.
  s.backends = {"inca"};
  s.sizes = {4 << 20};
  s.mode = "timing";
  s.host_packet_ns = 3000;
  auto cpu1 = RunCaisSimScenario(s);
  s.switches = 2;
  auto cpu2 = RunCaisSimScenario(s);
  ASSERT_TRUE(cpu1.ok() && cpu2.ok());
  EXPECT_NEAR(cpu2->rows[0].mean_us / cpu1->rows[0].mean_us, 1.0, 0.03);
  EXPECT_NEAR(cpu2->rows[0].of_closed_form, 1.0, 0.02);
}

}  // namespace
}  // namespace inca::sim
