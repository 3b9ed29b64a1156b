// Counters declared once (issue 17), in the spirit of Envoy's stats lists:
// each counter or gauge of a counters struct is one table entry (its JSON
// key, Prometheus family, kind, scale and help) next to the struct. The stop
// line's and /stats.json's JSON (JsonFields), /metrics (monitor's
// WriteCounters) and the rows of docs/monitoring.md (MarkdownRows, printed
// by `inca-switchd --counters-markdown`) all iterate the same table.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace inca::counters {

enum class Kind { kCounter, kGauge };

template <typename T>
struct Counter {
  const char* json;  // key in the JSON object
  const char* prom;  // Prometheus family (inca_..._total for counters)
  Kind kind;
  double prom_scale;  // the JSON value times this is the Prometheus one (1e-9: ns to s)
  const char* help;
  uint64_t T::*field;
};

template <typename T>
using Table = std::span<const Counter<T>>;

// `"key":value,...` for every entry (no braces, no trailing comma).
template <typename T>
std::string JsonFields(Table<T> table, const T& v) {
  std::string out;
  for (const Counter<T>& c : table) {
    absl::StrAppend(&out, out.empty() ? "" : ",", "\"", c.json, "\":", v.*c.field);
  }
  return out;
}

// The rows of a `| metric | type | meaning |` table, one per entry.
template <typename T>
std::string MarkdownRows(Table<T> table) {
  std::string out;
  for (const Counter<T>& c : table) {
    absl::StrAppend(&out, "| `", c.prom, "` | ", c.kind == Kind::kCounter ? "counter" : "gauge",
                    " | ", absl::StrReplaceAll(c.help, {{"|", "\\|"}}), " (JSON `", c.json,
                    "`) |\n");
  }
  return out;
}

}  // namespace inca::counters
