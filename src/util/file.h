// Reading a small text file (a YAML config, a scenario) with a size bound:
// /dev/zero or a huge file named by mistake is refused instead of read
// forever, and a read error is an error instead of an empty file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace inca::util {

// The default bound for configuration and scenario files.
inline constexpr size_t kMaxConfigFileBytes = size_t{1} << 20;  // 1 MiB

// The whole of `path`, at most `max_bytes`. Errors name `what` ("config
// file", "scenario") and the path, on one line: NotFound (cannot open),
// InvalidArgument (a directory, larger than max_bytes) or DataLoss (a read
// error, with the system's reason).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes,
                                          std::string_view what);

}  // namespace inca::util
