#include "switchd/switch_server.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "inca/wire/cais.h"
#include "inca/wire/mgmt.h"
#include "util/spdlog_event_log.h"

namespace inca::switchd {

// The dispatcher's output, onto the socket: data through the port table
// (ProgramHost::SendGather), a management reply to its request's source.
class SwitchServer::Output final : public CaisDispatcher::Output {
 public:
  explicit Output(SwitchServer* server) : server_(server) {}
  void ToPort(dp::PortId port, std::span<const uint8_t> head, std::span<const uint8_t> payload,
              uint64_t share) override {
    server_->host_->SendGather(port, head, payload, share);
  }
  void Reply(std::span<const uint8_t> mgmt) override {
    if (request_ != nullptr && server_->host_->SendNow(request_->from, request_->from_len, mgmt)) {
      ++server_->live_.mgmt_tx;
      return;
    }
    ++server_->live_.mgmt_send_errors;
    spdlog::warn("event=mgmt_send_error endpoint={} error=\"{}\"",
                 request_ != nullptr ? request_->source.ToString() : std::string("?"),
                 std::strerror(errno));
  }
  const ProgramHost::Datagram* request_ = nullptr;  // the datagram being handled

 private:
  SwitchServer* server_;
};

absl::StatusOr<std::unique_ptr<SwitchServer>> SwitchServer::Create(const SwitchdConfig& config,
                                                                   const net::TimeSource& clock) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  auto listen = net::Endpoint::Resolve(config.listen);
  if (!listen.ok()) return listen.status();
  auto reducer = cais::CaisReducer::Create(config.cais);
  if (!reducer.ok()) return reducer.status();
  auto io = net::ParseIoMode(config.io);  // validated above
  if (!io.ok()) return io.status();
  auto host =
      ProgramHost::Create(ProgramHostOptions{.listen = *listen,
                                             .socket_buffer_bytes = config.socket_buffer_bytes,
                                             .io = *io,
                                             .batch_size = config.batch_size,
                                             .max_packet_bytes = wire::kCaisHeaderBytes +
                                                                 config.cais.max_payload_bytes},
                          clock);
  if (!host.ok()) return host.status();
  const uint32_t seq_start = static_cast<uint32_t>(std::random_device{}());
  std::unique_ptr<SwitchServer> server(
      new SwitchServer(config, std::move(*reducer), std::move(*host), seq_start, &clock));
  for (const StaticPort& p : config.ports) {
    auto ep = net::Endpoint::Parse(p.endpoint);  // validated above
    if (!ep.ok()) return ep.status();
    if (absl::Status s = server->AddStaticPort(p.port, *ep); !s.ok()) return s;
  }
  for (const cais::Rule& r : config.rules) {
    if (absl::Status s = server->AddStaticRule(r); !s.ok()) return s;
  }
  server->Publish();
  return server;
}

SwitchServer::SwitchServer(const SwitchdConfig& config, std::unique_ptr<cais::CaisReducer> reducer,
                           std::unique_ptr<ProgramHost> host, uint32_t seq_start,
                           const net::TimeSource* clock)
    : config_(config),
      clock_(clock),
      reducer_(std::move(reducer)),
      host_(std::move(host)),
      dispatcher_(std::make_unique<CaisDispatcher>(
          reducer_.get(), &host_->ports(),
          DispatcherOptions{.seq_start = seq_start,
                            .lease = dp::TimeNs{config.lease_ms} * dp::kNsPerMs,
                            .ingress_loss = config.ingress_loss,
                            .egress_loss = config.egress_loss,
                            .loss_seed = config.loss_seed,
                            .log = &ProcessEventLog()})),
      output_(std::make_unique<Output>(this)) {}

SwitchServer::~SwitchServer() = default;

absl::Status SwitchServer::AddStaticPort(dp::PortId port, const net::Endpoint& endpoint) {
  if (absl::Status s = host_->ports().AddStatic(port, endpoint); !s.ok()) return s;
  spdlog::info("event=static_port port={} endpoint={}", port, endpoint.ToString());
  return absl::OkStatus();
}

