#include "switchd/olaf_dispatcher.h"

#include "util/event_format.h"

namespace inca::switchd {

OlafDispatcher::OlafDispatcher(olaf::OlafSwitch* program, membership::PortTable* ports,
                               const OlafDispatcherOptions& options)
    : program_(program),
      ports_(ports),
      options_(options),
      log_(options.log != nullptr ? options.log : &no_log_) {}

void OlafDispatcher::OnDatagram(std::span<const uint8_t> data, const net::Endpoint& source,
                                dp::TimeNs now, dp::PacketSink& out) {
  std::optional<dp::PortId> port = ports_->Lookup(source);
  if (!port) {
    auto bound = ports_->Bind(source);
    if (!bound.ok() && program_->cluster_table().Lookup(source.port()) && EvictSilentest()) {
      bound = ports_->Bind(source);
    }
    if (!bound.ok()) {
      ++counters_.ports_exhausted;
      return;
    }
    port = *bound;
    olaf::FlowKey flow;
    flow.src_ip = source.V6MappedAddress();
    flow.dst_ip = options_.local.V6MappedAddress();
    flow.src_port = source.port();
    flow.dst_port = options_.local.port();
    (void)program_->BindPort(*port, flow);  // port < kMaxPorts by construction
    Emit(*log_, LogLevel::kDebug, "event=peer_bound endpoint={} port={}", source.ToString(), *port);
  }
  seen_[*port] = now;
  program_->Process(data, *port, now, out);
}

void OlafDispatcher::Unbind(dp::PortId port) {
  (void)ports_->Release(port);
  (void)program_->UnbindPort(port);
}

bool OlafDispatcher::EvictSilentest() {
  int victim = -1;
  for (dp::PortId p = 0; p < dp::kMaxPorts; ++p) {
    const net::Endpoint* e = ports_->endpoint(p);
    if (e == nullptr || ports_->is_static(p) || program_->cluster_table().Lookup(e->port())) {
      continue;
    }
    if (victim < 0 || seen_[p] < seen_[static_cast<size_t>(victim)]) victim = p;
  }
  if (victim < 0) return false;
  const auto port = static_cast<dp::PortId>(victim);
  Emit(*log_, LogLevel::kInfo,
       "event=peer_evicted endpoint={} port={} reason=operator_mapped_peer_needs_a_port",
       ports_->endpoint(port)->ToString(), victim);
  Unbind(port);
  ++counters_.peers_evicted;
  return true;
}

void OlafDispatcher::Expire(dp::TimeNs now) {
  if (now < next_expiry_scan_) return;
  next_expiry_scan_ = now + options_.lease / 10;
  for (dp::PortId p = 0; p < dp::kMaxPorts; ++p) {
    const net::Endpoint* e = ports_->endpoint(p);
    if (e == nullptr || ports_->is_static(p) || now - seen_[p] < options_.lease) continue;
    Emit(*log_, LogLevel::kInfo, "event=peer_expired endpoint={} port={} silent_ms={}",
         e->ToString(), p, (now - seen_[p]) / dp::kNsPerMs);
    Unbind(p);
    ++counters_.peers_expired;
  }
}

}  // namespace inca::switchd
