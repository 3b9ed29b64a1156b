// The aggregation manager's decisions (PlanTrees): when a group is
// complete across the switches, the tree and what each switch gets, and
// every way a group cannot be built, each named on one line.
#include "inca/tree/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"

namespace inca::tree {
namespace {

using ::testing::HasSubstr;

// spine <- leaf0 (198.18.1.x), leaf1 (198.18.2.x).
constexpr const char* kTwoRacks = R"(
switches:
  - {name: spine, address: "198.18.0.1:9410"}
  - {name: leaf0, address: "198.18.1.1:9410", parent: spine}
  - {name: leaf1, address: "198.18.2.1:9410", parent: spine}
hosts:
  - {at: leaf0, addresses: [198.18.1.10, 198.18.1.11]}
  - {at: leaf1, addresses: [198.18.2.20, 198.18.2.21]}
)";

Topology Racks() {
  return *Topology::FromYaml(kTwoRacks, "t.yaml");
}

// Ranks 0, 1 JOINed leaf0 at ports 5 and 3 (out of rank order), ranks 2, 3
// leaf1 at 0 and 1; the spine has port 0 taken by something else.
std::vector<SwitchView> Views(int world = 4, bool all = true) {
  SwitchView spine{0, 100, {{0, "198.18.9.9:1"}}, {}};
  SwitchView leaf0{1,
                   40,
                   {{3, "198.18.1.11:5000"}, {5, "198.18.1.10:5000"}},
                   {{7, 9, world, {{0, 5, "198.18.1.10:5000"}, {1, 3, "198.18.1.11:5000"}}}}};
  SwitchView leaf1{2,
                   7,
                   {{0, "198.18.2.20:5000"}, {1, "198.18.2.21:5000"}},
                   {{7, 9, world, {{2, 0, "198.18.2.20:5000"}}}}};
  if (all) leaf1.forming[0].ranks.push_back({3, 1, "198.18.2.21:5000"});
  return {spine, leaf0, leaf1};
}

TEST(PlannerTest, ACompleteGroupGetsOneTreeInstalledParentsFirstWithOneSeqBase) {
  const auto out = PlanTrees(Racks(), Views());
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].plan.ok()) << out[0].plan.status();
  const TreePlan& p = *out[0].plan;
  EXPECT_EQ(p.group_id, 7);
  EXPECT_EQ(p.job, 9u);
  EXPECT_EQ(p.seq_base, 40u);  // the largest next base where the ranks joined
  ASSERT_EQ(p.installs.size(), 3u);
  const SwitchInstall& root = p.installs[0];
  EXPECT_EQ(root.switch_index, 0);
  EXPECT_FALSE(root.uplink.has_value());
  ASSERT_EQ(root.members.size(), 2u);
  // The children get free ports, in topology order.
  EXPECT_EQ(root.members[0].port, 1);
  EXPECT_EQ(root.members[0].child_switch, 1);
  EXPECT_EQ(root.members[0].endpoint, "198.18.1.1:9410");
  EXPECT_EQ(root.members[1].port, 2);
  EXPECT_EQ(root.members[1].child_switch, 2);
  const SwitchInstall& leaf0 = p.installs[1];
  EXPECT_EQ(leaf0.switch_index, 1);
  ASSERT_EQ(leaf0.members.size(), 2u);
  EXPECT_EQ(leaf0.members[0].port, 3);  // ascending ports: the reduction order
  EXPECT_EQ(leaf0.members[0].rank, 1);
  EXPECT_EQ(leaf0.members[1].rank, 0);
  EXPECT_EQ(leaf0.uplink, uint16_t{6});  // above its members', free
  EXPECT_EQ(leaf0.parent_endpoint, "198.18.0.1:9410");
  EXPECT_EQ(p.installs[2].uplink, uint16_t{2});
  // Each rank's port at each switch, for the JOIN replies: its own, the
  // child's toward it, or the uplink.
  EXPECT_EQ(root.rank_ports, (std::vector<uint16_t>{1, 1, 2, 2}));
  EXPECT_EQ(leaf0.rank_ports, (std::vector<uint16_t>{5, 3, 6, 6}));
  EXPECT_EQ(p.installs[2].rank_ports, (std::vector<uint16_t>{2, 2, 0, 1}));
}

