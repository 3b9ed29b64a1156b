// CaisConfig's checks (include/inca/cais/reducer.h).
#include <cstddef>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "inca/cais/reducer.h"

namespace inca::cais {
namespace {
// The largest CAIS payload a UDP datagram over IPv4 carries.
constexpr uint32_t kMaxUdpCaisPayload = 65507 - wire::kCaisHeaderBytes;
}  // namespace

size_t CaisConfig::cell_bytes() const {
  return (size_t{max_payload_bytes} * 2 + 63) / 64 * 64;
}

absl::Status CaisConfig::Validate() const {
  if (max_payload_bytes < 4 || max_payload_bytes > kMaxUdpCaisPayload ||
      max_payload_bytes % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_payload_bytes ", max_payload_bytes,
                                                   " must be a multiple of 4 between 4 and ",
                                                   kMaxUdpCaisPayload / 4 * 4));
  }
  if (!(sram_usage_limit > 0.0 && sram_usage_limit <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sram_usage_limit ", sram_usage_limit, " must be in (0, 1]"));
  }
  if (!(group_share >= 0.0 && group_share <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("group_share ", group_share, " must be in [0, 1]"));
  }
  if (sram_bytes < cell_bytes() ||
      static_cast<double>(sram_bytes) * sram_usage_limit < static_cast<double>(cell_bytes())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sram_bytes ", sram_bytes, " x sram_usage_limit ", sram_usage_limit,
        " must hold at least one slot cell of ", cell_bytes(),
        " bytes (2 x max_payload_bytes); raise sram_bytes or lower max_payload_bytes"));
  }
  if (sram_bytes / cell_bytes() > (size_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat("sram_bytes ", sram_bytes,
                                                   " gives more than 2^24 cells; use at most ",
                                                   (size_t{1} << 24) * cell_bytes(), " bytes"));
  }
  if (max_pending_chunks == 0) {
    return absl::InvalidArgumentError("max_pending_chunks must be at least 1");
  }
  if (timeout_ns <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("timeout_ns ", timeout_ns, " must be positive"));
  }
  if (uplink_rto_ns < 0 || uplink_rto_ns > 10'000 * dp::kNsPerMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("uplink_rto_ns ", uplink_rto_ns, " must be in [0, 10 s]"));
  }
  if (result_hold_ns < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("result_hold_ns ", result_hold_ns, " must not be negative"));
  }
  if (rule_capacity == 0 || rule_capacity > (size_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule_capacity ", rule_capacity, " must be between 1 and 1048576"));
  }
  if (rate_window_ns <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rate_window_ns ", rate_window_ns, " must be positive"));
  }
  if (tombstone_capacity > (size_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tombstone_capacity ", tombstone_capacity, " must be at most 16777216"));
  }
  if (offload_decision_capacity < 1 || offload_decision_capacity > (size_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offload_decision_capacity ", offload_decision_capacity, " must be in [1, 16777216]"));
  }
  if (resend_credit_per_result > 64 || resend_credit_max > (uint32_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resend_credit_per_result ", resend_credit_per_result, " must be at most 64 and ",
        "resend_credit_max ", resend_credit_max, " at most 16777216"));
  }
  return absl::OkStatus();
}

}  // namespace inca::cais
