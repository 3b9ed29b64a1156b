// The control API's figures (GetStats, GetOlafStats), declared once (issue
// 17): each field of a stats struct is one table entry beside the struct --
// its proto name and stable field number, its type (from the member) and its
// help. Counters are not listed again: a Block entry embeds a whole counters
// table (inca/util/counters.h: HostCounters, SwitchCounters, GroupCounters,
// ...) as a typed sub-message whose fields are the table's entries.
// proto/inca/control/v1/stats.proto is generated from these tables
// (`inca-switchd --stats-proto`; a test keeps the checked-in copy equal), and
// the gRPC adapter converts by protobuf reflection over the same tables
// (src/control/convert.cc), so a new figure is one member and one entry, and
// a new counter one entry in its counters table.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "inca/counters/switch_counters.h"
#include "inca/olaf/update_queue.h"
#include "inca/util/counters.h"

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
               std::string S::*, DropMap S::*, Repeated, counters::Block<S>>
      member;
  const char* help;
};
template <typename S>
using StatTable = std::span<const StatField<S>>;

struct GroupStats {
  uint8_t group_id = 0;
  cais::GroupCounters counters;
  // False once no rule names the group (dissolved, expired, destroyed): its
  // counters stay, but it is not offloaded.
  bool active = true;
  uint64_t pending_chunks = 0;  // being aggregated now
  uint64_t share_chunks = 0;    // reserved for it (CaisConfig::group_share)
  // Operation sizes the switch accepts for the group (min > max: none).
  uint64_t offload_min_bytes = 0;
  uint64_t offload_max_bytes = UINT64_MAX;
  double slot_holding_avg_us = 0;
  double slot_holding_p50_us = 0, slot_holding_p99_us = 0;
  // The group goes up a tree from this switch (its rule has an uplink,
  // docs/design/tree.md): the port toward its parent. False at a root and
  // for a group of one switch.
  bool tree_child = false;
  uint32_t uplink_port = 0;
};

inline constexpr StatField<GroupStats> kGroupStatsFields[] = {
    {"group_id", 1, &GroupStats::group_id, "The group (0..255)."},
    {"counters", 11,
     counters::MakeBlock<GroupStats, cais::kGroupCounters,
                         [](GroupStats& g) -> cais::GroupCounters& { return g.counters; }>(
         "CaisGroupCounters"),
     "The group's counters (cais::kGroupCounters)."},
    {"active", 12, &GroupStats::active,
     "False once no rule names the group: its counters stay, it is not offloaded."},
    {"pending_chunks", 13, &GroupStats::pending_chunks, "Chunks of the group being aggregated."},
    {"share_chunks", 14, &GroupStats::share_chunks,
     "Pending chunks reserved for the group (group_share); it may borrow beyond them."},
    {"offload_min_bytes", 15, &GroupStats::offload_min_bytes,
     "Smallest operation the switch accepts for the group."},
    {"offload_max_bytes", 16, &GroupStats::offload_max_bytes,
     "Largest operation the switch accepts for the group (min > max: none)."},
    {"slot_holding_avg_us", 17, &GroupStats::slot_holding_avg_us,
     "Mean slot-holding time of the group's completed chunks, us."},
    {"slot_holding_p50_us", 18, &GroupStats::slot_holding_p50_us,
     "Median slot-holding time (log2 buckets, interpolated), us."},
    {"slot_holding_p99_us", 19, &GroupStats::slot_holding_p99_us,
     "99th percentile slot-holding time (log2 buckets, interpolated), us."},
    {"tree_child", 20, &GroupStats::tree_child,
     "The group goes up a tree from this switch (its rule has an uplink)."},
    {"uplink_port", 21, &GroupStats::uplink_port,
     "With tree_child: the port toward the parent switch."},
};
// Numbers of removed fields (never reused): the flat copies of counters
// that the counters sub-message carries now.
inline constexpr int kGroupStatsReserved[] = {2, 3, 4, 5, 6, 7, 8, 9, 10};

