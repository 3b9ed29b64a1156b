// Helpers shared by olaf-train's roles (distributed.cc: ps, worker) and
// its launcher (launcher.cc: run). Not a public header.
#pragma once

#include <atomic>
#include <chrono>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "inca/rl/distributed.h"

namespace inca::rl::drl {

using Clock = std::chrono::steady_clock;

// Prints "olaf-train ROLE: WHAT" to stderr; returns `code`.
int Fail(std::string_view role, absl::string_view what, int code = 1);
double Seconds(Clock::duration d);
bool In(double x, double lo, double hi);  // finite and in [lo, hi]
// The options every role checks; creates out_dir. Prints why not.
bool ValidCommon(const DistributedOptions& o, std::string_view role);
// Set by SIGTERM and SIGINT once InstallStopHandlers ran.
extern std::atomic<bool> g_stop;
void InstallStopHandlers();
// Bad addresses and options are the caller's mistake: exit 2.
int StatusExit(const absl::Status& st);

}  // namespace inca::rl::drl
