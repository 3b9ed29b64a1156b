// The control API's figures (GetStats, GetOlafStats), declared once (issue
// 17): each field of a stats struct is one table entry beside the struct --
// its proto name and stable field number, its type (from the member) and its
// help. proto/inca/control/v1/stats.proto is generated from these tables
// (`inca-switchd --stats-proto`; a test keeps the checked-in copy equal), and
// the gRPC adapter converts by protobuf reflection over the same tables
// (src/control/convert.cc), so a new figure is one member and one entry.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace inca::control {

// Drop counts by reason name (dp::ToString), non-zero only.
using DropMap = std::map<std::string, uint64_t>;
// A repeated sub-message; its element type's own table converts each element.
struct Repeated {
  const char* message;  // the element's proto message name
};

template <typename S>
struct StatField {
  const char* name;  // proto field name (snake_case), also the JSON key
  int number;        // proto field number: stable, never reused
  std::variant<uint64_t S::*, uint32_t S::*, uint16_t S::*, uint8_t S::*, double S::*, bool S::*,
               std::string S::*, DropMap S::*, Repeated>
      member;
  const char* help;
};
template <typename S>
using StatTable = std::span<const StatField<S>>;

struct GroupStats {
  uint8_t group_id = 0;
  uint64_t rx_packets = 0;
  uint64_t completed_chunks = 0;
  uint64_t reduced_bytes = 0;
  uint64_t timeouts = 0;
  uint64_t fallback_notices = 0;
  uint64_t dropped = 0;
  uint64_t sram_cells = 0;
  uint64_t offload_accepted_ops = 0;
  uint64_t offload_declined_ops = 0;
};

inline constexpr StatField<GroupStats> kGroupStatsFields[] = {
    {"group_id", 1, &GroupStats::group_id, "The group (0..255)."},
    {"rx_packets", 2, &GroupStats::rx_packets, "Packets of the group received."},
    {"completed_chunks", 3, &GroupStats::completed_chunks, "Chunks reduced to completion."},
    {"reduced_bytes", 4, &GroupStats::reduced_bytes, "Payload bytes of completed chunks."},
    {"timeouts", 5, &GroupStats::timeouts, "Chunks that timed out (fallback notices sent)."},
    {"fallback_notices", 6, &GroupStats::fallback_notices, "FALLBACK notices sent."},
    {"dropped", 7, &GroupStats::dropped, "Packets of the group dropped."},
    {"sram_cells", 8, &GroupStats::sram_cells, "Slot cells the group holds now."},
    {"offload_accepted_ops", 9, &GroupStats::offload_accepted_ops,
     "Operations the offload policy sent to the switch."},
    {"offload_declined_ops", 10, &GroupStats::offload_declined_ops,
     "Operations the offload policy declined (DECLINED notices)."},
};

// The figures of the CAIS write-up's `cais-cli show-stats` (4.4) and more.
struct Stats {
  double sram_usage = 0;
  double sram_pending_usage = 0;
  double sram_usage_limit = 0;
  uint64_t sram_bytes = 0;
  double reductions_per_s = 0;
  double reduced_bytes_per_s = 0;
  uint64_t completed_chunks = 0;
  uint64_t timeouts = 0;
  uint64_t fallback_notices = 0;
  double fallback_ratio = 0;
  double slot_holding_avg_us = 0;
  uint64_t ingress_delay_ns_total = 0;
  uint64_t ingress_delay_samples = 0;
  double ingress_queue_delay_us = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t unknown_sender = 0;
  DropMap drops;
  std::vector<GroupStats> groups;  // groups with traffic
  bool conserved = true;
};

