// CommunicatorStats as the Python dict both bindings return (`cais.stats()`
// and the torch backend's `stats()`), from its declaration
// (kCommunicatorStatsFields in inca/client/communicator.h).
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <variant>

#include "inca/client/communicator.h"

namespace inca::python {

// {"explore": 1, ...}: the reasons counted, by name (those not zero).
inline pybind11::dict ReasonsDict(const HostReasonCounts& counts) {
  pybind11::dict d;
  for (size_t i = 0; i < kHostReasons; ++i) {
    if (counts[i] != 0) d[kHostReasonNames[i]] = counts[i];
  }
  return d;
}

// The lower bound of size class b, as "4 MiB", "64 KiB" or "512 B".
inline std::string SizeClassLabel(int b) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  return std::to_string(uint64_t{1} << (b % 10)) + " " + kUnits[b / 10];
}

inline pybind11::dict StatsDict(const CommunicatorStats& s) {
  pybind11::dict d;
  for (const CommunicatorStatsField& f : kCommunicatorStatsFields) {
    std::visit([&](auto CommunicatorStats::*p) { d[f.name] = s.*p; }, f.member);
  }
  // Why operations ran on the host path (HostReason), in all and per size
  // class: {"4 MiB": {"explore": 1, "measured": 9}} (docs/python.md).
  d["host_reasons"] = ReasonsDict(s.host_reasons);
  pybind11::dict by_class;
  for (const auto& [b, counts] : s.host_by_class)
    by_class[SizeClassLabel(b).c_str()] = ReasonsDict(counts);
  d["host_by_class"] = by_class;
  return d;
}

// {key: help} of the same dict (`_cais.stats_help()`).
inline pybind11::dict StatsHelp() {
  pybind11::dict d;
  for (const CommunicatorStatsField& f : kCommunicatorStatsFields) d[f.name] = f.help;
  d["host_reasons"] =
      "Of ops_host, why, by name: declined (by a switch that gives no reason), rule, model, "
      "measured, explore, held (the switch's offload decisions), fallback (left the switch "
      "part-way), off (not on the switch).";
  d["host_by_class"] =
      "host_reasons per size class, keyed by the class's lower bound (\"4 MiB\": operations of "
      "4 MiB up to 8 MiB, as the switch estimates their size).";
  return d;
}

}  // namespace inca::python
