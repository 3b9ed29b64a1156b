// The processes' EventLog (inca/util/event_log.h): each line through
// spdlog's default logger at the matching level.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

#include "inca/util/event_log.h"

namespace inca {

class SpdlogEventLog final : public EventLog {
 public:
  bool Enabled(LogLevel level) const override { return spdlog::should_log(Level(level)); }
  void Log(LogLevel level, std::string_view line) override {
    spdlog::log(Level(level), "{}", line);
  }

 private:
  static spdlog::level::level_enum Level(LogLevel level) {
    switch (level) {
      case LogLevel::kDebug: return spdlog::level::debug;
      case LogLevel::kInfo: return spdlog::level::info;
      case LogLevel::kWarn: return spdlog::level::warn;
    }
    return spdlog::level::info;
  }
};

// The one the processes share (stateless; thread-safe as spdlog is).
inline EventLog& ProcessEventLog() {
  static SpdlogEventLog log;
  return log;
}

}  // namespace inca