inline constexpr StatField<Stats> kStatsFields[] = {
    {"sram_usage", 1, &Stats::sram_usage,
     "Fraction of sram_bytes held (pending + retained chunks)."},
    {"sram_pending_usage", 2, &Stats::sram_pending_usage,
     "Fraction held by pending chunks (what admission checks)."},
    {"sram_bytes", 3, &Stats::sram_bytes, "Slot memory, bytes."},
    {"reductions_per_s", 4, &Stats::reductions_per_s, "Chunks completed per second, recently."},
    {"reduced_bytes_per_s", 5, &Stats::reduced_bytes_per_s,
     "Payload bytes of completed chunks per second, recently."},
    {"completed_chunks", 6, &Stats::completed_chunks, "Chunks reduced to completion."},
    {"timeouts", 7, &Stats::timeouts, "Chunks that timed out."},
    {"fallback_notices", 8, &Stats::fallback_notices, "FALLBACK notices sent."},
    {"fallback_ratio", 9, &Stats::fallback_ratio,
     "(timeouts + chunk_closed drops) / (completed + timeouts), since start."},
    {"slot_holding_avg_us", 10, &Stats::slot_holding_avg_us,
     "Mean slot-holding time, first contribution to completion (mostly rank skew), us. "
     "Not the queue delay (ingress_queue_delay_us); field 10 was avg_queue_delay_us."},
    {"rx_packets", 11, &Stats::rx_packets, "Datagrams received."},
    {"tx_packets", 12, &Stats::tx_packets, "Datagrams sent."},
    {"drops", 13, &Stats::drops, "Packets dropped, by reason name (non-zero only)."},
    {"groups", 14, Repeated{"GroupStats"}, "Groups with traffic."},
    {"unknown_sender", 15, &Stats::unknown_sender,
     "Datagrams from endpoints bound to no port (not given to the program)."},
    {"conserved", 16, &Stats::conserved,
     "Every packet is accounted for: rx = aggregated + forwarded + dropped."},
    {"ingress_delay_ns_total", 17, &Stats::ingress_delay_ns_total,
     "Ingress queueing (kernel receive timestamp to processing), summed over samples, ns."},
    {"ingress_delay_samples", 18, &Stats::ingress_delay_samples,
     "Samples in ingress_delay_ns_total (difference two snapshots for a windowed mean)."},
    {"ingress_queue_delay_us", 19, &Stats::ingress_queue_delay_us,
     "Mean ingress queueing delay since start, us."},
    {"sram_usage_limit", 20, &Stats::sram_usage_limit,
     "Admission stops when pending usage reaches this fraction."},
};

// One OLAF cluster as the switch sees it (AoM at the switch's PS-facing
// output; docs/design/olaf-core.md has the definitions).
struct OlafClusterInfo {
  uint16_t cluster_id = 0;
  uint32_t workers = 0;
  uint64_t offered = 0, enqueued = 0, merged = 0, dequeued = 0;
  uint64_t dequeued_worker_updates = 0;
  uint64_t dropped = 0;
  uint64_t occupancy = 0;
  bool aom_valid = false;
  double aom_current_ms = 0, aom_peak_ms = 0, aom_average_ms = 0;
  DropMap drops;
};

inline constexpr StatField<OlafClusterInfo> kOlafClusterFields[] = {
    {"cluster_id", 1, &OlafClusterInfo::cluster_id, "The cluster."},
    {"workers", 2, &OlafClusterInfo::workers, "Workers of the cluster the switch has seen."},
    {"offered", 3, &OlafClusterInfo::offered, "Updates offered to the queue."},
    {"enqueued", 4, &OlafClusterInfo::enqueued, "Updates that took an entry of their own."},
    {"merged", 5, &OlafClusterInfo::merged, "Updates merged into a queued one."},
    {"dequeued", 6, &OlafClusterInfo::dequeued, "Entries that left for the PS."},
    {"dequeued_worker_updates", 7, &OlafClusterInfo::dequeued_worker_updates,
     "Worker updates carried by what left the queue."},
    {"dropped", 8, &OlafClusterInfo::dropped, "Arrival drops and evictions."},
    {"occupancy", 9, &OlafClusterInfo::occupancy, "Entries queued now."},
    {"aom_valid", 10, &OlafClusterInfo::aom_valid,
     "False until the cluster's first update left the switch."},
    {"aom_current_ms", 11, &OlafClusterInfo::aom_current_ms, "Age of model now, ms."},
    {"aom_peak_ms", 12, &OlafClusterInfo::aom_peak_ms, "Largest age of model seen, ms."},
    {"aom_average_ms", 13, &OlafClusterInfo::aom_average_ms, "Time-average age of model, ms."},
    {"drops", 14, &OlafClusterInfo::drops, "By queue drop reason (non-zero only)."},
};

