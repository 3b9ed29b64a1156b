// The keys of a CAIS scenario (cais_scenario.cc's table), for scenarios
// that embed one (tp_scenario.cc).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "inca/sim/cais_scenario.h"
#include "sim/yaml_keys.h"

namespace inca::sim {

// Sets one key of a CAIS scenario from YAML (errors name `src` and the key).
absl::Status SetCaisKey(const std::string& key, const YAML::Node& v, std::string_view src,
                        CaisSimScenario* s);
// Every key SetCaisKey knows, in the table's order.
std::vector<std::string> CaisKeyNames();

// Scenarios that embed a CAIS scenario as their network, `net` (cais-tp,
// cais-dp): the keys of the CAIS scenario they set themselves.
inline bool DerivedCaisKey(const std::string& key) {
  return key == "hosts" || key == "sizes" || key == "ops" || key == "name" || key == "collective";
}

// One of such a scenario's own keys.
template <typename S>
struct OwnKey {
  const char* name;
  absl::Status (*set)(const YAML::Node& v, std::string_view src, S* s);
};
// An own key that reads YAML into s->LVALUE.
#define INCA_OWN_KEY(S, name, lvalue)                               \
  ::inca::sim::OwnKey<S> {                                          \
    name, [](const YAML::Node& v, std::string_view src, S* s) {     \
      return ::inca::sim::yaml_keys::Get(v, src, name, &s->lvalue); \
    }                                                               \
  }

// Sets `key` of such a scenario: one of `own`, else one of the CAIS
// scenario's but those it derives (`derived_why` says from what); an
// unknown key's error lists both.
template <typename S, size_t N>
absl::Status SetEmbeddingKey(const std::string& key, const YAML::Node& v, std::string_view src,
                             S* s, const OwnKey<S> (&own)[N], std::string_view derived_why) {
  for (const OwnKey<S>& k : own) {
    if (key == k.name) return k.set(v, src, s);
  }
  if (DerivedCaisKey(key)) {
    return yaml_keys::Bad(src, key, "set by the scenario (" + std::string(derived_why) + ")");
  }
  std::vector<std::string> known;
  for (const OwnKey<S>& k : own) known.emplace_back(k.name);
  for (const std::string& k : CaisKeyNames()) {
    if (k == key) return SetCaisKey(key, v, src, &s->net);
    if (!DerivedCaisKey(k)) known.push_back(k);
  }
  return yaml_keys::UnknownKey(src, key, known);
}

}  // namespace inca::sim
