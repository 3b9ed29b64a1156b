#include "membership/group_manager.h"

#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "membership/group_manager_test_util.h"

namespace inca::membership {
namespace {

using ::testing::ElementsAre;
using testing::Ep;
using testing::GroupManagerTest;
using wire::kAnyPort;
using wire::MgmtMessage;
using wire::MgmtReason;
using wire::MgmtStatus;
using wire::MgmtType;

TEST_F(GroupManagerTest, FormsGroupWhenLastRankJoins) {
  MgmtMessage r0 = Join(0, 0, 3, Ep(1));
  EXPECT_EQ(r0.type, MgmtType::kJoinReply);
  EXPECT_EQ(r0.status, MgmtStatus::kPending);
  EXPECT_EQ(r0.port, 0);
  EXPECT_TRUE(r0.rank_ports.empty());
  EXPECT_EQ(GroupRule(0), nullptr);
  EXPECT_EQ(Join(0, 1, 3, Ep(2)).status, MgmtStatus::kPending);
  ASSERT_NE(gm_.group(0), nullptr);
  EXPECT_FALSE(gm_.group(0)->formed);
  EXPECT_EQ(gm_.groups_forming(), 1u);

  MgmtMessage r2 = Join(0, 2, 3, Ep(3));
  EXPECT_EQ(r2.status, MgmtStatus::kOk);
  EXPECT_EQ(r2.reason, MgmtReason::kNone);
  EXPECT_EQ(r2.port, 2);
  EXPECT_THAT(r2.rank_ports, ElementsAre(0, 1, 2));
  EXPECT_EQ(r2.seq_base, kSeqStart);
  EXPECT_EQ(gm_.next_seq_base(), kSeqStart + kSeqBaseStride);
  EXPECT_EQ(gm_.groups_formed(), 1u);
  EXPECT_EQ(gm_.groups_forming(), 0u);

  const cais::Rule* rule = GroupRule(0);
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->key, (cais::RuleKey{0, std::nullopt, std::nullopt}));
  EXPECT_EQ(rule->input_ports, (cais::PortMask{0, 1, 2}));
  EXPECT_EQ(rule->output_ports, (cais::PortMask{0, 1, 2}));
  EXPECT_FALSE(rule->op.has_value());  // any collective

  // Earlier members asking again get the same OK.
  MgmtMessage again = Join(0, 0, 3, Ep(1));
  EXPECT_EQ(again.status, MgmtStatus::kOk);
  EXPECT_EQ(again.port, 0);
  EXPECT_EQ(again.rank_ports, r2.rank_ports);
  EXPECT_EQ(again.seq_base, r2.seq_base);
  EXPECT_EQ(gm_.next_seq_base(), kSeqStart + kSeqBaseStride);  // no re-formation
}

TEST_F(GroupManagerTest, RepliesEchoRequest) {
  MgmtMessage r = Join(9, 1, 2, Ep(1), kAnyPort, 0xDEADBEEF);
  EXPECT_EQ(r.type, MgmtType::kJoinReply);
  EXPECT_EQ(r.group_id, 9);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.world_size, 2);
  EXPECT_EQ(r.nonce, 0xDEADBEEFu);
  // The reply encodes and parses (ParseMgmt checks rank_ports vs world_size).
  r = Join(9, 0, 2, Ep(2), kAnyPort, 5);
  std::vector<uint8_t> bytes;
  wire::SerializeMgmt(r, &bytes);
  MgmtMessage parsed;
  ASSERT_TRUE(wire::ParseMgmt(bytes, &parsed));
  EXPECT_EQ(parsed, r);
}

TEST_F(GroupManagerTest, RankPortsFollowRankOrderNotJoinOrder) {
  Join(1, 2, 3, Ep(1));  // port 0
  Join(1, 0, 3, Ep(2));  // port 1
  MgmtMessage r = Join(1, 1, 3, Ep(3), /*port=*/40);
  EXPECT_EQ(r.status, MgmtStatus::kOk);
  EXPECT_THAT(r.rank_ports, ElementsAre(1, 40, 0));
}

TEST_F(GroupManagerTest, BadRequests) {
  EXPECT_EQ(Join(0, 0, 0, Ep(1)).reason, MgmtReason::kBadRequest);        // world 0
  EXPECT_EQ(Join(0, 0, 4097, Ep(1)).reason, MgmtReason::kBadRequest);     // world > 4096
  EXPECT_EQ(Join(0, 3, 3, Ep(1)).reason, MgmtReason::kBadRequest);        // rank >= world
  EXPECT_EQ(Join(0, 0, 3, Ep(1), 1024).reason, MgmtReason::kBadRequest);  // port > 1023
  EXPECT_EQ(Join(0, 0, 3, Ep(1), 0xFFFE).reason, MgmtReason::kBadRequest);
  MgmtMessage r = Join(0, 0, 0, Ep(1));
  EXPECT_EQ(r.status, MgmtStatus::kRefused);
  EXPECT_EQ(r.port, kAnyPort);
  EXPECT_TRUE(r.rank_ports.empty());
  EXPECT_EQ(gm_.group(0), nullptr);                                // nothing created
  EXPECT_EQ(ports_.size(), 0u);                                    // nothing bound
  EXPECT_EQ(Join(0, 63, 64, Ep(1)).status, MgmtStatus::kPending);  // the largest valid
}

