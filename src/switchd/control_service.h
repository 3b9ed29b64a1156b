// inca-switchd's embedded control service: SwitchControl over the
// process's shards, behind the gRPC server (docs/control.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "control/grpc_server.h"
#include "switchd/switch_control.h"
#include "switchd/switch_server.h"

namespace inca::switchd {

// The embedded control service of an inca-switchd: a SwitchControl and the
// gRPC server in front of it. Destroy before the SwitchServer.
struct ControlService {
  std::unique_ptr<SwitchControl> plane;
  std::unique_ptr<control::ControlServer> server;
};

// The shards as the control plane drives them.
inline std::vector<ControlTarget*> Targets(const std::vector<SwitchServer*>& shards) {
  return {shards.begin(), shards.end()};
}

// Serves the control API for `server` on `listen` (loopback by default;
// port 0 = ephemeral). `token` non-empty = bearer token required.
absl::StatusOr<ControlService> StartControlService(std::vector<SwitchServer*> shards,
                                                   const std::string& listen,
                                                   const std::string& token);
inline absl::StatusOr<ControlService> StartControlService(SwitchServer* server,
                                                          const std::string& listen,
                                                          const std::string& token) {
  return StartControlService(std::vector<SwitchServer*>{server}, listen, token);
}

}  // namespace inca::switchd
