// inca-switchd's process level: builds the server for the configured
// program (CAIS or OLAF/FIFO), its control API, embedded offload controller
// and monitor, installs SIGINT/SIGTERM handlers, runs until a signal, and
// prints the final counters as one JSON line on stdout. The executable only
// parses flags (tools/inca-switchd/main.cc).
#pragma once

#include <string>

#include "switchd/config.h"

namespace inca::daemon {

// Returns the process exit code: 0 after a clean stop, 1 when the server
// failed while running, 2 for configuration or start-up errors (printed as
// one line on stderr, prefixed "inca-switchd: ").
int RunSwitchd(const switchd::SwitchdConfig& config, const std::string& control_token);

}  // namespace inca::daemon
