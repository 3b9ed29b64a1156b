// SIGINT and SIGTERM to a stop handler: what every long-running executable
// (inca-switchd, udp-forwarder) installs before its loop.
#pragma once

#include <signal.h>

namespace inca::util {

// `handler` runs on SIGINT and SIGTERM; it must be async-signal-safe (set
// an atomic flag, call a Stop() that does).
inline void OnStopSignals(void (*handler)(int)) {
  struct sigaction sa = {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace inca::util
