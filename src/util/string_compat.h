// Debian's Abseil does not alias absl::string_view to std::string_view
// (ABSL_OPTION_USE_STD_STRING_VIEW 0); these convert between the two
// without copying, for every folder that hands one to the other.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace inca::util {

inline absl::string_view Av(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view Sv(absl::string_view s) {
  return std::string_view(s.data(), s.size());
}
// "0x" and two hex digits (a header byte in an error message).
inline std::string Hex2(uint32_t v) {
  return absl::StrCat("0x", absl::Hex(v, absl::kZeroPad2));
}

}  // namespace inca::util
