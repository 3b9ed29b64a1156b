// Numbers from the flat JSON objects inca's own tools write (olaf-train's
// summary and per-process files): no parser needed for "key":number.
#pragma once

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"

namespace inca::util {

// The whole of a small text file; empty when it cannot be read.
inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The number after "key": (the first occurrence); nullopt when absent or not
// a number.
inline std::optional<double> FlatJsonNumber(std::string_view json, std::string_view key) {
  const std::string k = "\"" + std::string(key) + "\":";
  const size_t at = json.find(k);
  if (at == std::string_view::npos) return std::nullopt;
  const size_t from = at + k.size();
  size_t end = from;
  while (end < json.size() &&
         std::string_view("0123456789.-+e").find(json[end]) != std::string_view::npos) {
    ++end;
  }
  double v = 0;
  if (!absl::SimpleAtod(absl::string_view(json.data() + from, end - from), &v)) return std::nullopt;
  return v;
}

}  // namespace inca::util
