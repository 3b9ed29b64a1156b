// How a pure core logs: it hands one structured line ("event=... key=value")
// and a level to the EventLog its host injected, and never calls a logging
// library itself. inca-switchd and inca-sim inject SpdlogEventLog
// (src/util/spdlog_event_log.h); tests inject nothing (NullEventLog) or a
// recorder.
#pragma once

#include <string_view>

namespace inca {

enum class LogLevel { kDebug, kInfo, kWarn };

class EventLog {
 public:
  virtual ~EventLog() = default;
  // Whether a line of `level` would be kept (so that it is formatted only then).
  virtual bool Enabled(LogLevel level) const = 0;
  virtual void Log(LogLevel level, std::string_view line) = 0;
};

// Keeps nothing.
class NullEventLog final : public EventLog {
 public:
  bool Enabled(LogLevel) const override { return false; }
  void Log(LogLevel, std::string_view) override {}
};

}  // namespace inca
