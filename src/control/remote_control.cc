// ConnectControl: a ControlPlane over the gRPC control service.
#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "control/convert.h"
#include "inca/control/control_plane.h"
#include "inca/control/v1/control.grpc.pb.h"
#include "net/endpoint.h"

namespace inca::control {

namespace {

class RemoteControl final : public ControlClient {
 public:
  RemoteControl(std::string target, std::string token, int timeout_ms)
      : target_(std::move(target)),
        token_(std::move(token)),
        timeout_ms_(timeout_ms),
        stub_(pb::Control::NewStub(
            grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()))) {}

  std::string program() const override { return "remote"; }

  absl::Status AddRule(const cais::Rule& rule) override {
    pb::AddRuleRequest req;
    ToProto(rule, req.mutable_rule());
    pb::AddRuleResponse resp;
    return Call([&](grpc::ClientContext* c) { return stub_->AddRule(c, req, &resp); });
  }
  absl::Status DeleteRule(const cais::RuleKey& key) override {
    pb::DeleteRuleRequest req;
    ToProto(key, req.mutable_key());
    pb::DeleteRuleResponse resp;
    return Call([&](grpc::ClientContext* c) { return stub_->DeleteRule(c, req, &resp); });
  }
  absl::StatusOr<std::vector<cais::Rule>> DumpRules() override {
    pb::DumpRulesRequest req;
    pb::DumpRulesResponse resp;
    if (auto s = Call([&](grpc::ClientContext* c) { return stub_->DumpRules(c, req, &resp); });
        !s.ok()) {
      return s;
    }
    std::vector<cais::Rule> out;
    for (const auto& r : resp.rules()) {
      cais::Rule rule;
      if (auto s = FromProto(r, &rule); !s.ok()) return s;
      out.push_back(rule);
    }
    return out;
  }
  absl::StatusOr<std::vector<PortInfo>> ListPorts() override {
    pb::ListPortsRequest req;
    pb::ListPortsResponse resp;
    if (auto s = Call([&](grpc::ClientContext* c) { return stub_->ListPorts(c, req, &resp); });
        !s.ok()) {
      return s;
    }
    std::vector<PortInfo> out;
    for (const auto& p : resp.ports()) {
      out.push_back({static_cast<uint16_t>(p.port()), p.endpoint(), p.is_static()});
    }
    return out;
  }
  absl::StatusOr<int> ReleasePort(uint16_t port) override {
    pb::ReleasePortRequest req;
    req.set_port(port);
    pb::ReleasePortResponse resp;
    if (auto s = Call([&](grpc::ClientContext* c) { return stub_->ReleasePort(c, req, &resp); });
        !s.ok()) {
      return s;
    }
    return static_cast<int>(resp.groups_dissolved());
  }
  absl::Status RegisterPort(uint16_t port, const std::string& endpoint) override {
    pb::RegisterPortRequest req;
    req.set_port(port);
    req.set_endpoint(endpoint);
    pb::RegisterPortResponse resp;
    return Call([&](grpc::ClientContext* c) { return stub_->RegisterPort(c, req, &resp); });
  }
  absl::StatusOr<GroupInfo> CreateGroup(uint8_t group_id,
                                        const std::vector<uint16_t>& ports) override {
    pb::CreateGroupRequest req;
    req.set_group_id(group_id);
    for (uint16_t p : ports) req.add_ports(p);
    pb::CreateGroupResponse resp;
    if (auto s = Call([&](grpc::ClientContext* c) { return stub_->CreateGroup(c, req, &resp); });
        !s.ok()) {
      return s;
    }
    return FromProto(resp.group());
  }
  absl::Status DestroyGroup(uint8_t group_id) override {
    pb::DestroyGroupRequest req;
    req.set_group_id(group_id);
    pb::DestroyGroupResponse resp;
    return Call([&](grpc::ClientContext* c) { return stub_->DestroyGroup(c, req, &resp); });
  }
  absl::StatusOr<std::vector<GroupInfo>> ListGroups() override {
    pb::ListGroupsRequest req;
    pb::ListGroupsResponse resp;
    if (auto s = Call([&](grpc::ClientContext* c) { return stub_->ListGroups(c, req, &resp); });
        !s.ok()) {
      return s;
    }
    std::vector<GroupInfo> out;
    for (const auto& g : resp.groups()) out.push_back(FromProto(g));
    return out;
  }
  absl::StatusOr<GroupInfo> InstallTree(const TreeInstall& install) override {
    pb::InstallTreeRequest req;
    ToProto(install, &req);
    pb::InstallTreeResponse resp;
    if (auto s = Call([&](grpc::ClientContext* c) { return stub_->InstallTree(c, req, &resp); });
        !s.ok()) {
      return s;
    }
    return FromProto(resp.group());
  }
  absl::StatusOr<std::map<std::string, std::string>> GetConfig() override {
    pb::GetConfigRequest req;
    pb::GetConfigResponse resp;
    if (auto s = Call([&](grpc::ClientContext* c) { return stub_->GetConfig(c, req, &resp); });
        !s.ok()) {
      return s;
    }
    return std::map<std::string, std::string>(resp.values().begin(), resp.values().end());
  }
  absl::Status SetConfig(const std::map<std::string, std::string>& values) override {
    pb::SetConfigRequest req;
    for (const auto& [k, v] : values) (*req.mutable_values())[k] = v;
    pb::SetConfigResponse resp;
    return Call([&](grpc::ClientContext* c) { return stub_->SetConfig(c, req, &resp); });
  }
  absl::StatusOr<Stats> GetStats() override {
    pb::GetStatsRequest req;
    pb::Stats resp;
    if (auto s = Call([&](grpc::ClientContext* c) { return stub_->GetStats(c, req, &resp); });
        !s.ok()) {
      return s;
    }
    return FromProto(resp);
  }
  absl::Status SetOffloadPolicy(const OffloadPolicy& policy) override {
    pb::OffloadPolicy req;
    ToProto(policy, &req);
    pb::SetOffloadPolicyResponse resp;
    return Call([&](grpc::ClientContext* c) { return stub_->SetOffloadPolicy(c, req, &resp); });
  }
  absl::StatusOr<OffloadPolicy> GetOffloadPolicy() override {
    pb::GetOffloadPolicyRequest req;
    pb::OffloadPolicy resp;
    if (auto s =
            Call([&](grpc::ClientContext* c) { return stub_->GetOffloadPolicy(c, req, &resp); });
        !s.ok()) {
      return s;
    }
    OffloadPolicy out;
    if (auto s = FromProto(resp, &out); !s.ok()) return s;
    return out;
  }
  absl::Status SetClusterMapping(uint16_t src_port, uint16_t cluster_id) override {
    pb::ClusterMapping req;
    req.set_src_port(src_port);
    req.set_cluster_id(cluster_id);
    pb::SetClusterMappingResponse resp;
    return Call([&](grpc::ClientContext* c) { return stub_->SetClusterMapping(c, req, &resp); });
  }
  absl::Status DeleteClusterMapping(uint16_t src_port) override {
    pb::DeleteClusterMappingRequest req;
    req.set_src_port(src_port);
    pb::DeleteClusterMappingResponse resp;
    return Call([&](grpc::ClientContext* c) { return stub_->DeleteClusterMapping(c, req, &resp); });
  }
  absl::StatusOr<std::vector<ClusterMapping>> ListClusterMappings() override {
    pb::ListClusterMappingsRequest req;
    pb::ListClusterMappingsResponse resp;
    if (auto s =
            Call([&](grpc::ClientContext* c) { return stub_->ListClusterMappings(c, req, &resp); });
        !s.ok()) {
      return s;
    }
    std::vector<ClusterMapping> out;
    for (const auto& m : resp.mappings()) {
      out.push_back({static_cast<uint16_t>(m.src_port()), static_cast<uint16_t>(m.cluster_id())});
    }
    return out;
  }
  absl::StatusOr<OlafStats> GetOlafStats() override {
    pb::GetOlafStatsRequest req;
    pb::OlafStats resp;
    if (auto s = Call([&](grpc::ClientContext* c) { return stub_->GetOlafStats(c, req, &resp); });
        !s.ok()) {
      return s;
    }
    return FromProto(resp);
  }
  absl::Status Health() override {
    pb::HealthRequest req;
    pb::HealthResponse resp;
    return Call([&](grpc::ClientContext* c) { return stub_->Health(c, req, &resp); });
  }

 private:
  template <typename F>
  absl::Status Call(F&& f) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms_));
    if (!token_.empty()) ctx.AddMetadata("authorization", "Bearer " + token_);
    const grpc::Status s = f(&ctx);
    if (s.ok()) return absl::OkStatus();
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
        s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                          absl::StrCat("cannot reach the switch's control API at ", target_, ": ",
                                       s.error_message()));
    }
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }

  std::string target_;
  std::string token_;
  int timeout_ms_;
  std::unique_ptr<pb::Control::Stub> stub_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ControlClient>> ConnectControl(const std::string& target,
                                                              const std::string& token,
                                                              int timeout_ms) {
  auto split = net::SplitHostPort(target);
  if (!split.ok() || split->second == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device '", target, "' must be HOST:PORT with a port in 1..65535, e.g. 127.0.0.1:50051"));
  }
  if (absl::Status s = ValidateControlToken(token); !s.ok()) return s;
  return std::unique_ptr<ControlClient>(new RemoteControl(target, token, timeout_ms));
}

}  // namespace inca::control
