#include "inca/control/reducer_stats.h"

#include <algorithm>
#include <string>

namespace inca::control {
namespace {

constexpr size_t kChunkClosed = static_cast<size_t>(dp::DropReason::kChunkClosed);

double HoldingAvgUs(const cais::GroupCounters& c) {
  return c.completed_chunks ? static_cast<double>(c.pending_ns_total) /
                                  static_cast<double>(c.completed_chunks) / 1e3
                            : 0.0;
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
  st->fallback_ratio = FallbackRatio(t);
  st->slot_holding_avg_us = HoldingAvgUs(t);
  st->slot_holding_p50_us = cais::HoldingQuantileUs(t.holding_us_log2, 0.5);
  st->slot_holding_p99_us = cais::HoldingQuantileUs(t.holding_us_log2, 0.99);
  st->conserved = r.counters().Conserved();
  st->drops.clear();
  for (size_t i = 1; i < dp::kDropReasonCount; ++i) {
    if (t.drops_by_reason[i] != 0) {
      st->drops[std::string(dp::ToString(static_cast<dp::DropReason>(i)))] = t.drops_by_reason[i];
    }
  }
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
    g.slot_holding_avg_us = HoldingAvgUs(c);
    g.slot_holding_p50_us = cais::HoldingQuantileUs(c.holding_us_log2, 0.5);
    g.slot_holding_p99_us = cais::HoldingQuantileUs(c.holding_us_log2, 0.99);
    st->groups.push_back(g);
  }
}

}  // namespace inca::control
