// Why a packet (or a queued OLAF update) was dropped: the one enum every
// program, the OLAF queue, the drivers and the metrics share, declared once.
//
// Each entry of INCA_DROP_REASONS gives the enumerator, the name exported as
// the `reason` label and JSON key, where it happens, and a one-line help. The
// enum, ToString(), the OLAF queue's subset and docs/monitoring.md's table all
// come from this list. Append only: values and names are exported.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace inca::dp {

// X(enumerator, name, where, help)
#define INCA_DROP_REASONS(X)                                                                    \
  X(kNone, "none", "-", "Not a drop (never counted).")                                          \
  X(kTooShort, "too_short", "parse", "Shorter than its header.")                                \
  X(kBadVersion, "bad_version", "parse", "A protocol version this switch does not speak.")      \
  X(kUnknownOp, "unknown_op", "parse (CAIS)", "An op_type CAIS does not define.")               \
  X(kUnknownReduceOp, "unknown_reduce_op", "parse (CAIS)", "A reduce_op CAIS does not define.") \
  X(kUnknownDType, "unknown_dtype", "parse (CAIS)", "A dtype CAIS does not define.")            \
  X(kUnknownFlags, "unknown_flags", "parse", "Flag bits the protocol reserves.")                \
  X(kPayloadLenMismatch, "payload_len_mismatch", "parse",                                       \
    "payload_len disagrees with the datagram's length.")                                        \
  X(kChunkOutOfRange, "chunk_out_of_range", "parse (CAIS)", "chunk_id >= chunk_count.")         \
  X(kPayloadMisaligned, "payload_misaligned", "parse",                                          \
    "A payload that is not a whole number of elements.")                                        \
  X(kEmptyPayload, "empty_payload", "parse", "A data packet without payload.")                  \
  X(kBadIngressPort, "bad_ingress_port", "ingress", "Ingress port beyond the port table.")      \
  X(kSwitchOriginated, "switch_originated", "ingress (CAIS)",                                   \
    "A RESULT or FALLBACK flag on a packet that came from a host.")                             \
  X(kNoRule, "no_rule", "match (CAIS)", "No rule matches the group, layer and chunk.")          \
  X(kPortNotInRule, "port_not_in_rule", "match (CAIS)",                                         \
    "The ingress port is not one of the rule's inputs.")                                        \
  X(kOpMismatch, "op_mismatch", "match (CAIS)", "The rule is for another op.")                  \
  X(kPayloadTooLarge, "payload_too_large", "slot (CAIS), queue (OLAF)",                         \
    "Larger than a slot cell, or than the OLAF queue's max payload.")                           \
  X(kShapeMismatch, "shape_mismatch", "slot (CAIS)",                                            \
    "Disagrees with the chunk's first contribution.")                                           \
  X(kDuplicate, "duplicate", "slot (CAIS)", "The port already contributed to this chunk.")      \
  X(kSlotsExhausted, "slots_exhausted", "slot (CAIS)", "max_pending_chunks reached.")           \
  X(kSramLimit, "sram_limit", "slot (CAIS)", "sram_usage_limit reached.")                       \
  X(kChunkClosed, "chunk_closed", "slot (CAIS)",                                                \
    "The chunk timed out or its result was evicted; a fallback notice was sent.")               \
  X(kNotContributor, "not_contributor", "slot (CAIS)",                                          \
    "AllGather/Broadcast data from a port that does not own the chunk.")                        \
  X(kNotReady, "not_ready", "slot (CAIS)", "A result request for a chunk not completed yet.")   \
  X(kOffloadDeclined, "offload_declined", "policy (CAIS)",                                      \
    "The offload policy declined the operation; a DECLINED notice was sent.")                   \
  X(kUnknownType, "unknown_type", "parse (OLAF)", "An OLAF type other than UPDATE/ACK/MODEL.")  \
  X(kFragmentOutOfRange, "fragment_out_of_range", "parse (OLAF)",                               \
    "frag_index >= frag_count, or frag_count 0.")                                               \
  X(kZeroMergedCount, "zero_merged_count", "parse (OLAF)",                                      \
    "An UPDATE claiming to carry no worker update.")                                            \
  X(kWrongDirection, "wrong_direction", "ingress (OLAF)",                                       \
    "An UPDATE from the PS port, or an ACK/MODEL from a worker port.")                          \
  X(kUnboundPort, "unbound_port", "ingress (OLAF)",                                             \
    "An unstamped UPDATE from a port with no bound flow.")                                      \
  X(kUnknownCluster, "unknown_cluster", "match (OLAF)",                                         \
    "No cluster table entry and no cluster in the header.")                                     \
  X(kUnknownWorker, "unknown_worker", "match (OLAF)", "An ACK for a worker never seen.")        \
  X(kNoRoute, "no_route", "egress",                                                             \
    "Nowhere to send it (a MODEL without workers, a passthrough without a route).")             \
  X(kQueueFull, "queue_full", "queue (OLAF)",                                                   \
    "No room, nothing to merge with, nothing to displace.")                                     \
  X(kClusterCap, "cluster_cap", "queue (OLAF)",                                                 \
    "The cluster holds its fair share of the queue and nothing to merge with.")                 \
  X(kStaleOnArrival, "stale_on_arrival", "queue (OLAF)",                                        \
    "Already older than the AoM threshold on arrival.")                                         \
  X(kWorkersExhausted, "workers_exhausted", "table (OLAF)", "The worker table is full.")        \
  X(kClustersExhausted, "clusters_exhausted", "table (OLAF)",                                   \
    "A new cluster beyond the queue's max_clusters.")                                           \
  X(kResendLimit, "resend_limit", "egress (CAIS)",                                              \
    "A result resend beyond the port's credit (resend_credit_*).")                              \
  X(kGroupShare, "group_share", "slot (CAIS)",                                                  \
    "The group is over its share and the rest is reserved (group_share).")                      \
  X(kStaleEvicted, "stale_evicted", "queue (OLAF), after queueing",                             \
    "A queued update evicted: queued for the AoM threshold without leaving.")                   \
  X(kDisplaced, "displaced", "queue (OLAF), after queueing",                                    \
    "A queued update removed to give a cluster without entries a slot.")                        \
  X(kParentStale, "parent_stale", "uplink (CAIS)",                                              \
    "A parent switch's answer for a chunk this switch no longer waits on (a duplicate).")

