#include "inca/dataplane/program.h"

#include <numeric>

namespace inca::dp {

std::string_view ToString(DropReason reason) {
  switch (reason) {
    case DropReason::kNone: return "none";
    case DropReason::kTooShort: return "too_short";
    case DropReason::kBadVersion: return "bad_version";
    case DropReason::kUnknownOp: return "unknown_op";
    case DropReason::kUnknownReduceOp: return "unknown_reduce_op";
    case DropReason::kUnknownDType: return "unknown_dtype";
    case DropReason::kUnknownFlags: return "unknown_flags";
    case DropReason::kPayloadLenMismatch: return "payload_len_mismatch";
    case DropReason::kChunkOutOfRange: return "chunk_out_of_range";
    case DropReason::kPayloadMisaligned: return "payload_misaligned";
    case DropReason::kEmptyPayload: return "empty_payload";
    case DropReason::kBadIngressPort: return "bad_ingress_port";
    case DropReason::kSwitchOriginated: return "switch_originated";
    case DropReason::kNoRule: return "no_rule";
    case DropReason::kPortNotInRule: return "port_not_in_rule";
    case DropReason::kOpMismatch: return "op_mismatch";
    case DropReason::kPayloadTooLarge: return "payload_too_large";
    case DropReason::kShapeMismatch: return "shape_mismatch";
    case DropReason::kDuplicate: return "duplicate";
    case DropReason::kSlotsExhausted: return "slots_exhausted";
    case DropReason::kSramLimit: return "sram_limit";
    case DropReason::kChunkClosed: return "chunk_closed";
    case DropReason::kNotContributor: return "not_contributor";
    case DropReason::kNotReady: return "not_ready";
    case DropReason::kOffloadDeclined: return "offload_declined";
    case DropReason::kUnknownType: return "unknown_type";
    case DropReason::kFragmentOutOfRange: return "fragment_out_of_range";
    case DropReason::kZeroMergedCount: return "zero_merged_count";
    case DropReason::kWrongDirection: return "wrong_direction";
    case DropReason::kUnboundPort: return "unbound_port";
    case DropReason::kUnknownCluster: return "unknown_cluster";
    case DropReason::kUnknownWorker: return "unknown_worker";
    case DropReason::kNoRoute: return "no_route";
    case DropReason::kQueueFull: return "queue_full";
    case DropReason::kClusterCap: return "cluster_cap";
    case DropReason::kStaleOnArrival: return "stale_on_arrival";
    case DropReason::kWorkersExhausted: return "workers_exhausted";
    case DropReason::kClustersExhausted: return "clusters_exhausted";
    case DropReason::kResendLimit: return "resend_limit";
    case DropReason::kGroupShare: return "group_share";
    case DropReason::kCount: break;
  }
  return "unknown";
}

std::string_view ToString(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAggregated: return "aggregated";
    case Verdict::kForwarded: return "forwarded";
    case Verdict::kDropped: return "dropped";
  }
  return "unknown";
}

bool ProgramCounters::Conserved() const {
  const uint64_t by_reason =
      std::accumulate(drops_by_reason.begin(), drops_by_reason.end(), uint64_t{0});
  return rx_packets == aggregated + forwarded + dropped && by_reason == dropped &&
         drops_by_reason[static_cast<size_t>(DropReason::kNone)] == 0;
}

namespace {
// Counts what a program emits, then passes it on.
class CountingSink final : public PacketSink {
 public:
  CountingSink(PacketSink& next, ProgramCounters& c) : next_(next), c_(c) {}
  void Emit(PortId egress, std::span<const uint8_t> packet) override {
    ++c_.tx_packets;
    c_.tx_bytes += packet.size();
    next_.Emit(egress, packet);
  }

 private:
  PacketSink& next_;
  ProgramCounters& c_;
};
}  // namespace

Outcome Program::Process(std::span<const uint8_t> packet, PortId ingress, TimeNs now,
                         PacketSink& out) {
  ++counters_.rx_packets;
  counters_.rx_bytes += packet.size();
  CountingSink sink(out, counters_);
  Outcome o = DoProcess(packet, ingress, now, sink);
  switch (o.verdict) {
    case Verdict::kAggregated: ++counters_.aggregated; break;
    case Verdict::kForwarded: ++counters_.forwarded; break;
    case Verdict::kDropped:
      // A drop without a named reason is a program bug: it is counted under
      // kNone, which makes Conserved() false so tests catch it.
      if (o.reason >= DropReason::kCount) o.reason = DropReason::kNone;
      ++counters_.dropped;
      ++counters_.drops_by_reason[static_cast<size_t>(o.reason)];
      break;
  }
  return o;
}

void Program::Advance(TimeNs now, PacketSink& out) {
  CountingSink sink(out, counters_);
  DoAdvance(now, sink);
}

}  // namespace inca::dp
