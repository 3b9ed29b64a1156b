// Byte sizes as users write them: 1024, 64K, 8M, 1G (binary multiples).
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace inca::util {

// InvalidArgument for anything else, and for a size past 2^64.
absl::StatusOr<uint64_t> ParseSize(std::string_view s);

}  // namespace inca::util
