#include "inca/control/offload_controller.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "inca/cais/reducer.h"

namespace inca::control {

absl::Status OffloadControllerConfig::Validate() const {
  if (!(base_threshold >= 0 && base_threshold <= max_threshold)) {
    return absl::InvalidArgumentError(
        absl::StrCat("offload_threshold ", base_threshold, " must be in [0, ", max_threshold, "]"));
  }
  if (!(step > 0) || !(healthy_sram < high_sram) || sustain < 1 || !(host_bandwidth_bps > 0) ||
      !(switch_rate_bps > 0) || !(host_latency_s >= 0) || period_ns <= 0 ||
      explore_interval_ns <= 0 || explore_retry_ns <= 0 || min_samples < 1 ||
      !(explore_budget > 0 && explore_budget <= 1) || fallback_window_ns <= 0 ||
      fallback_min_chunks < 1 || !(fallback_alarm > 0 && fallback_alarm <= 1) || borrow_span < 0 ||
      borrow_span > 63 || !(borrow_tolerance >= 0 && borrow_tolerance < 1)) {
    return absl::InvalidArgumentError(
        "offload controller: need step > 0, healthy_sram < high_sram, sustain >= 1, positive "
        "bandwidths, period and explore intervals, host latency >= 0, min_samples >= 1, "
        "explore_budget in (0, 1], a positive fallback window, fallback_min_chunks >= 1, "
        "fallback_alarm in (0, 1], borrow_span in [0, 63] and borrow_tolerance in [0, 1)");
  }
  return absl::OkStatus();
}

void WindowedRatio::Add(dp::TimeNs now, uint64_t numerator, uint64_t denominator) {
  if (!s_.empty() && (numerator < s_.back().num || denominator < s_.back().den)) s_.clear();
  // Close to the sample before the newest: the newest moves up instead.
  if (s_.size() >= 2 && now - s_[s_.size() - 2].at < window_ / 16) s_.pop_back();
  s_.push_back({now, numerator, denominator});
  // Keep one sample at least `window` old (the window's base), none older.
  while (s_.size() >= 2 && now - s_[1].at >= window_) s_.pop_front();
}

uint64_t WindowedRatio::denominator() const {
  return s_.empty() ? 0 : s_.back().den - s_.front().den;
}

double WindowedRatio::ratio(uint64_t min_denominator) const {
  const uint64_t den = denominator();
  if (den == 0 || den < min_denominator) return 0;
  return std::min(1.0,
                  static_cast<double>(s_.back().num - s_.front().num) / static_cast<double>(den));
}

OffloadController::OffloadController(const OffloadControllerConfig& config)
    : config_(config), threshold_(config.base_threshold) {}

bool OffloadController::Observe(const Stats& stats, dp::TimeNs now) {
  if (started_ && now - last_ < config_.period_ns) return false;
  // Ingress queueing delay over the period since the last evaluation.
  const counters::HostCounters& host = stats.counters;
  if (host.ingress_delay_samples > last_delay_samples_ &&
      host.ingress_delay_ns_total >= last_delay_ns_) {
    queue_delay_s_ = static_cast<double>(host.ingress_delay_ns_total - last_delay_ns_) /
                     static_cast<double>(host.ingress_delay_samples - last_delay_samples_) * 1e-9;
  } else if (host.ingress_delay_samples < last_delay_samples_) {
    queue_delay_s_ = 0;  // the switch restarted
  }
  last_delay_ns_ = host.ingress_delay_ns_total;
  last_delay_samples_ = host.ingress_delay_samples;
  started_ = true;
  last_ = now;
  utilisation_ = std::clamp(stats.reduced_bytes_per_s / config_.switch_rate_bps, 0.0, 0.95);
  // cais::SramPressure: the figure the dashboard shows as pressure too.
  sram_usage_ =
      cais::SramPressure(stats.sram_pending_usage, stats.sram_usage_limit, stats.sram_usage);
  // The fallback ratio over the window, switch-wide and per group.
  uint64_t closed = 0;
  if (auto it = stats.drops.find("chunk_closed"); it != stats.drops.end()) closed = it->second;
  const cais::GroupCounters& totals = stats.counters.cais;
  fallback_.Add(now, totals.timeouts + closed, totals.completed_chunks + totals.timeouts);
  alarm_ = fallback_ratio() > config_.fallback_alarm;
  std::map<uint8_t, WindowedRatio> groups;
  for (const GroupStats& g : stats.groups) {
    auto it = group_fallback_.find(g.group_id);
    WindowedRatio w = it != group_fallback_.end() ? std::move(it->second)
                                                  : WindowedRatio(config_.fallback_window_ns);
    w.Add(now, g.counters.timeouts, g.counters.completed_chunks + g.counters.timeouts);
    groups.emplace(g.group_id, std::move(w));
  }
  group_fallback_ = std::move(groups);
  if (sram_usage_ > config_.high_sram) {
    if (++above_ >= config_.sustain) {
      threshold_ = std::min(config_.max_threshold, threshold_ + config_.step);
    }
  } else {
    above_ = 0;
    if (sram_usage_ < config_.healthy_sram) {
      threshold_ = std::max(config_.base_threshold, threshold_ - config_.step);
    }
  }
  return true;
}

double OffloadController::fallback_ratio() const {
  return fallback_.ratio(config_.fallback_min_chunks);
}

double OffloadController::group_fallback_ratio(uint8_t group) const {
  const auto it = group_fallback_.find(group);
  return it == group_fallback_.end() ? 0 : it->second.ratio(config_.fallback_min_chunks);
}

void OffloadController::set_base_threshold(double base) {
  const double raised = threshold_ - config_.base_threshold;
  config_.base_threshold = std::clamp(base, 0.0, config_.max_threshold);
  threshold_ = std::min(config_.max_threshold, config_.base_threshold + raised);
}

OffloadDecision OffloadController::Decide(const OffloadOp& op) const {
  OffloadDecision d;
  d.threshold = threshold_;
  if (op.bytes == 0 || op.participants < 2) return d;  // nothing to save
  const double size = static_cast<double>(op.bytes);
  const double endpoint_time = config_.host_latency_s + size / config_.host_bandwidth_bps;
  const double switch_time = size / (config_.switch_rate_bps * (1 - utilisation_)) + queue_delay_s_;
  const double time_gain = (endpoint_time - switch_time) / endpoint_time;
  const double traffic_saving = 1.0 - 1.0 / op.participants;
  d.score = time_gain * traffic_saving;
  d.offload = d.score > threshold_;
  return d;
}

OffloadRange OffloadController::Range(int participants) const {
  constexpr OffloadRange kNone{1, 0};
  if (participants < 2) return kNone;
  // score > t  <=>  x/S + q < k (L + x/H)  with k = 1 - t / saving
  //            <=>  a x < b,  a = 1/S - k/H,  b = k L - q.
  const double k = 1.0 - threshold_ / (1.0 - 1.0 / participants);
  if (k <= 0) return kNone;
  const double a =
      1.0 / (config_.switch_rate_bps * (1 - utilisation_)) - k / config_.host_bandwidth_bps;
  const double b = k * config_.host_latency_s - queue_delay_s_;
  const auto to_bytes = [](double x) {
    return x >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(std::max(0.0, x));
  };
  if (a == 0) return b > 0 ? OffloadRange{1, UINT64_MAX} : kNone;
  const double bound = b / a;
  if (a < 0) {  // x > bound
    if (bound >= 1.8e19) return kNone;
    return OffloadRange{bound < 0 ? 1 : to_bytes(std::floor(bound)) + 1, UINT64_MAX};
  }
  if (bound <= 1) return kNone;  // x < bound
  return OffloadRange{1, to_bytes(std::ceil(bound)) - 1};
}

double MaxBandwidthGain(int participants) {
  if (participants < 2) return 0;
  const double n = participants;
  return 1.0 - n / (2.0 * (n - 1.0));
}

// Stale: older than the interval, and than its cost allows under the
// explore budget.
bool OffloadController::Stale(const PathTiming& p) const {
  if (!p.measured()) return true;
  const double budget_ns = p.mean_us * 1e3 / config_.explore_budget;
  const double interval_ns = std::max(static_cast<double>(config_.explore_interval_ns), budget_ns);
  return static_cast<double>(p.age_ms) * dp::kNsPerMs >= interval_ns;
}

GroupOffload OffloadController::Plan(const GroupInfo& g, dp::TimeNs now) {
  const OffloadRange r = Range(g.world_size);
  GroupOffload out{g.group_id, g.world_size, r.min_bytes, r.max_bytes};
  out.fallback_ratio = group_fallback_ratio(g.group_id);
  if (out.fallback_ratio > config_.fallback_alarm) {
    // Held on the host path: no size goes to the switch, nothing explores.
    out.fallback_hold = true;
    out.min_bytes = 1;
    out.max_bytes = 0;
    return out;
  }
  if (!config_.use_measurements) return out;
  // Measured mode: for a class never seen the model is only a prior, and
  // with its assumed rates (100 Gbit/s hosts) and the switch's own queue
  // delay it declines sizes that the switch path carries at its bound on a
  // real fabric (issue 46: 1 MiB on 4 x 1 Gbit/s). So the prior is the
  // switch, every size, unless SRAM pressure has raised the threshold above
  // its base, when the model's range says what is worth the memory.
  // Measurements move a class to the host path where that is faster.
  if (threshold_ <= config_.base_threshold && threshold_ < config_.max_threshold) {
    out.min_bytes = 1;
    out.max_bytes = UINT64_MAX;
  }
  Explored& ex = explored_[g.group_id];
  if (ex.seq_base != g.seq_base) ex = Explored{g.seq_base};
  // The best of the recent samples (older switches: the moving average).
  const auto per_byte = [](const PathTiming& p) {
    return p.best_us_per_byte > 0 ? p.best_us_per_byte : p.mean_us / std::max(1.0, p.mean_bytes);
  };
  const auto stale = [&](const PathTiming& p) { return Stale(p); };
  const auto enough = [&](const PathTiming& p) { return p.samples >= config_.min_samples; };
  const auto both = [&](const OffloadTiming& t) {
    return enough(t.switch_path) && enough(t.host_path);
  };
  const auto switch_wins = [&](double switch_per_byte, double host_per_byte) {
    const double gain = 1.0 - switch_per_byte / host_per_byte;
    return threshold_ < config_.max_threshold && gain > threshold_ * MaxBandwidthGain(g.world_size);
  };
  // A class short of samples on a path pools them with the nearest class
  // measured on both paths whose time per byte on the path this class has
  // measured best (the one with more samples) is within borrow_tolerance of
  // its own, and whose sample on the other path is fresh. Equal time per
  // byte on one path says both sizes are in the same regime (bandwidth-
  // bound), where the ratio between the paths does not depend on the size;
  // a latency-bound size differs from its neighbours and is explored on its
  // own. Together they need min_samples on each path; then the best time
  // per byte of the two on each path decides. nullptr: no such class.
  const auto lender = [&](const OffloadTiming& t) -> const OffloadTiming* {
    const bool by_switch = t.switch_path.samples >= t.host_path.samples;
    const auto own = [&](const OffloadTiming& u) -> const PathTiming& {
      return by_switch ? u.switch_path : u.host_path;
    };
    const auto other = [&](const OffloadTiming& u) -> const PathTiming& {
      return by_switch ? u.host_path : u.switch_path;
    };
    if (!own(t).measured()) return nullptr;
    const double mine = per_byte(own(t));
    const OffloadTiming* best = nullptr;
    for (const OffloadTiming& u : g.timings) {
      const int d = std::abs(u.bin - t.bin);
      if (d == 0 || d > config_.borrow_span || !own(u).measured() || stale(other(u)) ||
          own(u).samples + own(t).samples < config_.min_samples ||
          other(u).samples + other(t).samples < config_.min_samples)
        continue;
      const double theirs = per_byte(own(u));
      if (std::abs(theirs - mine) > config_.borrow_tolerance * std::max(theirs, mine)) continue;
      // Nearest first; of two as near, the larger (a smaller size's host
      // path carries more fixed cost per byte).
      const int bd = best == nullptr ? 64 : std::abs(best->bin - t.bin);
      if (d < bd || (d == bd && u.bin > best->bin)) best = &u;
    }
    return best;
  };
  // The best time per byte of two classes on one path (either may lack it).
  const auto pooled = [&](const PathTiming& a, const PathTiming& b) {
    if (!a.measured()) return per_byte(b);
    if (!b.measured()) return per_byte(a);
    return std::min(per_byte(a), per_byte(b));
  };
  for (const OffloadTiming& t : g.timings) {
    if (t.bin < 0 || t.bin > 63) continue;
    const uint64_t bit = uint64_t{1} << t.bin;
    bool on_switch;
    const OffloadTiming* from = nullptr;
    if (both(t)) {
      on_switch = switch_wins(per_byte(t.switch_path), per_byte(t.host_path));
      out.measured_bins |= bit;
      if (on_switch) out.offload_bins |= bit;
    } else if ((from = lender(t)) != nullptr) {
      // Decided with the lender's samples; not explored: the lender's own
      // unused path is measured again on its schedule.
      out.measured_bins |= bit;
      out.borrowed_bins |= bit;
      if (switch_wins(pooled(t.switch_path, from->switch_path),
                      pooled(t.host_path, from->host_path)))
        out.offload_bins |= bit;
      continue;
    } else if (enough(t.switch_path) || enough(t.host_path) ||
               t.switch_path.measured() != t.host_path.measured()) {
      // Measured (enough) on one path only: it stays there until the other
      // path is measured enough, rather than follow the model's range from
      // one period (or one job) to the next as the switch's queue delay
      // moves it.
      on_switch = enough(t.switch_path) || (!enough(t.host_path) && t.switch_path.measured());
      out.measured_bins |= bit;
      if (on_switch) out.offload_bins |= bit;
    } else {
      // Too few samples: the model's choice for a typical size of the class.
      const PathTiming& seen = t.switch_path.measured() ? t.switch_path : t.host_path;
      const uint64_t size = static_cast<uint64_t>(std::max(1.0, seen.mean_bytes));
      on_switch = size >= out.min_bytes && size <= out.max_bytes;
    }
    MaybeExplore(g, t, on_switch, now, ex, &out);
  }
  return out;
}

// The path class `t` does not use (on_switch: the host path) gets one
// operation when it lacks samples (again after explore_retry_ns) or when its
// last one is stale.
void OffloadController::MaybeExplore(const GroupInfo& g, const OffloadTiming& t, bool on_switch,
                                     dp::TimeNs now, Explored& ex, GroupOffload* out) const {
  const uint64_t bit = uint64_t{1} << t.bin;
  const auto enough = [&](const PathTiming& p) { return p.samples >= config_.min_samples; };
  const auto stale = [&](const PathTiming& p) { return Stale(p); };
  const PathTiming& other = on_switch ? t.host_path : t.switch_path;
  const bool explored = (ex.ever & bit) != 0;
  const bool landed = other.samples > ex.samples_then[t.bin];
  // An explore still under way is not repeated: a 64 MiB host-path
  // operation can take longer than explore_retry_ns.
  const double slowest_ns = 1e3 * std::max(t.switch_path.mean_us, t.host_path.mean_us);
  const auto lost_after = static_cast<dp::TimeNs>(
      std::max(static_cast<double>(config_.explore_interval_ns), 3 * slowest_ns));
  const dp::TimeNs gap =
      enough(other)
          ? std::max(config_.explore_interval_ns,
                     static_cast<dp::TimeNs>(other.mean_us * 1e3 / config_.explore_budget))
      : explored && !landed ? lost_after
                            : config_.explore_retry_ns;
  const bool armed_lately = explored && now - ex.at[t.bin] < gap;
  // The first look at the host path from the switch waits until the
  // class has run 1 / explore_budget operations on the switch (50 at
  // 2 %), so that a short job is not slowed by one (issue 46: a
  // bandwidth-bound operation explored onto a ring costs 1.5-1.75x); with
  // the timings kept across jobs of one shape, later jobs add to the
  // count. An explore toward the switch is not held back.
  const bool budget_allows =
      !on_switch || enough(other) ||
      static_cast<double>(t.switch_path.samples) * config_.explore_budget >= 1.0;
  // Not while another job shares the hosts: its traffic would be measured
  // with the explore, and slowed by it (docs/control.md).
  if ((!enough(other) || stale(other)) && !armed_lately && !g.contended && budget_allows) {
    out->explore_bins |= bit;
    ex.at[t.bin] = now;
    ex.samples_then[t.bin] = other.samples;
    ex.ever |= bit;
  }
}

}  // namespace inca::control
