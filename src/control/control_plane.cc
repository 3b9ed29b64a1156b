// WrongProgram, ValidateControlToken and the planes' defaults (ReleasePort, InstallTree).
#include "inca/control/control_plane.h"

#include "absl/strings/str_cat.h"

namespace inca::control {

absl::Status WrongProgram(std::string_view running, std::string_view needed) {
  return absl::FailedPreconditionError(
      absl::StrCat("this switch runs the ", absl::string_view(running.data(), running.size()),
                   " program; this call needs inca-switchd --program ",
                   absl::string_view(needed.data(), needed.size())));
}

absl::Status ValidateControlToken(std::string_view token, std::string_view where) {
  for (size_t i = 0; i < token.size(); ++i) {
    const auto u = static_cast<unsigned char>(token[i]);
    if (u < 0x20 || u > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat(absl::string_view(where.data(), where.size()), ": byte ", i + 1,
                       " of the token is 0x", absl::Hex(u, absl::kZeroPad2),
                       "; a control token must be printable ASCII (0x20-0x7E), with no newline"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ControlPlane::ReleasePort(uint16_t) {
  return absl::FailedPreconditionError("this control plane cannot release ports");
}

absl::StatusOr<GroupInfo> CaisControlPlane::InstallTree(const TreeInstall&) {
  return absl::UnimplementedError("this control plane cannot install trees");
}

}  // namespace inca::control
