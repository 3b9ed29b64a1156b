#include "switchd/switch_server.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "inca/wire/cais.h"
#include "inca/wire/mgmt.h"
#include "switchd/string_compat.h"

namespace inca::switchd {

// Hands the reducer's output to SwitchServer::Egress (loss injection, then
// the host).
class SwitchServer::Sink final : public dp::PacketSink {
 public:
  explicit Sink(SwitchServer* server) : server_(server) {}
  void Emit(dp::PortId egress, std::span<const uint8_t> packet) override {
    server_->Egress(egress, packet, {}, 0);
  }
  void EmitGather(dp::PortId egress, std::span<const uint8_t> head,
                  std::span<const uint8_t> payload, uint64_t share) override {
    server_->Egress(egress, head, payload, share);
  }

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
      groups_(&host_->ports(), &reducer_->rules(), seq_start,
              dp::TimeNs{config.lease_ms} * dp::kNsPerMs),
      sink_(std::make_unique<Sink>(this)),
      loss_rng_(config.loss_seed) {}

SwitchServer::~SwitchServer() = default;

absl::Status SwitchServer::AddStaticPort(dp::PortId port, const net::Endpoint& endpoint) {
  if (absl::Status s = host_->ports().AddStatic(port, endpoint); !s.ok()) return s;
  spdlog::info("event=static_port port={} endpoint={}", port, endpoint.ToString());
  return absl::OkStatus();
}

absl::Status SwitchServer::AddStaticRule(const cais::Rule& rule) {
  if (absl::Status s = groups_.AddStaticRule(rule); !s.ok()) return s;
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

bool SwitchServer::Lose(double p) {
  if (p <= 0) return false;
  if (p >= 1) return true;
  // 53 random bits -> [0, 1): the same sequence for a seed on every platform.
  return static_cast<double>(loss_rng_() >> 11) * 0x1.0p-53 < p;
}

void SwitchServer::Stop() noexcept {
  host_->Stop();
}

SwitchCounters SwitchServer::counters() const {
  absl::MutexLock lock(&snapshot_mu_);
  return snapshot_;
}

void SwitchServer::Publish() {
  static_cast<HostCounters&>(live_) = host_->counters();
  live_.ports_bound = host_->ports().size();
  live_.reducer = reducer_->counters();
  live_.cais = reducer_->totals();
  live_.sram = reducer_->sram();
  live_.groups_formed = groups_.groups_formed();
  live_.groups_forming = groups_.groups_forming();
  live_.groups_expired = groups_.groups_expired();
  live_.leases_expired = groups_.leases_expired();
  live_.groups_replaced = groups_.groups_replaced();
  live_.groups_destroyed = groups_.groups_destroyed();
  live_.ports_reclaimed = groups_.ports_reclaimed();
  live_.lease_ms = static_cast<uint64_t>(groups_.lease() / dp::kNsPerMs);
  live_.mgmt_reports = groups_.reports_accepted();
  live_.mgmt_reports_ignored = groups_.reports_ignored();
  live_.mgmt_reports_contended = groups_.reports_contended();
  live_.timing_shapes = groups_.timing_shapes();
  live_.timings_inherited = groups_.timings_inherited();
  absl::MutexLock lock(&snapshot_mu_);
  snapshot_ = live_;
}

void SwitchServer::Egress(dp::PortId port, std::span<const uint8_t> head,
                          std::span<const uint8_t> payload, uint64_t share) {
  if (host_->ports().endpoint(port) != nullptr && Lose(config_.egress_loss)) {
    ++live_.injected_egress_loss;
    return;
  }
  host_->SendGather(port, head, payload, share);
}

void SwitchServer::HandleMgmt(const ProgramHost::Datagram& d, dp::TimeNs now) {
  ++live_.mgmt_rx;
  wire::MgmtMessage request;
  if (!wire::ParseMgmt(d.data, &request)) {
    ++live_.mgmt_malformed;
    return;
  }
  std::optional<wire::MgmtMessage> reply = groups_.Handle(request, d.source, now);
  if (!reply) return;
  wire::SerializeMgmt(*reply, &mgmt_buf_);
  if (host_->SendNow(d.from, d.from_len, mgmt_buf_)) {
    ++live_.mgmt_tx;
  } else {
    ++live_.mgmt_send_errors;
    spdlog::warn("event=mgmt_send_error endpoint={} error=\"{}\"", d.source.ToString(),
                 std::strerror(errno));
  }
}

void SwitchServer::OnDatagram(const ProgramHost::Datagram& d, dp::TimeNs now) {
  if (wire::IsMgmtDatagram(d.data)) {
    HandleMgmt(d, now);
    return;
  }
  const std::optional<dp::PortId> port = host_->ports().Lookup(d.source);
  if (!port) {
    ++live_.unknown_sender;
    return;
  }
  groups_.SeenOnPort(*port, now);
  if (Lose(config_.ingress_loss)) {
    ++live_.injected_ingress_loss;
    return;
  }
  reducer_->Process(d.data, *port, now, *sink_);
}

void SwitchServer::OnTick(dp::TimeNs now) {
  reducer_->Advance(now, *sink_);
  groups_.Expire(now);
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
