// Aggregation up a tree of switches (Rule::uplink, docs/design/tree.md),
// deterministically: real reducers at every switch of a BuildTree tree and
// the ranks' transport cores, wired by simulated links on a manual clock.
// Every result is checked element by element against the tree's
// reference order.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>
#include <vector>

#include "tree/tree_net_test_util.h"

namespace inca::tree {
namespace {

using testing::TreeNet;
using testing::TreeNetOptions;

// Whether `got` is not `want`: bit for bit when `bitwise` (deterministic
// switches), else beyond f32 rounding.
bool Differs(float want, float got, bool bitwise) {
  return bitwise ? std::memcmp(&want, &got, sizeof got) != 0
                 : std::abs(got - want) > 1e-4f * std::max(1.0f, std::abs(want));
}

// Every rank's result equals the tree's reference sum (Differs).
void ExpectReference(TreeNet& net, int k, size_t elements, bool bitwise) {
  for (int r = 0; r < net.cores(); ++r) {
    ASSERT_TRUE(net.result(r).complete) << "core " << r << " op " << k;
    size_t wrong = 0;
    for (size_t i = 0; i < elements; ++i) {
      wrong += Differs(net.Reference(net.tree().root, k, i), net.data(r)[i], bitwise);
    }
    EXPECT_EQ(wrong, 0u) << "rank " << r << " op " << k;
  }
}

uint64_t Total(TreeNet& net, uint64_t cais::GroupCounters::*field) {
  uint64_t n = 0;
  for (size_t k = 0; k < net.tree().nodes.size(); ++k) {
    n += net.reducer(static_cast<int>(k)).group(0).*field;
  }
  return n;
}

TEST(TreeAggregationTest, TwoLevelsEveryRankGetsTheTreeSumAndLeavesSendOnePartialPerChunk) {
  TreeNetOptions o;
  o.racks = 2;
  o.hosts = 3;
  o.deterministic = true;
  TreeNet net(o);
  ASSERT_EQ(net.tree().depth, 2);
  for (int k = 0; k < 3; ++k) {
    net.RunOp(k);
    ExpectReference(net, k, o.elements, /*bitwise=*/true);
  }
  const uint64_t chunks = (o.elements * 4 + 8951) / 8952;
  const int root = net.tree().root;
  for (int c : net.tree().nodes[static_cast<size_t>(root)].children) {
    EXPECT_EQ(net.reducer(c).group(0).uplink_partials, 3 * chunks) << "leaf " << c;
    EXPECT_EQ(net.reducer(c).group(0).parent_results, 3 * chunks) << "leaf " << c;
    EXPECT_EQ(net.reducer(c).group(0).completed_chunks, 3 * chunks);
  }
  EXPECT_EQ(net.reducer(root).group(0).uplink_partials, 0u);
  EXPECT_EQ(net.reducer(root).group(0).completed_chunks, 3 * chunks);
  // Every pending slot was given back at every level.
  for (size_t k = 0; k < net.tree().nodes.size(); ++k) {
    EXPECT_EQ(net.reducer(static_cast<int>(k)).sram().pending_chunks, 0u);
  }
}

TEST(TreeAggregationTest, ThreeLevelsAreExact) {
  TreeNetOptions o;
  o.racks = 4;
  o.hosts = 2;
  o.levels = 3;
  o.deterministic = true;
  TreeNet net(o);
  ASSERT_EQ(net.tree().depth, 3);
  net.RunOp(0);
  ExpectReference(net, 0, o.elements, /*bitwise=*/true);
}

// The two-level scale on this machine: 128 ranks behind 4 leaves of
// 32 under one root, planned from their JOINs, exact on the switch path.
TEST(TreeAggregationTest, OneHundredTwentyEightRanksOverFourLeavesAreExact) {
  TreeNetOptions o;
  o.racks = 4;
  o.hosts = 32;
  o.elements = 3000;  // 2 chunks
  o.deterministic = true;
  TreeNet net(o);
  ASSERT_EQ(net.tree().world_size, 128);
  ASSERT_EQ(net.plan().installs.size(), 5u);
  net.RunOp(0);
  ExpectReference(net, 0, o.elements, /*bitwise=*/true);
  EXPECT_EQ(Total(net, &cais::GroupCounters::timeouts), 0u);
}

// In deterministic mode the result depends on the tree only: other link
// timings (another seed, jitter) reorder every arrival, not one bit.
TEST(TreeAggregationTest, DeterministicResultIsBitwiseTheSameRunToRun) {
  std::vector<float> first;
  for (uint64_t seed : {1, 2, 3}) {
    TreeNetOptions o;
    o.racks = 3;
    o.hosts = 3;
    o.deterministic = true;
    o.seed = seed;
    o.host_link.jitter_ns = 200'000 * static_cast<int64_t>(seed);
    o.uplink.jitter_ns = 100'000;
    TreeNet net(o);
    net.SetLate(static_cast<int>(seed), 2'000'000);
    net.RunOp(0);
    ExpectReference(net, 0, o.elements, /*bitwise=*/true);
    if (first.empty()) first = net.data(0);
    EXPECT_EQ(std::memcmp(first.data(), net.data(0).data(), first.size() * sizeof(float)), 0)
        << "seed " << seed;
  }
}

// After operation k as `op`: every rank's buffer holds what the collective
// gives it, every chunk through the switches (none handed back or
// declined): ReduceScatter its block of the tree's reference sum (bit for
// bit when `bitwise`), AllGather every rank's input, Broadcast the root's.
void ExpectCollective(TreeNet& net, int k, wire::CaisOp op, int root, size_t e, bool bitwise) {
  const auto n = static_cast<size_t>(net.tree().world_size);
  for (int r = 0; r < net.cores(); ++r) {
    const client::SwitchPhaseResult& res = net.result(r);
    ASSERT_TRUE(res.complete) << "rank " << r << " op " << k;
    EXPECT_FALSE(res.fallback_notice || res.declined) << "rank " << r << " op " << k;
    size_t wrong = 0;
    const size_t len = op == wire::CaisOp::kAllGather ? e * n : e;
    for (size_t i = 0; i < len; ++i) {
      float want = 0, got = 0;
      if (op == wire::CaisOp::kReduceScatter) {
        want = net.Reference(net.tree().root, k, static_cast<size_t>(r) * e + i);
        got = net.out(r)[i];
      } else if (op == wire::CaisOp::kAllGather) {
        want = TreeNet::Input(static_cast<int>(i / e), k, i % e);
        got = net.out(r)[i];
      } else {
        want = TreeNet::Input(root, k, i);
        got = net.data(r)[i];
      }
      wrong += Differs(want, got, bitwise);
    }
    EXPECT_EQ(wrong, 0u) << "rank " << r << " op " << k;
  }
}

// ReduceScatter, AllGather and Broadcast go up a 2-level and a 3-level
// tree: every switch places the blocks by rank (Rule::rank_ports), so a
// ReduceScatter chunk's result goes down only toward its owner (ACKs
// elsewhere), and an AllGather or Broadcast chunk goes up from its
// contributor's leaf and down to every leaf.
TEST(TreeAggregationTest, ReduceScatterAllGatherAndBroadcastGoUpTwoAndThreeLevels) {
  for (const auto& [racks, hosts, levels] : {std::tuple{2, 3, 2}, std::tuple{4, 2, 3}}) {
    SCOPED_TRACE(::testing::Message() << levels << " levels");
    TreeNetOptions o;
    o.racks = racks;
    o.hosts = hosts;
    o.levels = levels;
    o.elements = 5'000;
    o.deterministic = true;
    TreeNet net(o);
    ASSERT_EQ(net.tree().depth, levels);
    const int last = net.tree().world_size - 1;
    net.RunCollective(0, wire::CaisOp::kReduceScatter);
    ExpectCollective(net, 0, wire::CaisOp::kReduceScatter, 0, o.elements, /*bitwise=*/true);
    net.RunCollective(1, wire::CaisOp::kAllGather);
    ExpectCollective(net, 1, wire::CaisOp::kAllGather, 0, o.elements, /*bitwise=*/true);
    net.RunCollective(2, wire::CaisOp::kBroadcast, last);
    ExpectCollective(net, 2, wire::CaisOp::kBroadcast, last, o.elements, /*bitwise=*/true);
    net.RunCollective(3, wire::CaisOp::kBroadcast, 0);
    ExpectCollective(net, 3, wire::CaisOp::kBroadcast, 0, o.elements, /*bitwise=*/true);
    EXPECT_EQ(Total(net, &cais::GroupCounters::declined_notices), 0u);
    EXPECT_EQ(Total(net, &cais::GroupCounters::fallback_notices), 0u);
    // Every leaf sent partials up and multicast what came down.
    for (int c : net.tree().nodes[static_cast<size_t>(net.tree().root)].children) {
      EXPECT_GT(net.reducer(c).group(0).uplink_partials, 0u) << "child " << c;
      EXPECT_GT(net.reducer(c).group(0).parent_results, 0u) << "child " << c;
    }
    for (size_t k = 0; k < net.tree().nodes.size(); ++k) {
      EXPECT_EQ(net.reducer(static_cast<int>(k)).sram().pending_chunks, 0u);
    }
  }
}

// The same collectives with loss on every hop: an AllGather chunk lost
// below a leaf is asked for there and answered from the leaf's copy, or
// (when it never came down) from the parent's.
TEST(TreeAggregationTest, ReduceScatterAndAllGatherRecoverLossOnEveryHop) {
  TreeNetOptions o;
  o.racks = 2;
  o.hosts = 2;
  o.elements = 5'000;
  o.host_link.loss = 0.03;
  o.uplink.loss = 0.1;
  TreeNet net(o);
  for (int k = 0; k < 4; ++k) {
    const wire::CaisOp op = k % 2 ? wire::CaisOp::kAllGather : wire::CaisOp::kReduceScatter;
    net.RunCollective(k, op);
    ExpectCollective(net, k, op, 0, o.elements, /*bitwise=*/false);
  }
  EXPECT_GT(Total(net, &cais::GroupCounters::uplink_requests), 0u);
  EXPECT_GT(Total(net, &cais::GroupCounters::results_resent), 0u);
}

TEST(TreeAggregationTest, LossOnEveryHopIsRecoveredExactly) {
  TreeNetOptions o;
  o.racks = 2;
  o.hosts = 2;
  o.host_link.loss = 0.02;
  o.uplink.loss = 0.1;
  TreeNet net(o);
  for (int k = 0; k < 3; ++k) {
    net.RunOp(k);
    ExpectReference(net, k, o.elements, /*bitwise=*/false);
  }
  // The leaves re-asked their parent for answers lost on the uplink, and
  // resent partials it lacked.
  EXPECT_GT(Total(net, &cais::GroupCounters::uplink_requests), 0u);
  EXPECT_GT(Total(net, &cais::GroupCounters::uplink_resent), 0u);
}

// Two groups over one tree of 2 racks x 2 hosts, 100,000 f32 an operation
// (45 chunks), a root with room for `root_max_pending` chunks (half of
// them reserved, split between the groups), `window` chunks per rank.
TreeNetOptions TwoGroupsOnTwoRacks(uint32_t root_max_pending, uint32_t window) {
  TreeNetOptions o;
  o.racks = 2;
  o.hosts = 2;
  o.groups = 2;
  o.elements = 100'000;
  o.root_max_pending = root_max_pending;
  o.max_window = window;
  return o;
}

// Two groups over one tree whose root has room for 8 pending chunks (a
// reserved share of 2 each) against 16 chunks of window per rank: the root
// turns partials away, the leaves hold them and send them again when asked,
// and neither group starves the other into a fallback.
TEST(TreeAggregationTest, TwoGroupsSharingASmallRootBothFinishWithoutFallingBack) {
  const TreeNetOptions o = TwoGroupsOnTwoRacks(/*root_max_pending=*/8, /*window=*/16);
  TreeNet net(o);
  // The second leaf's partials arrive 2 ms after the first's: each root
  // slot waits that long, so both groups' windows overfill the root.
  net.uplink_up(net.tree().nodes[static_cast<size_t>(net.tree().root)].children[1]).delay_ns =
      2'000'000;
  for (int k = 0; k < 2; ++k) {
    net.RunOp(k);
    ExpectReference(net, k, o.elements, /*bitwise=*/false);
  }
  const auto& root = net.reducer(net.tree().root);
  EXPECT_GT(root.totals().drops_by_reason[static_cast<size_t>(dp::DropReason::kSlotsExhausted)] +
                root.totals().drops_by_reason[static_cast<size_t>(dp::DropReason::kGroupShare)],
            0u)
      << "the root was never full: the test shows nothing";
  uint64_t resent = 0;
  for (size_t k = 0; k < net.tree().nodes.size(); ++k) {
    resent += net.reducer(static_cast<int>(k)).totals().uplink_resent;
  }
  EXPECT_GT(resent, 0u);
  for (uint8_t g = 0; g < 2; ++g) {
    for (size_t k = 0; k < net.tree().nodes.size(); ++k) {
      const auto& c = net.reducer(static_cast<int>(k)).group(g);
      EXPECT_EQ(c.timeouts + c.fallback_notices, 0u) << "group " << int{g} << " node " << k;
    }
  }
}

// A hostile or buggy child switch (docs/design/tree.md, "Slots across
// levels"): leaf 1 floods the root with partials of group 1 for chunks that
// never complete, 20 a millisecond for the whole run (3 s). The root holds them
// within group 1's part and what nobody reserved; group 0, whose window fits
// its reserved part, finishes exact with no timeout or fallback anywhere.
TEST(TreeAggregationTest, AChildFloodingItsGroupIsContainedToThatGroup) {
  // 16 pending chunks at the root, 8 reserved: 4 per group, each rank's window.
  const TreeNetOptions o = TwoGroupsOnTwoRacks(/*root_max_pending=*/16, /*window=*/4);
  TreeNet net(o);
  const int root = net.tree().root;
  const int leaf1 = net.tree().nodes[static_cast<size_t>(root)].children[1];
  const std::vector<uint8_t> junk(64, 0x7f);
  for (int i = 0; i < 60'000; ++i) {
    wire::CaisHeader h;
    h.group_id = 1;
    h.seq_num = 1'000'000 + static_cast<uint32_t>(i);  // no rank runs these
    h.payload_len = static_cast<uint32_t>(junk.size());
    net.Inject(root, net.PortAtParent(leaf1), wire::SerializeCais(h, junk), int64_t{i} * 50'000);
  }
  for (int k = 0; k < 2; ++k) {
    net.RunOp(k);
    for (int r = 0; r < net.tree().world_size; ++r) {  // group 0's cores
      ASSERT_TRUE(net.result(r).complete) << "rank " << r;
      EXPECT_FALSE(net.result(r).fallback_notice) << "rank " << r;
      for (size_t i = 0; i < o.elements; i += 997) {
        const float want = net.Reference(root, k, i);
        ASSERT_NEAR(net.data(r)[i], want, 1e-4f * std::max(1.0f, std::abs(want))) << r;
      }
    }
  }
  ASSERT_LT(net.now(), 3'000'000'000) << "the flood lasts the whole run";
  const auto& at_root = net.reducer(root);
  EXPECT_GT(at_root.group(1).drops_by_reason[static_cast<size_t>(dp::DropReason::kGroupShare)],
            1000u)
      << "the flood was held to group 1's part";
  for (size_t k = 0; k < net.tree().nodes.size(); ++k) {
    const auto& c = net.reducer(static_cast<int>(k)).group(0);
    EXPECT_EQ(c.timeouts + c.fallback_notices, 0u) << "node " << k;
  }
}

// A buggy child sends partials its group's ranks cannot have made (another
// length) for every chunk of group 1's operation, ahead of the real ones:
// the root hands each chunk back to every child of group 1 as ranks that
// disagree, and every rank of group 1 hears it (the agreement round then
// names what differs); group 0, on the same switches, finishes exact. A
// partial of the right shape but wrong values cannot be told from a right
// one: a switch trusts its children as it trusts its hosts.
TEST(TreeAggregationTest, AChildsMisshapenPartialsHandBackOnlyItsOwnGroup) {
  const TreeNetOptions o = TwoGroupsOnTwoRacks(/*root_max_pending=*/4096, /*window=*/16);
  TreeNet net(o);
  const int root = net.tree().root;
  const int leaf1 = net.tree().nodes[static_cast<size_t>(root)].children[1];
  const uint16_t chunks = static_cast<uint16_t>((o.elements * 4 + 8951) / 8952);
  const std::vector<uint8_t> junk(64, 0x7f);
  for (uint16_t c = 0; c < chunks; ++c) {
    wire::CaisHeader h;
    h.group_id = 1;
    h.seq_num = 0;  // the operation RunOp(0) starts
    h.chunk_id = c;
    h.total_chunks = chunks;
    h.payload_len = static_cast<uint32_t>(junk.size());
    net.Inject(root, net.PortAtParent(leaf1), wire::SerializeCais(h, junk), net.now() + 1);
  }
  net.RunOp(0);
  const int n = net.tree().world_size;
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(net.result(r).complete) << "group 0 rank " << r;
    EXPECT_FALSE(net.result(r).fallback_notice) << "group 0 rank " << r;
    size_t wrong = 0;
    for (size_t i = 0; i < o.elements; ++i) {
      wrong += Differs(net.Reference(root, 0, i), net.data(r)[i], /*bitwise=*/false);
    }
    EXPECT_EQ(wrong, 0u) << "group 0 rank " << r;
    EXPECT_TRUE(net.result(n + r).disagreed) << "group 1 rank " << r;
  }
  EXPECT_EQ(net.reducer(root).group(0).fallback_notices, 0u);
  // The ranks' first chunks met the child's and were handed back; a rank
  // that hears it ends the operation there, so not every chunk went up.
  EXPECT_GT(net.reducer(root)
                .group(1)
                .drops_by_reason[static_cast<size_t>(dp::DropReason::kShapeMismatch)],
            0u);
}

TEST(TreeAggregationTest, ALateRankDelaysItsWholeTreeAndNothingFallsBack) {
  TreeNetOptions o;
  o.racks = 2;
  o.hosts = 2;
  TreeNet net(o);
  net.SetLate(3, 200'000'000);  // 200 ms: within every switch's timeout
  net.RunOp(0);
  ExpectReference(net, 0, o.elements, /*bitwise=*/false);
  EXPECT_EQ(Total(net, &cais::GroupCounters::timeouts), 0u);
  EXPECT_EQ(Total(net, &cais::GroupCounters::fallback_notices), 0u);
}

// The root alone decides: when it hands a chunk back (a rank later than its
// timeout), every rank under every leaf gets the fallback, none gives up.
TEST(TreeAggregationTest, TheRootsTimeoutHandsBackToEveryRankOfTheTree) {
  TreeNetOptions o;
  o.racks = 2;
  o.hosts = 2;
  o.elements = 4000;
  TreeNet net(o);
  net.SetLate(0, 550'000'000);  // beyond the root's 500 ms, within the leaves'
  net.RunOp(0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(net.result(r).complete) << "rank " << r;
    EXPECT_TRUE(net.result(r).fallback_notice) << "rank " << r;
  }
  EXPECT_GT(net.reducer(net.tree().root).group(0).timeouts, 0u);
  for (int c : net.tree().nodes[static_cast<size_t>(net.tree().root)].children) {
    EXPECT_EQ(net.reducer(c).group(0).timeouts, 0u) << "leaf " << c << " followed the root";
    EXPECT_EQ(net.reducer(c).sram().pending_chunks, 0u);
  }
}

TEST(TreeAggregationTest, ADeadParentHandsBackAtTheLeavesBeforeAnyRankGivesUp) {
  TreeNetOptions o;
  o.racks = 2;
  o.hosts = 2;
  o.elements = 4000;
  TreeNet net(o);
  net.Kill(net.tree().root);
  net.RunOp(0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(net.result(r).complete) << "rank " << r;
    EXPECT_TRUE(net.result(r).fallback_notice) << "rank " << r << " gave up instead";
  }
  EXPECT_LT(net.now(), int64_t{1'000'000'000});  // the client's switch_timeout_ms
}

}  // namespace
}  // namespace inca::tree
