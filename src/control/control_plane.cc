// WrongProgram and the ControlPlane's default ReleasePort.
#include "inca/control/control_plane.h"

#include "absl/strings/str_cat.h"

namespace inca::control {

absl::Status WrongProgram(std::string_view running, std::string_view needed) {
  return absl::FailedPreconditionError(
      absl::StrCat("this switch runs the ", absl::string_view(running.data(), running.size()),
                   " program; this call needs inca-switchd --program ",
                   absl::string_view(needed.data(), needed.size())));
}

absl::StatusOr<int> ControlPlane::ReleasePort(uint16_t) {
  return absl::FailedPreconditionError("this control plane cannot release ports");
}

}  // namespace inca::control
