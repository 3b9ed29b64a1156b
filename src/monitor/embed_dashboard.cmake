# cmake -DINPUT=dashboard.html -DOUTPUT=dashboard_html.cc -P embed_dashboard.cmake
# Writes a C++ source whose DashboardHtml() returns INPUT's bytes verbatim
# (a raw string literal), so the page ships inside the binary.
file(READ "${INPUT}" html)
set(delim "inca_html")
string(FIND "${html}" ")${delim}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )${delim}\"")
endif()
file(WRITE "${OUTPUT}.tmp"
"// Generated from src/monitor/dashboard.html by embed_dashboard.cmake. Do not edit.
#include \"monitor/dashboard.h\"

namespace inca::monitor {
namespace {
constexpr char kDashboardHtml[] = R\"${delim}(${html})${delim}\";
}  // namespace

std::string_view DashboardHtml() { return {kDashboardHtml, sizeof(kDashboardHtml) - 1}; }

}  // namespace inca::monitor
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
