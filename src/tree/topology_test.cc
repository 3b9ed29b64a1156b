// Topologies from YAML (every refusal one line) and the trees BuildTree
// makes over them: membership and order at every switch, pruning to the
// lowest common switch, the member limit, and determinism.
#include "inca/tree/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace inca::tree {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// spine <- leaf0, leaf1 (1 Gbit/s uplinks); hosts .10/.11 behind leaf0,
// .20/.21 behind leaf1, .5 behind the spine itself.
constexpr const char* kTwoRacks = R"(
switches:
  - {name: spine, address: "198.18.0.1:9410"}
  - {name: leaf0, address: "198.18.1.1:9410", parent: spine, uplink_bps: 1e9}
  - {name: leaf1, address: "198.18.2.1:9410", parent: spine, uplink_bps: 1e9}
hosts:
  - {at: leaf0, addresses: [198.18.1.10, 198.18.1.11]}
  - {at: leaf1, addresses: [198.18.2.20, "198.18.2.21"]}
  - {at: spine, addresses: ["2001:2::5"]}
)";

Topology MustParse(const std::string& yaml) {
  auto t = Topology::FromYaml(yaml, "t.yaml");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Topology{};
}

std::string NameOf(const Topology& t, const Tree& tree, int node) {
  return t.switches[static_cast<size_t>(tree.nodes[static_cast<size_t>(node)].switch_index)].name;
}

TEST(TopologyTest, ReadsSwitchesParentsRatesAndHosts) {
  const Topology t = MustParse(kTwoRacks);
  ASSERT_EQ(t.switches.size(), 3u);
  EXPECT_EQ(t.switches[1].parent, "spine");
  EXPECT_EQ(t.switches[1].uplink_bps, 1e9);
  EXPECT_EQ(t.hosts.size(), 5u);
  EXPECT_EQ(t.SwitchOfHost("198.18.2.21"), 2);
  EXPECT_EQ(t.SwitchOfHost("::ffff:198.18.1.10"), 1);  // the same host, v4-mapped
  EXPECT_EQ(t.SwitchOfHost("2001:2:0::5"), 0);
  EXPECT_EQ(t.SwitchOfHost("198.18.9.9"), std::nullopt);
}

