// Counters declared once (issue 17), in the spirit of Envoy's stats lists:
// each counter or gauge of a counters struct is one table entry (its proto
// field number, JSON key, Prometheus family, kind, scale and help) next to
// the struct. The stop line's and /stats.json's JSON (JsonFields), /metrics
// (monitor's WriteCounters), the rows of docs/monitoring.md (MarkdownRows,
// printed by `inca-switchd --counters-markdown`) and the control API's typed
// sub-messages (a Block in inca/control/stats.h: stats.proto's message for
// the table and the conversion both come from it) all iterate the same table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace inca::counters {

enum class Kind { kCounter, kGauge };

template <typename T>
struct Counter {
  int number;        // field number in the table's proto message: stable, never reused
  const char* json;  // key in the JSON object, also the proto field name
  const char* prom;  // Prometheus family (inca_..._total for counters)
  Kind kind;
  double prom_scale;  // the JSON value times this is the Prometheus one (1e-9: ns to s)
  const char* help;
  uint64_t T::*field;
};

template <typename T>
using Table = std::span<const Counter<T>>;

// A table entry without its struct: what a reader of the figures needs.
struct Row {
  int number;
  const char* json;
  const char* prom;
  Kind kind;
  double prom_scale;
  const char* help;
};
template <typename T>
constexpr Row RowOf(const Counter<T>& c) {
  return {c.number, c.json, c.prom, c.kind, c.prom_scale, c.help};
}

// A counters table seen from an enclosing struct S that holds the counters
// (for example the control API's Stats): the name of the proto message the
// table becomes, its rows, and each figure's place in an S. Made by
// MakeBlock, so no figure is named again.
template <typename S>
struct Block {
  const char* message;
  size_t size;
  Row (*row)(size_t i);
  uint64_t* (*at)(S& s, size_t i);
  uint64_t get(const S& s, size_t i) const { return *at(const_cast<S&>(s), i); }
};
// kTable: a Counter<T> table; kGet: a captureless `T& (S&)` giving the
// counters inside an S.
template <typename S, auto& kTable, auto kGet>
constexpr Block<S> MakeBlock(const char* message) {
  return {message, std::size(kTable), [](size_t i) { return RowOf(kTable[i]); },
          [](S& s, size_t i) -> uint64_t* { return &(kGet(s).*(kTable[i].field)); }};
}

// `"key":value,...` for every entry (no braces, no trailing comma).
template <typename T>
std::string JsonFields(Table<T> table, const T& v) {
  std::string out;
  for (const Counter<T>& c : table) {
    absl::StrAppend(&out, out.empty() ? "" : ",", "\"", c.json, "\":", v.*c.field);
  }
  return out;
}

// to += from for every entry of the table (counters and gauges alike: the
// caller fixes up a gauge that does not add, such as a configured period).
template <typename T>
void AddInto(Table<T> table, const T& from, T* to) {
  for (const Counter<T>& c : table) to->*c.field += from.*c.field;
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
