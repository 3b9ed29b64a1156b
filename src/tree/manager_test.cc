// The aggregation manager's loop (AggregationManager::Tick) against
// in-process switches: each a real GroupManager, port table and rule table
// behind the ControlPlane interface, as inca-switchd's SwitchControl serves
// them. Ranks JOIN their leaves; the manager installs the tree (ports for
// the neighbours, one seq_base, the ranks' JOINs answered); a dead switch
// withdraws the tree, a restarted one gets the next; faults are named once.
#include "inca/tree/manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/cais/rule_table.h"
#include "membership/group_manager.h"
#include "membership/port_table.h"
#include "switchd/port_control.h"
#include "switchd/switch_control.h"
#include "util/recording_event_log.h"

namespace inca::tree {
namespace {

using ::testing::ElementsAre;
using wire::MgmtMessage;
using wire::MgmtStatus;

// One switch: its membership and rules, served through the control API.
class FakeSwitch final : public control::ControlPlane, public control::CaisControlPlane {
 public:
  explicit FakeSwitch(uint32_t seq_start) : gm_(&ports_, &rules_, seq_start) {}

  std::string program() const override { return "cais"; }
  control::CaisControlPlane* cais() override { return alive ? this : nullptr; }
  absl::StatusOr<std::vector<control::PortInfo>> ListPorts() override {
    if (!alive) return absl::UnavailableError("down");
    return switchd::PortInfos(ports_);
  }
  // What the manager never calls.
  absl::Status Health() override { return absl::UnimplementedError("health"); }
  absl::StatusOr<control::Stats> GetStats() override { return Health(); }
  absl::Status SetConfig(const std::map<std::string, std::string>&) override { return Health(); }
  absl::StatusOr<std::map<std::string, std::string>> GetConfig() override {
    auto c = settings;
    c["timeout_ms"] = timeout_ms;
    return c;
  }
  absl::Status AddRule(const cais::Rule& r) override { return rules_.Add(r); }
  absl::Status DeleteRule(const cais::RuleKey& k) override { return rules_.Delete(k); }
  absl::StatusOr<std::vector<cais::Rule>> DumpRules() override { return rules_.Dump(); }
  absl::Status RegisterPort(uint16_t port, const std::string& endpoint) override {
    ++registered;
    return ports_.AddStatic(port, *net::Endpoint::Parse(endpoint));
  }
  absl::StatusOr<control::GroupInfo> CreateGroup(uint8_t, const std::vector<uint16_t>&) override {
    return absl::UnimplementedError("");
  }
  absl::Status DestroyGroup(uint8_t g) override {
    return gm_.Destroy(g) ? absl::OkStatus() : absl::NotFoundError("no group");
  }
  absl::StatusOr<std::vector<control::GroupInfo>> ListGroups() override {
    if (!alive) return absl::UnavailableError("down");
    std::vector<control::GroupInfo> out;
    for (int g = 0; g < 256; ++g) {
      if (const auto* st = gm_.group(static_cast<uint8_t>(g))) {
        out.push_back(switchd::GroupInfoOf(gm_, *st, 0));
      }
    }
    return out;
  }
  absl::StatusOr<control::GroupInfo> InstallTree(const control::TreeInstall& t) override {
    if (refuse_install) return absl::FailedPreconditionError("refused");
    membership::TreeGroup tg{t.group_id, t.job,        t.world_size, t.seq_base,
                             {},         std::nullopt, t.rank_ports, t.window_chunks};
    for (uint16_t p : t.members) tg.members.push_back(p);
    if (t.uplink) tg.uplink = *t.uplink;
    if (auto s = gm_.InstallTree(tg, 0); !s.ok()) return s;
    return switchd::GroupInfoOf(gm_, *gm_.group(t.group_id), 0);
  }
  absl::Status SetOffloadPolicy(const control::OffloadPolicy&) override { return absl::OkStatus(); }
  absl::StatusOr<control::OffloadPolicy> GetOffloadPolicy() override {
    return control::OffloadPolicy{};
  }

