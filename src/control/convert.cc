#include "control/convert.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

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

void ToProto(const Stats& s, pb::Stats* out) {
  out->set_sram_usage(s.sram_usage);
  out->set_sram_pending_usage(s.sram_pending_usage);
  out->set_sram_usage_limit(s.sram_usage_limit);
  out->set_sram_bytes(s.sram_bytes);
  out->set_reductions_per_s(s.reductions_per_s);
  out->set_reduced_bytes_per_s(s.reduced_bytes_per_s);
  out->set_completed_chunks(s.completed_chunks);
  out->set_timeouts(s.timeouts);
  out->set_fallback_notices(s.fallback_notices);
  out->set_fallback_ratio(s.fallback_ratio);
  out->set_slot_holding_avg_us(s.slot_holding_avg_us);
  out->set_rx_packets(s.rx_packets);
  out->set_tx_packets(s.tx_packets);
  out->set_unknown_sender(s.unknown_sender);
  out->set_conserved(s.conserved);
  out->set_ingress_delay_ns_total(s.ingress_delay_ns_total);
  out->set_ingress_delay_samples(s.ingress_delay_samples);
  out->set_ingress_queue_delay_us(s.ingress_queue_delay_us);
  for (const auto& [k, v] : s.drops) (*out->mutable_drops())[k] = v;
  for (const auto& g : s.groups) {
    pb::GroupStats* o = out->add_groups();
    o->set_group_id(g.group_id);
    o->set_rx_packets(g.rx_packets);
    o->set_completed_chunks(g.completed_chunks);
    o->set_reduced_bytes(g.reduced_bytes);
    o->set_timeouts(g.timeouts);
    o->set_fallback_notices(g.fallback_notices);
    o->set_dropped(g.dropped);
    o->set_sram_cells(g.sram_cells);
    o->set_offload_accepted_ops(g.offload_accepted_ops);
    o->set_offload_declined_ops(g.offload_declined_ops);
  }
}

Stats FromProto(const pb::Stats& s) {
  Stats out;
  out.sram_usage = s.sram_usage();
  out.sram_pending_usage = s.sram_pending_usage();
  out.sram_usage_limit = s.sram_usage_limit();
  out.sram_bytes = s.sram_bytes();
  out.reductions_per_s = s.reductions_per_s();
  out.reduced_bytes_per_s = s.reduced_bytes_per_s();
  out.completed_chunks = s.completed_chunks();
  out.timeouts = s.timeouts();
  out.fallback_notices = s.fallback_notices();
  out.fallback_ratio = s.fallback_ratio();
  out.slot_holding_avg_us = s.slot_holding_avg_us();
  out.rx_packets = s.rx_packets();
  out.tx_packets = s.tx_packets();
  out.unknown_sender = s.unknown_sender();
  out.conserved = s.conserved();
  out.ingress_delay_ns_total = s.ingress_delay_ns_total();
  out.ingress_delay_samples = s.ingress_delay_samples();
  out.ingress_queue_delay_us = s.ingress_queue_delay_us();
  for (const auto& [k, v] : s.drops()) out.drops[k] = v;
  for (const auto& g : s.groups()) {
    GroupStats o;
    o.group_id = static_cast<uint8_t>(g.group_id());
    o.rx_packets = g.rx_packets();
    o.completed_chunks = g.completed_chunks();
    o.reduced_bytes = g.reduced_bytes();
    o.timeouts = g.timeouts();
    o.fallback_notices = g.fallback_notices();
    o.dropped = g.dropped();
    o.sram_cells = g.sram_cells();
    o.offload_accepted_ops = g.offload_accepted_ops();
    o.offload_declined_ops = g.offload_declined_ops();
    out.groups.push_back(o);
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
  out->set_policy(s.policy);
  out->set_depth(s.depth);
  out->set_occupancy(s.occupancy);
  out->set_queue_util(s.queue_util);
  out->set_active_clusters(s.active_clusters);
  out->set_egress_rate_bps(s.egress_rate_bps);
  out->set_delta_t_ms(s.delta_t_ms);
  out->set_tau_ms(s.tau_ms);
  out->set_updates_rx(s.updates_rx);
  out->set_updates_absorbed(s.updates_absorbed);
  out->set_updates_cut_through(s.updates_cut_through);
  out->set_updates_tx(s.updates_tx);
  out->set_acks_forwarded(s.acks_forwarded);
  out->set_models_rx(s.models_rx);
  out->set_model_copies_tx(s.model_copies_tx);
  out->set_passthrough(s.passthrough);
  out->set_dropped(s.dropped);
  out->set_conserved(s.conserved);
  for (const auto& [k, v] : s.drops) (*out->mutable_drops())[k] = v;
  for (const OlafClusterInfo& c : s.clusters) {
    pb::OlafClusterStats* o = out->add_clusters();
    o->set_cluster_id(c.cluster_id);
    o->set_workers(c.workers);
    o->set_offered(c.offered);
    o->set_enqueued(c.enqueued);
    o->set_merged(c.merged);
    o->set_dequeued(c.dequeued);
    o->set_dequeued_worker_updates(c.dequeued_worker_updates);
    o->set_dropped(c.dropped);
    o->set_occupancy(c.occupancy);
    o->set_aom_valid(c.aom_valid);
    o->set_aom_current_ms(c.aom_current_ms);
    o->set_aom_peak_ms(c.aom_peak_ms);
    o->set_aom_average_ms(c.aom_average_ms);
    for (const auto& [k, v] : c.drops) (*o->mutable_drops())[k] = v;
  }
}

OlafStats FromProto(const pb::OlafStats& s) {
  OlafStats out;
  out.policy = s.policy();
  out.depth = s.depth();
  out.occupancy = s.occupancy();
  out.queue_util = s.queue_util();
  out.active_clusters = s.active_clusters();
  out.egress_rate_bps = s.egress_rate_bps();
  out.delta_t_ms = s.delta_t_ms();
  out.tau_ms = s.tau_ms();
  out.updates_rx = s.updates_rx();
  out.updates_absorbed = s.updates_absorbed();
  out.updates_cut_through = s.updates_cut_through();
  out.updates_tx = s.updates_tx();
  out.acks_forwarded = s.acks_forwarded();
  out.models_rx = s.models_rx();
  out.model_copies_tx = s.model_copies_tx();
  out.passthrough = s.passthrough();
  out.dropped = s.dropped();
  out.conserved = s.conserved();
  for (const auto& [k, v] : s.drops()) out.drops[k] = v;
  for (const pb::OlafClusterStats& c : s.clusters()) {
    OlafClusterInfo o;
    o.cluster_id = static_cast<uint16_t>(c.cluster_id());
    o.workers = c.workers();
    o.offered = c.offered();
    o.enqueued = c.enqueued();
    o.merged = c.merged();
    o.dequeued = c.dequeued();
    o.dequeued_worker_updates = c.dequeued_worker_updates();
    o.dropped = c.dropped();
    o.occupancy = c.occupancy();
    o.aom_valid = c.aom_valid();
    o.aom_current_ms = c.aom_current_ms();
    o.aom_peak_ms = c.aom_peak_ms();
    o.aom_average_ms = c.aom_average_ms();
    for (const auto& [k, v] : c.drops()) o.drops[k] = v;
    out.clusters.push_back(std::move(o));
  }
  return out;
}

}  // namespace inca::control
