// inca-switchd's settings, declared once (util/settings.h): the YAML keys,
// the flags, Validate()'s range checks and docs/settings.md all come from
// SwitchdSettings(). Lists and tables (ports, rules, olaf_clusters) are
// structured keys, parsed in config.cc and listed by StructuredKeys().
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "switchd/config.h"
#include "util/settings.h"

namespace inca::switchd {

// Every scalar setting of SwitchdConfig, in --help and reference order.
const settings::Table<SwitchdConfig>& SwitchdSettings();

// The setting named `key` (its canonical name), or nullptr.
const settings::Setting<SwitchdConfig>* FindSetting(const std::string& key);

// The YAML keys that are not scalars, with one line each on what they hold.
const std::vector<std::pair<std::string, std::string>>& StructuredKeys();

// docs/settings.md: the generated reference (inca-switchd --settings-markdown).
std::string SettingsMarkdown();

// The scalar settings as JSON (settings::Json), for the Python package
// (inca-switchd --settings-json; the build writes it into cais/).
std::string SettingsJson();

// The switch front end's counter tables (kHostCounters, kSwitchCounters,
// kOlafServerCounters) as the rows docs/monitoring.md shows between its
// "counters" markers (inca-switchd --counters-markdown).
std::string CountersMarkdown();

}  // namespace inca::switchd
