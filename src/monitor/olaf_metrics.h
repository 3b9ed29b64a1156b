// Monitoring figures of an inca-switchd running the OLAF or FIFO program:
// Prometheus text (inca_olaf_* switch-wide, inca_olaf_cluster_*{cluster})
// and JSON. Names and meanings: docs/monitoring.md, "OLAF".
#pragma once

#include <string>

#include "inca/control/stats.h"

namespace inca::monitor {

// Both from the control API's GetOlafStats alone (its `server` counters
// included), so the monitor reads what any control client reads.
std::string RenderOlafPrometheus(const control::OlafStats& s);
std::string RenderOlafStatsJson(const control::OlafStats& s);

}  // namespace inca::monitor
