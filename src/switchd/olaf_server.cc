#include "switchd/olaf_server.h"

#include <poll.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "switchd/group_manager.h"
#include "switchd/string_compat.h"

namespace inca::switchd {

namespace {
constexpr size_t kRecvSlotBytes = 65536;  // any UDP datagram
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
  if (batch_size < 1 || batch_size > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size ", batch_size, " not in 1..1024"));
  }
  if (lease_ms < kMinLeaseMs || lease_ms > kMaxLeaseMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease_ms ", lease_ms, " not in ", kMinLeaseMs, "..", kMaxLeaseMs));
  }
  return program.Validate();
}

bool OlafServerCounters::Conserved() const {
  return datagrams_rx == ports_exhausted + program.rx_packets &&
         program.tx_packets == egress_unmapped + datagrams_tx + send_errors && program.Conserved();
}

std::string OlafServerCounters::ToJson() const {
  std::string s = absl::StrCat(
      "{\"datagrams_rx\":", datagrams_rx, ",\"rx_truncated\":", rx_truncated,
      ",\"ports_exhausted\":", ports_exhausted, ",\"egress_unmapped\":", egress_unmapped,
      ",\"datagrams_tx\":", datagrams_tx, ",\"send_errors\":", send_errors,
      ",\"ports_bound\":", ports_bound, ",\"peers_expired\":", peers_expired,
      ",\"peers_evicted\":", peers_evicted, ",\"lease_ms\":", lease_ms,
      ",\"program\":{\"rx_packets\":", program.rx_packets, ",\"aggregated\":", program.aggregated,
      ",\"forwarded\":", program.forwarded, ",\"dropped\":", program.dropped,
      ",\"tx_packets\":", program.tx_packets, "},\"olaf\":{\"updates_rx\":", olaf.updates_rx,
      ",\"updates_absorbed\":", olaf.updates_absorbed,
      ",\"updates_cut_through\":", olaf.updates_cut_through, ",\"updates_tx\":", olaf.updates_tx,
      ",\"acks_forwarded\":", olaf.acks_forwarded, ",\"models_rx\":", olaf.models_rx,
      ",\"model_copies_tx\":", olaf.model_copies_tx, ",\"passthrough\":", olaf.passthrough,
      ",\"dropped\":", olaf.dropped, ",\"drops\":{");
  bool first = true;
  for (size_t r = 0; r < olaf::kOlafDropReasonCount; ++r) {
    if (olaf.drops[r] == 0) continue;
    absl::StrAppend(&s, first ? "" : ",", "\"",
                    Av(olaf::ToString(static_cast<olaf::OlafDropReason>(r))), "\":", olaf.drops[r]);
    first = false;
  }
  absl::StrAppend(&s, "}},\"queue\":{\"occupancy\":", queue.occupancy, ",\"depth\":", queue.depth,
                  ",\"active_clusters\":", queue.active_clusters,
                  "},\"conserved\":", Conserved() ? "true" : "false", "}");
  return s;
}

class OlafServer::Sink final : public dp::PacketSink {
 public:
  explicit Sink(OlafServer* server) : server_(server) {}
  void Emit(dp::PortId egress, std::span<const uint8_t> packet) override {
    server_->Egress(egress, packet);
  }

 private:
  OlafServer* server_;
};

absl::StatusOr<std::unique_ptr<OlafServer>> OlafServer::Create(const OlafServerConfig& config,
                                                               const net::TimeSource& clock) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  auto listen = net::Endpoint::Resolve(config.listen);
  if (!listen.ok()) return listen.status();
  auto ps = net::Endpoint::Parse(config.ps);
  if (!ps.ok()) return ps.status();
  auto program = olaf::OlafSwitch::Create(config.program);
  if (!program.ok()) return program.status();
  for (const auto& [port, cluster] : config.clusters) {
    if (absl::Status s = (*program)->cluster_table().Set(port, cluster); !s.ok()) return s;
  }
  auto socket = net::BindUdp(*listen, config.socket_buffer_bytes);
  if (!socket.ok()) return socket.status();
  auto wakeup = net::Wakeup::Create();
  if (!wakeup.ok()) return wakeup.status();
  std::unique_ptr<OlafServer> server(new OlafServer(config, std::move(*program), std::move(*socket),
                                                    std::move(*wakeup), *ps, &clock));
  if (absl::Status s = server->ports_.AddStatic(kPsPort, *ps); !s.ok()) return s;
  server->Publish(server->Now());
  return server;
}

