// Groups of a tree of switches (GroupManager::InstallTree): a leaf's ranks
// JOIN and wait, the manager's install forms the group with the tree's
// seq_base, uplink and child ports; a switch with no rank of the group
// (the root) gets it from the install and loses it after a lease of
// silence; what the install refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "membership/group_manager.h"
#include "membership/group_manager_test_util.h"

namespace inca::membership {
namespace {

using ::testing::ElementsAre;
using testing::Ep;
using testing::GroupManagerTest;
using ::testing::HasSubstr;
using wire::kAnyPort;
using wire::MgmtReason;
using wire::MgmtStatus;

class TreeGroupTest : public GroupManagerTest {
 protected:
  // Ranks 0 and 1 of 4 JOIN here (job 5); the parent is bound at port 40.
  TreeGroup Leaf() {
    EXPECT_EQ(Join(7, 0, 4, Ep(1), kAnyPort, 7, 5).status, MgmtStatus::kPending);
    EXPECT_EQ(Join(7, 1, 4, Ep(2), kAnyPort, 7, 5).status, MgmtStatus::kPending);
    EXPECT_TRUE(ports_.AddStatic(40, Ep(100, 9410)).ok());
    const uint16_t p0 = gm_.group(7)->ranks[0]->port, p1 = gm_.group(7)->ranks[1]->port;
    return TreeGroup{7, 5, 4, 77, {p0, p1}, dp::PortId{40}, {p0, p1, 40, 40}};
  }
};

TEST_F(TreeGroupTest, TheInstallFormsALeafsGroupWithTheTreesSeqBaseAndUplink) {
  const TreeGroup t = Leaf();
  ASSERT_TRUE(gm_.InstallTree(t, ++now_).ok());
  const cais::Rule* rule = GroupRule(7);
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->uplink, dp::PortId{40});
  EXPECT_EQ(rule->input_ports.count(), 2);
  // The rule places blocks by rank (each rank's port here).
  EXPECT_EQ(rule->rank_ports, std::vector<dp::PortId>(t.rank_ports.begin(), t.rank_ports.end()));
  // The ranks' next JOIN retry gets ok, the tree's seq_base and rank_ports,
  // and the block order of a tree: by rank.
  const auto reply = Join(7, 1, 4, Ep(2), kAnyPort, 8, 5);
  EXPECT_EQ(reply.status, MgmtStatus::kOk);
  EXPECT_EQ(reply.seq_base, 77u);
  EXPECT_EQ(reply.rank_ports, t.rank_ports);
  EXPECT_EQ(reply.block_order, wire::BlockOrder::kRanks);
  // A rank of the tree that is elsewhere cannot join here.
  EXPECT_EQ(Join(7, 2, 4, Ep(3), kAnyPort, 9, 5).reason, MgmtReason::kGroupConflict);
  EXPECT_EQ(gm_.groups_formed(), 1u);
}

// The root decides offload for the tree, from its ranks' REPORTs, which
// their leaves pass up: one from a child switch's endpoint counts; one from
// an endpoint that is no child of the group does not.
TEST_F(TreeGroupTest, ARootKeepsTheReportsItsChildrenPassUp) {
  ASSERT_TRUE(ports_.AddStatic(3, Ep(101, 9410)).ok());
  ASSERT_TRUE(ports_.AddStatic(4, Ep(102, 9410)).ok());
  ASSERT_TRUE(ports_.AddStatic(5, Ep(103, 9410)).ok());
  ASSERT_TRUE(
      gm_.InstallTree(TreeGroup{7, 5, 4, 77, {3, 4}, std::nullopt, {3, 3, 4, 4}}, ++now_).ok());
  wire::MgmtMessage m;
  m.type = wire::MgmtType::kReport;
  m.group_id = 7;
  m.rank = 2;  // a rank of the second leaf
  m.report_bytes = 1 << 20;
  m.report_duration_us = 1000;
  EXPECT_FALSE(gm_.Handle(m, Ep(102, 9410), ++now_).has_value());
  EXPECT_EQ(gm_.reports_accepted(), 1u);
  EXPECT_EQ(gm_.group(7)->timings[20][0].samples, 1u);
  EXPECT_FALSE(gm_.Handle(m, Ep(103, 9410), ++now_).has_value());  // bound, not a child
  EXPECT_EQ(gm_.reports_accepted(), 1u);
  EXPECT_EQ(gm_.reports_ignored(), 1u);
}

TEST_F(TreeGroupTest, ARootWithNoRanksHoldsTheGroupOnlyWhileItsChildrenSendData) {
  ASSERT_TRUE(ports_.AddStatic(3, Ep(101, 9410)).ok());
  ASSERT_TRUE(ports_.AddStatic(4, Ep(102, 9410)).ok());
  ASSERT_TRUE(
      gm_.InstallTree(TreeGroup{7, 5, 4, 77, {3, 4}, std::nullopt, {3, 3, 4, 4}}, ++now_).ok());
  EXPECT_FALSE(GroupRule(7)->uplink.has_value());
  now_ += gm_.lease() / 2;
  gm_.SeenOnPort(4, now_);  // a child's partial
  now_ += gm_.lease() * 3 / 4;
  gm_.Expire(now_);
  ASSERT_NE(gm_.group(7), nullptr) << "data half a lease ago keeps it";
  now_ += gm_.lease();
  gm_.Expire(now_);
  EXPECT_EQ(gm_.group(7), nullptr);
  EXPECT_EQ(GroupRule(7), nullptr);
}

TEST_F(TreeGroupTest, TheInstallRefusesWhatDoesNotFit) {
  TreeGroup t = Leaf();
  const auto refused = [&](TreeGroup bad) {
    const absl::Status s = gm_.InstallTree(bad, ++now_);
    EXPECT_FALSE(s.ok());
    return std::string(s.message());
  };
  TreeGroup bad = t;
  bad.job = 6;
  EXPECT_THAT(refused(bad), HasSubstr("the ranks here joined job 5 of world size 4"));
  bad = t;
  bad.rank_ports.pop_back();
  EXPECT_THAT(refused(bad), HasSubstr("rank_ports has 3 entries for world size 4"));
  bad = t;
  bad.members = {t.members[0]};
  EXPECT_THAT(refused(bad), HasSubstr("rank 1 joined at port"));
  bad = t;
  bad.uplink = 41;
  EXPECT_THAT(refused(bad), HasSubstr("uplink port 41 is not bound"));
  bad = t;
  bad.members.push_back(42);
  EXPECT_THAT(refused(bad), HasSubstr("member port 42 is not bound"));
  ASSERT_TRUE(gm_.InstallTree(t, ++now_).ok());
  EXPECT_THAT(refused(t), HasSubstr("formed already"));
  EXPECT_EQ(gm_.group(7)->rank_ports(), (std::vector<uint16_t>{t.rank_ports}));
}

TEST_F(TreeGroupTest, AGroupLargerThanOneSwitchWaitsForTheTreeAndCapsItsRanksHere) {
  // World size 128: 64 ranks may JOIN this switch, never form here alone.
  for (uint16_t r = 0; r < 64; ++r) {
    ASSERT_EQ(Join(9, r, 128, Ep(static_cast<uint8_t>(1 + r / 8), 9000 + r), kAnyPort, 1, 3).status,
              MgmtStatus::kPending)
        << "rank " << r;
  }
  EXPECT_EQ(Join(9, 64, 128, Ep(20), kAnyPort, 2, 3).reason, MgmtReason::kBadRequest);
  EXPECT_FALSE(gm_.group(9)->formed);
  ASSERT_TRUE(ports_.AddStatic(900, Ep(100, 9410)).ok());
  TreeGroup t{9, 3, 128, 0x1234'0000, {}, dp::PortId{900}, std::vector<uint16_t>(128, 900)};
  for (uint16_t r = 0; r < 64; ++r) {
    t.members.push_back(gm_.group(9)->ranks[r]->port);
    t.rank_ports[r] = gm_.group(9)->ranks[r]->port;
  }
  const uint32_t before = gm_.next_seq_base();
  ASSERT_TRUE(gm_.InstallTree(t, ++now_).ok());
  EXPECT_EQ(GroupRule(9)->input_ports.count(), 64);
  // The next group formed here starts above the tree's seq_base (serial order).
  EXPECT_GT(static_cast<int32_t>(gm_.next_seq_base() - t.seq_base), 0);
  EXPECT_GE(static_cast<int32_t>(gm_.next_seq_base() - before), 0);
}

}  // namespace
}  // namespace inca::membership
