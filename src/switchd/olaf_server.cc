#include "switchd/olaf_server.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "membership/group_manager.h"
#include "util/spdlog_event_log.h"

namespace inca::switchd {

namespace {
constexpr dp::PortId kPsPort = 0;
}  // namespace

absl::Status OlafServerConfig::Validate() const {
  if (ps.empty()) {
    return absl::InvalidArgumentError(
        "the OLAF switch needs its parameter server: give --ps HOST:PORT");
  }
  if (auto e = net::Endpoint::Parse(ps); !e.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("ps: ", e.status().message()));
  }
  if (program.ps_port != kPsPort) {
    return absl::InvalidArgumentError("ps_port must be 0 in inca-switchd");
  }
  if (auto m = net::ParseIoMode(io); !m.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("io: ", m.status().message()));
  }
  if (batch_size < 1 || batch_size > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size ", batch_size, " not in 1..1024"));
  }
  if (lease_ms < membership::kMinLeaseMs || lease_ms > membership::kMaxLeaseMs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lease_ms ", lease_ms, " not in ", membership::kMinLeaseMs, "..", membership::kMaxLeaseMs));
  }
  return program.Validate();
}

absl::StatusOr<std::unique_ptr<OlafServer>> OlafServer::Create(const OlafServerConfig& config,
                                                               const net::TimeSource& clock) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  auto listen = net::Endpoint::Resolve(config.listen);
  if (!listen.ok()) return listen.status();
  auto ps = net::Endpoint::Parse(config.ps);
  if (!ps.ok()) return ps.status();
  auto io = net::ParseIoMode(config.io);
  if (!io.ok()) return io.status();
  auto program = olaf::OlafSwitch::Create(config.program);
  if (!program.ok()) return program.status();
  for (const auto& [port, cluster] : config.clusters) {
    if (absl::Status s = (*program)->cluster_table().Set(port, cluster); !s.ok()) return s;
  }
  auto host =
      ProgramHost::Create(ProgramHostOptions{.listen = *listen,
                                             .socket_buffer_bytes = config.socket_buffer_bytes,
                                             .io = *io,
                                             .batch_size = config.batch_size},
                          clock);
  if (!host.ok()) return host.status();
  std::unique_ptr<OlafServer> server(
      new OlafServer(config, std::move(*program), std::move(*host), *ps, &clock));
  if (absl::Status s = server->host_->ports().AddStatic(kPsPort, *ps); !s.ok()) return s;
  server->Publish(server->Now());
  return server;
}

OlafServer::OlafServer(const OlafServerConfig& config, std::unique_ptr<olaf::OlafSwitch> program,
                       std::unique_ptr<ProgramHost> host, net::Endpoint ps,
                       const net::TimeSource* clock)
    : config_(config),
      clock_(clock),
      program_(std::move(program)),
      host_(std::move(host)),
      ps_(ps),
      dispatcher_(program_.get(), &host_->ports(),
                  OlafDispatcherOptions{.local = host_->socket().local,
                                        .lease = dp::TimeNs{config.lease_ms} * dp::kNsPerMs,
                                        .log = &ProcessEventLog()}) {}

OlafServer::~OlafServer() = default;

void OlafServer::Stop() noexcept {
  host_->Stop();
}

counters::OlafServerCounters OlafServer::counters() const {
  absl::MutexLock lock(&snapshot_mu_);
  return snapshot_;
}

void OlafServer::Publish(dp::TimeNs now) {
  static_cast<counters::HostCounters&>(live_) = host_->counters();
  live_.ports_bound = host_->ports().size();
  live_.program = program_->counters();
  live_.olaf = program_->totals();
  live_.queue = program_->queue_state(now);
  live_.lease_ms = config_.lease_ms;
  live_.ports_exhausted = dispatcher_.counters().ports_exhausted;
  live_.peers_expired = dispatcher_.counters().peers_expired;
  live_.peers_evicted = dispatcher_.counters().peers_evicted;
  absl::MutexLock lock(&snapshot_mu_);
  snapshot_ = live_;
}

void OlafServer::OnDatagram(const ProgramHost::Datagram& d, dp::TimeNs now) {
  dispatcher_.OnDatagram(d.data, d.source, now, host_->sink());
}

absl::Status OlafServer::Run() {
  if (!tasks_.Start()) return absl::FailedPreconditionError("OlafServer already running");
  spdlog::info(
      "event=olaf_switch_started listen={} ps={} policy={} depth={} delta_t_ms={} tau_ms={} "
      "egress_rate_bps={} {}",
      host_->socket().local.ToString(), ps_.ToString(), program_->name(), config_.program.depth,
      static_cast<double>(config_.program.delta_t_ns) / 1e6,
      static_cast<double>(config_.program.tau_ns) / 1e6, config_.program.egress_rate_bps,
      host_->socket().Describe());
  const absl::Status status = host_->Run(*this);
  Publish(Now());
  spdlog::info("event=olaf_switch_stopped {}", counters().ToJson());
  tasks_.Finish([this] { return MakeControl(); });
  return status;
}

dp::TimeNs OlafServer::NextWakeNs() const {
  const dp::TimeNs wake = program_->NextWakeNs();
  return wake == olaf::OlafSwitch::kIdle ? ProgramHost::kNoWake : wake;
}

void OlafServer::OnTick(dp::TimeNs now) {
  program_->Advance(now, host_->sink());
  host_->Flush();
  RunTasks();
  dispatcher_.Expire(now);
  Publish(now);
}

void OlafServer::RunTasks() {
  tasks_.RunPending([this] { return MakeControl(); });
}

void OlafServer::Execute(const std::function<void(Control&)>& fn) {
  tasks_.Execute(
      fn, [this] { return MakeControl(); }, [this] { host_->Wake(); });
}

}  // namespace inca::switchd
