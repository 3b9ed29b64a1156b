#include "monitor/synthetic.h"

#include <algorithm>
#include <cmath>

namespace inca::monitor {
namespace {

struct GroupShape {
  uint8_t id;
  double chunks_per_s;   // mean completion rate
  uint64_t ports;        // contributors per chunk
  double fallback_mean;  // mean fallback ratio
  double fallback_swing;
};

constexpr GroupShape kGroups[] = {
    {0, 6000, 4, 0.010, 0.005},
    {1, 3500, 4, 0.020, 0.010},
    {2, 1500, 8, 0.095, 0.065},  // crosses the 10% alarm line
    {5, 150, 2, 0.030, 0.010},   // offloading off
};
constexpr uint64_t kPayloadBytes = 8192;
constexpr size_t kSramBytes = size_t{16} << 20;
constexpr size_t kCellBytes = 2 * 8952;

uint64_t Round(double v) {
  return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v));
}

constexpr size_t R(dp::DropReason r) {
  return static_cast<size_t>(r);
}

// The groups' counters summed (switch-wide), and the sum of their slot
// holding times weighted by completed chunks (ms x chunks).
cais::GroupCounters SumGroups(const std::vector<GroupMetrics>& groups, double* pending_weighted) {
  cais::GroupCounters totals;
  for (const GroupMetrics& g : groups) {
    const cais::GroupCounters& c = g.counters;
    totals.rx_packets += c.rx_packets;
    totals.contributions += c.contributions;
    totals.completed_chunks += c.completed_chunks;
    totals.reduced_bytes += c.reduced_bytes;
    totals.results_resent += c.results_resent;
    totals.timeouts += c.timeouts;
    totals.fallback_notices += c.fallback_notices;
    totals.dropped += c.dropped;
    totals.sram_cells += c.sram_cells;
    for (size_t r = 0; r < dp::kDropReasonCount; ++r) {
      totals.drops_by_reason[r] += c.drops_by_reason[r];
    }
    *pending_weighted += g.slot_holding_avg_us / 1e3 * static_cast<double>(c.completed_chunks);
  }
  return totals;
}

}  // namespace

SyntheticMetrics::SyntheticMetrics(std::chrono::system_clock::time_point start) : start_(start) {
  for (const GroupShape& shape : kGroups) {
    GroupMetrics g;
    g.group_id = shape.id;
    last_.groups.push_back(g);
  }
}

