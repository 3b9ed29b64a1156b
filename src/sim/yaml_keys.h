// Reading scenario keys from YAML with one-line errors that name the key
// (inca-sim's OLAF and CAIS scenarios).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "util/string_compat.h"

namespace inca::sim::yaml_keys {

using util::Av;

inline absl::Status Bad(std::string_view source, const std::string& key, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(Av(source), ": ", key, ": ", why));
}

template <typename T>
absl::Status Get(const YAML::Node& n, std::string_view source, const std::string& key, T* out) {
  try {
    *out = n.as<T>();
  } catch (const YAML::Exception&) {
    return Bad(source, key, absl::StrCat("cannot read '", n.Scalar(), "' as the expected type"));
  }
  return absl::OkStatus();
}

// A count that may be written as 2e9 or 2000000000: a whole number in
// [lo, hi].
inline absl::Status GetCount(const YAML::Node& n, std::string_view source, const std::string& key,
                             double lo, double hi, uint64_t* out) {
  double v = 0;
  if (auto st = Get(n, source, key, &v); !st.ok()) return st;
  if (!(v >= lo && v <= hi) || v != static_cast<double>(static_cast<uint64_t>(v))) {
    return Bad(source, key, absl::StrCat("must be a whole number in [", lo, ", ", hi, "]"));
  }
  *out = static_cast<uint64_t>(v);
  return absl::OkStatus();
}

// A list given as a YAML list or one comma-separated scalar (--set, --sweep).
template <typename T>
absl::Status SetList(const YAML::Node& v, std::string_view src, const char* key,
                     std::vector<T>* out) {
  std::vector<std::string> items;
  if (v.IsSequence()) {
    for (const auto& x : v) items.push_back(x.Scalar());
  } else if (v.IsScalar()) {
    items = absl::StrSplit(v.Scalar(), ',', absl::SkipEmpty());
  }
  if (items.empty()) return Bad(src, key, "a list, e.g. [4, 8]");
  out->clear();
  for (const std::string& it : items) {
    T x;
    if (auto st = Get(YAML::Load(it), src, key, &x); !st.ok()) return st;
    out->push_back(x);
  }
  return absl::OkStatus();
}

// The event budget of a run (Simulator::set_event_budget), a key of every
// scenario kind.
inline constexpr double kMaxEventsHi = 1e15;

// "KEY=VALUE" of --set: the key, and the value parsed as YAML.
inline absl::Status SplitOverride(std::string_view key_value, std::string* key, YAML::Node* v) {
  const size_t eq = key_value.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--set '", Av(key_value), "' must be KEY=VALUE (e.g. seed=2)"));
  }
  *key = std::string(key_value.substr(0, eq));
  try {
    *v = YAML::Load(std::string(key_value.substr(eq + 1)));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("--set ", *key, ": ", e.what()));
  }
  return absl::OkStatus();
}

// `sweep: {key: K, values: [...]}` into s->sweep_key and s->sweep_values;
// every value must be acceptable to set_key (a copy of *s is probed).
// `not_sweepable` is a key that takes a list, which a sweep cannot set.
template <typename Scenario, typename SetKey>
absl::Status ParseSweep(const YAML::Node& v, std::string_view src, Scenario* s, SetKey set_key,
                        std::string_view not_sweepable) {
  if (!v.IsMap() || !v["key"] || !v["values"] || !v["values"].IsSequence() || v.size() != 2) {
    return Bad(src, "sweep", "must be {key: NAME, values: [V1, V2, ...]}");
  }
  if (auto st = Get(v["key"], src, "sweep.key", &s->sweep_key); !st.ok()) return st;
  s->sweep_values.clear();
  for (const auto& x : v["values"]) s->sweep_values.push_back(x.Scalar());
  if (s->sweep_key == "sweep" || s->sweep_key == "system" || s->sweep_key == not_sweepable ||
      s->sweep_values.empty()) {
    return Bad(src, "sweep", "needs a scalar key and at least one value");
  }
  for (const auto& val : s->sweep_values) {
    Scenario probe = *s;
    if (auto st = set_key(s->sweep_key, YAML::Load(val), src, &probe); !st.ok()) {
      return Bad(src, "sweep", std::string(st.message()));
    }
  }
  return absl::OkStatus();
}

// `system` and `sweep`, the keys every scenario has: true (with *st set)
// if `key` is one of them. `system` must be `system`, else the error says
// `wrong`.
template <typename Scenario, typename SetKey>
bool SystemOrSweep(const std::string& key, const YAML::Node& v, std::string_view src,
                   std::string_view system, std::string_view wrong, Scenario* s, SetKey set_key,
                   absl::Status* st) {
  if (key == "system") {
    *st =
        v.IsScalar() && v.Scalar() == system ? absl::OkStatus() : Bad(src, key, std::string(wrong));
    return true;
  }
  if (key == "sweep") {
    *st = ParseSweep(v, src, s, set_key, "");
    return true;
  }
  return false;
}

// A name that goes into JSON as it is: 1 to 64 characters, no quote,
// backslash or control character.
inline bool PlainName(std::string_view name) {
  for (char c : name) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) return false;
  }
  return !name.empty() && name.size() <= 64;
}
// A model's name (cais-tp, cais-dp) that goes into JSON as it is.
inline absl::Status CheckModelName(std::string_view model) {
  return PlainName(model) ? absl::OkStatus()
                          : absl::InvalidArgumentError(
                                "model must be a name of 1 to 64 characters without quotes or "
                                "backslashes");
}

// True if the YAML text is a map whose `system` is `system`.
inline bool IsSystem(std::string_view yaml, std::string_view system) {
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    return root.IsMap() && root["system"] && root["system"].IsScalar() &&
           root["system"].Scalar() == system;
  } catch (const YAML::Exception&) {
    return false;
  }
}

// The error for a key no table knows: system, sweep, then `known`.
inline absl::Status UnknownKey(std::string_view src, const std::string& key,
                               const std::vector<std::string>& known) {
  std::string list = "system, sweep";
  for (const std::string& k : known) absl::StrAppend(&list, ", ", k);
  return Bad(src, key, absl::StrCat("unknown key; known: ", list));
}

// A whole scenario: a YAML map whose every key goes to set_key, then
// Validate(); errors are one line naming the source.
template <typename Scenario, typename SetKey>
absl::StatusOr<Scenario> ParseScenario(std::string_view yaml, std::string_view source,
                                       SetKey set_key) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(Av(source), ": ", e.what()));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(Av(source), ": not a map"));
  Scenario s;
  for (const auto& kv : root) {
    if (auto st = set_key(kv.first.as<std::string>(), kv.second, source, &s); !st.ok()) return st;
  }
  if (auto st = s.Validate(); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(Av(source), ": ", st.message()));
  }
  return s;
}

// --set KEY=VALUE on a parsed scenario, then Validate() unless told not
// to (inca-sim applies every --set before it checks the whole).
template <typename Scenario, typename SetKey>
absl::Status ApplyOverride(std::string_view key_value, Scenario* s, SetKey set_key, bool validate) {
  std::string key;
  YAML::Node v;
  if (auto st = SplitOverride(key_value, &key, &v); !st.ok()) return st;
  if (auto st = set_key(key, v, "--set", s); !st.ok()) return st;
  return validate ? s->Validate() : absl::OkStatus();
}

}  // namespace inca::sim::yaml_keys
