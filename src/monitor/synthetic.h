// A synthetic, changing MetricsSnapshot source for the dashboard demo and
// its browser test: four groups whose traffic, SRAM use, queue delay and
// fallback ratio move smoothly with time, so every chart has something to
// draw. Counters only grow and the switch's conservation equations hold.
// Not a model of the switch: no reducer runs.
#pragma once

#include <chrono>
#include <mutex>

#include "monitor/metrics.h"

namespace inca::monitor {

class SyntheticMetrics {
 public:
  // `start` is taken_at of the first snapshot.
  explicit SyntheticMetrics(
      std::chrono::system_clock::time_point start = std::chrono::system_clock::now());

  // Advances the synthetic clock by `step` and returns the figures at the new
  // time. Deterministic for a given start and sequence of steps. Thread-safe.
  MetricsSnapshot Next(std::chrono::milliseconds step = std::chrono::seconds(1));

 private:
  std::mutex mu_;
  std::chrono::system_clock::time_point start_;
  std::chrono::milliseconds elapsed_{0};
  MetricsSnapshot last_;  // counters accumulate here
};

}  // namespace inca::monitor