TEST_F(GroupManagerTest, WorldSizeMismatch) {
  Join(0, 0, 4, Ep(1));
  MgmtMessage r = Join(0, 1, 3, Ep(2));
  EXPECT_EQ(r.status, MgmtStatus::kRefused);
  EXPECT_EQ(r.reason, MgmtReason::kWorldSizeMismatch);
  EXPECT_EQ(r.world_size, 4);  // what the group expects
  EXPECT_FALSE(ports_.Lookup(Ep(2)).has_value());
  EXPECT_EQ(gm_.group(0)->joined, 1);
}

TEST_F(GroupManagerTest, RankTakenWhileFormingAndFormed) {
  Join(0, 0, 2, Ep(1));
  EXPECT_EQ(Join(0, 0, 2, Ep(2)).reason, MgmtReason::kRankTaken);
  EXPECT_FALSE(ports_.Lookup(Ep(2)).has_value());
  Join(0, 1, 2, Ep(3));
  EXPECT_EQ(Join(0, 1, 2, Ep(2)).reason, MgmtReason::kRankTaken);
  EXPECT_EQ(Join(0, 1, 2, Ep(2)).status, MgmtStatus::kRefused);
}

TEST_F(GroupManagerTest, OneEndpointCannotHoldTwoRanksOfAGroup) {
  Join(0, 0, 3, Ep(1));
  EXPECT_EQ(Join(0, 1, 3, Ep(1)).reason, MgmtReason::kBadRequest);
  EXPECT_EQ(gm_.group(0)->joined, 1);
}

TEST_F(GroupManagerTest, RepeatedJoinIsIdempotent) {
  MgmtMessage a = Join(0, 0, 2, Ep(1), 5);
  MgmtMessage b = Join(0, 0, 2, Ep(1), 9);  // a different request port changes nothing
  EXPECT_EQ(a.status, MgmtStatus::kPending);
  EXPECT_EQ(b.status, MgmtStatus::kPending);
  EXPECT_EQ(a.port, 5);
  EXPECT_EQ(b.port, 5);
  EXPECT_EQ(gm_.group(0)->joined, 1);
  EXPECT_EQ(ports_.size(), 1u);
}

TEST_F(GroupManagerTest, PortChoice) {
  ASSERT_TRUE(ports_.AddStatic(10, Ep(100)).ok());
  EXPECT_EQ(Join(0, 0, 4, Ep(1), 7).port, 7);     // requested and free
  EXPECT_EQ(Join(0, 1, 4, Ep(2), 7).port, 0);     // requested taken: lowest free
  EXPECT_EQ(Join(0, 2, 4, Ep(100), 3).port, 10);  // a static endpoint keeps its port
  EXPECT_EQ(Join(1, 0, 2, Ep(1), 20).port, 7);    // same endpoint, other group: same port
  MgmtMessage r = Join(0, 3, 4, Ep(3));
  EXPECT_THAT(r.rank_ports, ElementsAre(7, 0, 10, 1));
}

TEST_F(GroupManagerTest, NoFreePort) {
  // 1,024 peers: sixteen formed groups of 64 (the most one group may have).
  for (uint8_t g = 0; g < 16; ++g) EXPECT_EQ(Form(g, 64, 1 + 64 * g).status, MgmtStatus::kOk);
  EXPECT_EQ(ports_.size(), 1024u);
  MgmtMessage r = Join(16, 0, 2, Ep(5000));
  EXPECT_EQ(r.reason, MgmtReason::kNoFreePort);
  EXPECT_EQ(gm_.group(16), nullptr);
  // A member of group 0 can still join another group on its own port.
  EXPECT_EQ(Join(16, 0, 2, Ep(1)).status, MgmtStatus::kPending);
}

// Issue 18: groups that never complete (a crashed job, a JOIN flood) held
// their ports and group ids forever. A forming group silent for a lease is
// dropped; one whose members keep re-sending JOIN is not, nor is a formed
// group whose members keep pinging.
TEST_F(GroupManagerTest, AFormingGroupSilentForALeaseIsDropped) {
  const dp::TimeNs lease = gm_.lease();
  EXPECT_EQ(lease, kDefaultLeaseNs);
  EXPECT_EQ(Form(0, 2, 1).status, MgmtStatus::kOk);
  EXPECT_EQ(Join(1, 0, 3, Ep(10)).status, MgmtStatus::kPending);
  EXPECT_EQ(Join(1, 1, 3, Ep(11)).status, MgmtStatus::kPending);
  EXPECT_EQ(Join(2, 0, 2, Ep(20)).status, MgmtStatus::kPending);
  EXPECT_EQ(ports_.size(), 5u);
  EXPECT_EQ(gm_.groups_formed(), 1u);
  EXPECT_EQ(gm_.groups_forming(), 2u);
  const dp::TimeNs quiet_since = now_;
  // Group 2's member keeps re-sending its JOIN, as a waiting client does;
  // group 0's members ping, as idle clients do.
  auto keep_alive = [&] {
    Join(2, 0, 2, Ep(20));
    Simple(MgmtType::kPing, 0, 0, Ep(1));
    Simple(MgmtType::kPing, 0, 1, Ep(2));
  };
  for (dp::TimeNs t = quiet_since; t < quiet_since + lease; t += lease / 4) {
    now_ = t;
    keep_alive();
    gm_.Expire(now_);
  }
  EXPECT_NE(gm_.group(1), nullptr);  // not yet: just under the lease
  now_ = quiet_since + lease;
  keep_alive();
  gm_.Expire(now_);
  EXPECT_EQ(gm_.group(1), nullptr);
  EXPECT_NE(gm_.group(2), nullptr);
  EXPECT_NE(gm_.group(0), nullptr);
  EXPECT_EQ(gm_.groups_expired(), 1u);
  EXPECT_EQ(gm_.leases_expired(), 0u);
  EXPECT_EQ(gm_.groups_forming(), 1u);
  EXPECT_EQ(ports_.size(), 3u);  // group 1's two ports released
  // The id is free for a new job of another size.
  EXPECT_EQ(Join(1, 0, 2, Ep(30)).status, MgmtStatus::kPending);
  EXPECT_EQ(Join(1, 1, 2, Ep(31)).status, MgmtStatus::kOk);
  // Scans are throttled: an earlier `now` does nothing.
  gm_.Expire(now_ - 1);
  EXPECT_EQ(gm_.groups_expired(), 1u);
}

