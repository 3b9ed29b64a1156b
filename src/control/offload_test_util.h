// Inputs the offload controller's tests share: a switch snapshot and a
// group with one size class measured.
#pragma once

#include <cmath>
#include <cstdint>

#include "inca/control/control_plane.h"
#include "inca/control/stats.h"

namespace inca::control {

// A snapshot with SRAM usage, a mean ingress delay over 1,000 samples, and
// a fallback ratio.
inline Stats Sram(double usage, double delay_us = 0, double fallback = 0) {
  Stats s;
  s.sram_usage = usage;
  s.counters.ingress_delay_samples = 1000;
  s.counters.ingress_delay_ns_total = static_cast<uint64_t>(delay_us * 1e3 * 1000);
  s.fallback_ratio = fallback;
  return s;
}

// A formed 4-rank group with one size class measured as given (mean_us < 0:
// not measured on that path). 64 switch samples: past the first explore's
// budget (1 / explore_budget = 50 at 2 %).
inline GroupInfo Measured(int bin, double switch_us, double host_us, int64_t switch_age_ms = 0,
                          int64_t host_age_ms = 0, uint32_t host_samples = 3,
                          uint32_t switch_samples = 64) {
  GroupInfo g;
  g.group_id = 5;
  g.world_size = 4;
  g.formed = true;
  g.seq_base = 77;
  OffloadTiming t;
  t.bin = bin;
  const double bytes = std::ldexp(1.0, bin);
  if (switch_us >= 0) t.switch_path = {switch_samples, switch_us, bytes, switch_age_ms};
  if (host_us >= 0) t.host_path = {host_samples, host_us, bytes, host_age_ms};
  g.timings.push_back(t);
  return g;
}

}  // namespace inca::control
