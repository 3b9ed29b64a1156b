#include "inca/olaf/ps_clock.h"

#include <algorithm>
#include <limits>

namespace inca::olaf {

namespace {
constexpr uint64_t kMaxTime = static_cast<uint64_t>(std::numeric_limits<dp::TimeNs>::max());
}  // namespace

void PsClockEstimate::OnPsTime(uint64_t ps_time_ns, dp::TimeNs now) {
  if (ps_time_ns > kMaxTime) return;  // not a time (e.g. kGenTimeUnknown)
  window_[samples_ % kWindow] = static_cast<dp::TimeNs>(ps_time_ns) - now;
  ++samples_;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(samples_, kWindow));
  offset_ = *std::max_element(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(n));
}

uint64_t PsClockEstimate::ToPs(dp::TimeNs local) const {
  const dp::TimeNs t = local + offset_.value_or(0);
  return static_cast<uint64_t>(std::max<dp::TimeNs>(0, t));
}

dp::TimeNs PsClockEstimate::ToLocal(uint64_t ps_time_ns) const {
  const dp::TimeNs t = static_cast<dp::TimeNs>(std::min(ps_time_ns, kMaxTime));
  return std::max<dp::TimeNs>(0, t - offset_.value_or(0));
}

}  // namespace inca::olaf
