// Test helper: a strict JSON (RFC 8259) syntax check, so tests need no JSON
// library. Returns "" when `text` is exactly one JSON value, otherwise what
// is wrong and where.
#pragma once

#include <string>
#include <string_view>

namespace inca::monitor {

std::string CheckJson(std::string_view text);

}  // namespace inca::monitor