// Issue 18, point 2: a crashed client's group stayed formed forever. A
// formed group keeps its place through any idle time while its members
// ping or send data, and is dissolved once one of them is silent for a
// lease: its ports are released and its id is free.
TEST_F(GroupManagerTest, AFormedGroupLivesOnKeepAlivesAndDiesWithASilentMember) {
  const dp::TimeNs lease = gm_.lease();
  MgmtMessage ok = Form(4, 2, 40);
  ASSERT_EQ(ok.status, MgmtStatus::kOk);
  EXPECT_EQ(ok.lease_ms, lease / dp::kNsPerMs);  // the client pings from it
  const dp::PortId port1 = ok.rank_ports[1];
  const dp::TimeNs start = now_;
  // Three leases of idle time: rank 0 pings, rank 1 only sends data.
  for (dp::TimeNs t = start; t < start + 3 * lease; t += lease / 4) {
    now_ = t;
    MgmtMessage pong = Simple(MgmtType::kPing, 4, 0, Ep(40));
    EXPECT_EQ(pong.status, MgmtStatus::kOk);
    EXPECT_EQ(pong.lease_ms, lease / dp::kNsPerMs);
    gm_.SeenOnPort(port1, now_);
    gm_.Expire(now_);
  }
  ASSERT_NE(gm_.group(4), nullptr);
  EXPECT_TRUE(gm_.group(4)->formed);
  // Rank 1 goes silent (killed): one lease later the group is gone.
  const dp::TimeNs last = now_;
  for (now_ = last; now_ < last + lease; now_ += lease / 8) {
    Simple(MgmtType::kPing, 4, 0, Ep(40));
    gm_.Expire(now_);
  }
  EXPECT_NE(gm_.group(4), nullptr);  // just under a lease
  now_ = last + lease + lease / 10;
  gm_.Expire(now_);
  EXPECT_EQ(gm_.group(4), nullptr);
  EXPECT_EQ(gm_.leases_expired(), 1u);
  EXPECT_EQ(gm_.groups_formed(), 0u);
  EXPECT_EQ(ports_.size(), 0u);
  EXPECT_EQ(GroupRule(4), nullptr);
  // The survivor learns it from its next PING and can form the group again.
  EXPECT_EQ(Simple(MgmtType::kPing, 4, 0, Ep(40)).status, MgmtStatus::kUnknown);
  EXPECT_EQ(Form(4, 2, 40).status, MgmtStatus::kOk);
  // A shorter lease (control key lease_ms) applies from the next scan.
  gm_.set_lease(lease / 10);
  now_ += lease / 10 + lease / 100;
  gm_.Expire(now_);
  EXPECT_EQ(gm_.group(4), nullptr);
}

// Issue 18: "re-running the job with the same group id gets rank_taken".
// A JOIN from another job replaces a group whose members have all been
// silent for half a lease, and is refused with group_busy while any of them
// is alive.
TEST_F(GroupManagerTest, ARerunReplacesItsOwnDeadGroupButNotALiveOne) {
  const dp::TimeNs lease = gm_.lease();
  constexpr uint64_t kOldJob = 0x1111, kNewJob = 0x2222;
  ASSERT_EQ(Join(5, 0, 2, Ep(50), kAnyPort, 1, kOldJob).status, MgmtStatus::kPending);
  ASSERT_EQ(Join(5, 1, 2, Ep(51), kAnyPort, 1, kOldJob).status, MgmtStatus::kOk);
  ASSERT_EQ(gm_.group(5)->job, kOldJob);
  // The old job is alive: the new one (another world size, too) is refused.
  now_ += lease / 4;
  Simple(MgmtType::kPing, 5, 1, Ep(51));
  MgmtMessage busy = Join(5, 0, 3, Ep(60), kAnyPort, 2, kNewJob);
  EXPECT_EQ(busy.status, MgmtStatus::kRefused);
  EXPECT_EQ(busy.reason, MgmtReason::kGroupBusy);
  EXPECT_EQ(busy.world_size, 2);  // what the group has
  EXPECT_EQ(gm_.group(5)->job, kOldJob);
  EXPECT_EQ(gm_.groups_replaced(), 0u);
  // The old job crashed: half a lease after its last word the re-run takes over.
  now_ += lease / 2;
  EXPECT_EQ(Join(5, 0, 3, Ep(60), kAnyPort, 2, kNewJob).status, MgmtStatus::kPending);
  EXPECT_EQ(gm_.groups_replaced(), 1u);
  EXPECT_EQ(gm_.group(5)->job, kNewJob);
  EXPECT_EQ(gm_.group(5)->world_size, 3);
  EXPECT_EQ(GroupRule(5), nullptr);  // the old rule went with it
  EXPECT_EQ(ports_.size(), 1u);      // the old ports too
  EXPECT_EQ(Join(5, 1, 3, Ep(61), kAnyPort, 2, kNewJob).status, MgmtStatus::kPending);
  EXPECT_EQ(Join(5, 2, 3, Ep(62), kAnyPort, 2, kNewJob).status, MgmtStatus::kOk);
  // The old job's ranks, if one was only slow, get group_busy now.
  EXPECT_EQ(Join(5, 1, 2, Ep(51), kAnyPort, 1, kOldJob).reason, MgmtReason::kGroupBusy);
}