// The figures of the CAIS write-up's `cais-cli show-stats` (4.4) and more.
// One data-plane shard of a switch run with --threads N > 1: its own
// socket, reducer and slot memory (docs/switchd.md, "Threads").
struct ShardStats {
  uint32_t shard = 0;
  std::string endpoint;   // the shard's UDP address
  bool conserved = true;  // SwitchCounters::Conserved() for this shard alone
  counters::SwitchCounters counters;
};

inline constexpr StatField<ShardStats> kShardStatsFields[] = {
    {"shard", 1, &ShardStats::shard, "The shard's index (0..threads-1)."},
    {"endpoint", 2, &ShardStats::endpoint, "The shard's UDP address (listen port + shard)."},
    {"conserved", 3, &ShardStats::conserved,
     "Every packet of this shard is accounted for (its own three equations)."},
    {"host", 4,
     counters::MakeBlock<ShardStats, counters::kHostCounters,
                         [](ShardStats& s) -> counters::HostCounters& { return s.counters; }>(
         "HostCounters"),
     "The shard's UDP front end."},
    {"switch_counters", 5,
     counters::MakeBlock<ShardStats, counters::kSwitchCounters,
                         [](ShardStats& s) -> counters::SwitchCounters& { return s.counters; }>(
         "SwitchCounters"),
     "The shard's management, groups and leases."},
    {"program", 6,
     counters::MakeBlock<ShardStats, dp::kProgramCounters,
                         [](ShardStats& s) -> dp::ProgramCounters& { return s.counters.reducer; }>(
         "ProgramCounters"),
     "The shard's reducer packets in and out."},
    {"cais", 7,
     counters::MakeBlock<ShardStats, cais::kGroupCounters,
                         [](ShardStats& s) -> cais::GroupCounters& { return s.counters.cais; }>(
         "CaisGroupCounters"),
     "The shard's CAIS totals."},
};

struct Stats {
  double sram_usage = 0;
  double sram_pending_usage = 0;
  double sram_usage_limit = 0;
  uint64_t sram_bytes = 0;
  double reductions_per_s = 0;
  double reduced_bytes_per_s = 0;
  double packets_per_s = 0;
  uint64_t rate_window_end_ns = 0;
  double fallback_ratio = 0;
  double slot_holding_avg_us = 0;
  double slot_holding_p50_us = 0, slot_holding_p99_us = 0;
  double ingress_queue_delay_us = 0;
  DropMap drops;
  std::vector<GroupStats> groups;  // groups with traffic
  bool conserved = true;
  // inca-switchd --threads N > 1: each shard's own counters (the figures
  // above are their sums); empty with one shard.
  std::vector<ShardStats> shards;
  // The switch's counters: the UDP front end (HostCounters and, for CAIS,
  // SwitchCounters' own), the program's (reducer) and the switch-wide CAIS
  // totals (cais). The OLAF program fills the host and program parts.
  counters::SwitchCounters counters;
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
    {"fallback_ratio", 9, &Stats::fallback_ratio,
     "(timeouts + chunk_closed drops) / (completed + timeouts), since start."},
    {"slot_holding_avg_us", 10, &Stats::slot_holding_avg_us,
     "Mean slot-holding time, first contribution to completion (mostly rank skew), us. "
     "Not the queue delay (ingress_queue_delay_us); field 10 was avg_queue_delay_us."},
    {"drops", 13, &Stats::drops, "Packets dropped, by reason name (non-zero only)."},
    {"groups", 14, Repeated{"GroupStats"}, "Groups with traffic."},
    {"conserved", 16, &Stats::conserved,
     "Every packet is accounted for: rx = aggregated + forwarded + dropped."},
    {"ingress_queue_delay_us", 19, &Stats::ingress_queue_delay_us,
     "Mean ingress queueing delay since start, us."},
    {"sram_usage_limit", 20, &Stats::sram_usage_limit,
     "Admission stops when pending usage reaches this fraction."},
    {"host", 21,
     counters::MakeBlock<Stats, counters::kHostCounters,
                         [](Stats& s) -> counters::HostCounters& { return s.counters; }>(
         "HostCounters"),
     "The switch's UDP front end (counters::kHostCounters)."},
    {"switch_counters", 22,
     counters::MakeBlock<Stats, counters::kSwitchCounters,
                         [](Stats& s) -> counters::SwitchCounters& { return s.counters; }>(
         "SwitchCounters"),
     "The CAIS front end: management, groups, leases (counters::kSwitchCounters)."},
    {"program", 23,
     counters::MakeBlock<Stats, dp::kProgramCounters,
                         [](Stats& s) -> dp::ProgramCounters& { return s.counters.reducer; }>(
         "ProgramCounters"),
     "The switch program's packets in and out (dp::kProgramCounters)."},
    {"cais", 24,
     counters::MakeBlock<Stats, cais::kGroupCounters,
                         [](Stats& s) -> cais::GroupCounters& { return s.counters.cais; }>(
         "CaisGroupCounters"),
     "Switch-wide CAIS totals (cais::kGroupCounters)."},
    {"packets_per_s", 25, &Stats::packets_per_s, "CAIS packets received per second, recently."},
    {"rate_window_end_ns", 26, &Stats::rate_window_end_ns,
     "End of the rate window the per-second figures cover (switch time, ns)."},
    {"slot_holding_p50_us", 27, &Stats::slot_holding_p50_us,
     "Median slot-holding time (log2 buckets, interpolated), us."},
    {"slot_holding_p99_us", 28, &Stats::slot_holding_p99_us,
     "99th percentile slot-holding time (log2 buckets, interpolated), us."},
    {"shards", 29, Repeated{"ShardStats"},
     "inca-switchd --threads N > 1: each data-plane shard's counters (the figures above sum "
     "them); empty with one shard."},
};
inline constexpr int kStatsReserved[] = {6, 7, 8, 11, 12, 15, 17, 18};

