// The fixture of the group manager's tests: a manager over its own port
// and rule tables on a manual clock, with JOIN and other requests from
// endpoints 10.0.x.y.
#pragma once

#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <string>

#include "membership/group_manager.h"

namespace inca::membership::testing {

using wire::kAnyPort;
using wire::MgmtMessage;
using wire::MgmtReason;
using wire::MgmtStatus;
using wire::MgmtType;

inline net::Endpoint Ep(int host, int port = 1000) {
  auto e = net::Endpoint::Parse("10.0." + std::to_string(host / 256) + "." +
                                std::to_string(host % 256) + ":" + std::to_string(port));
  EXPECT_TRUE(e.ok());
  return *e;
}

class GroupManagerTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kSeqStart = 1000;
  void SetUp() override { spdlog::set_level(spdlog::level::off); }

  MgmtMessage Join(uint8_t group, uint16_t rank, uint16_t world, const net::Endpoint& from,
                   uint16_t port = kAnyPort, uint32_t nonce = 7, uint64_t job = 0) {
    MgmtMessage m;
    m.type = MgmtType::kJoin;
    m.job = job;
    m.group_id = group;
    m.rank = rank;
    m.world_size = world;
    m.port = port;
    m.nonce = nonce;
    return Reply(m, from);
  }
  MgmtMessage Simple(MgmtType type, uint8_t group, uint16_t rank, const net::Endpoint& from,
                     uint32_t nonce = 9) {
    MgmtMessage m;
    m.type = type;
    m.group_id = group;
    m.rank = rank;
    m.nonce = nonce;
    return Reply(m, from);
  }
  // The manager's reply to `m` from `from`, a tick later (a failure when it
  // has none).
  MgmtMessage Reply(const MgmtMessage& m, const net::Endpoint& from) {
    auto r = gm_.Handle(m, from, ++now_);
    EXPECT_TRUE(r.has_value());
    return r.value_or(MgmtMessage{});
  }
  // Forms `group` of `world` ranks from endpoints host0.. host0+world-1.
  MgmtMessage Form(uint8_t group, uint16_t world, int host0) {
    MgmtMessage last;
    for (uint16_t r = 0; r < world; ++r) last = Join(group, r, world, Ep(host0 + r));
    return last;
  }
  const cais::Rule* GroupRule(uint8_t group) const { return rules_.Lookup(group, 12, 34); }

  PortTable ports_;
  cais::RuleTable rules_;
  GroupManager gm_{&ports_, &rules_, kSeqStart};
  dp::TimeNs now_ = 0;
};

}  // namespace inca::membership::testing
