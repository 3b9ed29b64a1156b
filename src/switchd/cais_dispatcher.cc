#include "switchd/cais_dispatcher.h"

#include <algorithm>

#include "inca/wire/mgmt.h"

namespace inca::switchd {

// The reducer's output, through egress loss injection, to the Output of
// the call in progress.
class CaisDispatcher::Sink final : public dp::PacketSink {
 public:
  explicit Sink(CaisDispatcher* d) : d_(d) {}
  void Emit(dp::PortId egress, std::span<const uint8_t> packet) override {
    Deliver(egress, packet, {}, 0);
  }
  void EmitGather(dp::PortId egress, std::span<const uint8_t> head,
                  std::span<const uint8_t> payload, uint64_t share) override {
    Deliver(egress, head, payload, share);
  }
  Output* out = nullptr;

 private:
  void Deliver(dp::PortId port, std::span<const uint8_t> head, std::span<const uint8_t> payload,
               uint64_t share) {
    if (d_->ports_->endpoint(port) != nullptr && d_->Lose(d_->options_.egress_loss)) {
      ++d_->counters_.injected_egress_loss;
      return;
    }
    out->ToPort(port, head, payload, share);
  }
  CaisDispatcher* d_;
};

CaisDispatcher::CaisDispatcher(cais::CaisReducer* reducer, membership::PortTable* ports,
                               const DispatcherOptions& options)
    : reducer_(reducer),
      ports_(ports),
      options_(options),
      groups_(ports, &reducer->rules(), options.seq_start, options.lease, options.log),
      sink_(std::make_unique<Sink>(this)),
      loss_rng_(options.loss_seed) {}

CaisDispatcher::~CaisDispatcher() = default;

bool CaisDispatcher::Lose(double p) {
  if (p <= 0) return false;
  if (p >= 1) return true;
  // 53 random bits -> [0, 1): the same sequence for a seed on every platform.
  return static_cast<double>(loss_rng_() >> 11) * 0x1.0p-53 < p;
}

uint16_t WindowAdvice(const cais::CaisReducer& reducer, const membership::GroupManager& groups,
                      uint8_t group_id) {
  if (!reducer.config().advise_window) return 0;
  const membership::GroupState* g = groups.group(group_id);
  size_t cells = 1;
  if (reducer.config().deterministic && g != nullptr) {
    cells = g->tree ? g->tree_members.size() : g->world_size;
  }
  uint32_t w = reducer.FairWindow(reducer.claiming_groups() + groups.groups_forming(), cells);
  if (g != nullptr && g->tree_window != 0) w = std::min<uint32_t>(w, g->tree_window);
  return static_cast<uint16_t>(std::clamp<uint32_t>(w, 1, UINT16_MAX));
}

void CaisDispatcher::Management(std::span<const uint8_t> data, const net::Endpoint& source,
                                dp::TimeNs now, Output& out) {
  ++counters_.mgmt_rx;
  wire::MgmtMessage request;
  if (!wire::ParseMgmt(data, &request)) {
    ++counters_.mgmt_malformed;
    return;
  }
  // A lease that ran out is gone before a JOIN is judged against it.
  groups_.Expire(now);
  const uint64_t kept = groups_.reports_accepted();
  std::optional<wire::MgmtMessage> reply = groups_.Handle(request, source, now);
  if (request.type == wire::MgmtType::kReport && groups_.reports_accepted() > kept) {
    // A rank's measured operation, for the root's offload decisions: only
    // the root decides for a tree (docs/design/tree.md, "Offload").
    const membership::GroupState* g = groups_.group(request.group_id);
    if (g != nullptr && g->tree_uplink && ports_->endpoint(*g->tree_uplink) != nullptr) {
      out.ToPort(*g->tree_uplink, data, {}, 0);
      ++counters_.reports_forwarded;
    }
  }
  if (!reply) return;
  if ((reply->type == wire::MgmtType::kJoinReply && reply->status != wire::MgmtStatus::kRefused) ||
      (reply->type == wire::MgmtType::kPong && reply->status == wire::MgmtStatus::kOk)) {
    reply->window_chunks = WindowAdvice(*reducer_, groups_, reply->group_id);
  }
  wire::SerializeMgmt(*reply, &mgmt_buf_);
  out.Reply(mgmt_buf_);
}

void CaisDispatcher::OnDatagram(std::span<const uint8_t> data, const net::Endpoint& source,
                                dp::TimeNs now, Output& out) {
  if (wire::IsMgmtDatagram(data)) {
    Management(data, source, now, out);
    return;
  }
  const std::optional<dp::PortId> port = ports_->Lookup(source);
  if (!port) {
    ++counters_.unknown_sender;
    return;
  }
  groups_.SeenOnPort(*port, now);
  if (Lose(options_.ingress_loss)) {
    ++counters_.injected_ingress_loss;
    return;
  }
  out.Ingress(*port, data);
  sink_->out = &out;
  reducer_->Process(data, *port, now, *sink_);
}

void CaisDispatcher::Advance(dp::TimeNs now, Output& out) {
  sink_->out = &out;
  reducer_->Advance(now, *sink_);
}

void CaisDispatcher::OnTick(dp::TimeNs now, Output& out) {
  Advance(now, out);
  groups_.Expire(now);
}

void FillDispatcherCounters(const CaisDispatcher& d, counters::SwitchCounters* out) {
  const cais::CaisReducer& r = d.reducer();
  out->reducer = r.counters();
  out->cais = r.totals();
  out->sram = r.sram();
  const membership::GroupManager& g = d.groups();
  const DispatcherCounters& c = d.counters();
  out->mgmt_rx = c.mgmt_rx;
  out->mgmt_malformed = c.mgmt_malformed;
  out->unknown_sender = c.unknown_sender;
  out->injected_ingress_loss = c.injected_ingress_loss;
  out->injected_egress_loss = c.injected_egress_loss;
  out->mgmt_reports_forwarded = c.reports_forwarded;
  out->groups_formed = g.groups_formed();
  out->groups_forming = g.groups_forming();
  out->groups_expired = g.groups_expired();
  out->leases_expired = g.leases_expired();
  out->groups_replaced = g.groups_replaced();
  out->groups_destroyed = g.groups_destroyed();
  out->ports_reclaimed = g.ports_reclaimed();
  out->lease_ms = static_cast<uint64_t>(g.lease() / dp::kNsPerMs);
  out->mgmt_reports = g.reports_accepted();
  out->mgmt_reports_ignored = g.reports_ignored();
  out->mgmt_reports_contended = g.reports_contended();
  out->timing_shapes = g.timing_shapes();
  out->timings_inherited = g.timings_inherited();
}

}  // namespace inca::switchd
