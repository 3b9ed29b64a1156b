// The keys of a CAIS scenario (cais_scenario.cc's table), for scenarios
// that embed one (tp_scenario.cc).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "inca/sim/cais_scenario.h"

namespace inca::sim {

// Sets one key of a CAIS scenario from YAML (errors name `src` and the key).
absl::Status SetCaisKey(const std::string& key, const YAML::Node& v, std::string_view src,
                        CaisSimScenario* s);
// Every key SetCaisKey knows, in the table's order.
std::vector<std::string> CaisKeyNames();

}  // namespace inca::sim
