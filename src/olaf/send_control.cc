#include "inca/olaf/send_control.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace inca::olaf {

std::string_view ToString(SendControlMode m) {
  switch (m) {
    case SendControlMode::kOff: return "off";
    case SendControlMode::kPriority: return "priority";
    case SendControlMode::kFairness: return "fairness";
  }
  return "unknown";
}

std::optional<SendControlMode> ParseSendControlMode(std::string_view s) {
  for (SendControlMode m :
       {SendControlMode::kOff, SendControlMode::kPriority, SendControlMode::kFairness}) {
    if (s == ToString(m)) return m;
  }
  return std::nullopt;
}

absl::Status SendControlOptions::Validate() const {
  if (mode != SendControlMode::kOff && mode != SendControlMode::kPriority &&
      mode != SendControlMode::kFairness) {
    return absl::InvalidArgumentError("send control: unknown mode");
  }
  if (delta_t_ns <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("send control: delta_t_ns must be > 0, got ", delta_t_ns));
  }
  if (time_unit_ns <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("send control: time_unit_ns must be > 0, got ", time_unit_ns));
  }
  return absl::OkStatus();
}

SendFeedback SendFeedback::FromAck(const AckHeader& ack, dp::TimeNs now) {
  SendFeedback f;
  f.queue_util = static_cast<double>(std::min(ack.queue_util, kQueueUtilOne)) /
                 static_cast<double>(kQueueUtilOne);
  f.active_clusters = ack.active_clusters;
  if (ack.aom_us != kAomUnknown) f.aom_ns = static_cast<dp::TimeNs>(ack.aom_us) * 1000;
  f.received_ns = now;
  return f;
}

double SendBaseTerm(const SendFeedback& feedback) {
  // Q_max/N with the queue's capacity as the unit (Q_max = 1): the fair
  // share of a full queue; plus the free part of the queue, which any
  // cluster may use. util <= 1/N -> 1.
  const double util = std::clamp(feedback.queue_util, 0.0, 1.0);
  const double n = std::max<double>(1.0, feedback.active_clusters);
  return std::min(1.0, (1.0 - util) + 1.0 / n);
}

double SendUrgencyTerm(const SendControlOptions& o, dp::TimeNs aom_ns) {
  if (o.mode == SendControlMode::kOff || aom_ns <= o.delta_t_ns) return 0.0;
  const auto overshoot = static_cast<double>(aom_ns - o.delta_t_ns);
  const auto dt = static_cast<double>(o.delta_t_ns);
  if (o.mode == SendControlMode::kPriority) return overshoot / dt;
  const auto unit = static_cast<double>(o.time_unit_ns);
  return (dt / unit) * (overshoot / unit);
}

double SendProbability(const SendControlOptions& o, const SendFeedback& feedback, dp::TimeNs now) {
  if (o.mode == SendControlMode::kOff) return 1.0;
  double p = SendBaseTerm(feedback);
  if (feedback.aom_ns.has_value()) {
    dp::TimeNs aom = *feedback.aom_ns;
    if (o.extrapolate_aom && now > feedback.received_ns) aom += now - feedback.received_ns;
    p += SendUrgencyTerm(o, aom);
  }
  return std::clamp(p, 0.0, 1.0);
}

absl::StatusOr<SendControl> SendControl::Create(const SendControlOptions& o) {
  if (absl::Status s = o.Validate(); !s.ok()) return s;
  return SendControl(o);
}

void SendControl::OnAck(const AckHeader& ack, dp::TimeNs now) {
  feedback_ = SendFeedback::FromAck(ack, now);
}

double SendControl::Probability(dp::TimeNs now) const {
  if (options_.mode == SendControlMode::kOff || !feedback_.has_value()) return 1.0;
  return SendProbability(options_, *feedback_, now);
}

bool SendControl::ShouldSend(dp::TimeNs now, double uniform01) const {
  return uniform01 < Probability(now);
}

std::optional<dp::TimeNs> SendControl::EstimatedAomNs(dp::TimeNs now) const {
  if (!feedback_.has_value() || !feedback_->aom_ns.has_value()) return std::nullopt;
  dp::TimeNs aom = *feedback_->aom_ns;
  if (options_.extrapolate_aom && now > feedback_->received_ns) aom += now - feedback_->received_ns;
  return aom;
}

}  // namespace inca::olaf
