// The parameter server's clock, seen from another host (issue 20, "time
// that is right across hosts"; docs/design/olaf-core.md, "Clocks across
// hosts"). Ages in OLAF compare an update's generation time with "now":
// across hosts those are two CLOCK_MONOTONICs, which nothing relates (PTP
// disciplines CLOCK_REALTIME, not CLOCK_MONOTONIC). Every MODEL carries
// gen_time_ns, when the PS made it on its clock, so a worker or switch that
// receives it at local time t learns
//
//   gen − t = offset − (its time from being made to being sent + the path's delay)
//           ≤ offset,            offset = PS clock − local clock.
//
// PsClockEstimate keeps the largest such sample of the last kWindow: never
// above the true offset, and below it by the fastest sample's delay (one
// way, PS to here; asymmetric paths do not matter, as only one direction is
// used). Old samples leave the window, so a drifting clock is followed.
// Pure: times are handed in.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "inca/dataplane/program.h"

namespace inca::olaf {

class PsClockEstimate {
 public:
  static constexpr size_t kWindow = 16;

  // A PS timestamp (a MODEL's gen_time_ns) that arrived at local time `now`.
  void OnPsTime(uint64_t ps_time_ns, dp::TimeNs now);
  // PS clock − local clock, or nullopt before the first sample.
  std::optional<dp::TimeNs> offset() const { return offset_; }
  uint64_t samples() const { return samples_; }

  // A local time on the PS's clock (offset known), or a PS time on the
  // local clock, clamped at 0.
  uint64_t ToPs(dp::TimeNs local) const;
  dp::TimeNs ToLocal(uint64_t ps_time_ns) const;

 private:
  std::array<dp::TimeNs, kWindow> window_{};
  uint64_t samples_ = 0;
  std::optional<dp::TimeNs> offset_;
};

}  // namespace inca::olaf
