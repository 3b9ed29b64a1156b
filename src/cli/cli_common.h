// What cais-cli and olaf-cli share: exit codes, the device address default
// and turning a control-API status into one error line.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace inca::cli {

inline constexpr int kOk = 0, kRefused = 1, kUsage = 2, kUnreachable = 3;

// "HOST" -> "HOST:50051" (the control API's default port).
inline std::string Device(std::string d) {
  if (d.find(':') == std::string::npos) d += ":50051";
  return d;
}

// OK -> kOk; otherwise one line "<tool>: <message>" on `err` and kUnreachable
// (switch not answering) or kRefused (the switch said no).
inline int Report(std::string_view tool, const absl::Status& s, std::ostream& err) {
  if (s.ok()) return kOk;
  err << tool << ": " << s.message() << "\n";
  return (s.code() == absl::StatusCode::kUnavailable ||
          s.code() == absl::StatusCode::kDeadlineExceeded)
             ? kUnreachable
             : kRefused;
}

}  // namespace inca::cli
