// CommunicatorStats as the Python dict both bindings return (`cais.stats()`
// and the torch backend's `stats()`), from its declaration
// (kCommunicatorStatsFields in inca/client/communicator.h).
#pragma once

#include <pybind11/pybind11.h>

#include <variant>

#include "inca/client/communicator.h"

namespace inca::python {

inline pybind11::dict StatsDict(const CommunicatorStats& s) {
  pybind11::dict d;
  for (const CommunicatorStatsField& f : kCommunicatorStatsFields) {
    std::visit([&](auto CommunicatorStats::*p) { d[f.name] = s.*p; }, f.member);
  }
  return d;
}

// {key: help} of the same dict (`_cais.stats_help()`).
inline pybind11::dict StatsHelp() {
  pybind11::dict d;
  for (const CommunicatorStatsField& f : kCommunicatorStatsFields) d[f.name] = f.help;
  return d;
}

}  // namespace inca::python
