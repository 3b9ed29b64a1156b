// Worker-side send control of OLAF (seed 000, section 3.3, "反向路径拥塞控制"):
// a worker sends each generated update with probability
//
//     P_send = Q_max / N_clusters + f(Δ̂),   f(Δ̂) = v·(Δ̂ − ΔT) if Δ̂ > ΔT else 0,
//
// fed by the last ACK (queue_util, active_clusters stamped by the most
// congested switch on the path; aom_us = the cluster's AoM at the PS).
//
// Normalisation (docs/design/olaf-transport.md, "Send control"):
//   base     = min(1, (1 − util) + 1/N)       util = queue_util / 0xFFFFFF,
//                                             N = max(1, active_clusters)
//   Δ̂(now)   = aom_us of the last ACK + (now − time that ACK arrived)
//   kPriority  v = 1/ΔT:  f = (Δ̂ − ΔT) / ΔT           (relative overshoot)
//   kFairness  v = ΔT:    f = (ΔT/U) · (Δ̂ − ΔT)/U     (U = time_unit_ns, 1 ms)
//   P        = min(1, base + f);  kOff: P = 1.
// No ACK yet, or aom_us unknown: f = 0; no ACK yet: base = 1.
//
// Pure logic: time is injected (dp::TimeNs, the caller's monotonic clock),
// randomness is injected (a uniform [0, 1) draw). Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/dataplane/program.h"
#include "inca/wire/olaf.h"

namespace inca::olaf {

enum class SendControlMode : uint8_t {
  kOff,       // always send (the "no send control" baseline)
  kPriority,  // v = 1/ΔT: favours high-priority (small-ΔT) clusters
  kFairness,  // v = ΔT: "absolute fairness", any late cluster sends at once
};
std::string_view ToString(SendControlMode m);  // "off", "priority", "fairness"
std::optional<SendControlMode> ParseSendControlMode(std::string_view s);

struct SendControlOptions {
  SendControlMode mode = SendControlMode::kPriority;
  dp::TimeNs delta_t_ns = 400 * dp::kNsPerMs;  // ΔT, the cluster's AoM bound
  // U, the unit in which kFairness expresses ΔT and Δ̂ − ΔT (kFairness is
  // not dimensionless: f scales with 1/U²). 1 ms, the seed's unit for ΔT
  // and AoM figures.
  dp::TimeNs time_unit_ns = dp::kNsPerMs;
  // Δ̂ grows with slope 1 after the last ACK (no ACK = no delivery seen);
  // false: Δ̂ is the ACK's aom_us as is.
  bool extrapolate_aom = true;

  absl::Status Validate() const;
};

// What one ACK tells the worker, already normalised.
struct SendFeedback {
  double queue_util = 0;             // [0, 1]
  uint32_t active_clusters = 0;      // as stamped (0 = no switch stamped it)
  std::optional<dp::TimeNs> aom_ns;  // the cluster's AoM at the PS; nullopt = unknown
  dp::TimeNs received_ns = 0;        // when the ACK arrived (worker clock)

  static SendFeedback FromAck(const AckHeader& ack, dp::TimeNs now);
};

// The formula itself, for the simulator and tests: P for `feedback`
// evaluated at `now` (>= feedback.received_ns when extrapolating).
double SendProbability(const SendControlOptions& o, const SendFeedback& feedback, dp::TimeNs now);
// Its two terms.
double SendBaseTerm(const SendFeedback& feedback);
double SendUrgencyTerm(const SendControlOptions& o, dp::TimeNs aom_ns);

class SendControl {
 public:
  // InvalidArgument when the options do not validate.
  static absl::StatusOr<SendControl> Create(const SendControlOptions& o);

  // Takes the ACK's queue state and AoM as the current feedback (the most
  // recently received ACK wins, whatever its update_id).
  void OnAck(const AckHeader& ack, dp::TimeNs now);
  void OnFeedback(const SendFeedback& f) { feedback_ = f; }
  // Forgets the feedback (P = 1 until the next ACK).
  void Reset() { feedback_.reset(); }

  // P_send at `now`, in [0, 1]; 1 in kOff mode and before the first ACK.
  double Probability(dp::TimeNs now) const;
  // True when `uniform01` (a draw from [0, 1)) < Probability(now).
  bool ShouldSend(dp::TimeNs now, double uniform01) const;
  // Δ̂ at `now` (extrapolated when configured); nullopt when unknown.
  std::optional<dp::TimeNs> EstimatedAomNs(dp::TimeNs now) const;

  const std::optional<SendFeedback>& feedback() const { return feedback_; }
  const SendControlOptions& options() const { return options_; }

 private:
  explicit SendControl(const SendControlOptions& o) : options_(o) {}

  SendControlOptions options_;
  std::optional<SendFeedback> feedback_;
};

}  // namespace inca::olaf
