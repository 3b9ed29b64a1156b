#include "monitor/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

#include "inca/control/reducer_stats.h"
#include "inca/dataplane/program.h"
#include "monitor/prom_writer.h"
#include "monitor/str_cat.h"

namespace inca::monitor {
namespace {

using cais::GroupCounters;
using internal::JsonBool;
using internal::JsonNumber;
using internal::PromNumber;
using internal::PromWriter;

constexpr size_t kChunkClosed = static_cast<size_t>(dp::DropReason::kChunkClosed);

// Unix time in whole milliseconds (exact in a double, unlike nanoseconds).
int64_t UnixMs(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::string GroupLabel(uint8_t g) {
  return internal::StrCat("group=\"", unsigned{g}, "\"");
}

std::string ReasonLabel(size_t r) {
  return internal::StrCat("reason=\"", dp::ToString(static_cast<dp::DropReason>(r)), "\"");
}

void AppendGroupCountersJson(const GroupCounters& c, size_t cell_bytes, std::string* out) {
  internal::StrAppend(out, counters::JsonFields<GroupCounters>(cais::kGroupCounters, c), ",");
  internal::StrAppend(
      out, "\"chunk_closed\":", c.drops_by_reason[kChunkClosed],
      ",\"sram_bytes\":", c.sram_cells * cell_bytes,
      ",\"slot_holding_p50_us\":", JsonNumber(cais::HoldingQuantileUs(c.holding_us_log2, 0.5)),
      ",\"slot_holding_p99_us\":", JsonNumber(cais::HoldingQuantileUs(c.holding_us_log2, 0.99)),
      ",\"fallback_ratio\":", JsonNumber(FallbackRatio(c)),
      ",\"fallback_alarm\":", JsonBool(FallbackRatio(c) > kFallbackAlarmRatio), ",\"drops\":{");
  bool first = true;
  for (size_t r = 1; r < dp::kDropReasonCount; ++r) {
    if (c.drops_by_reason[r] == 0) continue;
    internal::StrAppend(out, first ? "" : ",", "\"", dp::ToString(static_cast<dp::DropReason>(r)),
                        "\":", c.drops_by_reason[r]);
    first = false;
  }
  out->append("}");
}

}  // namespace

MetricsSnapshot FromControl(const control::Stats& stats, const control::OffloadPolicy& policy,
                            std::chrono::system_clock::time_point taken_at) {
  MetricsSnapshot s;
  s.taken_at = taken_at;
  s.switch_counters = stats.counters;
  s.rates.reductions_per_s = stats.reductions_per_s;
  s.rates.reduced_bytes_per_s = stats.reduced_bytes_per_s;
  s.rates.packets_per_s = stats.packets_per_s;
  s.rates.window_end_ns = static_cast<dp::TimeNs>(stats.rate_window_end_ns);
  s.avg_pending_ms = stats.slot_holding_avg_us / 1e3;
  s.shards = stats.shards;
  for (const control::GroupStats& g : stats.groups) {
    GroupMetrics m;
    static_cast<control::GroupStats&>(m) = g;
    m.offload_on = g.active && g.offload_min_bytes <= g.offload_max_bytes;
    s.groups.push_back(m);
  }
  ApplyOffloadPolicy(policy, &s);
  return s;
}

double QueueDelayUs(const counters::SwitchCounters& c) {
  return control::IngressQueueDelayUs(c);  // the one definition
}

bool FallbackAlarm(const MetricsSnapshot& s) {
  return s.offload_windowed ? s.offload_fallback_alarm
                            : FallbackRatio(s.switch_counters.cais) > kFallbackAlarmRatio;
}

void ApplyOffloadPolicy(const control::OffloadPolicy& policy, MetricsSnapshot* out) {
  if (policy.updated_unix_ms == 0) return;  // no controller has spoken
  out->offload_controller = policy.controller;
  out->offload_queue_delay_us = policy.queue_delay_us;
  out->offload_windowed = true;
  out->offload_fallback_ratio = policy.fallback_ratio;
  out->offload_fallback_alarm = policy.fallback_alarm;
  for (GroupMetrics& g : out->groups) {
    g.offload_threshold = policy.threshold;
    for (const control::GroupOffload& o : policy.groups) {
      if (o.group_id == g.group_id) g.fallback_hold = o.fallback_hold;
    }
  }
}

namespace {

// The UDP front end: socket counters, queue delay, groups and their leases.
void WriteSwitchFamilies(const counters::SwitchCounters& sw, PromWriter* w) {
  // The declared tables (switchd/program_host.h, switchd/switch_server.h).
  WriteCounters<counters::HostCounters>(counters::kHostCounters, sw, w);
  WriteCounters<counters::SwitchCounters>(counters::kSwitchCounters, sw, w);
  w->Gauge("inca_switch_io_offload",
           "1 when the socket uses the kernel offload (gso: UDP_SEGMENT sends, gro: UDP_GRO "
           "receives; --io).");
  w->Sample("offload=\"gso\"", sw.io_gso);
  w->Sample("offload=\"gro\"", sw.io_gro);
  // Queue delay as the write-up means it (4.4, "over 50 us means overload"):
  // in the switch, kernel receive timestamp to the pipeline. A windowed mean
  // is rate(..._seconds_total) / rate(..._samples_total).
  w->Gauge("inca_switch_queue_delay_seconds",
           "Mean in-switch queueing delay since start (kernel receive timestamp to the pipeline).");
  w->Sample("", QueueDelayUs(sw) / 1e6);
  w->Gauge("inca_switch_conserved", "1 when every packet is accounted for (conservation check).");
  w->Sample("", sw.Conserved());
}

// The reducer program: packets and bytes in, absorbed, forwarded, dropped
// and sent (dp::kProgramCounters), and drops by reason.
void WriteReducerFamilies(const dp::ProgramCounters& rc, PromWriter* w) {
  WriteCounters<dp::ProgramCounters>(dp::kProgramCounters, rc, w, "inca_reducer_");
  w->Counter("inca_reducer_dropped_packets_total", "Packets the reducer dropped, by reason.");
  for (size_t r = 1; r < dp::kDropReasonCount; ++r) {
    w->Sample(ReasonLabel(r), rc.drops_by_reason[r]);
  }
}

// CAIS figures: switch-wide (no labels) and per group (group="G").
void WriteCaisFamilies(const MetricsSnapshot& s, PromWriter* w) {
  const counters::SwitchCounters& sw = s.switch_counters;
  const cais::SramUsage& sram = sw.sram;
  for (const counters::Counter<GroupCounters>& f : cais::kGroupCounters) {
    CounterFamily(f, "inca_cais_", " All groups.", w);
    w->Sample("", sw.cais.*f.field);
    CounterFamily(f, "inca_cais_group_", " Per group.", w);
    for (const GroupMetrics& g : s.groups) w->Sample(GroupLabel(g.group_id), g.counters.*f.field);
  }
  w->Counter("inca_cais_group_dropped_packets_total",
             "Packets of the group dropped, by reason (non-zero reasons only).");
  for (const GroupMetrics& g : s.groups) {
    for (size_t r = 1; r < dp::kDropReasonCount; ++r) {
      if (g.counters.drops_by_reason[r] == 0) continue;
      w->Sample(internal::StrCat(GroupLabel(g.group_id), ",", ReasonLabel(r)),
                g.counters.drops_by_reason[r]);
    }
  }
  w->Gauge("inca_cais_sram_bytes", "Slot memory held by pending chunks and retained results.");
  w->Sample("", sw.cais.sram_cells * sram.cell_bytes);
  w->Gauge("inca_cais_group_sram_bytes", "Slot memory the group holds.");
  for (const GroupMetrics& g : s.groups) {
    w->Sample(GroupLabel(g.group_id), g.counters.sram_cells * sram.cell_bytes);
  }
  w->Gauge("inca_cais_fallback_ratio",
           "(timeouts + chunk_closed drops) / (completed + timeouts), since start.");
  w->Sample("", FallbackRatio(sw.cais));
  w->Gauge("inca_cais_group_fallback_ratio", "Fallback ratio of the group, since start.");
  for (const GroupMetrics& g : s.groups) {
    w->Sample(GroupLabel(g.group_id), FallbackRatio(g.counters));
  }
  w->Gauge("inca_cais_fallback_alarm",
           "1 when the fallback ratio exceeds 0.1 (health alarm): over the offload controller's "
           "10 s window when one runs, else since start.");
  w->Sample("", FallbackAlarm(s));
  w->Gauge("inca_offload_fallback_ratio",
           "Fallback ratio over the offload controller's window (10 s); 0 without a controller.");
  w->Sample("", s.offload_fallback_ratio);
  w->Gauge("inca_cais_group_fallback_hold",
           "1 while the offload controller holds the group on the host path (its windowed "
           "fallback ratio exceeds 0.1).");
  for (const GroupMetrics& g : s.groups) w->Sample(GroupLabel(g.group_id), g.fallback_hold);
  w->Gauge("inca_cais_avg_pending_seconds",
           "Mean slot-holding time of completed chunks (first contribution to completion: the "
           "wait for the slowest rank; the queue delay is inca_switch_queue_delay_seconds).");
  w->Sample("", s.avg_pending_ms / 1e3);
  w->Gauge("inca_cais_group_avg_pending_seconds",
           "Mean time the group's completed chunks spent pending.");
  for (const GroupMetrics& g : s.groups) {
    w->Sample(GroupLabel(g.group_id), g.slot_holding_avg_us / 1e6);
  }
  for (const auto& [q, name] : {std::pair{0.5, "p50"}, std::pair{0.99, "p99"}}) {
    const std::string what = internal::StrCat(
        " slot-holding time (first contribution to completion; log2 buckets, since start).");
    w->Gauge(internal::StrCat("inca_cais_slot_holding_", name, "_seconds"),
             internal::StrCat(name, what));
    w->Sample("", cais::HoldingQuantileUs(sw.cais.holding_us_log2, q) / 1e6);
    w->Gauge(internal::StrCat("inca_cais_group_slot_holding_", name, "_seconds"),
             internal::StrCat(name, what, " Per group."));
    for (const GroupMetrics& g : s.groups) {
      w->Sample(GroupLabel(g.group_id),
                cais::HoldingQuantileUs(g.counters.holding_us_log2, q) / 1e6);
    }
  }
  w->Gauge("inca_cais_reductions_per_second", "Chunks completed per second (last rate window).");
  w->Sample("", s.rates.reductions_per_s);
  w->Gauge("inca_cais_reduced_bytes_per_second",
           "Payload bytes folded in per second (last rate window).");
  w->Sample("", s.rates.reduced_bytes_per_s);
  w->Gauge("inca_cais_received_packets_per_second",
           "Packets received per second (last rate window).");
  w->Sample("", s.rates.packets_per_s);
}

// Offload decisions: per-group policy, shares, and the controller's queue delay.
void WriteOffloadFamilies(const MetricsSnapshot& s, PromWriter* w) {
  w->Gauge("inca_cais_groups_active", "Groups with traffic.");
  w->Sample("", static_cast<uint64_t>(s.groups.size()));
  w->Gauge("inca_cais_group_offload_enabled", "1 when the group's collectives go to the switch.");
  for (const GroupMetrics& g : s.groups) w->Sample(GroupLabel(g.group_id), g.offload_on);
  w->Gauge("inca_cais_group_offload_threshold",
           "Offload score threshold behind the group's decision.");
  for (const GroupMetrics& g : s.groups) w->Sample(GroupLabel(g.group_id), g.offload_threshold);
  w->Gauge("inca_cais_group_offload_min_bytes",
           "Smallest operation the group's policy sends to the switch.");
  for (const GroupMetrics& g : s.groups) {
    w->Sample(GroupLabel(g.group_id), static_cast<double>(g.offload_min_bytes));
  }
  w->Gauge("inca_cais_group_offload_max_bytes",
           "Largest operation the group's policy sends to the switch (1.8e19: no limit).");
  for (const GroupMetrics& g : s.groups) {
    w->Sample(GroupLabel(g.group_id), static_cast<double>(g.offload_max_bytes));
  }
  w->Gauge("inca_cais_group_uplink_port",
           "Port toward the parent switch where the group goes up a tree from here (only such "
           "groups; with inca_cais_group_uplink_partials_total and the slot-holding gauges, "
           "this switch's level of the tree).");
  for (const GroupMetrics& g : s.groups) {
    if (g.tree_child) w->Sample(GroupLabel(g.group_id), uint64_t{g.uplink_port});
  }
  w->Gauge("inca_cais_group_pending_chunks", "Chunks of the group being aggregated.");
  for (const GroupMetrics& g : s.groups) w->Sample(GroupLabel(g.group_id), g.pending_chunks);
  w->Gauge("inca_cais_group_share_chunks",
           "Pending chunks reserved for the group (group_share); it may borrow beyond them.");
  for (const GroupMetrics& g : s.groups) w->Sample(GroupLabel(g.group_id), g.share_chunks);
  w->Gauge("inca_offload_queue_delay_seconds",
           "Ingress queueing delay the offload controller last used.");
  w->Sample("", s.offload_queue_delay_us / 1e6);
}

// SRAM: capacity, usage by holder, admission pressure and chunk counts.
void WriteSramFamilies(const cais::SramUsage& sram, PromWriter* w) {
  w->Gauge("inca_sram_capacity_bytes", "Slot memory allocated at start.");
  w->Sample("", static_cast<uint64_t>(sram.sram_bytes));
  w->Gauge("inca_sram_cell_bytes", "Size of one slot cell.");
  w->Sample("", static_cast<uint64_t>(sram.cell_bytes));
  w->Gauge("inca_sram_cells", "Slot cells in the memory.");
  w->Sample("", static_cast<uint64_t>(sram.cells_total));
  w->Gauge("inca_sram_used_bytes", "Slot memory in use, by holder.");
  w->Sample("state=\"pending\"", static_cast<uint64_t>(sram.cells_pending * sram.cell_bytes));
  w->Sample("state=\"retained\"", static_cast<uint64_t>(sram.cells_retained * sram.cell_bytes));
  w->Gauge("inca_sram_usage_ratio", "Fraction of slot memory held (pending + retained).");
  w->Sample("", sram.usage());
  w->Gauge("inca_sram_pending_usage_ratio",
           "Fraction of slot memory held by pending chunks (what admission checks).");
  w->Sample("", sram.pending_usage());
  w->Gauge("inca_sram_usage_limit_ratio", "Admission stops above this pending usage.");
  w->Sample("", sram.usage_limit);
  w->Gauge("inca_sram_pressure_ratio",
           "Pending usage against the admission limit: what the offload controller acts on.");
  w->Sample("", sram.pressure());
  w->Gauge("inca_sram_pressure",
           "1 when inca_sram_pressure_ratio exceeds 0.8 (the controller raises its threshold).");
  w->Sample("", sram.pressure() > kSramPressureRatio);
  w->Gauge("inca_sram_pending_chunks", "Chunks being aggregated.");
  w->Sample("", static_cast<uint64_t>(sram.pending_chunks));
  w->Gauge("inca_sram_max_pending_chunks", "Limit on chunks being aggregated.");
  w->Sample("", static_cast<uint64_t>(sram.max_pending_chunks));
  w->Gauge("inca_sram_retained_chunks", "Completed chunks whose result is kept for resends.");
  w->Sample("", static_cast<uint64_t>(sram.retained_chunks));
  w->Gauge("inca_sram_tombstones", "Keys of closed chunks remembered for late packets.");
  w->Sample("", static_cast<uint64_t>(sram.tombstones));
}

// inca-switchd --threads N: every shard's counters under inca_shard_*
// {shard="i"} (the families above sum them). Nothing with one shard.
template <typename T, typename Get>
void WriteShardCounters(counters::Table<T> table, std::string_view prefix,
                        const std::vector<control::ShardStats>& shards, Get get, PromWriter* w) {
  for (const counters::Counter<T>& c : table) {
    const std::string full = internal::StrCat(prefix, c.prom);
    const std::string name = internal::StrCat("inca_shard_", full.substr(5));  // past "inca_"
    const std::string help = internal::StrCat(c.help, " Per data-plane shard (--threads).");
    if (c.kind == counters::Kind::kCounter) {
      w->Counter(name, help);
    } else {
      w->Gauge(name, help);
    }
    for (const control::ShardStats& sh : shards) {
      w->Sample(internal::StrCat("shard=\"", sh.shard, "\""),
                static_cast<double>(get(sh).*c.field) * c.prom_scale);
    }
  }
}

void WriteShardFamilies(const std::vector<control::ShardStats>& shards, PromWriter* w) {
  if (shards.empty()) return;
  using control::ShardStats;
  WriteShardCounters<counters::HostCounters>(
      counters::kHostCounters, "", shards,
      [](const ShardStats& s) -> const counters::HostCounters& { return s.counters; }, w);
  WriteShardCounters<counters::SwitchCounters>(
      counters::kSwitchCounters, "", shards,
      [](const ShardStats& s) -> const counters::SwitchCounters& { return s.counters; }, w);
  WriteShardCounters<dp::ProgramCounters>(
      dp::kProgramCounters, "inca_reducer_", shards,
      [](const ShardStats& s) -> const dp::ProgramCounters& { return s.counters.reducer; }, w);
  WriteShardCounters<GroupCounters>(
      cais::kGroupCounters, "inca_cais_", shards,
      [](const ShardStats& s) -> const GroupCounters& { return s.counters.cais; }, w);
  w->Gauge("inca_shard_conserved", "1 when every packet of the shard is accounted for.");
  for (const ShardStats& sh : shards) {
    w->Sample(internal::StrCat("shard=\"", sh.shard, "\""), sh.conserved);
  }
}

}  // namespace

std::string RenderPrometheus(const MetricsSnapshot& s) {
  const counters::SwitchCounters& sw = s.switch_counters;
  PromWriter w;

  w.Gauge("inca_monitor_snapshot_timestamp_seconds",
          "When this snapshot was taken (Unix time, seconds).");
  w.Sample("", static_cast<double>(UnixMs(s.taken_at)) / 1e3);

  WriteSwitchFamilies(sw, &w);
  WriteReducerFamilies(sw.reducer, &w);
  WriteCaisFamilies(s, &w);
  WriteOffloadFamilies(s, &w);
  WriteSramFamilies(sw.sram, &w);
  WriteShardFamilies(s.shards, &w);
  return w.Take();
}

std::string RenderStatsJson(const MetricsSnapshot& s) {
  const counters::SwitchCounters& sw = s.switch_counters;
  const cais::SramUsage& sram = sw.sram;
  const double fallback = FallbackRatio(sw.cais);
  std::string out = internal::StrCat(
      "{\"time_ms\":", UnixMs(s.taken_at),
      ",\"thresholds\":{\"fallback_alarm_ratio\":", JsonNumber(kFallbackAlarmRatio),
      ",\"sram_pressure_ratio\":", JsonNumber(kSramPressureRatio), "}");
  internal::StrAppend(
      &out, ",\"sram\":{\"usage_ratio\":", JsonNumber(sram.usage()),
      ",\"pending_usage_ratio\":", JsonNumber(sram.pending_usage()),
      ",\"usage_limit_ratio\":", JsonNumber(sram.usage_limit),
      ",\"pressure_ratio\":", JsonNumber(sram.pressure()),
      ",\"pressure\":", JsonBool(sram.pressure() > kSramPressureRatio),
      ",\"capacity_bytes\":", sram.sram_bytes, ",\"cell_bytes\":", sram.cell_bytes,
      ",\"cells_total\":", sram.cells_total, ",\"cells_pending\":", sram.cells_pending,
      ",\"cells_retained\":", sram.cells_retained, ",\"pending_chunks\":", sram.pending_chunks,
      ",\"retained_chunks\":", sram.retained_chunks,
      ",\"max_pending_chunks\":", sram.max_pending_chunks, ",\"tombstones\":", sram.tombstones,
      "}");
  internal::StrAppend(&out,
                      ",\"rates\":{\"reductions_per_s\":", JsonNumber(s.rates.reductions_per_s),
                      ",\"reduced_bytes_per_s\":", JsonNumber(s.rates.reduced_bytes_per_s),
                      ",\"packets_per_s\":", JsonNumber(s.rates.packets_per_s),
                      ",\"window_end_ns\":", s.rates.window_end_ns, "}");
  internal::StrAppend(&out, ",\"queue_delay_us\":", JsonNumber(QueueDelayUs(sw)));
  internal::StrAppend(&out, ",\"offload_controller\":\"", s.offload_controller,
                      "\",\"offload_queue_delay_us\":", JsonNumber(s.offload_queue_delay_us));
  internal::StrAppend(&out, ",\"avg_pending_ms\":", JsonNumber(s.avg_pending_ms),
                      ",\"fallback_ratio\":", JsonNumber(fallback), ",\"fallback_ratio_window\":",
                      s.offload_windowed ? JsonNumber(s.offload_fallback_ratio) : "null",
                      ",\"fallback_alarm\":", JsonBool(FallbackAlarm(s)), ",\"totals\":{");
  AppendGroupCountersJson(sw.cais, sram.cell_bytes, &out);
  out.append("},\"groups\":[");
  for (size_t i = 0; i < s.groups.size(); ++i) {
    const GroupMetrics& g = s.groups[i];
    internal::StrAppend(&out, i ? "," : "", "{\"group\":", unsigned{g.group_id},
                        ",\"offload_on\":", JsonBool(g.offload_on),
                        ",\"offload_threshold\":", JsonNumber(g.offload_threshold),
                        ",\"offload_min_bytes\":", g.offload_min_bytes,
                        ",\"offload_max_bytes\":", g.offload_max_bytes,
                        ",\"avg_pending_ms\":", JsonNumber(g.slot_holding_avg_us / 1e3),
                        ",\"active\":", JsonBool(g.active),
                        ",\"pending_chunks\":", g.pending_chunks,
                        ",\"share_chunks\":", g.share_chunks,
                        ",\"fallback_hold\":", JsonBool(g.fallback_hold), ",");
    AppendGroupCountersJson(g.counters, sram.cell_bytes, &out);
    out.append("}");
  }
  internal::StrAppend(&out, "],\"switch\":", sw.ToJson(), ",\"shards\":[");
  for (size_t i = 0; i < s.shards.size(); ++i) {
    const control::ShardStats& sh = s.shards[i];
    internal::StrAppend(&out, i ? "," : "", "{\"shard\":", sh.shard, ",\"endpoint\":\"",
                        sh.endpoint, "\",\"switch\":", sh.counters.ToJson(), "}");
  }
  out.append("]}");
  return out;
}

}  // namespace inca::monitor
