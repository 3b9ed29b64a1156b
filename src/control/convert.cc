#include "control/convert.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "control/stats_reflection.h"

namespace inca::control {

namespace {
pb::OpType OpToProto(const std::optional<wire::CaisOp>& op) {
  if (!op) return pb::OP_ANY;
  switch (*op) {
    case wire::CaisOp::kAllReduce: return pb::OP_ALLREDUCE;
    case wire::CaisOp::kAllGather: return pb::OP_ALLGATHER;
    case wire::CaisOp::kBroadcast: return pb::OP_BROADCAST;
    case wire::CaisOp::kReduceScatter: return pb::OP_REDUCESCATTER;
  }
  return pb::OP_ANY;
}

absl::Status PortsFromProto(const google::protobuf::RepeatedField<uint32_t>& in, const char* what,
                            cais::PortMask* out) {
  for (uint32_t p : in) {
    if (p >= dp::kMaxPorts) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " port ", p, " is out of range; ports are 0..", dp::kMaxPorts - 1));
    }
    out->add(static_cast<dp::PortId>(p));
  }
  return absl::OkStatus();
}
}  // namespace

void ToProto(const cais::RuleKey& k, pb::RuleKey* out) {
  out->set_group_id(k.group_id);
  if (k.layer_id) out->set_layer_id(*k.layer_id);
  if (k.chunk_id) out->set_chunk_id(*k.chunk_id);
}

absl::Status FromProto(const pb::RuleKey& k, cais::RuleKey* out) {
  if (k.group_id() > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("group_id ", k.group_id(), " is out of range; groups are 0..255"));
  }
  if (k.has_layer_id() && k.layer_id() > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer_id ", k.layer_id(), " is out of range; layers are 0..65535"));
  }
  if (k.has_chunk_id() && k.chunk_id() > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_id ", k.chunk_id(), " is out of range; chunks are 0..65535"));
  }
  out->group_id = static_cast<uint8_t>(k.group_id());
  out->layer_id = k.has_layer_id() ? std::optional<uint16_t>(static_cast<uint16_t>(k.layer_id()))
                                   : std::nullopt;
  out->chunk_id = k.has_chunk_id() ? std::optional<uint16_t>(static_cast<uint16_t>(k.chunk_id()))
                                   : std::nullopt;
  return absl::OkStatus();
}

void ToProto(const cais::Rule& r, pb::Rule* out) {
  ToProto(r.key, out->mutable_key());
  r.input_ports.ForEach([&](dp::PortId p) { out->add_input_ports(p); });
  r.output_ports.ForEach([&](dp::PortId p) { out->add_output_ports(p); });
  out->set_op(OpToProto(r.op));
  out->set_host_path(r.host_path);
  if (r.uplink) out->set_uplink_port(*r.uplink);
  for (dp::PortId p : r.rank_ports) out->add_rank_ports(p);
}

absl::Status FromProto(const pb::Rule& r, cais::Rule* out) {
  if (auto s = FromProto(r.key(), &out->key); !s.ok()) return s;
  out->input_ports = {};
  out->output_ports = {};
  if (auto s = PortsFromProto(r.input_ports(), "input", &out->input_ports); !s.ok()) return s;
  if (auto s = PortsFromProto(r.output_ports(), "output", &out->output_ports); !s.ok()) return s;
  switch (r.op()) {
    case pb::OP_ANY: out->op = std::nullopt; break;
    case pb::OP_ALLREDUCE: out->op = wire::CaisOp::kAllReduce; break;
    case pb::OP_ALLGATHER: out->op = wire::CaisOp::kAllGather; break;
    case pb::OP_BROADCAST: out->op = wire::CaisOp::kBroadcast; break;
    case pb::OP_REDUCESCATTER: out->op = wire::CaisOp::kReduceScatter; break;
    default: return absl::InvalidArgumentError(absl::StrCat("unknown op type ", r.op()));
  }
  out->host_path = r.host_path();
  out->uplink = std::nullopt;
  if (r.has_uplink_port()) {
    if (r.uplink_port() >= dp::kMaxPorts) {
      return absl::InvalidArgumentError(
          absl::StrCat("uplink port ", r.uplink_port(), " must be below ", dp::kMaxPorts));
    }
    out->uplink = static_cast<dp::PortId>(r.uplink_port());
  }
  out->rank_ports.clear();
  for (uint32_t p : r.rank_ports()) {
    if (p >= dp::kMaxPorts) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank port ", p, " must be below ", dp::kMaxPorts));
    }
    out->rank_ports.push_back(static_cast<dp::PortId>(p));
  }
  return absl::OkStatus();
}

