#include "inca/control/reducer_stats.h"

#include <algorithm>
#include <map>
#include <string>

namespace inca::control {
namespace {

constexpr size_t kChunkClosed = static_cast<size_t>(dp::DropReason::kChunkClosed);

double HoldingAvgUs(const cais::GroupCounters& c) {
  return c.completed_chunks ? static_cast<double>(c.pending_ns_total) /
                                  static_cast<double>(c.completed_chunks) / 1e3
                            : 0.0;
}

// The figures that follow from a group's (or the switch's) counters alone.
void HoldingFigures(const cais::GroupCounters& c, double* avg, double* p50, double* p99) {
  *avg = HoldingAvgUs(c);
  *p50 = cais::HoldingQuantileUs(c.holding_us_log2, 0.5);
  *p99 = cais::HoldingQuantileUs(c.holding_us_log2, 0.99);
}

void TotalsFigures(const cais::GroupCounters& t, Stats* st) {
  st->fallback_ratio = FallbackRatio(t);
  HoldingFigures(t, &st->slot_holding_avg_us, &st->slot_holding_p50_us, &st->slot_holding_p99_us);
  st->drops.clear();
  for (size_t i = 1; i < dp::kDropReasonCount; ++i) {
    if (t.drops_by_reason[i] != 0) {
      st->drops[std::string(dp::ToString(static_cast<dp::DropReason>(i)))] = t.drops_by_reason[i];
    }
  }
}

}  // namespace

double FallbackRatio(const cais::GroupCounters& c) {
  const double finished = static_cast<double>(c.completed_chunks + c.timeouts);
  if (finished == 0) return 0;
  const double fell_back = static_cast<double>(c.timeouts + c.drops_by_reason[kChunkClosed]);
  return std::min(1.0, fell_back / finished);
}

void CollectReducerStats(const cais::CaisReducer& r, Stats* st) {
  const cais::SramUsage u = r.sram();
  const cais::GroupCounters& t = r.totals();
  st->sram_usage = u.usage();
  st->sram_pending_usage = u.pending_usage();
  st->sram_usage_limit = u.usage_limit;
  st->sram_bytes = u.sram_bytes;
  const cais::CaisRates rates = r.rates();
  st->reductions_per_s = rates.reductions_per_s;
  st->reduced_bytes_per_s = rates.reduced_bytes_per_s;
  st->packets_per_s = rates.packets_per_s;
  st->rate_window_end_ns = static_cast<uint64_t>(std::max<dp::TimeNs>(0, rates.window_end_ns));
  TotalsFigures(t, st);
  st->conserved = r.counters().Conserved();
  st->groups.clear();
  for (unsigned id = 0; id < 256; ++id) {
    const auto gid = static_cast<uint8_t>(id);
    const cais::GroupCounters& c = r.group(gid);
    if (c.rx_packets == 0 && c.sram_cells == 0) continue;
    GroupStats g;
    g.group_id = gid;
    g.counters = c;
    g.active = r.rules().HasGroup(gid);
    const cais::GroupShare share = r.share(gid);
    g.pending_chunks = share.pending_chunks;
    g.share_chunks = share.share_chunks;
    g.offload_min_bytes = r.min_offload_bytes(gid);
    g.offload_max_bytes = r.max_offload_bytes(gid);
    HoldingFigures(c, &g.slot_holding_avg_us, &g.slot_holding_p50_us, &g.slot_holding_p99_us);
    if (const cais::Rule* rule = r.rules().Lookup(gid, 0, 0); rule && rule->uplink) {
      g.tree_child = true;
      g.uplink_port = *rule->uplink;
    }
    st->groups.push_back(g);
  }
}

double IngressQueueDelayUs(const counters::HostCounters& c) {
  return c.ingress_delay_samples ? static_cast<double>(c.ingress_delay_ns_total) /
                                       static_cast<double>(c.ingress_delay_samples) / 1e3
                                 : 0.0;
}

Stats MergeShards(std::span<const Stats> parts, std::span<const std::string> endpoints) {
  if (parts.size() == 1) return parts[0];
  Stats out;
  std::map<uint8_t, GroupStats> groups;
  double used = 0, pending = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Stats& p = parts[i];
    out.counters.Add(p.counters);
    used += p.sram_usage * static_cast<double>(p.sram_bytes);
    pending += p.sram_pending_usage * static_cast<double>(p.sram_bytes);
    out.sram_bytes += p.sram_bytes;
    out.sram_usage_limit = p.sram_usage_limit;
    out.reductions_per_s += p.reductions_per_s;
    out.reduced_bytes_per_s += p.reduced_bytes_per_s;
    out.packets_per_s += p.packets_per_s;
    out.rate_window_end_ns = std::max(out.rate_window_end_ns, p.rate_window_end_ns);
    out.conserved = out.conserved && p.conserved && p.counters.Conserved();
    for (const GroupStats& g : p.groups) {
      auto [it, fresh] = groups.try_emplace(g.group_id, g);
      if (fresh) continue;
      GroupStats& m = it->second;
      counters::SwitchCounters one, other;  // GroupCounters add as the totals do
      one.cais = m.counters;
      other.cais = g.counters;
      one.Add(other);
      m.counters = one.cais;
      m.active = m.active || g.active;
      m.pending_chunks += g.pending_chunks;
      m.share_chunks += g.share_chunks;
    }
    ShardStats sh;
    sh.shard = static_cast<uint32_t>(i);
    if (i < endpoints.size()) sh.endpoint = endpoints[i];
    sh.counters = p.counters;
    sh.conserved = p.conserved && p.counters.Conserved();
    out.shards.push_back(std::move(sh));
  }
  if (out.sram_bytes != 0) {
    out.sram_usage = used / static_cast<double>(out.sram_bytes);
    out.sram_pending_usage = pending / static_cast<double>(out.sram_bytes);
  }
  TotalsFigures(out.counters.cais, &out);
  for (auto& [id, g] : groups) {
    HoldingFigures(g.counters, &g.slot_holding_avg_us, &g.slot_holding_p50_us,
                   &g.slot_holding_p99_us);
    out.groups.push_back(g);
  }
  out.ingress_queue_delay_us = IngressQueueDelayUs(out.counters);
  return out;
}

}  // namespace inca::control