TEST(TopologyTest, EveryMistakeIsOneLineNamingTheFileAndWhat) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"switches: []", "at least one switch"},
      {"switches: [{name: a, address: x}]\nracks: 2", "unknown key 'racks'"},
      {"switches: [{address: x}]", "switches[0]: 'name' is missing"},
      {"switches: [{name: a, address: x, speed: 1}]", "unknown key 'speed'"},
      {"switches: [{name: a, address: x, uplink_bps: fast}]", "is not a number"},
      {"switches: [{name: a, address: x}, {name: a, address: y}]", "'a' is named twice"},
      {"switches: [{name: a, address: x, parent: b}]", "parent 'b' is no switch"},
      {"switches: [{name: a, address: x, parent: b}, {name: b, address: y, parent: a}]",
       "a cycle of parents"},
      {"switches: [{name: a, address: x}]\nhosts: [{at: a, addresses: [1.2.3]}]",
       "'1.2.3' is not an IP address"},
      {"switches: [{name: a, address: x}]\nhosts: [{at: b, addresses: [1.2.3.4]}]",
       "behind 'b', which is no switch"},
      {"switches: [{name: a, address: x}]\nhosts: [{at: a, addresses: [1.2.3.4, 1.2.3.4]}]",
       "listed twice"},
      {"switches: [{name: a, address: x}]\nhosts: [{at: a, addresses: 1.2.3.4}]",
       "'addresses' must be a list"},
      {"{{{", "not YAML"},
      {"switches: [{name: a, address: x, parent: b, parents: [b]}, {name: b, address: y}]",
       "'parent' and 'parents': give one"},
      {"switches: [{name: a, address: x, parents: []}]", "'parents' must be a list"},
      {"switches: [{name: a, address: x, parents: [b, c]}, {name: b, address: y}]",
       "parent 'c' is no switch"},
      {"switches: [{name: a, address: x, parents: [c, b]}, {name: b, address: y, parent: a},\n"
       "  {name: c, address: z}]",
       "a cycle of parents"},  // in plane 1 only
      {"switches: [{name: a, address: x, parents: [b, b]}, {name: b, address: y}]", "'b' twice"},
      {"switches: [{name: a, address: x, parents: [b, '']}, {name: b, address: y}]",
       "an empty name"},
  };
  for (const auto& [yaml, words] : cases) {
    const auto t = Topology::FromYaml(yaml, "t.yaml");
    ASSERT_FALSE(t.ok()) << yaml;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << yaml;
    const std::string m(t.status().message());
    EXPECT_THAT(m, HasSubstr(words)) << yaml;
    EXPECT_EQ(m.rfind("t.yaml: ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// Leaves that list two spines: two tree planes, each rooted at a spine;
// LeastLoadedTree takes the plane whose switches carry the fewest groups
// (plane 0 on a tie).
TEST(BuildTreeTest, ATopologyOfTwoSpinesHasATreePlaneRootedAtEach) {
  const Topology t = MustParse(R"(
switches:
  - {name: spine0, address: "198.18.0.1:9410"}
  - {name: spine1, address: "198.18.0.2:9410"}
  - {name: leaf0, address: "198.18.1.1:9410", parents: [spine0, spine1]}
  - {name: leaf1, address: "198.18.2.1:9410", parents: [spine0, spine1]}
hosts:
  - {at: leaf0, addresses: [198.18.1.10]}
  - {at: leaf1, addresses: [198.18.2.20]}
)");
  EXPECT_EQ(t.planes(), 2);
  EXPECT_EQ(t.switches[2].parent, "spine0");
  const std::vector<Member> m = {{0, "198.18.1.10"}, {1, "198.18.2.20"}};
  for (int plane : {0, 1, 2}) {
    auto tree = BuildTree(t, m, plane);
    ASSERT_TRUE(tree.ok()) << tree.status();
    EXPECT_EQ(tree->nodes[0].switch_index, plane % 2) << plane;
    EXPECT_EQ(tree->depth, 2);
  }
  auto tie = LeastLoadedTree(t, m, {0, 0, 1, 1});
  ASSERT_TRUE(tie.ok());
  EXPECT_EQ(tie->nodes[0].switch_index, 0);
  auto busy = LeastLoadedTree(t, m, {1, 0, 1, 1});  // spine0 carries a group
  ASSERT_TRUE(busy.ok());
  EXPECT_EQ(busy->nodes[0].switch_index, 1);
  // Ranks behind one leaf: one switch, whatever the plane.
  auto alone = LeastLoadedTree(t, {{0, "198.18.1.10"}}, {1, 0, 0, 0});
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(alone->nodes.size(), 1u);
}

TEST(BuildTreeTest, TwoRacksMeetAtTheSpineWithLeavesInTopologyOrder) {
  const Topology t = MustParse(kTwoRacks);
  // Ranks interleaved across the racks, as a scheduler might place them.
  auto tree = BuildTree(
      t, {{0, "198.18.2.20"}, {1, "198.18.1.10"}, {2, "198.18.2.21"}, {3, "198.18.1.11"}});
  ASSERT_TRUE(tree.ok()) << tree.status();
  ASSERT_EQ(tree->nodes.size(), 3u);
  EXPECT_EQ(NameOf(t, *tree, tree->root), "spine");
  EXPECT_EQ(tree->depth, 2);
  const TreeNode& spine = tree->nodes[0];
  EXPECT_TRUE(spine.ranks.empty());
  ASSERT_EQ(spine.children.size(), 2u);
  EXPECT_EQ(spine.members(), 2);
  const TreeNode& leaf0 = tree->nodes[static_cast<size_t>(spine.children[0])];
  const TreeNode& leaf1 = tree->nodes[static_cast<size_t>(spine.children[1])];
  EXPECT_EQ(NameOf(t, *tree, spine.children[0]), "leaf0");
  EXPECT_THAT(leaf0.ranks, ElementsAre(1, 3));
  EXPECT_THAT(leaf1.ranks, ElementsAre(0, 2));
  EXPECT_EQ(leaf0.index_at_parent, 0);
  EXPECT_EQ(leaf1.index_at_parent, 1);
  EXPECT_EQ(leaf0.ranks_beneath, 2);
  EXPECT_EQ(spine.ranks_beneath, 4);
  // Leaf partials in leaf order, each leaf's ranks in rank order.
  EXPECT_THAT(tree->reduction_order, ElementsAre(1, 3, 0, 2));
  EXPECT_EQ(tree->MemberToward(0, 2), 1);                  // through leaf1
  EXPECT_EQ(tree->MemberToward(spine.children[1], 2), 1);  // rank 2 is leaf1's member 1
  EXPECT_EQ(tree->MemberToward(spine.children[0], 2), std::nullopt);
}

TEST(BuildTreeTest, RanksBehindOneLeafMakeAOneSwitchTree) {
  const Topology t = MustParse(kTwoRacks);
  auto tree = BuildTree(t, {{0, "198.18.1.11"}, {1, "198.18.1.10"}});
  ASSERT_TRUE(tree.ok()) << tree.status();
  ASSERT_EQ(tree->nodes.size(), 1u);
  EXPECT_EQ(NameOf(t, *tree, tree->root), "leaf0");
  EXPECT_EQ(tree->depth, 1);
  EXPECT_EQ(tree->nodes[0].parent, -1);
  EXPECT_THAT(tree->nodes[0].ranks, ElementsAre(0, 1));
}

TEST(BuildTreeTest, ASwitchsOwnRanksComeBeforeItsChildSwitches) {
  const Topology t = MustParse(kTwoRacks);
  auto tree = BuildTree(t, {{0, "198.18.1.10"}, {1, "2001:2::5"}});
  ASSERT_TRUE(tree.ok()) << tree.status();
  const TreeNode& spine = tree->nodes[0];
  EXPECT_THAT(spine.ranks, ElementsAre(1));
  ASSERT_EQ(spine.children.size(), 1u);  // leaf1 has no rank: not in the tree
  EXPECT_EQ(tree->nodes[static_cast<size_t>(spine.children[0])].index_at_parent, 1);
  EXPECT_THAT(tree->reduction_order, ElementsAre(1, 0));
}

// core <- pod0 <- leaf00, leaf01; core <- pod1 <- leaf10: `racks` hosts per
// leaf at 198.18.<leaf>.<10 + h>.
std::string ThreeLevels(int hosts_per_leaf) {
  std::string y =
      "switches:\n  - {name: core, address: \"198.18.0.1:9410\"}\n"
      "  - {name: pod0, address: \"198.18.0.2:9410\", parent: core}\n"
      "  - {name: pod1, address: \"198.18.0.3:9410\", parent: core}\n";
  const char* leaves[][2] = {{"leaf00", "pod0"}, {"leaf01", "pod0"}, {"leaf10", "pod1"}};
  for (int l = 0; l < 3; ++l) {
    absl::StrAppend(&y, "  - {name: ", leaves[l][0], ", address: \"198.18.", l + 1,
                    ".1:9410\", parent: ", leaves[l][1], "}\n");
  }
  y += "hosts:\n";
  for (int l = 0; l < 3; ++l) {
    absl::StrAppend(&y, "  - {at: ", leaves[l][0], ", addresses: [");
    for (int h = 0; h < hosts_per_leaf; ++h) {
      absl::StrAppend(&y, h ? ", " : "", "198.18.", l + 1, ".", 10 + h);
    }
    y += "]}\n";
  }
  return y;
}

TEST(BuildTreeTest, ThreeLevelsPruneToTheLowestCommonSwitch) {
  const Topology t = MustParse(ThreeLevels(2));
  // Both leaves of pod0: the tree is pod0 and its two leaves.
  auto pod = BuildTree(t, {{0, "198.18.1.10"}, {1, "198.18.2.10"}, {2, "198.18.2.11"}});
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(NameOf(t, *pod, pod->root), "pod0");
  EXPECT_EQ(pod->depth, 2);
  // One leaf of each pod: core, both pods, one leaf under each.
  auto all = BuildTree(t, {{0, "198.18.1.10"}, {1, "198.18.3.10"}});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(NameOf(t, *all, all->root), "core");
  EXPECT_EQ(all->depth, 3);
  EXPECT_EQ(all->nodes.size(), 5u);
  for (size_t i = 1; i < all->nodes.size(); ++i) {
    EXPECT_LT(all->nodes[i].parent, static_cast<int>(i));  // parents first
  }
}

TEST(BuildTreeTest, MoreThan64MembersAtOneSwitchIsRefusedNamingIt) {
  const Topology t = MustParse(ThreeLevels(70));
  std::vector<Member> m;
  for (int h = 0; h < 65; ++h) m.push_back({h, absl::StrCat("198.18.1.", 10 + h)});
  auto tree = BuildTree(t, m);
  ASSERT_FALSE(tree.ok());
  EXPECT_THAT(std::string(tree.status().message()), HasSubstr("switch 'leaf00' would hold 65"));
  m.pop_back();
  EXPECT_TRUE(BuildTree(t, m).ok());  // 64 fit
}

TEST(BuildTreeTest, OneHundredTwentyEightRanksAcrossFourLeaves) {
  std::string y = "switches:\n  - {name: spine, address: \"198.18.0.1:9410\"}\n";
  std::string hosts = "hosts:\n";
  std::vector<Member> m;
  for (int l = 0; l < 4; ++l) {
    absl::StrAppend(&y, "  - {name: leaf", l, ", address: \"198.18.", l + 1,
                    ".1:9410\", parent: spine}\n");
    absl::StrAppend(&hosts, "  - {at: leaf", l, ", addresses: [");
    for (int h = 0; h < 32; ++h) {
      absl::StrAppend(&hosts, h ? ", " : "", "198.18.", l + 1, ".", 10 + h);
      m.push_back({static_cast<int>(m.size()), absl::StrCat("198.18.", l + 1, ".", 10 + h)});
    }
    hosts += "]}\n";
  }
  const Topology t = MustParse(y + hosts);
  // The order ranks are listed in does not change the tree.
  std::vector<Member> shuffled = m;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(7));
  auto a = BuildTree(t, m), b = BuildTree(t, shuffled);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->world_size, 128);
  EXPECT_EQ(a->nodes[0].members(), 4);
  EXPECT_EQ(a->nodes[0].ranks_beneath, 128);
  EXPECT_EQ(a->reduction_order, b->reduction_order);
  EXPECT_EQ(a->node_of_rank, b->node_of_rank);
  for (int r = 0; r < 128; ++r) EXPECT_EQ(a->MemberToward(0, r), r / 32) << r;
}

TEST(BuildTreeTest, RanksThatCannotFormATreeAreRefusedNamingTheRank) {
  const Topology two_roots = MustParse(R"(
switches:
  - {name: a, address: "198.18.0.1:9410"}
  - {name: b, address: "198.18.0.2:9410"}
hosts:
  - {at: a, addresses: [198.18.0.10]}
  - {at: b, addresses: [198.18.0.20]}
)");
  const std::vector<std::pair<std::vector<Member>, std::string>> cases = {
      {{}, "at least one rank"},
      {{{0, "198.18.0.10"}, {0, "198.18.0.20"}}, "rank 0 is listed twice"},
      {{{0, "198.18.0.10"}, {2, "198.18.0.20"}}, "rank 2 is not in 0..1"},
      {{{0, "198.18.0.10"}, {1, "198.18.7.7"}}, "rank 1: host 198.18.7.7 is behind no switch"},
      {{{0, "198.18.0.10"}, {1, "not-an-ip"}}, "rank 1: host not-an-ip"},
      {{{0, "198.18.0.10"}, {1, "198.18.0.20"}}, "ranks 0 and 1 share no switch"},
  };
  for (const auto& [members, words] : cases) {
    const auto tree = BuildTree(two_roots, members);
    ASSERT_FALSE(tree.ok()) << words;
    EXPECT_THAT(std::string(tree.status().message()), HasSubstr(words));
  }
}

}  // namespace
}  // namespace inca::tree
