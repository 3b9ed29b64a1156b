// Prometheus text and JSON number writers shared by the monitor's
// renderers (CAIS and OLAF). Internal to src/monitor.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "inca/util/counters.h"
#include "monitor/str_cat.h"

namespace inca::monitor::internal {

// Shortest round-trip decimal form; Prometheus spellings for non-finite.
inline std::string PromNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

inline std::string JsonNumber(double v) {
  return std::isfinite(v) ? PromNumber(v) : "null";
}

inline const char* JsonBool(bool b) {
  return b ? "true" : "false";
}

// Writes families in order; a family's samples follow its HELP/TYPE lines.
class PromWriter {
 public:
  void Counter(std::string_view name, std::string_view help) { Family(name, "counter", help); }
  void Gauge(std::string_view name, std::string_view help) { Family(name, "gauge", help); }

  // `labels` is the inside of {...} (already escaped) or empty.
  void Sample(std::string_view labels, uint64_t v) { Line(labels, internal::StrCat(v)); }
  void Sample(std::string_view labels, double v) { Line(labels, PromNumber(v)); }
  void Sample(std::string_view labels, bool v) { Line(labels, v ? "1" : "0"); }

  std::string Take() { return std::move(out_); }

 private:
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    name_ = name;
    internal::StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  void Line(std::string_view labels, std::string_view value) {
    if (labels.empty()) {
      internal::StrAppend(&out_, name_, " ", value, "\n");
    } else {
      internal::StrAppend(&out_, name_, "{", labels, "} ", value, "\n");
    }
  }

  std::string out_;
  std::string name_;
};

// Starts the family of a declared counter (util/counters.h): `prefix` +
// its `prom`, its kind, its help (+ `help_suffix`).
template <typename T>
void CounterFamily(const counters::Counter<T>& c, std::string_view prefix,
                   std::string_view help_suffix, PromWriter* w) {
  const std::string name = internal::StrCat(prefix, c.prom);
  const std::string help = internal::StrCat(c.help, help_suffix);
  if (c.kind == counters::Kind::kCounter) {
    w->Counter(name, help);
  } else {
    w->Gauge(name, help);
  }
}

// One family per entry of a declared counters table (util/counters.h).
template <typename T>
void WriteCounters(counters::Table<T> table, const T& v, PromWriter* w,
                   std::string_view prefix = {}) {
  for (const counters::Counter<T>& c : table) {
    CounterFamily(c, prefix, "", w);
    if (c.prom_scale == 1) {
      w->Sample("", v.*c.field);
    } else {
      w->Sample("", static_cast<double>(v.*c.field) * c.prom_scale);
    }
  }
}

}  // namespace inca::monitor::internal
