// Monitoring figures of an inca-switchd running the OLAF or FIFO program:
// Prometheus text (inca_olaf_* switch-wide, inca_olaf_cluster_*{cluster})
// and JSON. Names and meanings: docs/monitoring.md, "OLAF".
#pragma once

#include <string>

#include "inca/control/control_plane.h"
#include "switchd/olaf_server.h"

namespace inca::monitor {

std::string RenderOlafPrometheus(const control::OlafStats& s,
                                 const switchd::OlafServerCounters& server);
std::string RenderOlafStatsJson(const control::OlafStats& s,
                                const switchd::OlafServerCounters& server);

}  // namespace inca::monitor