OlafServer::OlafServer(const OlafServerConfig& config, std::unique_ptr<olaf::OlafSwitch> program,
                       net::UdpSocket socket, net::Wakeup wakeup, net::Endpoint ps,
                       const net::TimeSource* clock)
    : config_(config),
      clock_(clock),
      program_(std::move(program)),
      socket_(std::move(socket)),
      wakeup_(std::move(wakeup)),
      ps_(ps),
      rx_(config.batch_size, kRecvSlotBytes),
      tx_(config.batch_size, kRecvSlotBytes, socket_.family),
      sink_(std::make_unique<Sink>(this)) {}

OlafServer::~OlafServer() = default;

void OlafServer::Stop() noexcept {
  stop_.store(true);
  wakeup_.Notify();
}

OlafServerCounters OlafServer::counters() const {
  std::lock_guard lock(snapshot_mu_);
  return snapshot_;
}

void OlafServer::Publish(dp::TimeNs now) {
  live_.program = program_->counters();
  live_.olaf = program_->totals();
  live_.queue = program_->queue_state(now);
  live_.ports_bound = ports_.size();
  live_.lease_ms = config_.lease_ms;
  std::lock_guard lock(snapshot_mu_);
  snapshot_ = live_;
}

void OlafServer::Egress(dp::PortId port, std::span<const uint8_t> packet) {
  const net::Endpoint* to = ports_.endpoint(port);
  if (to == nullptr) {
    ++live_.egress_unmapped;
    return;
  }
  if (tx_.full()) FlushTx();
  if (!tx_.Add(*to, packet)) ++live_.send_errors;
}

void OlafServer::FlushTx() {
  if (tx_.empty()) return;
  const net::SendBatch::Result r = tx_.Flush(socket_.fd.get());
  live_.datagrams_tx += r.sent;
  live_.send_errors += r.failed + r.would_block;
}

void OlafServer::HandleDatagram(size_t i, dp::TimeNs now) {
  ++live_.datagrams_rx;
  if (rx_.truncated(i)) ++live_.rx_truncated;
  const net::Endpoint source = net::Endpoint::FromSockaddr(rx_.source(i), rx_.source_len(i));
  std::optional<dp::PortId> port = ports_.Lookup(source);
  if (!port) {
    auto bound = ports_.Bind(source);
    if (!bound.ok() && program_->cluster_table().Lookup(source.port()) && EvictSilentest()) {
      bound = ports_.Bind(source);
    }
    if (!bound.ok()) {
      ++live_.ports_exhausted;
      return;
    }
    port = *bound;
    olaf::FlowKey flow;
    flow.src_ip = source.V6MappedAddress();
    flow.dst_ip = socket_.local.V6MappedAddress();
    flow.src_port = source.port();
    flow.dst_port = socket_.local.port();
    (void)program_->BindPort(*port, flow);  // port < kMaxPorts by construction
    spdlog::debug("event=peer_bound endpoint={} port={}", source.ToString(), *port);
  }
  seen_[*port] = now;
  program_->Process(rx_.data(i), *port, now, *sink_);
}

void OlafServer::Unbind(dp::PortId port) {
  (void)ports_.Release(port);
  (void)program_->UnbindPort(port);
}