// Issue 18: "cais-cli groups destroy answers that a JOIN-formed group
// dissolves when a member leaves". An operator destroys any group.
TEST_F(GroupManagerTest, AnOperatorDestroysAJoinFormedOrFormingGroup) {
  ASSERT_EQ(Form(6, 2, 70).status, MgmtStatus::kOk);
  ASSERT_EQ(Join(7, 0, 2, Ep(80)).status, MgmtStatus::kPending);
  EXPECT_EQ(ports_.size(), 3u);
  EXPECT_TRUE(gm_.Destroy(6));
  EXPECT_EQ(gm_.groups_formed(), 0u);
  EXPECT_EQ(gm_.groups_forming(), 1u);
  EXPECT_TRUE(gm_.Destroy(7));
  EXPECT_EQ(gm_.groups_forming(), 0u);
  EXPECT_FALSE(gm_.Destroy(8));
  EXPECT_EQ(gm_.group(6), nullptr);
  EXPECT_EQ(gm_.group(7), nullptr);
  EXPECT_EQ(GroupRule(6), nullptr);
  EXPECT_EQ(ports_.size(), 0u);
  EXPECT_EQ(gm_.groups_destroyed(), 2u);
  EXPECT_EQ(Simple(MgmtType::kPing, 6, 0, Ep(70)).status, MgmtStatus::kUnknown);
}

// Issue 18, point 1: "one endpoint joining all 256 groups" left them
// forming forever. A source address gets at most kMaxFormingPerSource
// groups forming; joining a group already forming is not limited.
TEST_F(GroupManagerTest, ASourceMayHaveOnlySoManyGroupsForming) {
  auto at = [](int host, int port) {
    auto e = net::Endpoint::Parse("10.9.0." + std::to_string(host) + ":" + std::to_string(port));
    EXPECT_TRUE(e.ok());
    return *e;
  };
  for (int k = 0; k < static_cast<int>(kMaxFormingPerSource); ++k) {
    ASSERT_EQ(Join(static_cast<uint8_t>(k), 0, 2, at(1, 1000)).status, MgmtStatus::kPending);
  }
  MgmtMessage r = Join(200, 0, 2, at(1, 1001));  // another port, the same address
  EXPECT_EQ(r.status, MgmtStatus::kRefused);
  EXPECT_EQ(r.reason, MgmtReason::kSourceLimit);
  EXPECT_EQ(gm_.group(200), nullptr);
  // Another source creates it; the limited one may then join it.
  EXPECT_EQ(Join(200, 1, 2, at(2, 1000)).status, MgmtStatus::kPending);
  EXPECT_EQ(Join(200, 0, 2, at(1, 1001)).status, MgmtStatus::kOk);
  // A formed group does not count: a new one may form again.
  EXPECT_EQ(Join(201, 0, 2, at(1, 1002)).reason, MgmtReason::kSourceLimit);
  EXPECT_EQ(Join(0, 1, 2, at(3, 1000)).status, MgmtStatus::kOk);  // group 0 completes
  EXPECT_EQ(Join(201, 0, 2, at(1, 1002)).status, MgmtStatus::kPending);
}

