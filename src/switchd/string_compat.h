// Debian's Abseil does not alias absl::string_view to std::string_view
// (ABSL_OPTION_USE_STD_STRING_VIEW 0); these convert between the two
// without copying.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace inca::switchd {

inline absl::string_view Av(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view Sv(absl::string_view s) {
  return std::string_view(s.data(), s.size());
}

}  // namespace inca::switchd
