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
    case OpKind::kReduce: return "reduce";
    case OpKind::kGather: return "gather";
    case OpKind::kScatter: return "scatter";
    case OpKind::kAllToAll: return "all_to_all";
    case OpKind::kLeaving: return "none (destroying its communicator)";
  }
  return "unknown";
}

// The names of types and reductions inca does not have, for delegated
// operations: code kForeignCode + index; the last is "other".
constexpr std::string_view kForeignDTypes[] = {"f64",  "i64", "u8",   "i8",   "i16",
                                               "bool", "c64", "c128", "other"};
constexpr std::string_view kForeignReduces[] = {"avg",  "band",       "bor",
                                                "bxor", "premul_sum", "other"};

template <size_t N>
uint8_t ForeignCode(const std::string_view (&names)[N], std::string_view name) {
  size_t i = 0;
  while (i + 1 < N && names[i] != name) ++i;
  return static_cast<uint8_t>(kForeignCode + i);
}

template <size_t N>
std::string CodeName(const std::string_view (&names)[N], uint8_t code, std::string_view inca) {
  if (code < kForeignCode) return std::string(inca);
  return std::string(names[std::min<size_t>(code - kForeignCode, N - 1)]);
}

std::string DTypeName(uint8_t t) {
  return CodeName(kForeignDTypes, t,
                  t < wire::kDTypeCount ? wire::ToString(static_cast<wire::DType>(t)) : "other");
}
std::string ReduceName(uint8_t o) {
  return CodeName(
      kForeignReduces, o,
      o < wire::kReduceOpCount ? wire::ToString(static_cast<wire::ReduceOp>(o)) : "other");
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

static_assert(static_cast<uint8_t>(DelegatedOp::Kind::kAllToAll) ==
              static_cast<uint8_t>(OpKind::kAllToAll));

OpDescriptor DescribeDelegated(const DelegatedOp& op) {
  OpDescriptor d;
  d.count = op.count;
  d.root = op.root;
  d.layer_id = op.layer_id;
  d.kind = static_cast<uint8_t>(op.kind);
  d.delegated = 1;
  d.dtype = ForeignCode(kForeignDTypes, op.dtype);
  for (uint8_t t = 0; t < wire::kDTypeCount; ++t) {
    if (op.dtype == wire::ToString(static_cast<wire::DType>(t))) d.dtype = t;
  }
  d.reduce = 0;
  if (!op.reduce.empty()) {
    d.reduce = ForeignCode(kForeignReduces, op.reduce);
    for (uint8_t o = 0; o < wire::kReduceOpCount; ++o) {
      if (op.reduce == wire::ToString(static_cast<wire::ReduceOp>(o))) d.reduce = o;
    }
  }
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
      "dtype", [](const OpDescriptor& d) { return d.dtype; }, DTypeName);
  field(
      "op", [](const OpDescriptor& d) { return d.reduce; }, ReduceName);
  field(
      "root", [](const OpDescriptor& d) { return d.root; }, number);
  field(
      "layer", [](const OpDescriptor& d) { return d.layer_id; }, number);
  // Named last, and only when nothing else differs: the same operation,
  // which one rank runs through inca and another hands to another library.
  if (fields.empty()) {
    field(
        "library", [](const OpDescriptor& d) { return d.delegated; },
        [](uint8_t g) { return std::string(g ? "delegated" : "inca"); });
  }
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