// Issue 18, point 1: JOINs from 300 source ports bound every port, and
// every later job was refused. A JOIN that finds no free port reclaims one
// held only by forming groups, from the source holding the most; a job
// therefore forms in one round of JOINs, and the flood re-sending its JOINs
// cannot take the formed job's ports back.
TEST_F(GroupManagerTest, AJoinFloodCannotKeepAJobOut) {
  auto flood = [](int k) {
    // Two flooding hosts (16 forming groups each, the most one source may hold).
    auto e = net::Endpoint::Parse("10.66.0." + std::to_string(1 + (k / 512) % 2) + ":" +
                                  std::to_string(2000 + k));
    EXPECT_TRUE(e.ok());
    return *e;
  };
  auto FloodGroup = [](int k) { return static_cast<uint8_t>(100 + (k / 512) % 2 * 16 + k % 16); };
  // 1,024 flood endpoints in 32 groups of 64, half joined, never complete: every port.
  // Host 1 floods groups 100-115, host 2 groups 116-131.
  for (int k = 0; k < 1024; ++k) {
    ASSERT_EQ(Join(FloodGroup(k), static_cast<uint16_t>(k % 512 / 16), 64, flood(k)).status,
              MgmtStatus::kPending);
  }
  EXPECT_EQ(ports_.size(), 1024u);
  EXPECT_EQ(Join(7, 0, 2, flood(1100)).reason, MgmtReason::kSourceLimit);  // 10.66.0.1 again
  // A 4-rank job from four hosts forms at once, on reclaimed ports.
  MgmtMessage r;
  for (uint16_t rank = 0; rank < 4; ++rank) r = Join(9, rank, 4, Ep(90 + rank));
  EXPECT_EQ(r.status, MgmtStatus::kOk);
  EXPECT_EQ(gm_.ports_reclaimed(), 4u);
  const std::vector<uint16_t> job_ports = r.rank_ports;
  // The flood re-sends every JOIN: the evicted ones take flood ports back,
  // never the job's.
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 1024; ++k) {
      Join(FloodGroup(k), static_cast<uint16_t>(k % 512 / 16), 64, flood(k));
    }
  }
  ASSERT_NE(gm_.group(9), nullptr);
  EXPECT_TRUE(gm_.group(9)->formed);
  EXPECT_EQ(gm_.group(9)->rank_ports(), job_ports);
  EXPECT_EQ(ports_.size(), 1024u);
  // A formed group's ports are never reclaimed: with every port in formed
  // groups, a newcomer is refused.
  for (uint8_t g = 100; g < 132; ++g) gm_.Destroy(g);
  for (uint8_t g = 20; g < 35; ++g) EXPECT_EQ(Form(g, 64, 1000 + 64 * g).status, MgmtStatus::kOk);
  EXPECT_EQ(Form(35, 60, 5000).status, MgmtStatus::kOk);  // 4 + 15 * 64 + 60 = 1,024
  EXPECT_EQ(Join(40, 0, 2, Ep(6000)).reason, MgmtReason::kNoFreePort);
}

