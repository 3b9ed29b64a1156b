// Monitoring figures of inca-switchd (CAIS write-up 4.4, "show-stats"): one
// plain snapshot struct and its two renderings, Prometheus text exposition
// format 0.0.4 (/metrics) and JSON (/stats.json, read by the dashboard).
// Metric names and meanings: docs/monitoring.md.
//
// The figures come through the control API (issue 17): FromControl() builds
// a snapshot from GetStats and GetOffloadPolicy, so the monitor reads what
// any control client reads and needs nothing of the switch's internals.
//
// Threading: a MetricsSnapshot is a value; the functions are pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "inca/cais/reducer.h"
#include "inca/control/control_plane.h"
#include "inca/control/reducer_stats.h"
#include "inca/counters/switch_counters.h"

namespace inca::monitor {

// CAIS write-up 4.4: a fallback ratio above this is the health alarm.
inline constexpr double kFallbackAlarmRatio = 0.10;
// CAIS write-up 4.4: SRAM usage above this makes the controller raise
// offload_threshold ("SRAM pressure").
inline constexpr double kSramPressureRatio = 0.80;
// CAIS write-up 3.3: the default offload score threshold.
inline constexpr double kDefaultOffloadThreshold = 0.2;

// One reduction group's figures: the control API's (counters, share,
// offload range, slot holding) and the offload decision on top.
struct GroupMetrics : control::GroupStats {
  // The controller's offload decision for the group (CAIS write-up 3.3):
  // whether its collectives go to the switch, and the score threshold the
  // decision used. Until a controller speaks: on while a rule names the
  // group and its range is not empty; 0.2.
  bool offload_on = true;
  double offload_threshold = kDefaultOffloadThreshold;
  // The controller holds the group on the host path: its chunks fell back
  // more than 10 % of the time in the controller's window (docs/control.md).
  bool fallback_hold = false;
};

struct MetricsSnapshot {
  // When the figures were taken (wall clock; exported as Unix seconds).
  std::chrono::system_clock::time_point taken_at{};
  // Switch counters, including the reducer's ProgramCounters, the CAIS
  // switch-wide totals (`cais`) and SRAM occupancy (`sram`).
  counters::SwitchCounters switch_counters;
  // Throughput over the reducer's last rate window.
  cais::CaisRates rates;
  // Switch-wide mean slot-holding time of completed chunks (first
  // contribution to completion), milliseconds; 0 while not measured. Not the
  // queue delay (QueueDelayUs).
  double avg_pending_ms = 0;
  // Groups with any traffic, ascending group_id.
  std::vector<GroupMetrics> groups;
  // Who sets offload decisions ("embedded", an external controller's name,
  // or "none") and the ingress queueing delay it last used.
  std::string offload_controller = "none";
  double offload_queue_delay_us = 0;
  // The controller's switch-wide fallback ratio over its window (10 s) and
  // its alarm; without a controller (offload_windowed false) the alarm is
  // taken from the since-start ratio.
  bool offload_windowed = false;
  double offload_fallback_ratio = 0;
  bool offload_fallback_alarm = false;
  // inca-switchd --threads N > 1: each shard's counters (the figures above
  // are their sums); empty with one shard.
  std::vector<control::ShardStats> shards;
};

// The mean in-switch queueing delay since start, microseconds: kernel
// receive timestamp to the pipeline (write-up 4.4's "queue delay").
double QueueDelayUs(const counters::SwitchCounters& c);

// The health alarm of write-up 4.4: the controller's windowed figure when a
// controller runs, else the since-start fallback ratio above 0.1.
bool FallbackAlarm(const MetricsSnapshot& s);

// The since-start fallback ratio (inca/control/reducer_stats.h).
using control::FallbackRatio;

// The snapshot of what GetStats returned (and, when a controller has
// spoken, its policy through ApplyOffloadPolicy), taken at `taken_at`.
MetricsSnapshot FromControl(const control::Stats& stats, const control::OffloadPolicy& policy,
                            std::chrono::system_clock::time_point taken_at);

// Copies an offload controller's policy into the snapshot: the controller's
// name and queue delay, and each listed group's threshold.
void ApplyOffloadPolicy(const control::OffloadPolicy& policy, MetricsSnapshot* out);

// Prometheus text exposition format 0.0.4: every family has HELP and TYPE,
// names start with "inca_", counters end in "_total", units are in the names
// (_bytes, _seconds, _ratio). Per-group series carry group="G", drops
// reason="R" (dp::ToString(DropReason)).
std::string RenderPrometheus(const MetricsSnapshot& s);

// The snapshot as one JSON object (the dashboard's input; layout in
// docs/monitoring.md). Non-finite numbers are written as null.
std::string RenderStatsJson(const MetricsSnapshot& s);

}  // namespace inca::monitor