// One OLAF cluster as the switch sees it (AoM at the switch's PS-facing
// output; docs/design/olaf-core.md has the definitions).
struct OlafClusterInfo {
  uint16_t cluster_id = 0;
  uint32_t workers = 0;
  olaf::QueueCounters queue;  // offered, merged, dequeued, occupancy, ...
  uint64_t dropped = 0;
  bool aom_valid = false;
  double aom_current_ms = 0, aom_peak_ms = 0, aom_average_ms = 0;
  DropMap drops;
};

inline constexpr StatField<OlafClusterInfo> kOlafClusterFields[] = {
    {"cluster_id", 1, &OlafClusterInfo::cluster_id, "The cluster."},
    {"workers", 2, &OlafClusterInfo::workers, "Workers of the cluster the switch has seen."},
    {"dropped", 8, &OlafClusterInfo::dropped, "Arrival drops and evictions."},
    {"aom_valid", 10, &OlafClusterInfo::aom_valid,
     "False until the cluster's first update left the switch."},
    {"aom_current_ms", 11, &OlafClusterInfo::aom_current_ms, "Age of model now, ms."},
    {"aom_peak_ms", 12, &OlafClusterInfo::aom_peak_ms, "Largest age of model seen, ms."},
    {"aom_average_ms", 13, &OlafClusterInfo::aom_average_ms, "Time-average age of model, ms."},
    {"drops", 14, &OlafClusterInfo::drops, "By queue drop reason (non-zero only)."},
    {"queue", 15,
     counters::MakeBlock<OlafClusterInfo, olaf::kQueueCounters,
                         [](OlafClusterInfo& c) -> olaf::QueueCounters& { return c.queue; }>(
         "OlafQueueCounters"),
     "The cluster's queue counters (olaf::kQueueCounters)."},
};
inline constexpr int kOlafClusterReserved[] = {3, 4, 5, 6, 7, 9};

