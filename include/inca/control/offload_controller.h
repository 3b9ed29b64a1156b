// The offload decision of the CAIS design write-up (3.3, 4.4): per
// communication operation, is it worth running on the switch? A library
// with injected time; the caller feeds it live switch figures (a Stats
// snapshot) every evaluation period and asks it for decisions.
//
// The write-up's score, (endpoint_time - switch_time) * traffic_saving,
// mixes seconds and bytes while its threshold (0.2) is described as "20% of
// the endpoint time". inca normalises both factors, making the score
// dimensionless:
//
//   endpoint_time  = size / host_bandwidth
//   switch_time    = size / switch_rate + queue_delay
//   time_gain      = (endpoint_time - switch_time) / endpoint_time
//   traffic_saving = 1 - 1 / participants        (fraction of bytes saved)
//   score          = time_gain * traffic_saving;  offload iff score > threshold
//
// Threshold adaptation (4.4): while SRAM usage stays above 80% for
// `sustain` evaluations in a row the threshold rises by `step` (up to
// `max_threshold`, where nothing qualifies); once usage is below
// `healthy_sram` it falls back by `step` per evaluation to the configured
// base. A fallback ratio above 10% raises the alarm flag.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "inca/control/control_plane.h"
#include "inca/dataplane/program.h"

namespace inca::control {

struct OffloadControllerConfig {
  double base_threshold = 0.2;  // the write-up's default offload_threshold
  double step = 0.1;
  double max_threshold = 1.0;  // scores never exceed 1: nothing is offloaded
  double high_sram = 0.8;      // "SRAM usage stays above 80%"
  double healthy_sram = 0.6;
  int sustain = 3;                            // evaluations above high_sram before raising
  double fallback_alarm = 0.10;               // "fallback ratio above 10%"
  double host_bandwidth_bps = 100e9 / 8;      // bytes/s of a host's path (100 Gbit/s)
  double switch_rate_bps = 400e9 / 8;         // bytes/s the switch reduces at
  dp::TimeNs period_ns = 100 * dp::kNsPerMs;  // the write-up re-evaluates every 100 ms
  absl::Status Validate() const;
};

struct OffloadOp {
  uint64_t bytes = 0;
  int participants = 2;
};

struct OffloadDecision {
  bool offload = false;
  double score = 0;
  double threshold = 0;
};

class OffloadController {
 public:
  explicit OffloadController(const OffloadControllerConfig& config);

  // Feeds the switch's figures observed at `now`. Re-evaluates the
  // threshold at most once per period; returns true if it did.
  bool Observe(const Stats& stats, dp::TimeNs now);

  // The decision for one operation under the current state.
  OffloadDecision Decide(const OffloadOp& op) const;

  double threshold() const { return threshold_; }
  bool fallback_alarm() const { return alarm_; }
  double queue_delay_s() const { return queue_delay_s_; }

 private:
  OffloadControllerConfig config_;
  double threshold_;
  bool alarm_ = false;
  int above_ = 0;
  double queue_delay_s_ = 0;
  bool started_ = false;
  dp::TimeNs last_ = 0;
};

}  // namespace inca::control
