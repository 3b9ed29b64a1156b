// A test's EventLog: keeps every line a core logs, at every level.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "inca/util/event_log.h"

namespace inca::testing {

class RecordingEventLog final : public EventLog {
 public:
  bool Enabled(LogLevel) const override { return true; }
  void Log(LogLevel, std::string_view line) override { lines.emplace_back(line); }
  std::vector<std::string> lines;
};

}  // namespace inca::testing