  // A rank's JOIN from `ip`:`port`.
  MgmtMessage Join(int rank, int world, const std::string& ip, int port, uint64_t job = 9,
                   uint8_t group = 7) {
    MgmtMessage m;
    m.type = wire::MgmtType::kJoin;
    m.group_id = group;
    m.rank = static_cast<uint16_t>(rank);
    m.world_size = static_cast<uint16_t>(world);
    m.port = wire::kAnyPort;
    m.job = job;
    m.nonce = 1;
    return *gm_.Handle(m, *net::Endpoint::Parse(absl::StrCat(ip, ":", port)), 0);
  }
  std::optional<cais::Rule> Rule(uint8_t g) const {
    for (const auto& r : rules_.Dump()) {
      if (r.key.group_id == g) return r;
    }
    return std::nullopt;
  }
  const membership::GroupManager& groups() const { return gm_; }

  bool alive = true;
  bool refuse_install = false;
  std::string timeout_ms = "500";
  // The rest of GetConfig: the switch's defaults.
  std::map<std::string, std::string> settings = {
      {"chunk_size", "8952"}, {"group_share", "0.5"}, {"max_pending_chunks", "128"}};
  int registered = 0;

 private:
  membership::PortTable ports_;
  cais::RuleTable rules_;
  membership::GroupManager gm_;
};

constexpr const char* kTopology = R"(
switches:
  - {name: spine, address: "198.18.0.1:9410", control: "198.18.0.1:50051"}
  - {name: leaf0, address: "198.18.1.1:9410", control: "198.18.1.1:50051", parent: spine}
  - {name: leaf1, address: "198.18.2.1:9410", control: "198.18.2.1:50051", parent: spine}
hosts:
  - {at: leaf0, addresses: [198.18.1.10, 198.18.1.11]}
  - {at: leaf1, addresses: [198.18.2.20, 198.18.2.21]}
)";

class ManagerTest : public ::testing::Test {
 protected:
  ManagerTest()
      : spine_(100u << 20),
        leaf0_(300u << 20),
        leaf1_(200u << 20),
        manager_(*Topology::FromYaml(kTopology, "t.yaml"), {&spine_, &leaf0_, &leaf1_},
                 ManagerConfig{}, &log_) {
    for (FakeSwitch* s : {&leaf0_, &leaf1_}) s->timeout_ms = "750";
  }
  int Logged(const std::string& event) const {
    return static_cast<int>(std::count_if(log_.lines.begin(), log_.lines.end(), [&](auto& l) {
      return l.find(event) != std::string::npos;
    }));
  }

  // Ranks 0, 1 JOIN leaf0, ranks 2, 3 leaf1 (world 4).
  void JoinAll(uint64_t job = 9) {
    EXPECT_EQ(leaf0_.Join(0, 4, "198.18.1.10", 5000, job).status, MgmtStatus::kPending);
    EXPECT_EQ(leaf0_.Join(1, 4, "198.18.1.11", 5000, job).status, MgmtStatus::kPending);
    EXPECT_EQ(leaf1_.Join(2, 4, "198.18.2.20", 5000, job).status, MgmtStatus::kPending);
    EXPECT_EQ(leaf1_.Join(3, 4, "198.18.2.21", 5000, job).status, MgmtStatus::kPending);
  }
  void Tick() { manager_.Tick(now_ += 100 * dp::kNsPerMs); }

