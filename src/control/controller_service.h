// inca-controller's engine: one OffloadLoop per managed switch, each over a
// gRPC ControlPlane (ConnectControl). A switch that cannot be reached is
// retried every tick; the others are unaffected.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/control/control_plane.h"
#include "inca/control/offload_loop.h"

namespace inca::control {

struct ControllerServiceOptions {
  std::vector<std::string> switches;  // "host:port" of each switch's control API
  std::string token;                  // bearer token, if the switches need one
  OffloadLoopOptions loop;            // loop.name is reported to the switches
  int rpc_timeout_ms = 1000;
  absl::Status Validate() const;
};

struct SwitchTickResult {
  std::string target;
  absl::Status status;
  OffloadPolicy policy;  // valid when status is OK
  bool changed = false;  // a group's range or the threshold differs from the last tick
};

class ControllerService {
 public:
  // InvalidArgument for bad options (no switch, duplicate target, bad
  // controller name or parameters).
  static absl::StatusOr<std::unique_ptr<ControllerService>> Create(
      const ControllerServiceOptions& options);

  // One evaluation of every switch at `now`.
  std::vector<SwitchTickResult> Tick(dp::TimeNs now);

 private:
  struct Managed {
    std::string target;
    std::unique_ptr<ControlClient> plane;
    std::unique_ptr<OffloadLoop> loop;
    OffloadPolicy last;
  };
  explicit ControllerService(const ControllerServiceOptions& options) : options_(options) {}
  ControllerServiceOptions options_;
  std::vector<Managed> switches_;
};

}  // namespace inca::control
