#include "inca/counters/switch_counters.h"

#include "absl/strings/str_cat.h"

namespace inca::counters {

std::string DropsJson(const std::array<uint64_t, dp::kDropReasonCount>& drops) {
  std::string s = "\"drops\":{";
  bool first = true;
  for (size_t r = 0; r < dp::kDropReasonCount; ++r) {
    if (drops[r] == 0) continue;
    const std::string_view name = dp::ToString(static_cast<dp::DropReason>(r));
    absl::StrAppend(&s, first ? "" : ",", "\"", absl::string_view(name.data(), name.size()),
                    "\":", drops[r]);
    first = false;
  }
  return s + "}";
}

std::string HostCounters::JsonFields() const {
  return absl::StrCat(counters::JsonFields<HostCounters>(kHostCounters, *this),
                      ",\"io_gso\":", io_gso ? "true" : "false",
                      ",\"io_gro\":", io_gro ? "true" : "false");
}

bool SwitchCounters::Conserved() const {
  const bool ingress =
      datagrams_rx == mgmt_rx + unknown_sender + injected_ingress_loss + reducer.rx_packets;
  const bool egress =
      reducer.tx_packets == egress_unmapped + injected_egress_loss + datagrams_tx + send_errors;
  return ingress && egress && reducer.Conserved() &&
         mgmt_malformed + mgmt_reports + mgmt_reports_ignored + mgmt_reports_contended <= mgmt_rx;
}

namespace {

template <typename T, size_t N>
void AddArray(const std::array<T, N>& from, std::array<T, N>* to) {
  for (size_t i = 0; i < N; ++i) (*to)[i] += from[i];
}

}  // namespace

void SwitchCounters::Add(const SwitchCounters& o) {
  const uint64_t lease = lease_ms;
  counters::AddInto<HostCounters>(kHostCounters, o, this);
  counters::AddInto<SwitchCounters>(kSwitchCounters, o, this);
  lease_ms = lease == 0 ? o.lease_ms : lease;
  io_gso = io_gso || o.io_gso;
  io_gro = io_gro || o.io_gro;
  counters::AddInto<dp::ProgramCounters>(dp::kProgramCounters, o.reducer, &reducer);
  AddArray(o.reducer.drops_by_reason, &reducer.drops_by_reason);
  counters::AddInto<cais::GroupCounters>(cais::kGroupCounters, o.cais, &cais);
  cais.pending_ns_total += o.cais.pending_ns_total;
  AddArray(o.cais.holding_us_log2, &cais.holding_us_log2);
  AddArray(o.cais.drops_by_reason, &cais.drops_by_reason);
  sram.sram_bytes += o.sram.sram_bytes;
  sram.cell_bytes = sram.cell_bytes == 0 ? o.sram.cell_bytes : sram.cell_bytes;
  sram.cells_total += o.sram.cells_total;
  sram.cells_pending += o.sram.cells_pending;
  sram.cells_retained += o.sram.cells_retained;
  sram.pending_chunks += o.sram.pending_chunks;
  sram.retained_chunks += o.sram.retained_chunks;
  sram.max_pending_chunks += o.sram.max_pending_chunks;
  sram.tombstones += o.sram.tombstones;
  sram.usage_limit = sram.usage_limit == 0 ? o.sram.usage_limit : sram.usage_limit;
}

std::string SwitchCounters::ToJson() const {
  return absl::StrCat(
      "{", JsonFields(), ",", counters::JsonFields<SwitchCounters>(kSwitchCounters, *this),
      ",\"reducer\":{", counters::JsonFields<dp::ProgramCounters>(dp::kProgramCounters, reducer),
      ",", DropsJson(reducer.drops_by_reason), "},\"cais\":{",
      counters::JsonFields<cais::GroupCounters>(cais::kGroupCounters, cais),
      "},\"sram\":{\"sram_bytes\":", sram.sram_bytes, ",\"cell_bytes\":", sram.cell_bytes,
      ",\"cells_total\":", sram.cells_total, ",\"cells_pending\":", sram.cells_pending,
      ",\"cells_retained\":", sram.cells_retained, ",\"pending_chunks\":", sram.pending_chunks,
      ",\"retained_chunks\":", sram.retained_chunks, ",\"tombstones\":", sram.tombstones,
      "},\"conserved\":", Conserved() ? "true" : "false", "}");
}

std::string SwitchCounters::ToLogString() const {
  return absl::StrCat(
      "datagrams_rx=", datagrams_rx, " mgmt_rx=", mgmt_rx, " unknown_sender=", unknown_sender,
      " injected_ingress_loss=", injected_ingress_loss, " reducer_rx=", reducer.rx_packets,
      " aggregated=", reducer.aggregated, " forwarded=", reducer.forwarded,
      " dropped=", reducer.dropped, " completed_chunks=", cais.completed_chunks,
      " timeouts=", cais.timeouts, " fallback_notices=", cais.fallback_notices,
      " reducer_tx=", reducer.tx_packets, " datagrams_tx=", datagrams_tx,
      " injected_egress_loss=", injected_egress_loss, " egress_unmapped=", egress_unmapped,
      " send_errors=", send_errors, " pending_chunks=", sram.pending_chunks,
      " retained_chunks=", sram.retained_chunks, " groups_formed=", groups_formed,
      " ports_bound=", ports_bound, " conserved=", Conserved() ? "true" : "false");
}

bool OlafServerCounters::Conserved() const {
  return datagrams_rx == ports_exhausted + program.rx_packets &&
         program.tx_packets == egress_unmapped + datagrams_tx + send_errors && program.Conserved();
}

std::string OlafServerCounters::ToJson() const {
  return absl::StrCat(
      "{", JsonFields(), ",", counters::JsonFields<OlafServerCounters>(kOlafServerCounters, *this),
      ",\"program\":{", counters::JsonFields<dp::ProgramCounters>(dp::kProgramCounters, program),
      "},\"olaf\":{", counters::JsonFields<olaf::OlafCounters>(olaf::kOlafCounters, olaf),
      ",\"dropped\":", olaf.dropped, ",", DropsJson(olaf.drops),
      "},\"queue\":{\"occupancy\":", queue.occupancy, ",\"depth\":", queue.depth,
      ",\"active_clusters\":", queue.active_clusters,
      "},\"conserved\":", Conserved() ? "true" : "false", "}");
}

}  // namespace inca::counters