// A second group through the same switches: the leaves already have ports
// at the spine, and the spine at each leaf: the new tree uses them.
TEST(PlannerTest, ASecondTreeThroughTheSameSwitchesReusesTheirPorts) {
  auto views = Views();
  views[0].ports.push_back({1, "198.18.1.1:9410"});
  views[0].ports.push_back({2, "198.18.2.1:9410"});
  views[1].ports.push_back({6, "198.18.0.1:9410"});
  views[2].ports.push_back({2, "198.18.0.1:9410"});
  for (auto& v : views) {
    for (auto& f : v.forming) f.group_id = 8;
  }
  const auto out = PlanTrees(Racks(), views);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].plan.ok()) << out[0].plan.status();
  EXPECT_EQ(out[0].plan->installs[0].members[0].port, 1);
  EXPECT_EQ(out[0].plan->installs[0].members[1].port, 2);
  EXPECT_EQ(out[0].plan->installs[1].uplink, uint16_t{6});
  EXPECT_EQ(out[0].plan->installs[2].uplink, uint16_t{2});
}

// Two groups over two leaves that each link to two spines, planned in one
// round: the first is rooted at spine0, the second, seeing spine0 carry
// the first, at spine1; each leaf gets an uplink port toward each spine.
TEST(PlannerTest, GroupsPlannedTogetherAreRootedAtDifferentSpines) {
  const Topology t = *Topology::FromYaml(R"(
switches:
  - {name: spine0, address: "198.18.0.1:9410"}
  - {name: spine1, address: "198.18.0.2:9410"}
  - {name: leaf0, address: "198.18.1.1:9410", parents: [spine0, spine1]}
  - {name: leaf1, address: "198.18.2.1:9410", parents: [spine0, spine1]}
hosts:
  - {at: leaf0, addresses: [198.18.1.10]}
  - {at: leaf1, addresses: [198.18.2.20]}
)",
                                         "t.yaml");
  std::vector<SwitchView> views{{0, 0, {}, {}}, {1, 0, {}, {}}, {2, 0, {}, {}}, {3, 0, {}, {}}};
  for (const uint8_t group : std::vector<uint8_t>{1, 2}) {
    for (int leaf = 0; leaf < 2; ++leaf) {
      SwitchView& v = views[static_cast<size_t>(leaf + 2)];
      const auto port = static_cast<uint16_t>(v.ports.size());
      const std::string ep =
          absl::StrCat("198.18.", leaf + 1, ".", 10 * (leaf + 1), ":", 7000 + group);
      v.ports.push_back({port, ep});
      v.forming.push_back({group, group, 2, {{leaf, port, ep}}});
      ++v.groups;
    }
  }
  const auto out = PlanTrees(t, views);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(out[0].plan.ok() && out[1].plan.ok());
  EXPECT_EQ(out[0].plan->installs[0].switch_index, 0);
  EXPECT_EQ(out[1].plan->installs[0].switch_index, 1);
  const SwitchInstall &a = out[0].plan->installs[1], &b = out[1].plan->installs[1];
  EXPECT_EQ(a.switch_index, b.switch_index);
  EXPECT_EQ(a.parent_switch, 0);
  EXPECT_EQ(b.parent_switch, 1);
  EXPECT_EQ(a.parent_endpoint, "198.18.0.1:9410");
  EXPECT_EQ(b.parent_endpoint, "198.18.0.2:9410");
  EXPECT_NE(a.uplink, b.uplink);
  // A spine that already carries a group is passed over.
  views[0].groups = 1;
  const auto busy = PlanTrees(t, views);
  ASSERT_TRUE(busy[0].plan.ok());
  EXPECT_EQ(busy[0].plan->installs[0].switch_index, 1);
  // A spine that has not reported (down) is passed over too, both groups
  // rooted at the other, instead of waiting for it.
  views.erase(views.begin() + 1);  // spine1
  const auto down = PlanTrees(t, views);
  ASSERT_EQ(down.size(), 2u);
  for (const PlanOutcome& o : down) {
    ASSERT_TRUE(o.plan.ok()) << o.plan.status();
    EXPECT_EQ(o.plan->installs[0].switch_index, 0);
  }
}

