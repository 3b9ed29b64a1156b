// The monitoring dashboard: one self-contained HTML page (inline CSS and JS,
// no external resources) that polls stats.json once a second and draws live
// charts on <canvas>. Source: src/monitor/dashboard.html, embedded into the
// library at build time (embed_dashboard.cmake).
#pragma once

#include <string_view>

namespace inca::monitor {

// The page, UTF-8. Static storage.
std::string_view DashboardHtml();

}  // namespace inca::monitor
