// The client settings' table (inca/client/settings.h says what follows from
// it), as the switch's is switchd/settings.cc. Who a rank is (rank, world
// size, addresses, its switch port) is not a setting: torchrun's variables
// and the launchers give it.
#pragma once

#include <string>

#include "inca/client/communicator.h"
#include "inca/client/settings.h"
#include "util/settings.h"

namespace inca::client {

// Every tunable of CommunicatorOptions, in reference order.
const settings::Table<CommunicatorOptions>& ClientSettings();

// The setting named `key` (or one of its aliases), or nullptr.
const settings::Setting<CommunicatorOptions>* FindClientSetting(const std::string& key);

}  // namespace inca::client