// Two groups complete in one round through different leaves of one spine:
// the second tree's plan sees the ports the first binds, so the leaf both
// use keeps one port at the spine (and its uplink one port), and the other
// leaf gets a port of its own, never one the first tree gave another.
TEST(PlannerTest, TreesPlannedInOneRoundGiveEachNeighbourOnePort) {
  std::string yaml = "switches:\n  - {name: spine, address: \"198.18.0.1:9410\"}\n";
  std::string hosts = "hosts:\n";
  std::vector<SwitchView> views{{0, 0, {}, {}}};
  for (int k = 0; k < 3; ++k) {
    yaml += absl::StrCat("  - {name: leaf", k, ", address: \"198.18.", k + 1,
                         ".1:9410\", parent: spine}\n");
    hosts += absl::StrCat("  - {at: leaf", k, ", addresses: [198.18.", k + 1, ".10]}\n");
    views.push_back({k + 1, 0, {}, {}});
  }
  // Group 1 (job 1): rank 0 behind leaf0, rank 1 behind leaf1; group 2
  // (job 2): rank 0 behind leaf1, rank 1 behind leaf2.
  for (const auto& [group, leaf, rank] :
       std::vector<std::tuple<uint8_t, int, int>>{{1, 0, 0}, {1, 1, 1}, {2, 1, 0}, {2, 2, 1}}) {
    SwitchView& v = views[static_cast<size_t>(leaf + 1)];
    const auto port = static_cast<uint16_t>(v.ports.size());
    const std::string ep = absl::StrCat("198.18.", leaf + 1, ".10:", 7000 + group);
    v.ports.push_back({port, ep});
    v.forming.push_back({group, group, 2, {{rank, port, ep}}});
  }
  const auto out = PlanTrees(*Topology::FromYaml(yaml + hosts, "t.yaml"), views);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(out[0].plan.ok() && out[1].plan.ok());
  const SwitchInstall &a = out[0].plan->installs[0], &b = out[1].plan->installs[0];
  ASSERT_EQ(a.switch_index, 0);
  ASSERT_EQ(b.switch_index, 0);
  ASSERT_EQ(a.members.size(), 2u);
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(a.members[0].port, 0);  // leaf0
  EXPECT_EQ(a.members[1].port, 1);  // leaf1
  EXPECT_EQ(b.members[0].child_switch, 2);
  EXPECT_EQ(b.members[0].port, 1);  // leaf1 again, at its port
  EXPECT_EQ(b.members[1].child_switch, 3);
  EXPECT_EQ(b.members[1].port, 2);  // leaf2: a port of its own
  // leaf1's uplink: one port for both trees.
  EXPECT_EQ(out[0].plan->installs[2].switch_index, 2);
  EXPECT_EQ(out[1].plan->installs[1].switch_index, 2);
  EXPECT_EQ(out[0].plan->installs[2].uplink, out[1].plan->installs[1].uplink);
}

TEST(PlannerTest, AGroupStillMissingARankGetsNoOutcome) {
  EXPECT_TRUE(PlanTrees(Racks(), Views(4, /*all=*/false)).empty());
}

TEST(PlannerTest, RanksBehindOneLeafMakeAOneSwitchTree) {
  auto views = Views(2);
  views[2].forming.clear();
  const auto out = PlanTrees(Racks(), views);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].plan.ok()) << out[0].plan.status();
  ASSERT_EQ(out[0].plan->installs.size(), 1u);
  EXPECT_EQ(out[0].plan->installs[0].switch_index, 1);
  EXPECT_FALSE(out[0].plan->installs[0].uplink.has_value());
  EXPECT_EQ(out[0].plan->seq_base, 40u);
}

