// Test helper: a strict reader of Prometheus text exposition format 0.0.4
// as inca writes it. Reports every problem it finds instead of stopping at
// the first, and returns the samples for value checks.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inca::monitor {

struct PromSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // as written
  double value = 0;
  std::string series;  // name{a="x",b="y"} with labels sorted; name alone if none
};

struct PromCheckResult {
  std::vector<std::string> errors;  // "line N: what is wrong"
  std::vector<PromSample> samples;  // in order
  // The value of `series` (labels sorted, as in PromSample::series).
  std::optional<double> Value(std::string_view series) const;
  // The TYPE of the family `name` ("" when there is none).
  std::string Type(std::string_view name) const;
  std::vector<std::pair<std::string, std::string>> types;  // name, type
};

// Checks: every line is a HELP, TYPE or sample line (no blank lines, no other
// comments, no timestamps); names and label names well-formed and
// `required_prefix`-prefixed; label values quoted with only \\ \" \n escapes;
// one HELP and one TYPE (counter or gauge) per family, both before its
// samples; a family's samples contiguous; counters named *_total, gauges
// not; no duplicate series; values numeric (counters finite and >= 0); the
// text ends in a newline.
PromCheckResult CheckPrometheusText(std::string_view text,
                                    std::string_view required_prefix = "inca_");

}  // namespace inca::monitor