MetricsSnapshot SyntheticMetrics::Next(std::chrono::milliseconds step) {
  std::lock_guard lock(mu_);
  elapsed_ += step;
  const double dt = std::chrono::duration<double>(step).count();
  const double t = std::chrono::duration<double>(elapsed_).count();
  MetricsSnapshot& s = last_;
  counters::SwitchCounters& sw = s.switch_counters;
  s.taken_at = start_ + elapsed_;

  // SRAM swings between about 38% and 86%, crossing the 80% pressure line.
  const double usage = 0.62 + 0.24 * std::sin(t / 9.0);
  cais::SramUsage& sram = sw.sram;
  sram.sram_bytes = kSramBytes;
  sram.cell_bytes = kCellBytes;
  sram.cells_total = kSramBytes / kCellBytes;
  sram.usage_limit = 0.75;
  sram.max_pending_chunks = 1024;
  sram.cells_pending = Round(usage * 0.7 * static_cast<double>(sram.cells_total));
  sram.cells_retained = Round(usage * 0.3 * static_cast<double>(sram.cells_total));
  sram.pending_chunks = static_cast<uint32_t>(sram.cells_pending);
  sram.retained_chunks = static_cast<uint32_t>(sram.cells_retained);
  const bool pressure = sram.pressure() > kSramPressureRatio;

  uint64_t step_completed = 0, step_bytes = 0, step_rx = 0, step_tx = 0;
  uint64_t cells_left = sram.cells_pending + sram.cells_retained;
  double weight_left = 0;
  for (const GroupShape& shape : kGroups) weight_left += shape.chunks_per_s;
  for (size_t i = 0; i < std::size(kGroups); ++i) {
    const GroupShape& shape = kGroups[i];
    GroupMetrics& g = s.groups[i];
    cais::GroupCounters& c = g.counters;
    const double phase = t / 6.0 + static_cast<double>(i);
    // Every ~70 s a few seconds of "loss" push every group past the alarm.
    const double burst = std::sin(t / 11.0) > 0.9 ? 0.12 : 0.0;
    const double fallback =
        shape.fallback_mean + shape.fallback_swing * std::sin(t / 7.0 + phase) + burst;
    const uint64_t completed = Round(shape.chunks_per_s * (1 + 0.25 * std::sin(phase)) * dt);
    const uint64_t timeouts = Round(static_cast<double>(completed) * fallback * 0.8);
    const uint64_t closed = Round(static_cast<double>(completed) * fallback * 0.3);
    const uint64_t duplicates = Round(static_cast<double>(completed) * 0.001);
    const uint64_t contributions = completed * shape.ports + timeouts * (shape.ports - 1);
    const uint64_t resent = Round(static_cast<double>(completed) * 0.002);
    c.completed_chunks += completed;
    c.timeouts += timeouts;
    c.contributions += contributions;
    c.reduced_bytes += contributions * kPayloadBytes;
    c.drops_by_reason[R(dp::DropReason::kChunkClosed)] += closed;
    c.drops_by_reason[R(dp::DropReason::kDuplicate)] += duplicates;
    c.dropped += closed + duplicates;
    c.rx_packets += contributions + closed + duplicates;
    c.fallback_notices += timeouts * shape.ports + closed;
    c.results_resent += resent;
    // SRAM shared in proportion to the mean rate; the last group takes the rest.
    const uint64_t cells = i + 1 == std::size(kGroups)
                               ? cells_left
                               : std::min(cells_left, Round(static_cast<double>(cells_left) *
                                                            shape.chunks_per_s / weight_left));
    c.sram_cells = cells;
    cells_left -= cells;
    weight_left -= shape.chunks_per_s;

    g.slot_holding_avg_us = 1e3 * (0.3 + 0.02 * static_cast<double>(shape.ports)) *
                            (1 + 0.5 * std::sin(t / 5.0 + phase)) * (pressure ? 1.8 : 1.0);
    // Offload decisions as the CAIS controller would take them: threshold
    // raised while SRAM is under pressure; group 2 off while its fallback
    // ratio is high; group 5 kept on the hosts.
    g.offload_threshold = shape.id == 5 ? 0.4 : (pressure ? 0.3 : kDefaultOffloadThreshold);
    g.offload_on = shape.id == 5 ? false : !(shape.id == 2 && fallback > 0.14);

    step_completed += completed;
    step_bytes += contributions * kPayloadBytes;
    step_rx += contributions + closed + duplicates;
    step_tx += completed * shape.ports + timeouts * shape.ports + closed + resent;
  }

  // Switch-wide totals and the program/switch counters (conserved).
  double pending_weighted = 0;
  cais::GroupCounters totals = SumGroups(s.groups, &pending_weighted);
  // A little garbage that names no group: counted switch-wide only.
  const uint64_t too_short = Round(3 * dt);
  const uint64_t too_short_total =
      sw.cais.drops_by_reason[R(dp::DropReason::kTooShort)] + too_short;
  totals.drops_by_reason[R(dp::DropReason::kTooShort)] = too_short_total;
  totals.dropped += too_short_total;
  sram.tombstones = std::min<size_t>(8192, totals.timeouts);
  sw.cais = totals;
  s.avg_pending_ms =
      totals.completed_chunks ? pending_weighted / static_cast<double>(totals.completed_chunks) : 0;

  dp::ProgramCounters& rc = sw.reducer;
  rc.aggregated = totals.contributions;
  rc.forwarded = 0;
  rc.dropped = totals.dropped;
  rc.drops_by_reason = totals.drops_by_reason;
  rc.rx_packets = rc.aggregated + rc.forwarded + rc.dropped;
  rc.rx_bytes += (step_rx + too_short) * (20 + kPayloadBytes);
  rc.tx_packets += step_tx;
  rc.tx_bytes += step_tx * (20 + kPayloadBytes);
  sw.mgmt_rx += Round(0.5 * dt);
  sw.mgmt_tx = sw.mgmt_rx;
  sw.datagrams_rx = sw.mgmt_rx + rc.rx_packets;
  sw.datagrams_tx = rc.tx_packets;
  sw.ports_bound = 18;
  sw.groups_formed = std::size(kGroups);

  s.rates.reductions_per_s = dt > 0 ? static_cast<double>(step_completed) / dt : 0;
  s.rates.reduced_bytes_per_s = dt > 0 ? static_cast<double>(step_bytes) / dt : 0;
  s.rates.packets_per_s = dt > 0 ? static_cast<double>(step_rx + too_short) / dt : 0;
  s.rates.window_end_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed_).count();
  return s;
}

}  // namespace inca::monitor
