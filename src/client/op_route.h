// Where one operation runs, and what follows its switch phase: the
// communicator's switch-or-host decision as pure functions of what it knows
// (no sockets, clock or logging), so that the rules are read and tested in
// one place (docs/design/cais-client.md, "Recovery on the host path").
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "client/transport_core.h"

namespace inca::client {

// What the communicator knows about its switch before an operation.
struct RouteState {
  bool has_switch = false;      // a switch address was configured
  bool switch_mode = false;     // the group agreed to use the switch (formation)
  bool want_offload = false;    // offload on (set_offload / INCA_OFFLOAD)
  bool formed = false;          // this rank's session is formed now
  bool require_switch = false;  // INCA_REQUIRE_SWITCH
};

enum class OpRoute : uint8_t {
  kSwitch,        // on the switch
  kHostNoSwitch,  // no switch configured: the host path (after the agreement round)
  kRefused,       // the switch is required and the group is not on it: an error
  kHostFallback,  // offload off, or the group is not on the switch: the host path
};
OpRoute RouteOf(const RouteState& s);

// How an operation's switch phase ended.
enum class SwitchOutcome : uint8_t {
  kComplete,   // every chunk's result arrived: done
  kDeclined,   // the offload policy declined it: the host path, staying joined
  kDisagreed,  // the ranks' chunks differed in shape: the agreement round names how
  kLost,       // a timeout or hand-back: the host path, and the session is stale
};
SwitchOutcome OutcomeOf(const SwitchPhaseResult& r);

// The UDP ports of a switch's data-plane shards (inca-switchd --threads: one
// port each, consecutive), from the one that answered a JOIN: its port, its
// index `shard` and the count `shards`. nullopt when the answer cannot be
// right (index past the count, ports past 65535); one port for 0 or 1 shard.
std::optional<std::vector<uint16_t>> ShardPorts(uint16_t answered_port, uint8_t shard,
                                                uint8_t shards);

}  // namespace inca::client
