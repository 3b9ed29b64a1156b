// One event line ("event=... key=value") to an injected EventLog, formatted
// with fmt only when the log keeps that level: what the pure cores call
// instead of a logging library (include/inca/util/event_log.h).
#pragma once

#include <fmt/format.h>

#include <utility>

#include "inca/util/event_log.h"

namespace inca {

template <typename... A>
void Emit(EventLog& log, LogLevel level, fmt::format_string<A...> f, A&&... a) {
  if (log.Enabled(level)) log.Log(level, fmt::format(f, std::forward<A>(a)...));
}

}  // namespace inca
