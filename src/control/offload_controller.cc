#include "inca/control/offload_controller.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace inca::control {

absl::Status OffloadControllerConfig::Validate() const {
  if (!(base_threshold >= 0 && base_threshold <= max_threshold)) {
    return absl::InvalidArgumentError(
        absl::StrCat("offload_threshold ", base_threshold, " must be in [0, ", max_threshold, "]"));
  }
  if (!(step > 0) || !(healthy_sram < high_sram) || sustain < 1 || !(host_bandwidth_bps > 0) ||
      !(switch_rate_bps > 0) || period_ns <= 0) {
    return absl::InvalidArgumentError(
        "offload controller: need step > 0, healthy_sram < high_sram, sustain >= 1, positive "
        "bandwidths and period");
  }
  return absl::OkStatus();
}

OffloadController::OffloadController(const OffloadControllerConfig& config)
    : config_(config), threshold_(config.base_threshold) {}

bool OffloadController::Observe(const Stats& stats, dp::TimeNs now) {
  if (started_ && now - last_ < config_.period_ns) return false;
  started_ = true;
  last_ = now;
  queue_delay_s_ = stats.avg_queue_delay_us * 1e-6;
  alarm_ = stats.fallback_ratio > config_.fallback_alarm;
  if (stats.sram_usage > config_.high_sram) {
    if (++above_ >= config_.sustain) {
      threshold_ = std::min(config_.max_threshold, threshold_ + config_.step);
    }
  } else {
    above_ = 0;
    if (stats.sram_usage < config_.healthy_sram) {
      threshold_ = std::max(config_.base_threshold, threshold_ - config_.step);
    }
  }
  return true;
}

OffloadDecision OffloadController::Decide(const OffloadOp& op) const {
  OffloadDecision d;
  d.threshold = threshold_;
  if (op.bytes == 0 || op.participants < 2) return d;  // nothing to save
  const double size = static_cast<double>(op.bytes);
  const double endpoint_time = size / config_.host_bandwidth_bps;
  const double switch_time = size / config_.switch_rate_bps + queue_delay_s_;
  const double time_gain = (endpoint_time - switch_time) / endpoint_time;
  const double traffic_saving = 1.0 - 1.0 / op.participants;
  d.score = time_gain * traffic_saving;
  d.offload = d.score > threshold_;
  return d;
}

}  // namespace inca::control