void ToProto(const GroupInfo& g, pb::Group* out) {
  out->set_group_id(g.group_id);
  out->set_world_size(g.world_size);
  for (uint16_t p : g.rank_ports) out->add_rank_ports(p);
  out->set_formed(g.formed);
  out->set_seq_base(g.seq_base);
  out->set_source(g.source);
  out->set_contended(g.contended);
  out->set_job(g.job);
  for (const GroupMemberInfo& m : g.members) {
    pb::GroupMember* o = out->add_members();
    o->set_rank(m.rank);
    o->set_port(m.port);
    o->set_endpoint(m.endpoint);
  }
  out->set_tree(g.tree);
  for (uint16_t p : g.tree_members) out->add_tree_members(p);
  if (g.uplink) out->set_uplink_port(*g.uplink);
  out->set_window_chunks(g.window_chunks);
  for (const OffloadTiming& t : g.timings) {
    pb::OffloadTiming* o = out->add_timings();
    o->set_bin(static_cast<uint32_t>(t.bin));
    for (auto [from, to] : {std::pair{&t.switch_path, o->mutable_switch_path()},
                            std::pair{&t.host_path, o->mutable_host_path()}}) {
      to->set_samples(from->samples);
      to->set_mean_us(from->mean_us);
      to->set_mean_bytes(from->mean_bytes);
      to->set_age_ms(from->age_ms);
      to->set_best_us_per_byte(from->best_us_per_byte);
    }
  }
}

GroupInfo FromProto(const pb::Group& g) {
  GroupInfo out;
  out.group_id = static_cast<uint8_t>(g.group_id());
  out.world_size = static_cast<uint16_t>(g.world_size());
  for (uint32_t p : g.rank_ports()) out.rank_ports.push_back(static_cast<uint16_t>(p));
  out.formed = g.formed();
  out.seq_base = g.seq_base();
  out.source = g.source();
  out.contended = g.contended();
  out.job = g.job();
  out.window_chunks = static_cast<uint16_t>(std::min<uint32_t>(g.window_chunks(), UINT16_MAX));
  for (const pb::GroupMember& m : g.members()) {
    out.members.push_back(
        {static_cast<uint16_t>(m.rank()), static_cast<uint16_t>(m.port()), m.endpoint()});
  }
  out.tree = g.tree();
  for (uint32_t p : g.tree_members()) out.tree_members.push_back(static_cast<uint16_t>(p));
  if (g.has_uplink_port()) out.uplink = static_cast<uint16_t>(g.uplink_port());
  for (const pb::OffloadTiming& t : g.timings()) {
    OffloadTiming o;
    o.bin = static_cast<int>(std::min<uint32_t>(t.bin(), 63));
    for (auto [from, to] :
         {std::pair{&t.switch_path(), &o.switch_path}, std::pair{&t.host_path(), &o.host_path}}) {
      to->samples = from->samples();
      to->mean_us = from->mean_us();
      to->mean_bytes = from->mean_bytes();
      to->age_ms = from->age_ms();
      to->best_us_per_byte = from->best_us_per_byte();
    }
    out.timings.push_back(o);
  }
  return out;
}

void ToProto(const TreeInstall& t, pb::InstallTreeRequest* out) {
  out->set_group_id(t.group_id);
  out->set_job(t.job);
  out->set_world_size(t.world_size);
  out->set_seq_base(t.seq_base);
  for (uint16_t p : t.members) out->add_member_ports(p);
  if (t.uplink) out->set_uplink_port(*t.uplink);
  for (uint16_t p : t.rank_ports) out->add_rank_ports(p);
  out->set_window_chunks(t.window_chunks);
}

