// The one place the communicator's options become the switch path's: the
// layers below the communicator (transport_core.h, switch_transport.h) take
// their own option structs and never see the public CommunicatorOptions.
#pragma once

#include "client/switch_transport.h"
#include "client/transport_core.h"
#include "inca/client/communicator.h"

namespace inca::client {

// What the switch path runs its core with (inca-sim and its tests derive
// theirs the same way).
TransportConfig TransportConfigFrom(const CommunicatorOptions& o);

// What SwitchTransport and SwitchSet are created with.
SwitchTransportOptions SwitchTransportOptionsFrom(const CommunicatorOptions& o);

}  // namespace inca::client
