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
  // Limits, so that no client can make the switch's control plane grow
  // without bound (issue 18): a request larger than max_message_bytes is
  // refused with RESOURCE_EXHAUSTED; at most max_streams calls run at once
  // on one connection; all connections together get at most max_threads
  // handler threads (beyond that a call is refused with RESOURCE_EXHAUSTED
  // rather than queued); a connection idle for idle_timeout_ms is closed.
  int max_message_bytes = 1 << 20;
  int max_streams = 16;
  int max_threads = 16;
  int idle_timeout_ms = 5 * 60 * 1000;
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
