// cais-cli: the command-line adapter over the control API (the CAIS
// write-up's 4.1/4.4 commands, and more). Everything but argument parsing
// and printing is the ControlPlane's.
#pragma once

#include <ostream>

namespace inca::cli {

// Runs one cais-cli invocation. Returns the process exit code: 0 ok,
// 1 the switch refused or failed the request, 2 bad usage, 3 unreachable.
// Errors are one line on `err`.
int RunCaisCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace inca::cli
