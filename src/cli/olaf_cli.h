// olaf-cli: the command-line adapter over the control API for OLAF switches
// (OLAF paper 5.2: the cluster_mapping table, reconfigurable at run time;
// plus the queue and per-cluster AoM figures).
//   olaf-cli clusters [list]
//   olaf-cli clusters set --src-port 40001 --cluster 3
//   olaf-cli clusters del --src-port 40001
//   olaf-cli show-stats [--json]
#pragma once

#include <ostream>

namespace inca::cli {

// Runs one olaf-cli invocation. Exit codes as cais-cli: 0 ok, 1 the switch
// refused the request, 2 bad usage, 3 unreachable. Errors are one line.
int RunOlafCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace inca::cli