absl::Status FromProto(const pb::InstallTreeRequest& t, TreeInstall* out) {
  if (t.group_id() > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("group_id ", t.group_id(), " is out of range; groups are 0..255"));
  }
  if (t.world_size() < 1 || t.world_size() > static_cast<uint32_t>(cais::kMaxTreeRanks)) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size ", t.world_size(), " must be in 1..", cais::kMaxTreeRanks));
  }
  const auto port = [](uint32_t p, const char* what, uint16_t* to) {
    if (p >= dp::kMaxPorts) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " port ", p, " is out of range; ports are 0..", dp::kMaxPorts - 1));
    }
    *to = static_cast<uint16_t>(p);
    return absl::OkStatus();
  };
  *out = TreeInstall{};
  out->group_id = static_cast<uint8_t>(t.group_id());
  out->job = t.job();
  out->world_size = static_cast<uint16_t>(t.world_size());
  out->seq_base = t.seq_base();
  if (t.window_chunks() > UINT16_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("window_chunks ", t.window_chunks(), " must be at most ", UINT16_MAX));
  }
  out->window_chunks = static_cast<uint16_t>(t.window_chunks());
  for (uint32_t p : t.member_ports()) {
    if (auto s = port(p, "member", &out->members.emplace_back()); !s.ok()) return s;
  }
  if (t.has_uplink_port()) {
    if (auto s = port(t.uplink_port(), "uplink", &out->uplink.emplace()); !s.ok()) return s;
  }
  for (uint32_t p : t.rank_ports()) {
    if (auto s = port(p, "rank", &out->rank_ports.emplace_back()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void ToProto(const Stats& s, pb::Stats* out) {
  stats_internal::FieldsToProto<Stats>(kStatsFields, s, out);
  for (const GroupStats& g : s.groups) {
    stats_internal::FieldsToProto<GroupStats>(kGroupStatsFields, g, out->add_groups());
  }
  for (const ShardStats& sh : s.shards) {
    stats_internal::FieldsToProto<ShardStats>(kShardStatsFields, sh, out->add_shards());
  }
}

Stats FromProto(const pb::Stats& s) {
  Stats out;
  stats_internal::FieldsFromProto<Stats>(kStatsFields, s, &out);
  for (const pb::GroupStats& g : s.groups()) {
    stats_internal::FieldsFromProto<GroupStats>(kGroupStatsFields, g, &out.groups.emplace_back());
  }
  for (const pb::ShardStats& sh : s.shards()) {
    stats_internal::FieldsFromProto<ShardStats>(kShardStatsFields, sh, &out.shards.emplace_back());
  }
  return out;
}

void ToProto(const OffloadPolicy& p, pb::OffloadPolicy* out) {
  out->set_controller(p.controller);
  out->set_threshold(p.threshold);
  out->set_fallback_alarm(p.fallback_alarm);
  out->set_fallback_ratio(p.fallback_ratio);
  out->set_queue_delay_us(p.queue_delay_us);
  out->set_port_utilisation(p.port_utilisation);
  out->set_sram_usage(p.sram_usage);
  out->set_updated_unix_ms(p.updated_unix_ms);
  for (const GroupOffload& g : p.groups) {
    pb::GroupOffload* o = out->add_groups();
    o->set_group_id(g.group_id);
    o->set_participants(static_cast<uint32_t>(g.participants));
    o->set_min_bytes(g.min_bytes);
    o->set_max_bytes(g.max_bytes);
    o->set_measured_bins(g.measured_bins);
    o->set_offload_bins(g.offload_bins);
    o->set_explore_bins(g.explore_bins);
    o->set_borrowed_bins(g.borrowed_bins);
    o->set_fallback_ratio(g.fallback_ratio);
    o->set_fallback_hold(g.fallback_hold);
  }
}

absl::Status FromProto(const pb::OffloadPolicy& p, OffloadPolicy* out) {
  OffloadPolicy r;
  r.controller = p.controller();
  r.threshold = p.threshold();
  r.fallback_alarm = p.fallback_alarm();
  // A ratio, reported back by cais-cli and /metrics: refuse what is not one.
  const auto ratio_ok = [](double v) { return v >= 0 && v <= 1; };  // false for NaN
  if (!ratio_ok(p.fallback_ratio())) {
    return absl::InvalidArgumentError(
        absl::StrCat("offload policy: fallback_ratio ", p.fallback_ratio(), " must be in [0, 1]"));
  }
  r.fallback_ratio = p.fallback_ratio();
  r.queue_delay_us = p.queue_delay_us();
  r.port_utilisation = p.port_utilisation();
  r.sram_usage = p.sram_usage();
  r.updated_unix_ms = p.updated_unix_ms();
  for (const pb::GroupOffload& g : p.groups()) {
    if (g.group_id() > 255) {
      return absl::InvalidArgumentError(
          absl::StrCat("offload policy: group_id ", g.group_id(), " must be in [0, 255]"));
    }
    GroupOffload o;
    o.group_id = static_cast<uint8_t>(g.group_id());
    o.participants = static_cast<int>(std::min<uint32_t>(g.participants(), 1u << 16));
    o.min_bytes = g.min_bytes();
    o.max_bytes = g.max_bytes();
    o.measured_bins = g.measured_bins();
    o.offload_bins = g.offload_bins();
    o.explore_bins = g.explore_bins();
    o.borrowed_bins = g.borrowed_bins() & g.measured_bins();
    if (!ratio_ok(g.fallback_ratio())) {
      return absl::InvalidArgumentError(absl::StrCat("offload policy: group ", g.group_id(),
                                                     " fallback_ratio ", g.fallback_ratio(),
                                                     " must be in [0, 1]"));
    }
    o.fallback_ratio = g.fallback_ratio();
    o.fallback_hold = g.fallback_hold();
    r.groups.push_back(o);
  }
  *out = std::move(r);
  return absl::OkStatus();
}

void ToProto(const OlafStats& s, pb::OlafStats* out) {
  stats_internal::FieldsToProto<OlafStats>(kOlafStatsFields, s, out);
  for (const OlafClusterInfo& c : s.clusters) {
    stats_internal::FieldsToProto<OlafClusterInfo>(kOlafClusterFields, c, out->add_clusters());
  }
}

OlafStats FromProto(const pb::OlafStats& s) {
  OlafStats out;
  stats_internal::FieldsFromProto<OlafStats>(kOlafStatsFields, s, &out);
  for (const pb::OlafClusterStats& c : s.clusters()) {
    stats_internal::FieldsFromProto<OlafClusterInfo>(kOlafClusterFields, c,
                                                     &out.clusters.emplace_back());
  }
  return out;
}

}  // namespace inca::control
