// OlafControl: the ControlPlane of an inca-switchd running the OLAF (or
// FIFO) program. Cluster table and statistics calls run on the switch
// thread (OlafServer::Execute); CAIS calls answer FailedPrecondition.
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
#include "switchd/olaf_gate.h"
#include "switchd/olaf_server.h"

namespace inca::switchd {

class OlafControl final : public control::ControlPlane {
 public:
  explicit OlafControl(OlafServer* server) : server_(server) {}

  absl::Status AddRule(const cais::Rule&) override { return NotCais(); }
  absl::Status DeleteRule(const cais::RuleKey&) override { return NotCais(); }
  absl::StatusOr<std::vector<cais::Rule>> DumpRules() override { return NotCais(); }
  absl::StatusOr<std::vector<control::PortInfo>> ListPorts() override;
  absl::Status RegisterPort(uint16_t, const std::string&) override { return NotCais(); }
  absl::StatusOr<int> ReleasePort(uint16_t port) override;
  absl::StatusOr<control::GroupInfo> CreateGroup(uint8_t, const std::vector<uint16_t>&) override {
    return NotCais();
  }
  absl::Status DestroyGroup(uint8_t) override { return NotCais(); }
  absl::StatusOr<std::vector<control::GroupInfo>> ListGroups() override { return NotCais(); }
  absl::StatusOr<std::map<std::string, std::string>> GetConfig() override;
  absl::Status SetConfig(const std::map<std::string, std::string>& values) override;
  absl::StatusOr<control::Stats> GetStats() override;
  absl::Status Health() override { return absl::OkStatus(); }
  absl::Status SetOffloadPolicy(const control::OffloadPolicy&) override { return NotCais(); }
  absl::StatusOr<control::OffloadPolicy> GetOffloadPolicy() override { return NotCais(); }

  absl::Status SetClusterMapping(uint16_t src_port, uint16_t cluster_id) override;
  absl::Status DeleteClusterMapping(uint16_t src_port) override;
  absl::StatusOr<std::vector<control::ClusterMapping>> ListClusterMappings() override;
  absl::StatusOr<control::OlafStats> GetOlafStats() override;

 private:
  absl::Status NotCais() const;
  OlafObserved Observe();  // on the switch thread

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
