#include "client/op_route.h"

#include <algorithm>

namespace inca::client {

OpRoute RouteOf(const RouteState& s) {
  if (s.has_switch && s.switch_mode && s.want_offload && s.formed) return OpRoute::kSwitch;
  if (!s.has_switch) return OpRoute::kHostNoSwitch;
  if (s.want_offload && s.require_switch) return OpRoute::kRefused;
  return OpRoute::kHostFallback;
}

SwitchOutcome OutcomeOf(const SwitchPhaseResult& r) {
  if (r.complete) return SwitchOutcome::kComplete;
  if (r.declined) return SwitchOutcome::kDeclined;
  if (r.disagreed) return SwitchOutcome::kDisagreed;
  return SwitchOutcome::kLost;
}

std::optional<std::vector<uint16_t>> ShardPorts(uint16_t answered_port, uint8_t shard,
                                                uint8_t shards) {
  const size_t n = std::max<size_t>(1, shards);
  if (shard >= n || answered_port < shard) return std::nullopt;
  const size_t base = answered_port - size_t{shard};
  if (base + n - 1 > 65535) return std::nullopt;
  std::vector<uint16_t> ports(n);
  for (size_t i = 0; i < n; ++i) ports[i] = static_cast<uint16_t>(base + i);
  return ports;
}

}  // namespace inca::client