#define INCA_DROP_REASON_ENUMERATOR(e, name, where, help) e,
enum class DropReason : uint8_t { INCA_DROP_REASONS(INCA_DROP_REASON_ENUMERATOR) kCount };
#undef INCA_DROP_REASON_ENUMERATOR
inline constexpr size_t kDropReasonCount = static_cast<size_t>(DropReason::kCount);

struct DropReasonInfo {
  const char* name;
  const char* where;
  const char* help;
};

#define INCA_DROP_REASON_INFO(e, name, where, help) DropReasonInfo{name, where, help},
inline constexpr std::array<DropReasonInfo, kDropReasonCount> kDropReasons = {
    INCA_DROP_REASONS(INCA_DROP_REASON_INFO)};
#undef INCA_DROP_REASON_INFO

constexpr std::string_view ToString(DropReason r) {
  const auto i = static_cast<size_t>(r);
  return i < kDropReasonCount ? kDropReasons[i].name : "unknown";
}

// The reason whose name is `name`; kCount when none is.
constexpr DropReason DropReasonByName(std::string_view name) {
  for (size_t i = 0; i < kDropReasonCount; ++i) {
    if (kDropReasons[i].name == name) return static_cast<DropReason>(i);
  }
  return DropReason::kCount;
}

// The table of docs/monitoring.md: one row per reason (kNone left out).
std::string DropReasonsMarkdown();

}  // namespace inca::dp