TEST(PlannerTest, GroupsThatCannotBeBuiltAreNamedOnOneLine) {
  const auto fault = [](std::vector<SwitchView> views) {
    const auto out = PlanTrees(Racks(), views);
    EXPECT_EQ(out.size(), 1u);
    if (out.empty() || out[0].plan.ok()) return std::string("planned");
    const std::string m(out[0].plan.status().message());
    EXPECT_EQ(m.find('\n'), std::string::npos);
    return m;
  };
  auto v = Views();
  v[2].forming[0].world_size = 5;
  EXPECT_THAT(fault(v), HasSubstr("group 7 job 9: its ranks disagree on the world size (4 and 5"));
  v = Views();
  v[2].forming[0].ranks[0].rank = 1;
  EXPECT_THAT(fault(v), HasSubstr("rank 1 joined twice"));
  v = Views();
  v[2].forming[0].ranks[1].rank = 4;
  EXPECT_THAT(fault(v), HasSubstr("rank 4 is outside the world size"));
  v = Views();
  v[2].forming[0].ranks[0].endpoint = "198.18.1.10:6000";  // a leaf0 host at leaf1
  EXPECT_THAT(fault(v), HasSubstr("rank 2 joined switch leaf1 but the topology puts its host "
                                  "198.18.1.10 behind leaf0"));
  v = Views();
  v.erase(v.begin());  // the spine never reported
  EXPECT_THAT(fault(v), HasSubstr("switch spine of the tree has not reported"));
  v = Views();
  for (uint16_t p = 1; p < 1024; ++p) v[0].ports.push_back({p, "198.18.9.9:2"});
  EXPECT_THAT(fault(v), HasSubstr("switch spine has no free port"));
}

// 128 ranks over 4 leaves of 32: the issue's two-level size on this scale.
TEST(PlannerTest, OneHundredTwentyEightRanksOverFourLeaves) {
  std::string yaml = "switches:\n  - {name: spine, address: \"198.18.0.1:9410\"}\n";
  std::vector<SwitchView> views{{0, 0, {}, {}}};
  std::string hosts = "hosts:\n";
  for (int k = 0; k < 4; ++k) {
    yaml += absl::StrCat("  - {name: leaf", k, ", address: \"198.18.", k + 1,
                         ".1:9410\", parent: spine}\n");
    hosts += absl::StrCat("  - {at: leaf", k, ", addresses: [");
    FormingGroup f{3, 1, 128, {}};
    for (int h = 0; h < 32; ++h) {
      hosts += absl::StrCat(h ? ", " : "", "198.18.", k + 1, ".", 10 + h);
      f.ranks.push_back({k * 32 + h, static_cast<uint16_t>(h),
                         absl::StrCat("198.18.", k + 1, ".", 10 + h, ":7000")});
    }
    hosts += "]}\n";
    SwitchView view{k + 1, 0, {}, {f}};
    for (const JoinedRank& r : f.ranks) view.ports.push_back({r.port, r.endpoint});
    views.push_back(view);
  }
  const auto out = PlanTrees(*Topology::FromYaml(yaml + hosts, "t.yaml"), views);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].plan.ok()) << out[0].plan.status();
  ASSERT_EQ(out[0].plan->installs.size(), 5u);
  EXPECT_EQ(out[0].plan->installs[0].members.size(), 4u);
  for (size_t k = 1; k < 5; ++k) {
    EXPECT_EQ(out[0].plan->installs[k].members.size(), 32u);
    EXPECT_EQ(out[0].plan->installs[k].uplink, uint16_t{32});
  }
}

TEST(PlannerTest, HostOfEndpointTakesV4AndBracketedV6) {
  EXPECT_EQ(HostOfEndpoint("198.18.0.1:9410"), "198.18.0.1");
  EXPECT_EQ(HostOfEndpoint("[2001:2::5]:9410"), "2001:2::5");
  EXPECT_EQ(HostOfEndpoint("nohost"), "");
}

}  // namespace
}  // namespace inca::tree
