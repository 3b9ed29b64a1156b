// The CAIS match-action rule table (CAIS design write-up, sections 3.2 and
// 4.1 `cais-cli add-rule`): (group_id, layer_id, chunk_id) -> input ports,
// output ports, collective op. layer_id and chunk_id may be wildcards.
//
// Lookup precedence, most specific first:
//   (group, layer, chunk) > (group, layer, *) > (group, *, chunk) > (group, *, *)
// Capacity is fixed at construction; Add() beyond it fails.
// Not thread-safe; owned by the data-plane thread (control changes are
// marshalled onto it by the driver).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "inca/cais/port_mask.h"
#include "inca/wire/cais.h"

namespace inca::cais {

struct RuleKey {
  uint8_t group_id = 0;
  std::optional<uint16_t> layer_id;  // nullopt = wildcard
  std::optional<uint16_t> chunk_id;  // nullopt = wildcard

  friend bool operator==(const RuleKey&, const RuleKey&) = default;
  std::string ToString() const;  // "group 0 layer 5 chunk *"
};

struct Rule {
  RuleKey key;
  PortMask input_ports;
  PortMask output_ports;
  // The collective this rule serves; nullopt = any (the packet's op_type
  // decides). Groups formed by JOIN use `any`, so one rule serves every
  // collective of the group.
  std::optional<wire::CaisOp> op = wire::CaisOp::kAllReduce;
  // A policy rule: operations that match it run on the host path. The switch
  // declines them (a DECLINED notice on the sender's port, drop reason
  // offload_declined) before any port check, so ports may be empty. This is
  // how an operator pins a layer to the host (`cais-cli add-rule
  // --layer-id 5 --host-path`); a layer-specific rule may sit beside the
  // group-wide rule that JOIN installs.
  bool host_path = false;
  // The port toward this switch's parent in a tree of switches
  // (docs/design/tree.md): when every input has contributed to a chunk, its
  // reduction goes there as this switch's one contribution (a partial), and
  // the parent's result, arriving on it, is what the output ports get. Only
  // Without rank_ports only all-reduces go up a tree; the rule's other
  // collectives are declined (DeclineReason::kTree). Never one of the
  // rule's input or output ports.
  std::optional<dp::PortId> uplink = std::nullopt;
  // A tree of switches: each rank's port here (its own, the child switch's
  // toward it, or the uplink), in rank order. The group's blocks
  // (ReduceScatter owners, AllGather contributors, the Broadcast root) are
  // then placed by rank, the same at every switch of the tree; empty: by
  // input port in ascending order (docs/design/tree.md, "Blocks"). Each
  // entry is an input port or the uplink; at most kMaxRankPorts entries.
  std::vector<dp::PortId> rank_ports = {};
  static constexpr size_t kMaxRankPorts = 4096;

  friend bool operator==(const Rule&, const Rule&) = default;
};

class RuleTable {
 public:
  static constexpr size_t kDefaultCapacity = 4096;

  explicit RuleTable(size_t capacity = kDefaultCapacity);

  // Checks a rule on its own: non-empty input and output port sets (unless
  // host_path), a known op. (Ports >= kMaxPorts cannot be represented in a PortMask; front ends
  // reject them when parsing.) For Broadcast, any input port may act as the
  // root. Returns InvalidArgument saying what to fix.
  static absl::Status Validate(const Rule& rule);

  // Installs a rule. InvalidArgument (see Validate), AlreadyExists (a rule
  // with the same key is installed: delete it first), ResourceExhausted
  // (table full).
  absl::Status Add(const Rule& rule);

  // Removes the rule with exactly this key (wildcards must match). NotFound
  // if there is none.
  absl::Status Delete(const RuleKey& key);

  void Clear();

  // The most specific rule matching a packet, or nullptr. O(1): at most four
  // hash probes. The pointer is valid until the next Add/Delete/Clear.
  const Rule* Lookup(uint8_t group_id, uint16_t layer_id, uint16_t chunk_id) const noexcept;

  // All rules, ordered by group, then layer (wildcard last), then chunk.
  std::vector<Rule> Dump() const;

  size_t size() const { return rules_.size(); }
  size_t capacity() const { return capacity_; }
  // True when some rule names `group_id` (any layer or chunk).
  bool HasGroup(uint8_t group_id) const noexcept;
  // Changes with every Add, Delete and Clear that changes the table.
  uint64_t version() const { return version_; }

 private:
  static uint64_t Pack(uint8_t group, std::optional<uint16_t> layer, std::optional<uint16_t> chunk);

  size_t capacity_;
  uint64_t version_ = 0;
  absl::flat_hash_map<uint64_t, Rule> rules_;
  // Per group, how many rules of each wildcard shape exist, so Lookup can
  // skip probes that cannot match. Index: (layer wild ? 2 : 0) | (chunk wild ? 1 : 0).
  std::vector<std::array<uint32_t, 4>> shapes_per_group_;
};

}  // namespace inca::cais
