// The group's blocks, the same at every switch of a tree (docs/design/
// tree.md, "Blocks"): which member a ReduceScatter chunk belongs to, which
// one contributes an AllGather chunk or a Broadcast, and the port toward it.
#pragma once

#include <cstdint>

#include "inca/cais/port_mask.h"
#include "inca/cais/rule_table.h"
#include "inca/wire/cais.h"

namespace inca::cais::internal {

// AllGather and Broadcast chunks have one contributor: their data is
// multicast and retained like a reduction result.
inline bool IsSingleContributor(wire::CaisOp op) {
  return op == wire::CaisOp::kAllGather || op == wire::CaisOp::kBroadcast;
}

// The group's blocks (docs/design/tree.md, "Blocks"): under a tree
// (Rule::rank_ports) member m is rank m, reached through rank_ports[m];
// at a switch of its own, member m is the m-th port of `ports` in
// ascending order.
inline int Members(const Rule& rule, const PortMask& ports) {
  return rule.rank_ports.empty() ? ports.count() : static_cast<int>(rule.rank_ports.size());
}
inline dp::PortId MemberPort(const Rule& rule, const PortMask& ports, int m) {
  return rule.rank_ports.empty() ? ports.nth(m) : rule.rank_ports[static_cast<size_t>(m)];
}
// The member chunk c of an operation of `total` chunks belongs to when the
// group has n members: floor(c * n / total) (ReduceScatter, AllGather).
inline uint64_t BlockOf(const wire::CaisHeader& h, int n) {
  return uint64_t{h.chunk_id} * static_cast<uint64_t>(n) / h.total_chunks;
}

// Whether the rule carries this collective. A tree's switches place blocks
// by rank: without rank_ports only all-reduces go up; and a Broadcast
// names its root in one byte, so a tree of more than 256 ranks carries
// broadcasts as all-reduces only (the communicator's way).
inline bool Carries(const Rule& rule, wire::CaisOp op) {
  if (!rule.rank_ports.empty()) {
    return op != wire::CaisOp::kBroadcast || rule.rank_ports.size() <= 256;
  }
  return !rule.uplink || op == wire::CaisOp::kAllReduce;
}

}  // namespace inca::cais::internal
