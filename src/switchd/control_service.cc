#include "switchd/control_service.h"

#include <utility>

namespace inca::switchd {

absl::StatusOr<ControlService> StartControlService(std::vector<SwitchServer*> shards,
                                                   const std::string& listen,
                                                   const std::string& token) {
  ControlService svc;
  // The plane reports the port actually bound; construct it after binding.
  auto plane = std::make_unique<SwitchControl>(Targets(shards), 0);
  control::ControlServerOptions o;
  o.listen = listen;
  o.token = token;
  auto grpc_server = control::ControlServer::Start(o, plane.get());
  if (!grpc_server.ok()) return grpc_server.status();
  plane->set_controller_port((*grpc_server)->port());
  svc.plane = std::move(plane);
  svc.server = std::move(*grpc_server);
  return svc;
}

}  // namespace inca::switchd
