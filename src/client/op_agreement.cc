#include "client/op_agreement.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace inca::client {
namespace {

using wire::CaisOp;

std::string_view KindName(uint8_t k) {
  switch (static_cast<OpKind>(k)) {
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kLeaving: return "none (destroying its communicator)";
  }
  return "unknown";
}

// "f32 on ranks 0,2; i32 on rank 1": each value once, in the order of the
// lowest rank that gave it.
template <typename Get, typename Name>
std::string Spread(std::span<const OpDescriptor> all, Get get, Name name) {
  std::vector<std::pair<std::string, std::vector<size_t>>> groups;
  std::map<std::string, size_t> index;
  for (size_t r = 0; r < all.size(); ++r) {
    std::string v = name(get(all[r]));
    auto [it, fresh] = index.emplace(v, groups.size());
    if (fresh) groups.push_back({v, {}});
    groups[it->second].second.push_back(r);
  }
  std::vector<std::string> parts;
  for (const auto& [v, ranks] : groups) {
    parts.push_back(
        absl::StrCat(v, " on rank", ranks.size() > 1 ? "s " : " ", absl::StrJoin(ranks, ",")));
  }
  return absl::StrJoin(parts, "; ");
}

template <typename Get>
bool Differs(std::span<const OpDescriptor> all, Get get) {
  for (const OpDescriptor& d : all) {
    if (get(d) != get(all[0])) return true;
  }
  return false;
}

}  // namespace

OpDescriptor Describe(const SwitchOp& op, uint64_t whole_count) {
  OpDescriptor d;
  d.count = whole_count;
  d.layer_id = op.layer_id;
  d.dtype = static_cast<uint8_t>(op.type);
  const bool broadcast = op.broadcast || op.op == CaisOp::kBroadcast;
  d.kind = static_cast<uint8_t>(broadcast                         ? OpKind::kBroadcast
                                : op.op == CaisOp::kAllGather     ? OpKind::kAllGather
                                : op.op == CaisOp::kReduceScatter ? OpKind::kReduceScatter
                                                                  : OpKind::kAllReduce);
  const bool reduces = !broadcast && op.op != CaisOp::kAllGather;
  d.reduce = reduces ? static_cast<uint8_t>(op.reduce) : 0;
  d.root = broadcast ? op.root : 0;
  return d;
}

OpDescriptor Leaving() {
  OpDescriptor d;
  d.kind = static_cast<uint8_t>(OpKind::kLeaving);
  return d;
}

absl::Status CheckAgreement(uint32_t group_id, uint64_t op_index,
                            std::span<const OpDescriptor> all) {
  if (all.empty()) return absl::OkStatus();
  std::vector<std::string> fields;
  auto field = [&](const char* what, auto get, auto name) {
    if (Differs(all, get)) fields.push_back(absl::StrCat(what, " (", Spread(all, get, name), ")"));
  };
  auto number = [](auto v) { return absl::StrCat(v); };
  field(
      "collective", [](const OpDescriptor& d) { return d.kind; },
      [](uint8_t k) { return std::string(KindName(k)); });
  field(
      "count", [](const OpDescriptor& d) { return d.count; }, number);
  field(
      "dtype", [](const OpDescriptor& d) { return d.dtype; },
      [](uint8_t t) {
        return t < wire::kDTypeCount ? std::string(wire::ToString(static_cast<wire::DType>(t)))
                                     : absl::StrCat("dtype ", t);
      });
  field(
      "op", [](const OpDescriptor& d) { return d.reduce; },
      [](uint8_t o) {
        return o < wire::kReduceOpCount
                   ? std::string(wire::ToString(static_cast<wire::ReduceOp>(o)))
                   : absl::StrCat("op ", o);
      });
  field(
      "root", [](const OpDescriptor& d) { return d.root; }, number);
  field(
      "layer", [](const OpDescriptor& d) { return d.layer_id; }, number);
  // A rank that is leaving has no operation: its other fields say nothing.
  const bool leaving = std::any_of(all.begin(), all.end(), [](const OpDescriptor& d) {
    return d.kind == static_cast<uint8_t>(OpKind::kLeaving);
  });
  if (leaving) fields.resize(std::min<size_t>(fields.size(), 1));
  if (fields.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("group ", group_id, ", operation ", op_index,
                                                 ": the ranks disagree on ",
                                                 absl::StrJoin(fields, ", "), "; no rank ran it"));
}

}  // namespace inca::client
