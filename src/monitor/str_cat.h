// StrCat/StrAppend for std::string_view and integers. Debian's Abseil keeps
// absl::string_view distinct from std::string_view, so absl::StrCat does not
// take std::string_view (see util/string_compat.h); this does, without
// conversions at every call.
#pragma once

#include <charconv>
#include <concepts>
#include <string>
#include <string_view>

namespace inca::monitor::internal {

inline void AppendPiece(std::string* out, std::string_view s) {
  out->append(s);
}
inline void AppendPiece(std::string* out, const char* s) {
  out->append(s);
}
template <std::integral T>
requires(!std::same_as<T, bool> && !std::same_as<T, char>) void AppendPiece(std::string* out, T v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

template <typename... Pieces>
void StrAppend(std::string* out, const Pieces&... pieces) {
  (AppendPiece(out, pieces), ...);
}

template <typename... Pieces>
std::string StrCat(const Pieces&... pieces) {
  std::string out;
  StrAppend(&out, pieces...);
  return out;
}

}  // namespace inca::monitor::internal