bool OlafServer::EvictSilentest() {
  int victim = -1;
  for (dp::PortId p = 0; p < dp::kMaxPorts; ++p) {
    const net::Endpoint* e = ports_.endpoint(p);
    if (e == nullptr || ports_.is_static(p) || program_->cluster_table().Lookup(e->port())) {
      continue;
    }
    if (victim < 0 || seen_[p] < seen_[static_cast<size_t>(victim)]) victim = p;
  }
  if (victim < 0) return false;
  spdlog::info("event=peer_evicted endpoint={} port={} reason=operator_mapped_peer_needs_a_port",
               ports_.endpoint(static_cast<dp::PortId>(victim))->ToString(), victim);
  Unbind(static_cast<dp::PortId>(victim));
  ++live_.peers_evicted;
  return true;
}

void OlafServer::ExpirePeers(dp::TimeNs now) {
  const dp::TimeNs lease = dp::TimeNs{config_.lease_ms} * dp::kNsPerMs;
  if (now < next_expiry_scan_) return;
  next_expiry_scan_ = now + lease / 10;
  for (dp::PortId p = 0; p < dp::kMaxPorts; ++p) {
    const net::Endpoint* e = ports_.endpoint(p);
    if (e == nullptr || ports_.is_static(p) || now - seen_[p] < lease) continue;
    spdlog::info("event=peer_expired endpoint={} port={} silent_ms={}", e->ToString(), p,
                 (now - seen_[p]) / dp::kNsPerMs);
    Unbind(p);
    ++live_.peers_expired;
  }
}

absl::Status OlafServer::Run() {
  if (!tasks_.Start()) return absl::FailedPreconditionError("OlafServer already running");
  spdlog::info(
      "event=olaf_switch_started listen={} ps={} policy={} depth={} delta_t_ms={} tau_ms={} "
      "egress_rate_bps={}",
      socket_.local.ToString(), ps_.ToString(), program_->name(), config_.program.depth,
      static_cast<double>(config_.program.delta_t_ns) / 1e6,
      static_cast<double>(config_.program.tau_ns) / 1e6, config_.program.egress_rate_bps);
  absl::Status status;
  pollfd fds[2] = {{socket_.fd.get(), POLLIN, 0}, {wakeup_.fd(), POLLIN, 0}};
  bool busy = false;
  while (!stop_.load()) {
    bool readable = busy;
    if (!busy) {
      // Sleep until the next datagram, the program's next transmission or
      // at most 1 ms (control tasks are woken by the eventfd).
      const dp::TimeNs now = Now();
      const dp::TimeNs wake = program_->NextWakeNs();
      dp::TimeNs wait = dp::kNsPerMs;
      if (wake != olaf::OlafSwitch::kIdle) wait = std::clamp<dp::TimeNs>(wake - now, 0, wait);
      const timespec ts{0, static_cast<long>(wait)};
      const int r = ::ppoll(fds, 2, &ts, nullptr);
      if (r < 0 && errno != EINTR) {
        status = absl::InternalError(absl::StrCat("ppoll: ", std::strerror(errno)));
        break;
      }
      if (r > 0 && (fds[1].revents & POLLIN) != 0) wakeup_.Drain();
      readable = r > 0 && (fds[0].revents & (POLLIN | POLLERR)) != 0;
    }
    busy = false;
    if (readable) {
      const int n = rx_.Receive(socket_.fd.get());
      if (n > 0) {
        const dp::TimeNs now = Now();
        for (size_t i = 0; i < static_cast<size_t>(n); ++i) HandleDatagram(i, now);
        FlushTx();
        busy = rx_.filled();
      }
    }
    const dp::TimeNs now = Now();
    program_->Advance(now, *sink_);
    FlushTx();
    RunTasks();
    ExpirePeers(now);
    Publish(now);
  }
  FlushTx();
  Publish(Now());
  spdlog::info("event=olaf_switch_stopped {}", counters().ToJson());
  tasks_.Finish([this] { return MakeControl(); });
  return status;
}

void OlafServer::RunTasks() {
  tasks_.RunPending([this] { return MakeControl(); });
}

void OlafServer::Execute(const std::function<void(Control&)>& fn) {
  tasks_.Execute(
      fn, [this] { return MakeControl(); }, [this] { wakeup_.Notify(); });
}

}  // namespace inca::switchd
