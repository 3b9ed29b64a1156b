#include "control/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "control/convert.h"
#include "inca/control/v1/control.grpc.pb.h"
#include "net/endpoint.h"

namespace inca::control {

namespace {

// The most of a message a client gets back. An error travels in gRPC's
// trailing metadata, which a client refuses beyond 8 KiB: a configure key
// of 8 KB echoed back reached the client as "initial metadata size exceeds
// limit" instead of the error.
constexpr size_t kMaxErrorBytes = 1024;

// Messages quote what the client sent (an endpoint, a key): control
// characters are escaped so that every error stays one line, and a message
// longer than kMaxErrorBytes is cut, saying so.
grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  std::string msg;
  msg.reserve(std::min(s.message().size(), kMaxErrorBytes) + 64);
  for (const char c : s.message()) {
    if (msg.size() >= kMaxErrorBytes) {
      absl::StrAppend(&msg, "... (cut: the message was ", s.message().size(), " bytes)");
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      absl::StrAppend(&msg, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      msg.push_back(c);
    }
  }
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::move(msg));
}

// At most this many StreamStats at once: each holds one of the server's
// handler threads (ControlServerOptions::max_threads) for its lifetime.
constexpr int kMaxStatsStreams = 4;

class Service final : public pb::Control::Service {
 public:
  Service(ControlPlane* plane, std::string token) : plane_(plane), token_(std::move(token)) {}

