// Fuzzes group membership (issue 18: "the socket fuzzer covers
// JOIN/LEAVE/keep-alive sequences"). The input is a sequence of 6-byte
// records
//   [op][group][rank][world][endpoint][time step]
// driving one GroupManager over a port table of 64 ports with 80 possible
// endpoints (so ports run out), 8 groups, 4 jobs, data on ports, lease
// expiry and operator destroys. After every record the bookkeeping must
// agree with itself; at the end, once every peer has been silent for two
// leases, nothing may be held: no group, no dynamic port, no rule.
#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "inca/cais/rule_table.h"
#include "membership/group_manager.h"
#include "membership/port_table.h"

namespace {

using inca::dp::TimeNs;
using inca::wire::MgmtMessage;
using inca::wire::MgmtType;

// Says which invariant broke (the compiler folds every abort into one).
#define Check(cond)                                                                \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "group_manager_fuzz: %s (line %d)\n", #cond, __LINE__); \
      std::abort();                                                                \
    }                                                                              \
  } while (false)

inca::net::Endpoint Endpoint(uint8_t id) {
  auto e = inca::net::Endpoint::Parse("10.1.0." + std::to_string(id % 80 + 1) + ":4000");
  Check(e.ok());
  return *e;
}

void CheckConsistent(const inca::membership::GroupManager& gm,
                     const inca::membership::PortTable& ports, const inca::cais::RuleTable& rules) {
  Check(ports.size() <= ports.max_bound());
  size_t formed = 0, forming = 0;
  for (int id = 0; id < 256; ++id) {
    const inca::membership::GroupState* g = gm.group(static_cast<uint8_t>(id));
    if (g == nullptr) {
      Check(!rules.HasGroup(static_cast<uint8_t>(id)));
      continue;
    }
    Check(g->ranks.size() == g->world_size);
    uint16_t present = 0;
    for (const auto& r : g->ranks) {
      if (!r) continue;
      ++present;
      const inca::net::Endpoint* at = ports.endpoint(r->port);
      Check(at != nullptr && *at == r->endpoint);  // its port is still its own
    }
    Check(present == g->joined && present > 0);
    Check(g->formed == (present == g->world_size));
    Check(rules.HasGroup(static_cast<uint8_t>(id)) == g->formed);
    ++(g->formed ? formed : forming);
  }
  Check(rules.size() == formed);
  Check(gm.groups_formed() == formed && gm.groups_forming() == forming);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inca;
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)quiet;
  membership::PortTable ports{64};  // small, so that ports run out
  cais::RuleTable rules;
  const TimeNs lease = TimeNs{membership::kMinLeaseMs} * dp::kNsPerMs;  // scans every lease/10
  membership::GroupManager gm(&ports, &rules, /*seq_start=*/7, lease);
  TimeNs now = 1;
  for (size_t i = 0; i + 6 <= size; i += 6) {
    const uint8_t op = data[i], group = data[i + 1] % 8, rank = data[i + 2] % 8;
    const uint8_t world = data[i + 3] % 9;  // 0 is a bad request
    const inca::net::Endpoint from = Endpoint(data[i + 4]);
    now += TimeNs{data[i + 5]} * lease / 64;
    MgmtMessage m;
    m.group_id = group;
    m.rank = rank;
    m.world_size = world;
    m.nonce = static_cast<uint32_t>(i);
    switch (op % 7) {
      case 0:
        m.type = MgmtType::kJoin;
        m.job = (op >> 3) & 3;
        m.port = (op & 0x80) ? static_cast<uint16_t>(data[i + 4] % 70) : wire::kAnyPort;
        break;
      case 1: m.type = MgmtType::kLeave; break;
      case 2: m.type = MgmtType::kPing; break;
      case 3:
        m.type = MgmtType::kReport;
        m.report_bytes = uint64_t{world} << (op >> 3);
        m.report_duration_us = 1 + data[i + 4];
        break;
      case 4: gm.SeenOnPort(static_cast<dp::PortId>(data[i + 4] % 64), now); break;
      case 5: gm.Expire(now); break;
      case 6: gm.Destroy(group); break;
    }
    if (op % 7 <= 3) {
      const auto reply = gm.Handle(m, from, now);
      Check(reply.has_value() == (m.type != MgmtType::kReport));
      if (reply) Check(reply->nonce == m.nonce && reply->group_id == group);
    }
    CheckConsistent(gm, ports, rules);
  }
  // Everyone falls silent: two leases later nothing is held.
  now += 2 * lease;
  gm.Expire(now);
  CheckConsistent(gm, ports, rules);
  Check(gm.groups_formed() == 0 && gm.groups_forming() == 0);
  Check(ports.size() == 0 && rules.size() == 0);
  return 0;
}