struct OlafStats {
  std::string policy;
  uint32_t depth = 0;
  uint64_t occupancy = 0;
  double queue_util = 0;
  uint32_t active_clusters = 0;
  uint64_t egress_rate_bps = 0;
  double delta_t_ms = 0, tau_ms = 0;
  uint64_t updates_rx = 0, updates_absorbed = 0, updates_cut_through = 0, updates_tx = 0;
  uint64_t acks_forwarded = 0, models_rx = 0, model_copies_tx = 0, passthrough = 0;
  uint64_t dropped = 0;
  DropMap drops;
  std::vector<OlafClusterInfo> clusters;
  bool conserved = true;
};

inline constexpr StatField<OlafStats> kOlafStatsFields[] = {
    {"policy", 1, &OlafStats::policy, "\"olaf\" or \"fifo\"."},
    {"depth", 2, &OlafStats::depth, "Queue entries in use (up to the depth allocated at start)."},
    {"occupancy", 3, &OlafStats::occupancy, "Entries queued now."},
    {"queue_util", 4, &OlafStats::queue_util, "occupancy / depth, as stamped into ACKs."},
    {"active_clusters", 5, &OlafStats::active_clusters, "Clusters active within delta_t."},
    {"egress_rate_bps", 6, &OlafStats::egress_rate_bps, "Paced egress to the PS; 0: unpaced."},
    {"delta_t_ms", 7, &OlafStats::delta_t_ms, "The AoM threshold (delta T), ms."},
    {"tau_ms", 8, &OlafStats::tau_ms, "The merge time constant, ms."},
    {"updates_rx", 9, &OlafStats::updates_rx, "UPDATE packets that parsed."},
    {"updates_absorbed", 10, &OlafStats::updates_absorbed, "UPDATEs queued or merged."},
    {"updates_cut_through", 11, &OlafStats::updates_cut_through, "UPDATEs sent on at once."},
    {"updates_tx", 12, &OlafStats::updates_tx, "UPDATE packets sent to the PS."},
    {"acks_forwarded", 13, &OlafStats::acks_forwarded, "ACKs routed to workers."},
    {"models_rx", 14, &OlafStats::models_rx, "MODEL packets from the PS."},
    {"model_copies_tx", 15, &OlafStats::model_copies_tx, "MODEL copies sent to worker ports."},
    {"passthrough", 16, &OlafStats::passthrough, "Non-OLAF packets forwarded untouched."},
    {"dropped", 17, &OlafStats::dropped, "Packets dropped."},
    {"drops", 18, &OlafStats::drops, "Packets dropped, by reason name (non-zero only)."},
    {"clusters", 19, Repeated{"OlafClusterStats"}, "Clusters the queue knows."},
    {"conserved", 20, &OlafStats::conserved, "Every packet and queued update is accounted for."},
};

namespace stats_internal {
// The proto type of a member alternative (StatField::member's index).
std::string ProtoType(size_t alternative, const char* repeated_message);
// `  // help\n  type name = number;\n`.
std::string FieldText(const std::string& type, const char* name, int number, const char* help);
}  // namespace stats_internal

// One message of stats.proto, from a table (fields in number order).
template <typename S>
std::string StatsMessageProto(const char* message, StatTable<S> table) {
  std::vector<const StatField<S>*> by_number;
  for (const StatField<S>& f : table) by_number.push_back(&f);
  std::sort(by_number.begin(), by_number.end(),
            [](const auto* a, const auto* b) { return a->number < b->number; });
  std::string out = std::string("message ") + message + " {\n";
  for (const StatField<S>* f : by_number) {
    const auto* rep = std::get_if<Repeated>(&f->member);
    out += stats_internal::FieldText(
        stats_internal::ProtoType(f->member.index(), rep ? rep->message : ""), f->name, f->number,
        f->help);
  }
  return out + "}\n";
}

// The whole of proto/inca/control/v1/stats.proto.
std::string StatsProto();

}  // namespace inca::control