TEST_F(GroupManagerTest, StaticRuleOwnsItsGroup) {
  cais::Rule rule{cais::RuleKey{5, std::nullopt, std::nullopt}, cais::PortMask{1, 2},
                  cais::PortMask{1, 2}, wire::CaisOp::kAllReduce};
  ASSERT_TRUE(gm_.AddStaticRule(rule).ok());
  EXPECT_TRUE(gm_.is_static_group(5));
  EXPECT_EQ(Join(5, 0, 1, Ep(1)).reason, MgmtReason::kGroupConflict);
  EXPECT_EQ(Join(5, 0, 2, Ep(2)).reason, MgmtReason::kGroupConflict);
  EXPECT_EQ(gm_.group(5), nullptr);
  EXPECT_EQ(ports_.size(), 0u);
  EXPECT_EQ(gm_.AddStaticRule(rule).code(), absl::StatusCode::kAlreadyExists);
  // A group formed by JOIN cannot take group-wide static rules afterwards.
  Form(6, 1, 10);
  EXPECT_EQ(gm_.AddStaticRule(cais::Rule{cais::RuleKey{6, std::nullopt, 1}, cais::PortMask{0},
                                         cais::PortMask{0}, std::nullopt})
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(GroupManagerTest, RulesForOneLayerSitBesideAJoinFormedGroup) {
  cais::Rule pin{cais::RuleKey{7, 5, std::nullopt}, {}, {}, std::nullopt};
  pin.host_path = true;
  ASSERT_TRUE(gm_.AddStaticRule(pin).ok());
  EXPECT_FALSE(gm_.is_static_group(7));
  Form(7, 2, 20);  // JOIN still forms the group, with its group-wide rule
  ASSERT_NE(gm_.group(7), nullptr);
  EXPECT_TRUE(gm_.group(7)->formed);
  EXPECT_TRUE(rules_.Lookup(7, 5, 0)->host_path);
  EXPECT_FALSE(rules_.Lookup(7, 4, 0)->host_path);
  // ... and layer rules can be added to a formed group too.
  EXPECT_TRUE(gm_.AddStaticRule(cais::Rule{cais::RuleKey{7, 6, std::nullopt}, cais::PortMask{20},
                                           cais::PortMask{20}, std::nullopt})
                  .ok());
}

TEST_F(GroupManagerTest, ExistingRuleForKeyRefusesFormationAndUndoes) {
  // Installed behind the manager's back (not static): found at formation.
  ASSERT_TRUE(rules_
                  .Add(cais::Rule{cais::RuleKey{2, std::nullopt, std::nullopt}, cais::PortMask{9},
                                  cais::PortMask{9}, std::nullopt})
                  .ok());
  EXPECT_EQ(Join(2, 0, 2, Ep(1)).status, MgmtStatus::kPending);
  MgmtMessage r = Join(2, 1, 2, Ep(2));
  EXPECT_EQ(r.status, MgmtStatus::kRefused);
  EXPECT_EQ(r.reason, MgmtReason::kGroupConflict);
  ASSERT_NE(gm_.group(2), nullptr);
  EXPECT_EQ(gm_.group(2)->joined, 1);
  EXPECT_FALSE(gm_.group(2)->formed);
  EXPECT_FALSE(ports_.Lookup(Ep(2)).has_value());  // its port was released again
}

TEST_F(GroupManagerTest, SeqBaseAdvancesPerFormationAndWraps) {
  GroupManager gm(&ports_, &rules_, 0xFFF00000u);
  MgmtMessage m;
  m.type = MgmtType::kJoin;
  m.world_size = 1;
  m.group_id = 1;
  EXPECT_EQ(gm.Handle(m, Ep(1), 1)->seq_base, 0xFFF00000u);
  m.group_id = 2;
  EXPECT_EQ(gm.Handle(m, Ep(2), 2)->seq_base, 0u);  // + 2^20, modulo 2^32
  EXPECT_EQ(gm.next_seq_base(), kSeqBaseStride);
}

TEST_F(GroupManagerTest, LeaveDissolvesFormedGroup) {
  Form(0, 3, 1);
  const uint32_t first_seq = gm_.group(0)->seq_base;
  MgmtMessage r = Simple(MgmtType::kLeave, 0, 1, Ep(2), 77);
  EXPECT_EQ(r.type, MgmtType::kLeaveReply);
  EXPECT_EQ(r.status, MgmtStatus::kOk);
  EXPECT_EQ(r.nonce, 77u);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(gm_.group(0), nullptr);
  EXPECT_EQ(gm_.groups_formed(), 0u);
  EXPECT_EQ(GroupRule(0), nullptr);
  EXPECT_EQ(ports_.size(), 0u);  // every member's dynamic port released
  // The others find out from PING and must JOIN again.
  EXPECT_EQ(Simple(MgmtType::kPing, 0, 0, Ep(1)).status, MgmtStatus::kUnknown);
  EXPECT_EQ(Simple(MgmtType::kLeave, 0, 0, Ep(1)).status, MgmtStatus::kUnknown);
  // Re-formed, possibly with another world size, on a fresh seq_base.
  MgmtMessage again = Form(0, 2, 1);
  EXPECT_EQ(again.status, MgmtStatus::kOk);
  EXPECT_EQ(again.seq_base, first_seq + kSeqBaseStride);
  EXPECT_NE(GroupRule(0), nullptr);
}

TEST_F(GroupManagerTest, LeaveWhileFormingRemovesOnlyThatMember) {
  Join(0, 0, 3, Ep(1));
  Join(0, 1, 3, Ep(2));
  EXPECT_EQ(Simple(MgmtType::kLeave, 0, 0, Ep(1)).status, MgmtStatus::kOk);
  ASSERT_NE(gm_.group(0), nullptr);
  EXPECT_EQ(gm_.group(0)->joined, 1);
  EXPECT_FALSE(ports_.Lookup(Ep(1)).has_value());
  EXPECT_EQ(Simple(MgmtType::kPing, 0, 1, Ep(2)).status, MgmtStatus::kOk);
  EXPECT_EQ(Simple(MgmtType::kLeave, 0, 1, Ep(2)).status, MgmtStatus::kOk);
  EXPECT_EQ(gm_.group(0), nullptr);  // empty: forgotten, so any world size may start it
  EXPECT_EQ(Join(0, 0, 5, Ep(3)).status, MgmtStatus::kPending);
}

TEST_F(GroupManagerTest, LeaveAndPingFromNonMembers) {
  Form(0, 2, 1);
  EXPECT_EQ(Simple(MgmtType::kLeave, 0, 0, Ep(9)).status, MgmtStatus::kUnknown);  // stranger
  EXPECT_EQ(Simple(MgmtType::kLeave, 0, 1, Ep(1)).status, MgmtStatus::kUnknown);  // wrong rank
  EXPECT_EQ(Simple(MgmtType::kLeave, 0, 7, Ep(1)).status, MgmtStatus::kUnknown);  // no such rank
  EXPECT_EQ(Simple(MgmtType::kLeave, 3, 0, Ep(1)).status, MgmtStatus::kUnknown);  // no group
  EXPECT_EQ(Simple(MgmtType::kPing, 0, 0, Ep(9)).status, MgmtStatus::kUnknown);
  EXPECT_EQ(Simple(MgmtType::kPing, 4, 0, Ep(1)).status, MgmtStatus::kUnknown);
  EXPECT_TRUE(gm_.group(0)->formed);  // untouched
}

TEST_F(GroupManagerTest, ReportsFromMembersAverageBySizeClassAndPath) {
  auto report = [&](uint8_t group, uint16_t rank, const net::Endpoint& from, uint64_t bytes,
                    uint32_t us, wire::ReportPath path) {
    MgmtMessage m;
    m.type = MgmtType::kReport;
    m.group_id = group;
    m.rank = rank;
    m.report_bytes = bytes;
    m.report_duration_us = us;
    m.report_path = path;
    EXPECT_FALSE(gm_.Handle(m, from, ++now_).has_value());  // never answered
  };
  Join(0, 0, 2, Ep(1));
  report(0, 0, Ep(1), 1 << 20, 100, wire::ReportPath::kSwitch);  // group still forming
  Join(0, 1, 2, Ep(2));
  report(0, 0, Ep(9), 1 << 20, 100, wire::ReportPath::kSwitch);  // stranger
  report(0, 1, Ep(1), 1 << 20, 100, wire::ReportPath::kSwitch);  // wrong rank for endpoint
  report(5, 0, Ep(1), 1 << 20, 100, wire::ReportPath::kSwitch);  // no such group
  report(0, 0, Ep(1), 0, 100, wire::ReportPath::kSwitch);        // empty operation
  EXPECT_EQ(gm_.reports_ignored(), 5u);
  EXPECT_EQ(gm_.reports_accepted(), 0u);

  report(0, 0, Ep(1), 1 << 20, 1000, wire::ReportPath::kSwitch);
  const dp::TimeNs at = now_;
  report(0, 1, Ep(2), (1 << 21) - 1, 2000, wire::ReportPath::kSwitch);  // same class
  report(0, 0, Ep(1), 1 << 21, 5000, wire::ReportPath::kHost);          // next class
  EXPECT_EQ(gm_.reports_accepted(), 3u);
  const auto& t = gm_.group(0)->timings;
  const PathAverage& sw = t[20][0];
  EXPECT_EQ(sw.samples, 2u);
  EXPECT_DOUBLE_EQ(sw.mean_us, 1000 + kTimingWeight * 1000);  // first sample, then EWMA
  EXPECT_GT(sw.last, at);
  EXPECT_EQ(t[20][1].samples, 0u);
  EXPECT_EQ(t[21][1].samples, 1u);
  EXPECT_DOUBLE_EQ(t[21][1].mean_bytes, 1 << 21);
  // The best of the last four samples: 1000 us per MiB so far; a slow one
  // does not change it, and four slower ones push it out.
  EXPECT_DOUBLE_EQ(sw.BestUsPerByte(), 1000.0 / (1 << 20));
  report(0, 0, Ep(1), 1 << 20, 9000, wire::ReportPath::kSwitch);
  EXPECT_DOUBLE_EQ(gm_.group(0)->timings[20][0].BestUsPerByte(), 1000.0 / (1 << 20));
  for (int i = 0; i < 4; ++i) report(0, 0, Ep(1), 1 << 20, 3000 + i, wire::ReportPath::kSwitch);
  EXPECT_DOUBLE_EQ(gm_.group(0)->timings[20][0].BestUsPerByte(), 3000.0 / (1 << 20));
  EXPECT_EQ(t[20][1].BestUsPerByte(), 0.0);
  EXPECT_EQ(wire::SizeClass(1), 0);
  EXPECT_EQ(wire::SizeClass(4096), 12);
  EXPECT_EQ(wire::SizeClass(UINT64_MAX), 63);
}

// Two jobs on the same two hosts (the testbed's sharing case): a REPORT of an
// operation during which the other job sent data from one of those hosts is
// set aside; once the other job is quiet for the operation's whole
// duration, reports count again. A group on other hosts is never contended.
TEST_F(GroupManagerTest, ReportsOfOperationsThatSharedTheirHostsAreSetAside) {
  Form(0, 2, 1);                                          // hosts 1 and 2, UDP port 1000
  Join(1, 0, 2, Ep(1, 2000));                             // the second job: the same hosts,
  const MgmtMessage formed = Join(1, 1, 2, Ep(2, 2000));  // other UDP ports
  ASSERT_EQ(formed.status, MgmtStatus::kOk);
  Form(2, 2, 5);  // a third job on hosts 5 and 6
  const auto port = [&](uint8_t g, uint16_t r) { return gm_.group(g)->ranks[r]->port; };
  auto report = [&](uint8_t group, const net::Endpoint& from, uint32_t us) {
    MgmtMessage m;
    m.type = MgmtType::kReport;
    m.group_id = group;
    m.rank = 0;
    m.report_bytes = 1 << 24;
    m.report_duration_us = us;
    m.report_path = wire::ReportPath::kHost;
    now_ += 1'000'000'000;  // one second later
    EXPECT_FALSE(gm_.Handle(m, from, now_).has_value());
  };
  // Group 1 sends data from host 2 during group 0's 200 ms operation.
  gm_.SeenOnPort(port(1, 1), now_ + 900'000'000);
  EXPECT_FALSE(gm_.Contended(2, now_));  // hosts 5 and 6 are not shared
  report(0, Ep(1), 200'000);
  EXPECT_EQ(gm_.reports_contended(), 1u);
  EXPECT_EQ(gm_.reports_accepted(), 0u);
  EXPECT_EQ(gm_.group(0)->timings[24][1].samples, 0u);
  EXPECT_TRUE(gm_.Contended(0, now_ - 200'000'000));
  EXPECT_FALSE(gm_.Contended(1, now_ - 200'000'000));  // group 0 sent no data
  gm_.SeenOnPort(port(0, 0), now_);
  EXPECT_TRUE(gm_.Contended(1, now_ - 200'000'000));  // now it has
  // Its traffic ended 100 ms before group 0's next operation began.
  gm_.SeenOnPort(port(1, 0), now_ + 100'000'000);
  report(0, Ep(1), 500'000);  // began at now_ - 0.5 s, after the last data
  EXPECT_EQ(gm_.reports_contended(), 1u);
  EXPECT_EQ(gm_.reports_accepted(), 1u);
  EXPECT_EQ(gm_.group(0)->timings[24][1].samples, 1u);
  // The third job's data never contends with the first.
  gm_.SeenOnPort(port(2, 0), now_ + 500'000'000);
  report(0, Ep(1), 700'000);
  EXPECT_EQ(gm_.reports_accepted(), 2u);
  EXPECT_FALSE(gm_.Contended(5, now_));  // no such group
}

TEST_F(GroupManagerTest, PingFromMember) {
  Form(0, 2, 1);
  const dp::TimeNs before = gm_.group(0)->ranks[1]->last_seen;
  MgmtMessage r = Simple(MgmtType::kPing, 0, 1, Ep(2), 1234);
  EXPECT_EQ(r.type, MgmtType::kPong);
  EXPECT_EQ(r.status, MgmtStatus::kOk);
  EXPECT_EQ(r.nonce, 1234u);
  EXPECT_EQ(r.group_id, 0);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.port, 1);
  EXPECT_EQ(r.world_size, 2);
  EXPECT_EQ(r.seq_base, gm_.group(0)->seq_base);
  EXPECT_GT(gm_.group(0)->ranks[1]->last_seen, before);
}

TEST_F(GroupManagerTest, RepliesAreNotAnswered) {
  for (MgmtType t : {MgmtType::kJoinReply, MgmtType::kPong, MgmtType::kLeaveReply}) {
    MgmtMessage m;
    m.type = t;
    EXPECT_FALSE(gm_.Handle(m, Ep(1), 1).has_value());
  }
  EXPECT_EQ(ports_.size(), 0u);
}

TEST_F(GroupManagerTest, PortsSharedAcrossGroupsAreReleasedWithTheLastGroup) {
  Form(1, 2, 1);         // Ep(1) port 0, Ep(2) port 1
  Join(2, 0, 2, Ep(1));  // Ep(1) again: port 0
  EXPECT_EQ(Join(2, 1, 2, Ep(3)).rank_ports, (std::vector<uint16_t>{0, 2}));
  Simple(MgmtType::kLeave, 1, 0, Ep(1));  // dissolves group 1
  EXPECT_EQ(ports_.Lookup(Ep(1)), 0);     // still in group 2
  EXPECT_FALSE(ports_.Lookup(Ep(2)).has_value());
  Simple(MgmtType::kLeave, 2, 0, Ep(1));
  EXPECT_FALSE(ports_.Lookup(Ep(1)).has_value());
  EXPECT_EQ(ports_.size(), 0u);
}

TEST_F(GroupManagerTest, StaticPortsSurviveLeave) {
  ASSERT_TRUE(ports_.AddStatic(30, Ep(1)).ok());
  EXPECT_EQ(Form(0, 1, 1).port, 30);
  Simple(MgmtType::kLeave, 0, 0, Ep(1));
  EXPECT_EQ(ports_.Lookup(Ep(1)), 30);
}

TEST_F(GroupManagerTest, ManyGroupsAndReformationsKeepPortsBalanced) {
  for (int round = 0; round < 50; ++round) {
    const uint8_t g = static_cast<uint8_t>(round % 7);
    const uint16_t world = static_cast<uint16_t>(1 + round % 5);
    ASSERT_EQ(Form(g, world, round * 10).status, MgmtStatus::kOk) << round;
    Simple(MgmtType::kLeave, g, 0, Ep(round * 10));
    ASSERT_EQ(gm_.group(g), nullptr);
  }
  EXPECT_EQ(ports_.size(), 0u);
  EXPECT_EQ(rules_.size(), 0u);
  EXPECT_EQ(gm_.next_seq_base(), kSeqStart + 50 * kSeqBaseStride);
}

// The manager's events go to the log it was given, never to a logging
// library of its own (inca/util/event_log.h).
TEST_F(GroupManagerTest, EventsGoToTheInjectedLogAtTheirLevel) {
  struct Recorder final : EventLog {
    bool Enabled(LogLevel level) const override { return level != LogLevel::kDebug; }
    void Log(LogLevel level, std::string_view line) override {
      lines.emplace_back(level, std::string(line));
    }
    std::vector<std::pair<LogLevel, std::string>> lines;
  } log;
  GroupManager gm(&ports_, &rules_, 100, kDefaultLeaseNs, &log);
  MgmtMessage m;
  m.type = MgmtType::kJoin;
  m.world_size = 1;
  m.group_id = 3;
  ASSERT_TRUE(gm.Handle(m, Ep(1), 1).has_value());
  m.world_size = 0;  // refused: bad_request, a warning
  ASSERT_TRUE(gm.Handle(m, Ep(2), 2).has_value());
  ASSERT_EQ(log.lines.size(), 3u);
  EXPECT_EQ(log.lines[0].first, LogLevel::kInfo);
  EXPECT_EQ(log.lines[0].second.rfind("event=member_joined group=3 rank=0 world_size=1", 0), 0u)
      << log.lines[0].second;
  EXPECT_EQ(log.lines[1].second.rfind("event=group_formed group=3 world_size=1", 0), 0u);
  EXPECT_EQ(log.lines[2].first, LogLevel::kWarn);
  EXPECT_NE(log.lines[2].second.find("reason=bad_request"), std::string::npos);
}

}  // namespace
}  // namespace inca::membership