  FakeSwitch spine_, leaf0_, leaf1_;
  ::inca::testing::RecordingEventLog log_;
  AggregationManager manager_;
  dp::TimeNs now_ = 0;
};

TEST_F(ManagerTest, ACompleteGroupGetsItsTreeInstalledAndItsRanksAnswered) {
  EXPECT_EQ(leaf0_.Join(0, 4, "198.18.1.10", 5000).status, MgmtStatus::kPending);
  Tick();
  EXPECT_TRUE(manager_.trees().empty()) << "ranks 1..3 have not joined";
  JoinAll();
  Tick();
  ASSERT_EQ(manager_.trees().size(), 1u);
  const InstalledTree& t = manager_.trees()[0];
  EXPECT_THAT(t.switches, ElementsAre(0, 1, 2));
  EXPECT_EQ(t.depth, 2);
  EXPECT_EQ(t.seq_base, 300u << 20) << "above both leaves' next seq_base";
  EXPECT_GE(t.formation_ns, 100 * dp::kNsPerMs);
  // The spine reduces its two children; each leaf its ranks, with the uplink.
  ASSERT_TRUE(spine_.Rule(7).has_value());
  EXPECT_EQ(spine_.Rule(7)->input_ports.count(), 2);
  EXPECT_FALSE(spine_.Rule(7)->uplink.has_value());
  ASSERT_TRUE(leaf1_.Rule(7).has_value());
  EXPECT_TRUE(leaf1_.Rule(7)->uplink.has_value());
  EXPECT_EQ(spine_.registered, 2);  // a port per child
  EXPECT_EQ(leaf0_.registered, 1);  // and the parent at each leaf
  // A rank's next JOIN is answered: ok, the tree's seq_base, a port per rank.
  const MgmtMessage r = leaf1_.Join(3, 4, "198.18.2.21", 5000);
  EXPECT_EQ(r.status, MgmtStatus::kOk);
  EXPECT_EQ(r.seq_base, t.seq_base);
  ASSERT_EQ(r.rank_ports.size(), 4u);
  EXPECT_EQ(r.rank_ports[0], *leaf1_.Rule(7)->uplink);
  // The next group formed at a leaf starts above the tree's seq_base.
  EXPECT_GT(static_cast<int32_t>(leaf1_.groups().next_seq_base() - t.seq_base), 0);
  Tick();
  EXPECT_EQ(manager_.counters().trees_installed, 1u) << "installed once";
}

// Two jobs whose groups complete in the same round, over the same leaves:
// both trees installed in that round, sharing each neighbour's port (the
// second install finds the ports the first registered bound, not taken).
TEST_F(ManagerTest, TwoGroupsCompleteInOneRoundAreBothInstalledInIt) {
  JoinAll();
  const std::string ips[] = {"198.18.1.10", "198.18.1.11", "198.18.2.20", "198.18.2.21"};
  for (int r = 0; r < 4; ++r) {
    FakeSwitch& leaf = r < 2 ? leaf0_ : leaf1_;
    EXPECT_EQ(leaf.Join(r, 4, ips[r], 5001, /*job=*/10, /*group=*/8).status, MgmtStatus::kPending);
  }
  Tick();
  ASSERT_EQ(manager_.trees().size(), 2u);
  EXPECT_EQ(manager_.counters().install_failures, 0u);
  EXPECT_EQ(Logged("tree_install_failed"), 0);
  EXPECT_EQ(spine_.registered, 2);  // a port per child, for both trees
  EXPECT_EQ(leaf0_.registered, 1);
  ASSERT_TRUE(spine_.Rule(7).has_value() && spine_.Rule(8).has_value());
  EXPECT_EQ(spine_.Rule(7)->input_ports, spine_.Rule(8)->input_ports);
  EXPECT_EQ(leaf1_.Join(3, 4, ips[3], 5001, 10, 8).status, MgmtStatus::kOk);
}

// Each tree's switches get its window cap: the least of max_pending_chunks
// over the groups at each switch of the tree, this round's trees counted.
// Two trees through a spine of 96 pending chunks: 48 each, under the
// leaves' 64 (128 over two groups).
TEST_F(ManagerTest, EachTreeIsCappedAtItsLeastFairShareAlongTheTree) {
  spine_.settings["max_pending_chunks"] = "96";
  JoinAll();
  const std::string ips[] = {"198.18.1.10", "198.18.1.11", "198.18.2.20", "198.18.2.21"};
  for (int r = 0; r < 4; ++r) {
    FakeSwitch& leaf = r < 2 ? leaf0_ : leaf1_;
    leaf.Join(r, 4, ips[r], 5001, /*job=*/10, /*group=*/8);
  }
  Tick();
  ASSERT_EQ(manager_.trees().size(), 2u);
  for (FakeSwitch* s : {&spine_, &leaf0_, &leaf1_}) {
    for (int g : {7, 8}) {
      ASSERT_NE(s->groups().group(static_cast<uint8_t>(g)), nullptr);
      EXPECT_EQ(s->groups().group(static_cast<uint8_t>(g))->tree_window, 48) << g;
    }
  }
}

// Switches that do not say their max_pending_chunks cap nothing.
TEST_F(ManagerTest, ATreeOfSwitchesWithoutASlotLimitIsNotCapped) {
  for (FakeSwitch* s : {&spine_, &leaf0_, &leaf1_}) s->settings.erase("max_pending_chunks");
  JoinAll();
  Tick();
  ASSERT_EQ(manager_.trees().size(), 1u);
  EXPECT_EQ(spine_.groups().group(7)->tree_window, 0);
}

TEST_F(ManagerTest, ADeadSwitchWithdrawsTheTreeAndARestartedOneGetsTheNext) {
  JoinAll();
  Tick();
  ASSERT_EQ(manager_.trees().size(), 1u);
  spine_.alive = false;
  for (int i = 0; i < 29; ++i) Tick();  // 2.9 s: within the 3 s lease
  EXPECT_EQ(manager_.trees().size(), 1u);
  Tick();
  Tick();
  EXPECT_FALSE(manager_.up(0));
  EXPECT_TRUE(manager_.trees().empty());
  EXPECT_EQ(manager_.counters().trees_withdrawn, 1u);
  EXPECT_EQ(leaf0_.groups().group(7), nullptr) << "the leaves' groups are dissolved";
  // The ranks re-JOIN; nothing is installed while the spine is down.
  JoinAll();
  Tick();
  EXPECT_TRUE(manager_.trees().empty());
  spine_.alive = true;
  Tick();
  ASSERT_EQ(manager_.trees().size(), 1u);
  EXPECT_EQ(manager_.counters().trees_installed, 2u);
}

TEST_F(ManagerTest, ARootRestartedWithinItsLeaseWithdrawsTheTreeAndTheRanksGetItBack) {
  JoinAll();
  Tick();
  ASSERT_EQ(manager_.trees().size(), 1u);
  // Killed and back before the manager saw it down: it answers, without the
  // group (a restart keeps no groups). The leaves' partials would meet no
  // rule there, so the tree goes at once, not after the lease.
  ASSERT_TRUE(spine_.DestroyGroup(7).ok());
  Tick();
  EXPECT_TRUE(manager_.up(0));
  EXPECT_TRUE(manager_.trees().empty());
  EXPECT_EQ(manager_.counters().trees_withdrawn, 1u);
  EXPECT_EQ(Logged("event=tree_withdrawn group=7"), 1);
  EXPECT_EQ(leaf0_.groups().group(7), nullptr) << "its ranks see PONG unknown and JOIN again";
  EXPECT_EQ(leaf1_.groups().group(7), nullptr);
  JoinAll();
  Tick();
  ASSERT_EQ(manager_.trees().size(), 1u);
  EXPECT_EQ(manager_.counters().trees_installed, 2u);
  EXPECT_NE(spine_.groups().group(7), nullptr);
}

TEST_F(ManagerTest, ALeafThatLosesTheGroupWithdrawsItEverywhereAndAnEndedJobRetiresIt) {
  JoinAll();
  Tick();
  ASSERT_TRUE(leaf1_.DestroyGroup(7).ok());  // an operator, or a lease
  EXPECT_EQ(leaf1_.Join(2, 4, "198.18.2.20", 5000).status, MgmtStatus::kPending);  // re-JOINs
  Tick();
  EXPECT_TRUE(manager_.trees().empty());
  EXPECT_EQ(manager_.counters().trees_withdrawn, 1u);
  EXPECT_EQ(spine_.groups().group(7), nullptr);
  EXPECT_EQ(leaf0_.groups().group(7), nullptr);
  JoinAll();  // every rank JOINs again: the tree is built again
  Tick();
  ASSERT_EQ(manager_.trees().size(), 1u);
  // The job ends: its ranks LEAVE, the leaves dissolve the group; the
  // spine, which has no rank of it, lets it go at once.
  ASSERT_TRUE(leaf0_.DestroyGroup(7).ok());
  Tick();
  EXPECT_EQ(manager_.trees().size(), 1u) << "leaf1's ranks are still at it";
  ASSERT_TRUE(leaf1_.DestroyGroup(7).ok());
  Tick();
  EXPECT_TRUE(manager_.trees().empty());
  EXPECT_EQ(manager_.counters().trees_retired, 1u);
  EXPECT_EQ(manager_.counters().trees_withdrawn, 1u) << "only the first";
  EXPECT_EQ(spine_.groups().group(7), nullptr);
}

TEST_F(ManagerTest, AGroupThatCannotBeBuiltIsRefusedOnceAndNothingIsInstalled) {
  JoinAll();
  // Rank 3 sits on a host the topology puts behind leaf1 but JOINed leaf0.
  ASSERT_TRUE(leaf1_.DestroyGroup(7).ok());
  EXPECT_EQ(leaf1_.Join(2, 4, "198.18.2.20", 5000).status, MgmtStatus::kPending);
  EXPECT_EQ(leaf0_.Join(3, 4, "198.18.2.21", 5001).status, MgmtStatus::kPending);
  Tick();
  Tick();
  EXPECT_TRUE(manager_.trees().empty());
  EXPECT_EQ(manager_.counters().trees_refused, 1u) << "named once, not every round";
  EXPECT_FALSE(spine_.Rule(7).has_value());
  EXPECT_FALSE(leaf0_.groups().group(7)->formed);
}

TEST_F(ManagerTest, ARefusedInstallRollsBackTheSwitchesDoneAndIsTriedAgain) {
  JoinAll();
  leaf1_.refuse_install = true;
  Tick();
  Tick();
  EXPECT_TRUE(manager_.trees().empty());
  EXPECT_EQ(manager_.counters().install_failures, 1u);
  EXPECT_EQ(spine_.groups().group(7), nullptr) << "rolled back";
  EXPECT_EQ(leaf0_.groups().group(7), nullptr) << "rolled back: its ranks re-JOIN";
  leaf1_.refuse_install = false;
  JoinAll();
  Tick();
  EXPECT_EQ(manager_.trees().size(), 1u);
}

TEST_F(ManagerTest, ALeafThatDoesNotWaitLongerThanItsParentIsNamedOnce) {
  leaf1_.timeout_ms = "500";  // the root's: the leaf would hand chunks back first
  JoinAll();
  Tick();
  ASSERT_EQ(manager_.trees().size(), 1u) << "a warning, not a refusal";
  EXPECT_EQ(Logged("event=tree_timeouts_inverted switch=leaf1"), 1);
  EXPECT_EQ(Logged("event=tree_timeouts_inverted switch=leaf0"), 0);
  for (FakeSwitch* s : {&leaf0_, &leaf1_}) ASSERT_TRUE(s->DestroyGroup(7).ok());
  JoinAll(11);
  Tick();
  Tick();
  EXPECT_EQ(Logged("event=tree_timeouts_inverted"), 1) << "once per switch and parent";
  EXPECT_EQ(Logged("event=tree_installed"), 2) << ::testing::PrintToString(log_.lines);
}

TEST_F(ManagerTest, ALeafTakingLargerChunksThanItsParentIsRefusedAndAThinShareNamed) {
  leaf0_.settings["chunk_size"] = "8952";
  spine_.settings["chunk_size"] = "1400";  // a smaller MTU above the leaves
  JoinAll();
  Tick();
  Tick();
  EXPECT_TRUE(manager_.trees().empty()) << "its partials could not go up";
  EXPECT_EQ(Logged("event=tree_refused group=7"), 1);
  EXPECT_EQ(Logged("switch leaf0 takes chunks of up to 8952 bytes, its parent spine only 1400"), 1);
  EXPECT_EQ(spine_.groups().group(7), nullptr) << "nothing installed";
  for (FakeSwitch* s : {&leaf0_, &leaf1_}) s->settings["chunk_size"] = "1400";
  // Defaults reserve 64 of 128 pending chunks for the group: a window of 64
  // is sure of its slots; two groups at the spine would be sure of 32 each.
  spine_.settings["max_pending_chunks"] = "96";
  Tick();
  ASSERT_EQ(manager_.trees().size(), 1u) << "a thin share is a warning, not a refusal";
  EXPECT_EQ(Logged("event=tree_share_below_window switch=spine groups=1 reserved_chunks=48 "
                   "window_chunks=64"),
            1);
  EXPECT_EQ(Logged("event=tree_share_below_window switch=leaf"), 0);
}

}  // namespace
}  // namespace inca::tree