struct OlafStats {
  std::string policy;
  uint32_t depth = 0;
  uint64_t occupancy = 0;
  double queue_util = 0;
  uint32_t active_clusters = 0;
  uint64_t egress_rate_bps = 0;
  double delta_t_ms = 0, tau_ms = 0;
  uint64_t dropped = 0;
  DropMap drops;
  std::vector<OlafClusterInfo> clusters;
  bool conserved = true;
  // The switch's counters: its UDP front end, the program's packets and the
  // OLAF figures (server.olaf).
  counters::OlafServerCounters server;
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
    {"dropped", 17, &OlafStats::dropped, "Packets dropped."},
    {"drops", 18, &OlafStats::drops, "Packets dropped, by reason name (non-zero only)."},
    {"clusters", 19, Repeated{"OlafClusterStats"}, "Clusters the queue knows."},
    {"conserved", 20, &OlafStats::conserved, "Every packet and queued update is accounted for."},
    {"host", 21,
     counters::MakeBlock<OlafStats, counters::kHostCounters,
                         [](OlafStats& s) -> counters::HostCounters& { return s.server; }>(
         "HostCounters"),
     "The switch's UDP front end (counters::kHostCounters)."},
    {"server", 22,
     counters::MakeBlock<OlafStats, counters::kOlafServerCounters,
                         [](OlafStats& s) -> counters::OlafServerCounters& { return s.server; }>(
         "OlafServerCounters"),
     "The OLAF front end: peer ports and leases (counters::kOlafServerCounters)."},
    {"program", 23,
     counters::MakeBlock<OlafStats, dp::kProgramCounters,
                         [](OlafStats& s) -> dp::ProgramCounters& { return s.server.program; }>(
         "ProgramCounters"),
     "The program's packets in and out (dp::kProgramCounters)."},
    {"olaf", 24,
     counters::MakeBlock<OlafStats, olaf::kOlafCounters,
                         [](OlafStats& s) -> olaf::OlafCounters& { return s.server.olaf; }>(
         "OlafCounters"),
     "UPDATE, ACK and MODEL figures (olaf::kOlafCounters)."},
};
inline constexpr int kOlafStatsReserved[] = {9, 10, 11, 12, 13, 14, 15, 16};

namespace stats_internal {
// The proto type of a member alternative (StatField::member's index);
// `message` names the element (Repeated) or sub-message (Block).
std::string ProtoType(size_t alternative, const char* message);
// `  // help\n  type name = number;\n`.
std::string FieldText(const std::string& type, const char* name, int number, const char* help);
// `  reserved 1, 2;\n`, or nothing.
std::string ReservedText(std::span<const int> numbers);
// The message a counters table becomes: one uint64 per row, by its number.
std::string CountersMessageText(const char* message, size_t size, counters::Row (*row)(size_t));

template <typename S>
const char* SubMessage(const StatField<S>& f) {
  if (const auto* rep = std::get_if<Repeated>(&f.member)) return rep->message;
  if (const auto* b = std::get_if<counters::Block<S>>(&f.member)) return b->message;
  return "";
}
}  // namespace stats_internal

// One message of stats.proto, from a table (fields in number order).
template <typename S>
std::string StatsMessageProto(const char* message, StatTable<S> table,
                              std::span<const int> reserved = {}) {
  std::vector<const StatField<S>*> by_number;
  for (const StatField<S>& f : table) by_number.push_back(&f);
  std::sort(by_number.begin(), by_number.end(),
            [](const auto* a, const auto* b) { return a->number < b->number; });
  std::string out =
      std::string("message ") + message + " {\n" + stats_internal::ReservedText(reserved);
  for (const StatField<S>* f : by_number) {
    out += stats_internal::FieldText(
        stats_internal::ProtoType(f->member.index(), stats_internal::SubMessage(*f)), f->name,
        f->number, f->help);
  }
  return out + "}\n";
}

// The messages of the counters tables a stats table embeds, by name (a
// table embedded twice is written once).
template <typename S>
void CountersMessagesProto(StatTable<S> table, std::map<std::string, std::string>* out) {
  for (const StatField<S>& f : table) {
    if (const auto* b = std::get_if<counters::Block<S>>(&f.member)) {
      (*out)[b->message] = stats_internal::CountersMessageText(b->message, b->size, b->row);
    }
  }
}

// The whole of proto/inca/control/v1/stats.proto.
std::string StatsProto();

}  // namespace inca::control
