// OlafControl: the ControlPlane of an inca-switchd running the OLAF (or
// FIFO) program: the common calls and the OLAF facet (no CAIS facet: the
// gRPC service answers CAIS calls FailedPrecondition). Cluster table and
// statistics calls run on the switch thread (OlafServer::Execute).
//
// SetConfig changes delta_t_ms, tau_ms and depth at run time (depth up to
// the one the switch started with). A change of ΔT, depth or
// verify_epsilon on the OLAF program is first put to olaf-verify's model
// (olaf_gate.h) with the clusters' observed update periods, on the calling
// thread: one the model proves cannot be ε-fair is refused
// (FailedPrecondition naming the unsat core's constraint families) unless
// the call also sets override=true, which applies it and logs a warning.
// GetConfig's last_change says what the last change was.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/grpc_server.h"
#include "inca/control/control_plane.h"
#include "olafverify/olaf_gate.h"
#include "switchd/olaf_server.h"

namespace inca::switchd {

class OlafControl final : public control::ControlPlane, public control::OlafControlPlane {
 public:
  explicit OlafControl(OlafServer* server) : server_(server) {}

  // "olaf" or "fifo", the queue policy it runs.
  std::string program() const override;
  control::OlafControlPlane* olaf() override { return this; }

  absl::StatusOr<std::vector<control::PortInfo>> ListPorts() override;
  absl::StatusOr<int> ReleasePort(uint16_t port) override;
  absl::StatusOr<std::map<std::string, std::string>> GetConfig() override;
  absl::Status SetConfig(const std::map<std::string, std::string>& values) override;
  absl::StatusOr<control::Stats> GetStats() override;
  absl::Status Health() override { return absl::OkStatus(); }

  absl::Status SetClusterMapping(uint16_t src_port, uint16_t cluster_id) override;
  absl::Status DeleteClusterMapping(uint16_t src_port) override;
  absl::StatusOr<std::vector<control::ClusterMapping>> ListClusterMappings() override;
  absl::StatusOr<control::OlafStats> GetOlafStats() override;

 private:
  olafverify::OlafObserved Observe();  // on the switch thread

  OlafServer* server_;
  std::mutex mu_;  // epsilon_, last_change_
  double epsilon_ = 0.1;
  std::string last_change_ = "none";
};

struct OlafControlService {
  std::unique_ptr<OlafControl> plane;
  std::unique_ptr<control::ControlServer> server;  // null when not served
};

// Serves the control API for an OLAF switch on `listen` ("off": the plane
// only, for in-process users such as the monitor).
absl::StatusOr<OlafControlService> StartOlafControlService(OlafServer* server,
                                                           const std::string& listen,
                                                           const std::string& token);

}  // namespace inca::switchd