absl::Status SwitchServer::AddStaticRule(const cais::Rule& rule) {
  if (absl::Status s = dispatcher_->groups().AddStaticRule(rule); !s.ok()) return s;
  spdlog::info("event=static_rule key=\"{}\" inputs={} outputs={} op={}", rule.key.ToString(),
               rule.input_ports.ToString(), rule.output_ports.ToString(),
               rule.op ? wire::ToString(*rule.op) : "any");
  rule.output_ports.ForEach([&](dp::PortId p) {
    if (host_->ports().endpoint(p) == nullptr) {
      spdlog::warn("event=static_rule_unmapped_port key=\"{}\" port={}", rule.key.ToString(), p);
    }
  });
  return absl::OkStatus();
}

void SwitchServer::Stop() noexcept {
  host_->Stop();
}

counters::SwitchCounters SwitchServer::counters() const {
  absl::MutexLock lock(&snapshot_mu_);
  return snapshot_;
}

void SwitchServer::Publish() {
  static_cast<counters::HostCounters&>(live_) = host_->counters();
  live_.ports_bound = host_->ports().size();
  FillDispatcherCounters(*dispatcher_, &live_);
  absl::MutexLock lock(&snapshot_mu_);
  snapshot_ = live_;
}

void SwitchServer::OnDatagram(const ProgramHost::Datagram& d, dp::TimeNs now) {
  output_->request_ = &d;
  dispatcher_->OnDatagram(d.data, d.source, now, *output_);
  output_->request_ = nullptr;
}

void SwitchServer::OnTick(dp::TimeNs now) {
  dispatcher_->OnTick(now, *output_);
  host_->Flush();
  RunTasks();
  Publish();
  const dp::TimeNs stats_every = static_cast<dp::TimeNs>(config_.stats_interval_s * 1e9);
  if (stats_every > 0 && now >= next_stats_) {
    next_stats_ = now + stats_every;
    spdlog::info("event=stats {}", counters().ToLogString());
  }
}

absl::Status SwitchServer::Run() {
  // Waits for a control task running on a caller's thread to finish.
  if (!tasks_.Start()) return absl::FailedPreconditionError("SwitchServer already running");
  const net::UdpSocket& socket = host_->socket();
  spdlog::info(
      "event=switch_started listen={} {} batch_size={} "
      "sram_bytes={} max_payload_bytes={} max_pending_chunks={} timeout_ms={} "
      "result_hold_ms={} lease_ms={} deterministic={} ingress_loss={} egress_loss={}",
      socket.local.ToString(), socket.Describe(), config_.batch_size, config_.cais.sram_bytes,
      config_.cais.max_payload_bytes, config_.cais.max_pending_chunks,
      static_cast<double>(config_.cais.timeout_ns) / 1e6,
      static_cast<double>(config_.cais.result_hold_ns) / 1e6, config_.lease_ms,
      config_.cais.deterministic, config_.ingress_loss, config_.egress_loss);
  if (socket.buffer_capped()) {
    spdlog::warn(
        "event=socket_buffer_capped requested={} rcvbuf_bytes={} sndbuf_bytes={} "
        "hint=\"raise net.core.rmem_max/wmem_max or run with CAP_NET_ADMIN\"",
        config_.socket_buffer_bytes, socket.rcvbuf_bytes, socket.sndbuf_bytes);
  }
  next_stats_ = Now() + static_cast<dp::TimeNs>(config_.stats_interval_s * 1e9);
  const absl::Status status = host_->Run(*this);
  Publish();
  spdlog::info("event=switch_stopped {}", counters().ToLogString());
  tasks_.Finish([this] { return MakeControl(); });  // what was queued before the loop ended
  return status;
}

void SwitchServer::RunTasks() {
  tasks_.RunPending([this] { return MakeControl(); });
}

void SwitchServer::Execute(const std::function<void(Control&)>& fn) {
  tasks_.Execute(
      fn, [this] { return MakeControl(); }, [this] { host_->Wake(); });
}

}  // namespace inca::switchd
