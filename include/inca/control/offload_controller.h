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
//   endpoint_time  = host_latency + size / host_bandwidth
//   switch_time    = size / (switch_rate * (1 - port_utilisation)) + queue_delay
//   time_gain      = (endpoint_time - switch_time) / endpoint_time
//   traffic_saving = 1 - 1 / participants        (fraction of bytes saved)
//   score          = time_gain * traffic_saving;  offload iff score > threshold
//
// queue_delay is the switch's ingress queueing delay over the last period
// (kernel receive timestamp to processing, Stats::ingress_delay_*), and
// port_utilisation its reduced bytes/s over switch_rate (capped at 0.95).
// Because time_gain is a ratio of two affine functions of size, the sizes
// that qualify always form one interval; Range() returns it so the switch
// can apply the decision per operation (CaisReducer::SetOffloadRange).
//
// SRAM usage here means aggregation memory: pending usage over
// sram_usage_limit (what admission allows), or Stats::sram_usage when the
// snapshot has no limit. Retained results are a cache that gives way and do
// not count.
//
// Measured mode (the default): hosts report how long each operation took on
// the path it ran on (REPORT datagrams, docs/protocol.md), and the switch
// keeps moving averages per group and size class (bin b: sizes in
// [2^b, 2^(b+1))), given here as GroupInfo::timings. Where a class has been
// measured on both paths the model above is not used for it:
//
//   time_gain = 1 - (switch_us / switch_bytes) / (host_us / host_bytes)
//   max_gain  = 1 - n / (2 (n - 1))     (MaxBandwidthGain: a bandwidth-bound
//               ring moves 2(n-1)/n S per host link, the switch S)
//   offload iff time_gain > threshold * max_gain, and threshold < max_threshold
//
// so the threshold is the share of the gain in-network reduction can bring
// that the switch must deliver (0.2: a fifth; 6.7 % faster at 4 ranks,
// 8.6 % at 8, any gain at 2) rather than a fixed 20 %, which at 4 ranks,
// where the best possible gain is 33 %, would turn the switch off whenever
// the host is a little loaded. Traffic saving is not multiplied in again:
// measured times already contain it. SRAM pressure raises the threshold as
// before; at max_threshold nothing is offloaded. A class measured on only
// the path the model picks gets one operation sent the other way (an
// explore: OffloadDecision::explore_bins, one operation, applied by the
// switch); and the path a measured class does not use is measured again
// once its last sample is older than explore_interval. A class short of
// samples whose time per byte on the path it has measured is within
// borrow_tolerance of a nearby class measured on both pools its samples
// with that class's and is decided from them instead of being explored
// (GroupOffload::borrowed_bins): a sweep or a job with many bucket sizes
// explores the host path about once per regime, not twice per size.
// Classes never seen follow the model. So the model is only a prior: what the hosts achieve
// decides, and the switch is still declined where it makes operations
// slower.
//
// Threshold adaptation (4.4): while SRAM usage stays above 80% for
// `sustain` evaluations in a row the threshold rises by `step` (up to
// `max_threshold`, where nothing qualifies); once usage is below
// `healthy_sram` it falls back by `step` per evaluation to the configured
// base.
//
// Fallback alarm and hold (4.4's "fallback ratio above 10%"): the ratio is
// taken over the last `fallback_window` (10 s), not since start, so that
// after a million clean chunks a burst of timeouts still shows. Switch-wide
// it raises the alarm flag. Per group it acts: a group whose chunks fell
// back more than `fallback_alarm` of the time in the window (with at least
// `fallback_min_chunks` decided there) is held on the host path: its policy
// sends no size to the switch and explores nothing, until the bad chunks
// have left the window (about fallback_window after the group went to the
// host path), when it is planned as before.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>

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
  double host_latency_s = 100e-6;             // fixed cost of one host collective
  double switch_rate_bps = 400e9 / 8;         // bytes/s the switch reduces at
  dp::TimeNs period_ns = 100 * dp::kNsPerMs;  // the write-up re-evaluates every 100 ms
  bool use_measurements = true;               // false: the model alone, as the write-up
  // How old the unused path's last sample may get before one operation is
  // sent that way again.
  dp::TimeNs explore_interval_ns = 10'000 * dp::kNsPerMs;
  // At most this share of a class's time goes to re-exploring the path not
  // in use, once both paths are measured: the re-explore waits at least that
  // path's last operation time / explore_budget (a 1.9 s host-path
  // all-reduce is measured again after 95 s, not every 10 s). (0, 1].
  double explore_budget = 0.02;
  // Samples a class needs on each path before they decide it. One sample
  // taken beside another job's traffic can be far off (docs/control.md);
  // until then the model decides and the path lacking samples is explored
  // again after explore_retry_ns, once the last explore's sample has
  // arrived (an explore whose sample never comes is re-sent after
  // explore_interval_ns, or three times the slower path's operation time
  // when that is longer).
  uint32_t min_samples = 2;
  dp::TimeNs explore_retry_ns = 1'000 * dp::kNsPerMs;
  // A class short of samples pools them with the nearest class measured on
  // both paths, at most borrow_span classes away (4: 16x the size), whose
  // time per byte on the path it has measured is within borrow_tolerance
  // of its own (both bandwidth-bound: the ratio between the paths carries
  // over), instead of being explored. 0 turns borrowing off.
  int borrow_span = 4;
  double borrow_tolerance = 0.2;
  // The fallback ratio's window, and the chunks decided in it (completed or
  // timed out) below which the ratio counts as 0.
  dp::TimeNs fallback_window_ns = 10'000 * dp::kNsPerMs;
  uint64_t fallback_min_chunks = 64;
  absl::Status Validate() const;
};