  grpc::Status AddRule(grpc::ServerContext* ctx, const pb::AddRuleRequest* req,
                       pb::AddRuleResponse*) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    CaisControlPlane* cais = plane_->cais();
    if (cais == nullptr) return NotServed("cais");
    cais::Rule rule;
    if (auto s = FromProto(req->rule(), &rule); !s.ok()) return ToGrpc(s);
    return ToGrpc(cais->AddRule(rule));
  }
  grpc::Status DeleteRule(grpc::ServerContext* ctx, const pb::DeleteRuleRequest* req,
                          pb::DeleteRuleResponse*) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    CaisControlPlane* cais = plane_->cais();
    if (cais == nullptr) return NotServed("cais");
    cais::RuleKey key;
    if (auto s = FromProto(req->key(), &key); !s.ok()) return ToGrpc(s);
    return ToGrpc(cais->DeleteRule(key));
  }
  grpc::Status DumpRules(grpc::ServerContext* ctx, const pb::DumpRulesRequest*,
                         pb::DumpRulesResponse* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    CaisControlPlane* cais = plane_->cais();
    if (cais == nullptr) return NotServed("cais");
    auto rules = cais->DumpRules();
    if (!rules.ok()) return ToGrpc(rules.status());
    for (const auto& r : *rules) ToProto(r, resp->add_rules());
    return grpc::Status::OK;
  }
  grpc::Status ListPorts(grpc::ServerContext* ctx, const pb::ListPortsRequest*,
                         pb::ListPortsResponse* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    auto ports = plane_->ListPorts();
    if (!ports.ok()) return ToGrpc(ports.status());
    for (const auto& p : *ports) {
      pb::Port* o = resp->add_ports();
      o->set_port(p.port);
      o->set_endpoint(p.endpoint);
      o->set_is_static(p.is_static);
    }
    return grpc::Status::OK;
  }
  grpc::Status ReleasePort(grpc::ServerContext* ctx, const pb::ReleasePortRequest* req,
                           pb::ReleasePortResponse* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    if (req->port() > 0xFFFF) {
      return ToGrpc(absl::InvalidArgumentError("port is out of range"));
    }
    auto n = plane_->ReleasePort(static_cast<uint16_t>(req->port()));
    if (!n.ok()) return ToGrpc(n.status());
    resp->set_groups_dissolved(static_cast<uint32_t>(*n));
    return grpc::Status::OK;
  }
  grpc::Status RegisterPort(grpc::ServerContext* ctx, const pb::RegisterPortRequest* req,
                            pb::RegisterPortResponse*) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    CaisControlPlane* cais = plane_->cais();
    if (cais == nullptr) return NotServed("cais");
    if (req->port() >= dp::kMaxPorts) {
      return ToGrpc(absl::InvalidArgumentError(absl::StrCat(
          "port ", req->port(), " is out of range; ports are 0..", dp::kMaxPorts - 1)));
    }
    return ToGrpc(cais->RegisterPort(static_cast<uint16_t>(req->port()), req->endpoint()));
  }
  grpc::Status CreateGroup(grpc::ServerContext* ctx, const pb::CreateGroupRequest* req,
                           pb::CreateGroupResponse* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    CaisControlPlane* cais = plane_->cais();
    if (cais == nullptr) return NotServed("cais");
    if (req->group_id() > 255) {
      return ToGrpc(absl::InvalidArgumentError(
          absl::StrCat("group_id ", req->group_id(), " is out of range; groups are 0..255")));
    }
    std::vector<uint16_t> ports;
    for (uint32_t p : req->ports()) {
      if (p >= dp::kMaxPorts) {
        return ToGrpc(absl::InvalidArgumentError(
            absl::StrCat("port ", p, " is out of range; ports are 0..", dp::kMaxPorts - 1)));
      }
      ports.push_back(static_cast<uint16_t>(p));
    }
    auto g = cais->CreateGroup(static_cast<uint8_t>(req->group_id()), ports);
    if (!g.ok()) return ToGrpc(g.status());
    ToProto(*g, resp->mutable_group());
    return grpc::Status::OK;
  }
  grpc::Status DestroyGroup(grpc::ServerContext* ctx, const pb::DestroyGroupRequest* req,
                            pb::DestroyGroupResponse*) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    CaisControlPlane* cais = plane_->cais();
    if (cais == nullptr) return NotServed("cais");
    if (req->group_id() > 255) {
      return ToGrpc(absl::InvalidArgumentError("group_id is out of range; groups are 0..255"));
    }
    return ToGrpc(cais->DestroyGroup(static_cast<uint8_t>(req->group_id())));
  }
  grpc::Status ListGroups(grpc::ServerContext* ctx, const pb::ListGroupsRequest*,
                          pb::ListGroupsResponse* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    CaisControlPlane* cais = plane_->cais();
    if (cais == nullptr) return NotServed("cais");
    auto groups = cais->ListGroups();
    if (!groups.ok()) return ToGrpc(groups.status());
    for (const auto& g : *groups) ToProto(g, resp->add_groups());
    return grpc::Status::OK;
  }
  grpc::Status InstallTree(grpc::ServerContext* ctx, const pb::InstallTreeRequest* req,
                           pb::InstallTreeResponse* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    CaisControlPlane* cais = plane_->cais();
    if (cais == nullptr) return NotServed("cais");
    TreeInstall install;
    if (absl::Status s = FromProto(*req, &install); !s.ok()) return ToGrpc(s);
    auto g = cais->InstallTree(install);
    if (!g.ok()) return ToGrpc(g.status());
    ToProto(*g, resp->mutable_group());
    return grpc::Status::OK;
  }
  grpc::Status GetConfig(grpc::ServerContext* ctx, const pb::GetConfigRequest*,
                         pb::GetConfigResponse* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    auto c = plane_->GetConfig();
    if (!c.ok()) return ToGrpc(c.status());
    for (const auto& [k, v] : *c) (*resp->mutable_values())[k] = v;
    return grpc::Status::OK;
  }
  grpc::Status SetConfig(grpc::ServerContext* ctx, const pb::SetConfigRequest* req,
                         pb::SetConfigResponse* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    std::map<std::string, std::string> values(req->values().begin(), req->values().end());
    if (auto s = plane_->SetConfig(values); !s.ok()) return ToGrpc(s);
    auto c = plane_->GetConfig();
    if (!c.ok()) return ToGrpc(c.status());
    for (const auto& [k, v] : *c) (*resp->mutable_values())[k] = v;
    return grpc::Status::OK;
  }
  grpc::Status GetStats(grpc::ServerContext* ctx, const pb::GetStatsRequest*,
                        pb::Stats* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    auto s = plane_->GetStats();
    if (!s.ok()) return ToGrpc(s.status());
    ToProto(*s, resp);
    return grpc::Status::OK;
  }
  grpc::Status StreamStats(grpc::ServerContext* ctx, const pb::StreamStatsRequest* req,
                           grpc::ServerWriter<pb::Stats>* writer) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    if (req->interval_ms() > 3'600'000) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("interval_ms ", req->interval_ms(), " is above an hour (3600000)"));
    }
    if (streams_.fetch_add(1) >= kMaxStatsStreams) {
      streams_.fetch_sub(1);
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("at most ", kMaxStatsStreams,
                                       " StreamStats at once; close one or poll GetStats"));
    }
    struct Release {
      std::atomic<int>* n;
      ~Release() { n->fetch_sub(1); }
    } release{&streams_};
    const auto interval = std::chrono::milliseconds(
        req->interval_ms() == 0 ? 1000 : std::max<uint32_t>(req->interval_ms(), 10));
    for (uint32_t n = 0; req->count() == 0 || n < req->count(); ++n) {
      if (ctx->IsCancelled()) break;
      auto s = plane_->GetStats();
      if (!s.ok()) return ToGrpc(s.status());
      pb::Stats msg;
      ToProto(*s, &msg);
      if (!writer->Write(msg)) break;
      if (req->count() != 0 && n + 1 == req->count()) break;
      // Paces the stream; a cancelled or expired call ends within 20 ms.
      const auto next = std::chrono::steady_clock::now() + interval;
      while (!ctx->IsCancelled() && std::chrono::steady_clock::now() < next) {
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            std::chrono::milliseconds(20), next - std::chrono::steady_clock::now()));
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status SetOffloadPolicy(grpc::ServerContext* ctx, const pb::OffloadPolicy* req,
                                pb::SetOffloadPolicyResponse*) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    CaisControlPlane* cais = plane_->cais();
    if (cais == nullptr) return NotServed("cais");
    OffloadPolicy p;
    if (auto s = FromProto(*req, &p); !s.ok()) return ToGrpc(s);
    return ToGrpc(cais->SetOffloadPolicy(p));
  }
  grpc::Status GetOffloadPolicy(grpc::ServerContext* ctx, const pb::GetOffloadPolicyRequest*,
                                pb::OffloadPolicy* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    CaisControlPlane* cais = plane_->cais();
    if (cais == nullptr) return NotServed("cais");
    auto p = cais->GetOffloadPolicy();
    if (!p.ok()) return ToGrpc(p.status());
    ToProto(*p, resp);
    return grpc::Status::OK;
  }
  grpc::Status SetClusterMapping(grpc::ServerContext* ctx, const pb::ClusterMapping* req,
                                 pb::SetClusterMappingResponse*) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    OlafControlPlane* olaf = plane_->olaf();
    if (olaf == nullptr) return NotServed("olaf");
    if (req->src_port() > 65535 || req->cluster_id() > 65535) {
      return ToGrpc(
          absl::InvalidArgumentError(absl::StrCat("src_port ", req->src_port(), " and cluster_id ",
                                                  req->cluster_id(), " must be in [0, 65535]")));
    }
    return ToGrpc(olaf->SetClusterMapping(static_cast<uint16_t>(req->src_port()),
                                          static_cast<uint16_t>(req->cluster_id())));
  }
  grpc::Status DeleteClusterMapping(grpc::ServerContext* ctx,
                                    const pb::DeleteClusterMappingRequest* req,
                                    pb::DeleteClusterMappingResponse*) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    OlafControlPlane* olaf = plane_->olaf();
    if (olaf == nullptr) return NotServed("olaf");
    if (req->src_port() > 65535) {
      return ToGrpc(absl::InvalidArgumentError(
          absl::StrCat("src_port ", req->src_port(), " must be in [0, 65535]")));
    }
    return ToGrpc(olaf->DeleteClusterMapping(static_cast<uint16_t>(req->src_port())));
  }
  grpc::Status ListClusterMappings(grpc::ServerContext* ctx, const pb::ListClusterMappingsRequest*,
                                   pb::ListClusterMappingsResponse* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    OlafControlPlane* olaf = plane_->olaf();
    if (olaf == nullptr) return NotServed("olaf");
    auto m = olaf->ListClusterMappings();
    if (!m.ok()) return ToGrpc(m.status());
    for (const ClusterMapping& c : *m) {
      pb::ClusterMapping* o = resp->add_mappings();
      o->set_src_port(c.src_port);
      o->set_cluster_id(c.cluster_id);
    }
    return grpc::Status::OK;
  }
  grpc::Status GetOlafStats(grpc::ServerContext* ctx, const pb::GetOlafStatsRequest*,
                            pb::OlafStats* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    OlafControlPlane* olaf = plane_->olaf();
    if (olaf == nullptr) return NotServed("olaf");
    auto s = olaf->GetOlafStats();
    if (!s.ok()) return ToGrpc(s.status());
    ToProto(*s, resp);
    return grpc::Status::OK;
  }
  grpc::Status Health(grpc::ServerContext* ctx, const pb::HealthRequest*,
                      pb::HealthResponse* resp) override {
    if (auto a = Authorize(ctx); !a.ok()) return a;
    if (auto s = plane_->Health(); !s.ok()) return ToGrpc(s);
    resp->set_status("serving");
    resp->set_version("inca 0.1.0, control API v1");
    return grpc::Status::OK;
  }

 private:
  // The FailedPrecondition for a call of a program the switch does not run.
  grpc::Status NotServed(std::string_view needed) const {
    return ToGrpc(WrongProgram(plane_->program(), needed));
  }
  grpc::Status Authorize(grpc::ServerContext* ctx) const {
    if (token_.empty()) return grpc::Status::OK;
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    const std::string want = "Bearer " + token_;
    if (it == md.end()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this switch requires a token: pass --token (or INCA_TOKEN)");
    }
    if (std::string(it->second.data(), it->second.size()) != want) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "token rejected: it is not the one this switch was started with "
                          "(--control-token or INCA_TOKEN)");
    }
    return grpc::Status::OK;
  }

  ControlPlane* plane_;
  std::string token_;
  std::atomic<int> streams_{0};
};

}  // namespace

