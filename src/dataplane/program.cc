#include "inca/dataplane/program.h"

#include <numeric>
#include <string>
#include <vector>

namespace inca::dp {

std::string DropReasonsMarkdown() {
  std::string out = "| reason | where | meaning |\n|---|---|---|\n";
  for (size_t i = 1; i < kDropReasonCount; ++i) {
    const DropReasonInfo& r = kDropReasons[i];
    out.append("| `").append(r.name).append("` | ").append(r.where).append(" | ");
    out.append(r.help).append(" |\n");
  }
  return out;
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

void PacketSink::EmitGather(PortId egress, std::span<const uint8_t> head,
                            std::span<const uint8_t> payload, uint64_t /*share*/) {
  thread_local std::vector<uint8_t> packet;
  packet.assign(head.begin(), head.end());
  packet.insert(packet.end(), payload.begin(), payload.end());
  Emit(egress, packet);
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
  void EmitGather(PortId egress, std::span<const uint8_t> head, std::span<const uint8_t> payload,
                  uint64_t share) override {
    ++c_.tx_packets;
    c_.tx_bytes += head.size() + payload.size();
    next_.EmitGather(egress, head, payload, share);
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
