// The client's settings (CommunicatorOptions' tunables), declared once in
// src/client/settings.cc: Validate()'s range checks, cais-perf's flags,
// docs/client-settings.md, the Python bindings' option dicts and
// cais.configure()'s checks all come from that table.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "inca/client/communicator.h"

namespace inca::client {

// A setting's value as a binding has it: an integer, a number, a flag or
// text (the table's settings::Value).
using SettingValue = std::variant<uint64_t, double, bool, std::string>;

// Checks `v` against the setting `key` (or one of its aliases) and stores it
// in `o`. NotFound when no setting has that name; InvalidArgument
// "key: message" for a value of the wrong type or out of range (an integer
// is taken where a number is expected).
absl::Status SetClientSetting(CommunicatorOptions* o, const std::string& key,
                              const SettingValue& v);

// Every setting that declares an environment variable (INCA_IO,
// INCA_OFFLOAD, INCA_REQUIRE_SWITCH) and finds it set, into `o`: what
// OptionsFromEnvironment and the Python bindings apply before the options
// given explicitly. InvalidArgument naming the variable for a bad value
// ("INCA_IO='fast': unknown value 'fast'; use gso or mmsg"), `o` unchanged.
absl::Status ApplyClientEnvironment(CommunicatorOptions* o);

// docs/client-settings.md (cais-perf --settings-markdown).
std::string ClientSettingsMarkdown();

// The table as JSON (settings::Json), for the Python package (cais-perf
// --settings-json; the build writes it into cais/_client_settings.json).
std::string ClientSettingsJson();

}  // namespace inca::client
