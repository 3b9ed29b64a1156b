#include "inca/cais/rule_table.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace inca::cais {

std::vector<dp::PortId> PortMask::ToVector() const {
  std::vector<dp::PortId> v;
  v.reserve(static_cast<size_t>(count()));
  ForEach([&](dp::PortId p) { v.push_back(p); });
  return v;
}

std::string PortMask::ToString() const {
  return absl::StrJoin(ToVector(), ",");
}

std::string RuleKey::ToString() const {
  return absl::StrCat("group ", group_id, " layer ", layer_id ? absl::StrCat(*layer_id) : "*",
                      " chunk ", chunk_id ? absl::StrCat(*chunk_id) : "*");
}

namespace {
int ShapeIndex(bool layer_wild, bool chunk_wild) {
  return (layer_wild ? 2 : 0) | (chunk_wild ? 1 : 0);
}
}  // namespace

RuleTable::RuleTable(size_t capacity) : capacity_(capacity), shapes_per_group_(256) {
  rules_.reserve(capacity);
}

uint64_t RuleTable::Pack(uint8_t group, std::optional<uint16_t> layer,
                         std::optional<uint16_t> chunk) {
  // bits 40..47 group, 39 layer wildcard, 23..38 layer, 22 chunk wildcard, 0..15 chunk
  uint64_t k = uint64_t{group} << 40;
  k |= layer ? (uint64_t{*layer} << 23) : (uint64_t{1} << 39);
  k |= chunk ? uint64_t{*chunk} : (uint64_t{1} << 22);
  return k;
}

absl::Status RuleTable::Validate(const Rule& rule) {
  if (rule.op && static_cast<uint8_t>(*rule.op) >= wire::kCaisOpCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown op type ", static_cast<int>(*rule.op),
                     "; use allreduce, allgather, broadcast, reducescatter or any"));
  }
  if (rule.host_path) {
    if (rule.uplink) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rule for ", rule.key.ToString(), " is a host-path rule and cannot have an uplink"));
    }
    return absl::OkStatus();  // ports are not used
  }
  if (rule.uplink && (*rule.uplink >= dp::kMaxPorts || rule.input_ports.contains(*rule.uplink) ||
                      rule.output_ports.contains(*rule.uplink))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rule for ", rule.key.ToString(), ": uplink port ", *rule.uplink, " must be below ",
        dp::kMaxPorts, " and not one of its input or output ports"));
  }
  if (rule.input_ports.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule for ", rule.key.ToString(), " has no input ports; give at least one"));
  }
  if (rule.rank_ports.size() > Rule::kMaxRankPorts) {
    return absl::InvalidArgumentError(absl::StrCat("rule for ", rule.key.ToString(), " has ",
                                                   rule.rank_ports.size(), " rank ports; at most ",
                                                   Rule::kMaxRankPorts));
  }
  for (size_t r = 0; r < rule.rank_ports.size(); ++r) {
    const dp::PortId p = rule.rank_ports[r];
    if (!rule.input_ports.contains(p) && rule.uplink != p) {
      return absl::InvalidArgumentError(absl::StrCat("rule for ", rule.key.ToString(), ": rank ", r,
                                                     "'s port ", p,
                                                     " is neither an input port nor the uplink"));
    }
  }
  if (rule.output_ports.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule for ", rule.key.ToString(), " has no output ports; give at least one"));
  }
  if (rule.input_ports.count() > kMaxGroupMembers) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule for ", rule.key.ToString(), " has ", rule.input_ports.count(),
                     " input ports; at most ", kMaxGroupMembers, " ranks reduce in one group"));
  }
  return absl::OkStatus();
}

absl::Status RuleTable::Add(const Rule& rule) {
  if (absl::Status s = Validate(rule); !s.ok()) return s;
  const uint64_t k = Pack(rule.key.group_id, rule.key.layer_id, rule.key.chunk_id);
  if (rules_.contains(k)) {
    return absl::AlreadyExistsError(
        absl::StrCat("a rule for ", rule.key.ToString(), " is already installed; delete it first"));
  }
  if (rules_.size() >= capacity_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("rule table full (", capacity_, " rules); delete unused rules"));
  }
  rules_.emplace(k, rule);
  ++version_;
  ++shapes_per_group_[rule.key.group_id][ShapeIndex(!rule.key.layer_id, !rule.key.chunk_id)];
  return absl::OkStatus();
}

absl::Status RuleTable::Delete(const RuleKey& key) {
  auto it = rules_.find(Pack(key.group_id, key.layer_id, key.chunk_id));
  if (it == rules_.end()) {
    return absl::NotFoundError(absl::StrCat("no rule for ", key.ToString()));
  }
  rules_.erase(it);
  ++version_;
  --shapes_per_group_[key.group_id][ShapeIndex(!key.layer_id, !key.chunk_id)];
  return absl::OkStatus();
}

void RuleTable::Clear() {
  rules_.clear();
  ++version_;
  for (auto& s : shapes_per_group_) s = {};
}

bool RuleTable::HasGroup(uint8_t group_id) const noexcept {
  for (uint32_t n : shapes_per_group_[group_id]) {
    if (n != 0) return true;
  }
  return false;
}

const Rule* RuleTable::Lookup(uint8_t group_id, uint16_t layer_id,
                              uint16_t chunk_id) const noexcept {
  const auto& shapes = shapes_per_group_[group_id];
  auto probe = [&](std::optional<uint16_t> l, std::optional<uint16_t> c) -> const Rule* {
    auto it = rules_.find(Pack(group_id, l, c));
    return it == rules_.end() ? nullptr : &it->second;
  };
  const Rule* r = nullptr;
  if (shapes[0] != 0 && (r = probe(layer_id, chunk_id))) return r;
  if (shapes[1] != 0 && (r = probe(layer_id, std::nullopt))) return r;
  if (shapes[2] != 0 && (r = probe(std::nullopt, chunk_id))) return r;
  if (shapes[3] != 0 && (r = probe(std::nullopt, std::nullopt))) return r;
  return nullptr;
}

std::vector<Rule> RuleTable::Dump() const {
  std::vector<Rule> out;
  out.reserve(rules_.size());
  for (const auto& [k, r] : rules_) out.push_back(r);
  auto order = [](const Rule& r) {
    return std::make_tuple(r.key.group_id, !r.key.layer_id.has_value(), r.key.layer_id.value_or(0),
                           !r.key.chunk_id.has_value(), r.key.chunk_id.value_or(0));
  };
  std::sort(out.begin(), out.end(),
            [&](const Rule& a, const Rule& b) { return order(a) < order(b); });
  return out;
}

}  // namespace inca::cais
