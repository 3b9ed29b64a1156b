// ControlServer: the gRPC adapter over a ControlPlane (control.proto).
// Every handler: check the bearer token, convert, call the ControlPlane,
// map the absl::Status code 1:1 onto the gRPC status.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "inca/control/control_plane.h"

namespace inca::control {

struct ControlServerOptions {
  // host:port; port 0 = ephemeral. Loopback unless configured otherwise.
  std::string listen = "127.0.0.1:50051";
  // When non-empty, calls must carry `authorization: Bearer <token>`.
  std::string token;
};

class ControlServer {
 public:
  // Starts serving `plane` (not owned; must outlive the server). A port
  // already in use is an Unavailable error that says how to pick another.
  static absl::StatusOr<std::unique_ptr<ControlServer>> Start(const ControlServerOptions& options,
                                                              ControlPlane* plane);
  ~ControlServer();  // stops accepting, finishes calls in flight
  int port() const;

 private:
  struct Impl;
  explicit ControlServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace inca::control
