// SwitchControl: the ControlPlane of one CAIS switch: an inca-switchd
// process, where every call runs on the switch thread through
// SwitchServer::Execute, so it is safe while traffic flows; or an inca-sim
// switch (CaisSwitchNode), at the simulated time. Both are ControlTargets.
//
// With --threads N the process has N shards (switchd/shards.h), each a
// SwitchServer with its own thread, socket, reducer and groups. Changes
// (rules, ports, groups, config, offload policy) go to every shard, in
// shard order, and the first error is returned; reads of tables (rules,
// ports, groups, config) show shard 0's, which every host joins first;
// GetStats sums all shards (control::MergeShards) and lists each.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "inca/control/control_plane.h"
#include "switchd/control_target.h"

namespace inca::switchd {

// What the control API reports of a JOIN-formed group, its measured
// operation times included (the offload controller's input).
control::GroupInfo GroupInfoOf(const membership::GroupManager& groups,
                               const membership::GroupState& st, dp::TimeNs now);
// An offload controller's decision for one group, applied to the reducer.
void ApplyOffload(const control::GroupOffload& g, cais::CaisReducer& reducer);

class SwitchControl final : public control::ControlPlane, public control::CaisControlPlane {
 public:
  // `target` (every shard) must outlive this object. `controller_port` is
  // reported as the read-only config key of that name.
  SwitchControl(ControlTarget* target, int controller_port);
  SwitchControl(std::vector<ControlTarget*> shards, int controller_port);

  std::string program() const override { return "cais"; }
  control::CaisControlPlane* cais() override { return this; }

  absl::Status AddRule(const cais::Rule& rule) override;
  absl::Status DeleteRule(const cais::RuleKey& key) override;
  absl::StatusOr<std::vector<cais::Rule>> DumpRules() override;
  absl::StatusOr<std::vector<control::PortInfo>> ListPorts() override;
  absl::Status RegisterPort(uint16_t port, const std::string& endpoint) override;
  absl::StatusOr<int> ReleasePort(uint16_t port) override;
  absl::StatusOr<control::GroupInfo> CreateGroup(uint8_t group_id,
                                                 const std::vector<uint16_t>& ports) override;
  absl::Status DestroyGroup(uint8_t group_id) override;
  absl::StatusOr<std::vector<control::GroupInfo>> ListGroups() override;
  absl::StatusOr<control::GroupInfo> InstallTree(const control::TreeInstall& t) override;
  absl::StatusOr<std::map<std::string, std::string>> GetConfig() override;
  absl::Status SetConfig(const std::map<std::string, std::string>& values) override;
  absl::StatusOr<control::Stats> GetStats() override;
  absl::Status Health() override;
  absl::Status SetOffloadPolicy(const control::OffloadPolicy& policy) override;
  absl::StatusOr<control::OffloadPolicy> GetOffloadPolicy() override;

  double offload_threshold() const;
  void set_controller_port(int port) { controller_port_ = port; }

 private:
  // Runs `fn` on every shard's thread in turn, or on shard 0's.
  void ForEach(const std::function<void(ControlTarget::Control&)>& fn);
  void First(const std::function<void(ControlTarget::Control&)>& fn) { shards_[0]->Execute(fn); }

  std::vector<ControlTarget*> shards_;
  int controller_port_;
  mutable std::mutex mu_;
  double offload_threshold_ = 0.2;                           // the write-up's default (3.3)
  std::map<uint8_t, std::vector<uint16_t>> control_groups_;  // created here
  control::OffloadPolicy policy_;                            // as last applied
};

}  // namespace inca::switchd