// A ratio of two cumulative counters over a sliding time window: the
// difference between the newest sample and the newest one at least `window`
// old (or the oldest kept). Samples closer than window/16 to the one before
// the newest replace the newest, so about 20 at most are kept. A counter
// that goes backwards (the switch restarted) starts the window afresh.
class WindowedRatio {
 public:
  explicit WindowedRatio(dp::TimeNs window) : window_(window) {}
  void Add(dp::TimeNs now, uint64_t numerator, uint64_t denominator);
  // numerator / denominator over the window; 0 when the denominator grew by
  // less than `min_denominator` there.
  double ratio(uint64_t min_denominator = 1) const;
  uint64_t denominator() const;  // its growth over the window
  size_t samples() const { return s_.size(); }

 private:
  struct Sample {
    dp::TimeNs at;
    uint64_t num, den;
  };
  dp::TimeNs window_;
  std::deque<Sample> s_;
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

// Operation sizes (bytes, inclusive) that qualify; min > max: none.
struct OffloadRange {
  uint64_t min_bytes = 0;
  uint64_t max_bytes = UINT64_MAX;
  bool empty() const { return min_bytes > max_bytes; }
};

// The largest time gain a switch reduction has over a ring all-reduce on
// bandwidth-bound host links: 1 - n / (2 (n - 1)); 0 for fewer than 2.
double MaxBandwidthGain(int participants);

class OffloadController {
 public:
  explicit OffloadController(const OffloadControllerConfig& config);

  // Feeds the switch's figures observed at `now`. Re-evaluates the
  // threshold at most once per period; returns true if it did.
  bool Observe(const Stats& stats, dp::TimeNs now);

  // The decision for one operation under the current state.
  OffloadDecision Decide(const OffloadOp& op) const;
  // Every size Decide() would offload for `participants` ranks.
  OffloadRange Range(int participants) const;

  // The policy for one formed group at `now` (after Observe): the model's
  // range, and in measured mode the size classes decided from `g.timings`
  // and the ones to explore. Remembers what it explored, per group
  // formation (seq_base), so an explore is asked for at most once per
  // explore_interval.
  GroupOffload Plan(const GroupInfo& g, dp::TimeNs now);

  // Changes the configured base (the switch's offload_threshold key),
  // keeping any pressure-driven raise above it.
  void set_base_threshold(double base);

  double threshold() const { return threshold_; }
  bool fallback_alarm() const { return alarm_; }
  // Switch-wide, over the window: (timeouts + chunk_closed drops) /
  // (completed + timeouts).
  double fallback_ratio() const;
  // The group's timeouts / (completed + timeouts) over the window.
  double group_fallback_ratio(uint8_t group) const;
  double queue_delay_s() const { return queue_delay_s_; }
  double port_utilisation() const { return utilisation_; }
  double sram_usage() const { return sram_usage_; }  // as defined above
  const OffloadControllerConfig& config() const { return config_; }

 private:
  OffloadControllerConfig config_;
  double threshold_;
  bool alarm_ = false;
  int above_ = 0;
  double queue_delay_s_ = 0;
  double utilisation_ = 0;
  double sram_usage_ = 0;
  bool started_ = false;
  dp::TimeNs last_ = 0;
  uint64_t last_delay_ns_ = 0, last_delay_samples_ = 0;
  WindowedRatio fallback_{config_.fallback_window_ns};
  std::map<uint8_t, WindowedRatio> group_fallback_;  // groups in the last Stats
  struct Explored {
    uint32_t seq_base = 0;
    std::array<dp::TimeNs, 64> at{};  // when each class was last explored
    // The explored path's sample count then: an explore has landed once it
    // grew.
    std::array<uint64_t, 64> samples_then{};
    uint64_t ever = 0;  // classes explored at least once
  };
  std::map<uint8_t, Explored> explored_;

  // Plan's parts: whether a path's samples are due again, and the explore
  // of the path class `t` does not use.
  bool Stale(const PathTiming& p) const;
  void MaybeExplore(const GroupInfo& g, const OffloadTiming& t, bool on_switch, dp::TimeNs now,
                    Explored& ex, GroupOffload* out) const;
};

}  // namespace inca::control
