#include "inca/util/size.h"

#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace inca::util {

absl::StatusOr<uint64_t> ParseSize(std::string_view s) {
  const std::string text(s);
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' is not like 1024, 64K, 8M or 1G"));
  };
  if (text.empty()) return bad();
  uint64_t mult = 1;
  std::string digits = text;
  switch (absl::ascii_toupper(static_cast<unsigned char>(text.back()))) {
    case 'K': mult = 1024; break;
    case 'M': mult = 1024 * 1024; break;
    case 'G': mult = uint64_t{1024} * 1024 * 1024; break;
    default: break;
  }
  if (mult != 1) digits.pop_back();
  uint64_t v = 0;
  if (digits.empty() || !absl::SimpleAtoi(digits, &v)) return bad();
  if (v > std::numeric_limits<uint64_t>::max() / mult) return bad();
  return v * mult;
}

}  // namespace inca::util