struct ControlServer::Impl {
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

ControlServer::ControlServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ControlServer::~ControlServer() {
  if (impl_ && impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
}

int ControlServer::port() const {
  return impl_->port;
}

namespace {

// Whether a TCP socket already listens on `listen` (a numeric HOST:PORT):
// checked before gRPC tries, so that a conflict gets one clear line rather
// than gRPC's multi-line internal log first. Names and port 0 are left to
// gRPC, as is the (rare) race with a process binding in between. The probe
// sets SO_REUSEADDR, as gRPC's own listener does: without it the sockets a
// killed or stopped switch leaves behind (FIN-WAIT-2 while a control client
// keeps its end open, then TIME-WAIT) made the port look taken for a minute
// after a restart, though gRPC could bind it; with it only a listener
// counts.
bool TcpPortTaken(const std::string& listen) {
  auto ep = net::Endpoint::Parse(listen);
  if (!ep.ok() || ep->port() == 0) return false;
  const int family = ep->is_v6() ? AF_INET6 : AF_INET;
  sockaddr_storage ss{};
  const socklen_t len = ep->ToSockaddr(family, &ss);
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || len == 0) {
    if (fd >= 0) close(fd);
    return false;
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const bool taken =
      bind(fd, reinterpret_cast<const sockaddr*>(&ss), len) != 0 && errno == EADDRINUSE;
  close(fd);
  return taken;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ControlServer>> ControlServer::Start(
    const ControlServerOptions& options, ControlPlane* plane) {
  const auto in_use = [&] {
    return absl::UnavailableError(
        absl::StrCat("cannot serve the control API on ", options.listen,
                     " (port in use?); choose another with --control-listen HOST:PORT "
                     "(the CAIS write-up's controller_port)"));
  };
  if (absl::Status s = ValidateControlToken(options.token, "--control-token"); !s.ok()) return s;
  if (TcpPortTaken(options.listen)) return in_use();
  auto impl = std::make_unique<Impl>();
  impl->service = std::make_unique<Service>(plane, options.token);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterService(impl->service.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  grpc::ResourceQuota quota("inca-control");
  quota.SetMaxThreads(options.max_threads);
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, options.idle_timeout_ms);
  // gRPC enables SO_REUSEPORT by default, which would let a second switch
  // silently share the port (the write-up's 5.3 port conflict): refuse it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) return in_use();
  return std::unique_ptr<ControlServer>(new ControlServer(std::move(impl)));
}

}  // namespace inca::control
