// The CAIS in-switch reducer: parse -> lookup -> compute -> deparse (CAIS
// design write-up, after arXiv 2605.05628, section 3.2) as a pure
// data-plane Program over a bounded slot memory ("SRAM").
//
// Stage contracts:
//  parse    ParseCais() on the datagram; failures dropped with the parse
//           error's DropReason. Packets carrying RESULT/FALLBACK flags are
//           switch-originated and dropped on ingress.
//  lookup   RuleTable::Lookup(group, layer, chunk); the ingress port must be
//           one of the rule's input ports and the packet's op must match.
//  compute  AllReduce/ReduceScatter: one slot per in-flight chunk keyed by
//           (group, layer, seq_num, chunk); each input port contributes once;
//           when all have, the result is emitted. AllGather/Broadcast are
//           replicated without state.
//  deparse  results are written once into a preallocated buffer and emitted
//           to every egress port (multicast).
//
// Memory: `sram_bytes` are allocated once at Create() and cut into cells of
// 2 x max_payload_bytes (room for f16/bf16 widened to f32 accumulators). A
// pending chunk holds one cell, or one per input port in deterministic mode.
// Completed chunks keep their result (one cell) for `result_hold_ns` so that
// a host that lost the result can get it again, then become tombstones (keys
// only, bounded) that answer late packets with a fallback notice.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "inca/cais/rule_table.h"
#include "inca/dataplane/program.h"
#include "inca/util/counters.h"
#include "inca/wire/cais.h"

namespace inca::cais {

namespace internal {
class SlotPool;
struct SlotKey;
}  // namespace internal

// One group's use of the shared pending capacity against its share
// (CaisConfig::group_share), as of the last shares computed.
struct GroupShare {
  bool claims = false;  // a rule names the group: it holds a share
  size_t pending_chunks = 0;
  size_t share_chunks = 0;
  size_t pending_cells = 0;
  size_t share_cells = 0;
};

struct CaisConfig {
  // Total slot memory, allocated up front.
  size_t sram_bytes = size_t{16} << 20;
  // Admission of new chunks stops when pending cells would exceed this
  // fraction of sram_bytes (CAIS write-up 5.5, tip 2). In (0, 1].
  double sram_usage_limit = 0.75;
  // At most this many chunks pending (being aggregated) at once.
  uint32_t max_pending_chunks = 128;
  // Per-group shares (issue 18): this fraction of max_pending_chunks and of
  // the SRAM admission limit is split equally between the groups that have
  // a rule, each part reserved for its group. A group may use more than its
  // part only out of what no group has reserved; beyond that its new chunks
  // are dropped as group_share. Borrowed capacity is never taken back from
  // a chunk in progress. 0 = no shares. In [0, 1].
  double group_share = 0.5;
  // JOIN_REPLYs and PONGs advise each group's members a window of the
  // group's fair share of the pending limits (FairWindow over the groups
  // present; docs/protocol.md, "Window advice"), which the client keeps
  // to, so that groups together never send more chunks than there are
  // slots. False: no advice (windows as the hosts set them).
  bool advise_window = true;
  // Largest CAIS payload accepted (bytes, multiple of 4). The default fits a
  // 9000-byte jumbo frame: 9000 - 20 (IPv4) - 8 (UDP) - 20 (CAIS).
  uint32_t max_payload_bytes = 8952;
  // A chunk not complete this long after its first contribution is released
  // and its input ports get a fallback notice (CAIS write-up 4.2 timeout_ms).
  // The write-up's example is 50 ms, for ranks that start a collective
  // within microseconds of each other; commodity hosts start one tens of
  // milliseconds apart (a result copied, a thread scheduled), and a chunk
  // whose last rank is merely late must not be handed back. 500 ms stays
  // below the client's default switch_timeout_ms (1 s), so the switch hands
  // back before a client gives up.
  dp::TimeNs timeout_ns = 500 * dp::kNsPerMs;
  // How long a completed chunk's result is kept for retransmissions.
  dp::TimeNs result_hold_ns = 1000 * dp::kNsPerMs;
  // Results bitwise identical whatever the arrival order: contributions are
  // stored per input port and reduced in ascending port order at completion.
  // Costs one cell per input port per pending chunk instead of one.
  bool deterministic = false;
  // Rule table capacity.
  size_t rule_capacity = RuleTable::kDefaultCapacity;
  // Keys of closed (timed-out or evicted) chunks remembered to answer late
  // packets with a fallback notice instead of opening a new slot.
  size_t tombstone_capacity = 65536;
  // Length of the window over which rates() are measured.
  dp::TimeNs rate_window_ns = 100 * dp::kNsPerMs;
  // Operations whose offload decision is remembered (see SetOffloadRange).
  size_t offload_decision_capacity = 4096;
  // Result resends are bounded per port, so that 20-byte requests cannot
  // draw 9,000-byte results out of the switch without limit (issue 18
  // measured 450x): a port starts with resend_credit_max resends and earns
  // resend_credit_per_result for each result (or ReduceScatter ACK) the
  // switch sends it when a chunk completes, holding at most
  // resend_credit_max. A request or late retransmission with no credit left
  // is dropped as resend_limit. Resends to a port are thus at most
  // resend_credit_per_result x its results + resend_credit_max. A lost
  // result costs its owner one resend (or a few, under repeated loss).
  uint32_t resend_credit_per_result = 2;
  uint32_t resend_credit_max = 1024;
  // A switch in a tree (Rule::uplink) asks its parent again for a chunk
  // whose partial went up when one of its inputs asks again (a host's
  // resend or tail probe: the parent's answer may be lost), at most once
  // per this many ns per chunk (docs/design/tree.md, "Loss").
  dp::TimeNs uplink_probe_ns = 1 * dp::kNsPerMs;
  // ... and on its own: a partial whose parent has not answered for this
  // long makes a request up (the parent answers with its result, PENDING 0
  // and the partial goes again, or PENDING 1), the wait doubling per
  // unanswered request up to 32 times. So a partial or result lost on the
  // uplink costs about this long, not a host's retransmission timeout
  // (docs/design/tree.md, "Loss"). 0: only the inputs' requests ask.
  dp::TimeNs uplink_rto_ns = 2 * dp::kNsPerMs;

  // InvalidArgument naming the field and the accepted range.
  absl::Status Validate() const;
  size_t cell_bytes() const;
};

struct SramUsage {
  size_t sram_bytes = 0;
  size_t cell_bytes = 0;
  size_t cells_total = 0;
  size_t cells_pending = 0;   // held by chunks being aggregated
  size_t cells_retained = 0;  // held by completed results
  uint32_t pending_chunks = 0;
  uint32_t retained_chunks = 0;
  uint32_t max_pending_chunks = 0;
  size_t tombstones = 0;
  double usage_limit = 0;
  // Fraction of sram_bytes held by pending chunks (what admission checks).
  double pending_usage() const {
    return sram_bytes
               ? static_cast<double>(cells_pending * cell_bytes) / static_cast<double>(sram_bytes)
               : 0;
  }
  // Fraction of sram_bytes held by pending chunks and retained results.
  double usage() const {
    return sram_bytes ? static_cast<double>((cells_pending + cells_retained) * cell_bytes) /
                            static_cast<double>(sram_bytes)
                      : 0;
  }
  // What the offload controller acts on and the dashboard calls pressure
  // (SramPressure): pending usage against the admission limit.
  double pressure() const;
};

// SRAM pressure, the one definition: aggregation memory against what
// admission allows (pending_usage / usage_limit). Retained results are a
// cache that gives way (evicted oldest first) and do not count; without a
// limit, plain usage. The offload controller raises its threshold while it
// stays above OffloadControllerConfig::high_sram (0.8); the dashboard and
// inca_sram_pressure show the same figure.
double SramPressure(double pending_usage, double usage_limit, double usage);

// Slot-holding times (a chunk's first contribution to its completion, so
// the wait for the slowest rank) in log2 buckets: bucket b holds
// [2^b, 2^(b+1)) microseconds (bucket 0 also less), the last one the rest.
inline constexpr int kHoldingBuckets = 24;
int HoldingBucket(dp::TimeNs held);
// The q-quantile (0 < q <= 1) of the bucketed times in microseconds,
// interpolated linearly inside its bucket; 0 when there is none.
double HoldingQuantileUs(const std::array<uint64_t, kHoldingBuckets>& buckets, double q);

// Per-group figures (and the same for the whole switch in CaisCounters).
struct GroupCounters {
  uint64_t rx_packets = 0;        // packets that parsed and named this group
  uint64_t contributions = 0;     // aggregated into a slot
  uint64_t completed_chunks = 0;  // reductions finished and emitted
  uint64_t reduced_bytes = 0;     // payload bytes folded into reductions
  uint64_t replicated = 0;        // AllGather/Broadcast packets replicated
  uint64_t results_resent = 0;    // result re-sent after completion
  uint64_t pending_answers = 0;   // PENDING answers to result requests (tail probes)
  uint64_t timeouts = 0;          // chunks released by timeout
  uint64_t fallback_notices = 0;  // fallback notices emitted
  uint64_t evicted_results = 0;   // retained results dropped for memory/age
  uint64_t pending_ns_total = 0;  // sum over completed chunks of their time pending (ns)
  std::array<uint64_t, kHoldingBuckets> holding_us_log2{};  // the same times, bucketed
  uint64_t offload_accepted_ops = 0;                        // operations the offload policy let in
  uint64_t offload_declined_ops = 0;                        // operations it sent to the host path
  uint64_t offload_explored_ops = 0;  // of those two: sent the other way to be measured
  uint64_t declined_notices = 0;      // DECLINED notices emitted
  uint64_t uplink_partials = 0;       // partials sent up a tree (Rule::uplink)
  uint64_t uplink_requests = 0;       // requests to the parent (an input asked again)
  uint64_t uplink_resent = 0;         // partials sent up again (the parent lacked them)
  uint64_t parent_results = 0;        // parent's results multicast to the inputs
  uint64_t dropped = 0;
  std::array<uint64_t, dp::kDropReasonCount> drops_by_reason{};
  // Gauge, not a counter: slot cells this group holds now (pending chunks
  // and retained results); x SramUsage::cell_bytes for bytes.
  uint64_t sram_cells = 0;
};

// GroupCounters' counters, declared once (inca/util/counters.h): the stop
// line's and /stats.json's JSON, /metrics (as inca_cais_<prom> switch-wide
// and inca_cais_group_<prom>{group} per group) and docs/monitoring.md's rows
// come from this table. `prom` is the family's suffix here.
inline constexpr counters::Counter<GroupCounters> kGroupCounters[] = {
    {1, "rx_packets", "received_packets_total", counters::Kind::kCounter, 1,
     "CAIS packets that parsed and named the group.", &GroupCounters::rx_packets},
    {2, "contributions", "contributions_total", counters::Kind::kCounter, 1,
     "Contributions aggregated into a slot.", &GroupCounters::contributions},
    {3, "completed_chunks", "completed_chunks_total", counters::Kind::kCounter, 1,
     "Reductions finished and emitted (chunks).", &GroupCounters::completed_chunks},
    {4, "reduced_bytes", "reduced_bytes_total", counters::Kind::kCounter, 1,
     "Payload bytes folded into reductions.", &GroupCounters::reduced_bytes},
    {5, "replicated", "replicated_packets_total", counters::Kind::kCounter, 1,
     "AllGather/Broadcast packets replicated.", &GroupCounters::replicated},
    {6, "results_resent", "results_resent_total", counters::Kind::kCounter, 1,
     "Results re-sent after completion.", &GroupCounters::results_resent},
    {7, "pending_answers", "pending_answers_total", counters::Kind::kCounter, 1,
     "PENDING answers to result requests for chunks not complete (clients' tail probes).",
     &GroupCounters::pending_answers},
    {8, "timeouts", "timeouts_total", counters::Kind::kCounter, 1,
     "Chunks released by timeout (their ports got a fallback notice).", &GroupCounters::timeouts},
    {9, "fallback_notices", "fallback_notices_total", counters::Kind::kCounter, 1,
     "Fallback notices emitted.", &GroupCounters::fallback_notices},
    {10, "evicted_results", "evicted_results_total", counters::Kind::kCounter, 1,
     "Retained results dropped for memory or age.", &GroupCounters::evicted_results},
    {11, "offload_accepted_ops", "offload_accepted_operations_total", counters::Kind::kCounter, 1,
     "Operations the offload policy let into the switch.", &GroupCounters::offload_accepted_ops},
    {12, "offload_declined_ops", "offload_declined_operations_total", counters::Kind::kCounter, 1,
     "Operations the offload policy sent to the host path.", &GroupCounters::offload_declined_ops},
    {13, "offload_explored_ops", "offload_explored_operations_total", counters::Kind::kCounter, 1,
     "Operations sent the other way once so that path is measured.",
     &GroupCounters::offload_explored_ops},
    {14, "declined_notices", "declined_notices_total", counters::Kind::kCounter, 1,
     "DECLINED notices emitted.", &GroupCounters::declined_notices},
    {15, "dropped", "dropped_total", counters::Kind::kCounter, 1,
     "Packets of the group dropped, all reasons (by reason: dropped_packets_total).",
     &GroupCounters::dropped},
    {16, "sram_cells", "sram_cells", counters::Kind::kGauge, 1,
     "Slot cells held now by pending chunks and retained results (times the cell size: "
     "sram_bytes).",
     &GroupCounters::sram_cells},
    {17, "uplink_partials", "uplink_partials_total", counters::Kind::kCounter, 1,
     "Partials sent up a tree of switches (one per chunk reduced here for the parent).",
     &GroupCounters::uplink_partials},
    {18, "uplink_requests", "uplink_requests_total", counters::Kind::kCounter, 1,
     "Requests to the parent switch for a chunk's answer (an input asked again).",
     &GroupCounters::uplink_requests},
    {19, "uplink_resent", "uplink_resent_total", counters::Kind::kCounter, 1,
     "Partials sent up again because the parent said it lacked them.",
     &GroupCounters::uplink_resent},
    {20, "parent_results", "parent_results_total", counters::Kind::kCounter, 1,
     "Parent switch results multicast to this switch's inputs.", &GroupCounters::parent_results},
};
// Throughput over the last complete measurement window (rate_window_ns of
// injected time). All zero until one window has passed.
struct CaisRates {
  double reductions_per_s = 0;     // chunks completed
  double reduced_bytes_per_s = 0;  // contribution payload bytes folded in
  double packets_per_s = 0;        // packets received
  dp::TimeNs window_end_ns = 0;
};

class CaisReducer final : public dp::Program {
 public:
  static absl::StatusOr<std::unique_ptr<CaisReducer>> Create(const CaisConfig& config);
  ~CaisReducer() override;

  std::string_view name() const override { return "cais"; }
  const CaisConfig& config() const { return config_; }

  // Changes the limits that may change while traffic flows:
  // sram_usage_limit, max_pending_chunks, timeout_ns, result_hold_ns,
  // rate_window_ns. Every other field of `config` must equal the current
  // one (FailedPrecondition names the first that differs: those size memory
  // at Create()). InvalidArgument as Create() for bad values.
  absl::Status UpdateConfig(const CaisConfig& config);

  RuleTable& rules() { return rules_; }
  const RuleTable& rules() const { return rules_; }

  SramUsage sram() const;
  // The group's pending capacity against its share. Shares follow the rule
  // table: recomputed at the next admission after rules change.
  GroupShare share(uint8_t group_id) const;
  // Groups a rule names (each holds a share once shares are recomputed).
  size_t claiming_groups() const;
  // The most chunks one group may keep pending so that `groups` groups,
  // each as many and each chunk holding `cells_per_chunk` cells, fit the
  // pending limits together: min(max_pending_chunks, the SRAM admission
  // limit in cells / cells_per_chunk) / groups, at least 1. What a switch
  // advises its members' windows (wire::MgmtMessage::window_chunks).
  uint32_t FairWindow(size_t groups, size_t cells_per_chunk) const;
  const GroupCounters& group(uint8_t group_id) const { return groups_[group_id]; }
  const GroupCounters& totals() const { return totals_; }
  const CaisRates& rates() const { return rates_; }

  // Offload admission (CAIS write-up 3.3): the offload controller sets, per
  // group, the range of operation sizes worth reducing here. An operation's
  // size is estimated at its first packet that would open a slot as
  // total_chunks x that packet's payload_len; the decision (accept iff
  // min_bytes <= size <= max_bytes) is remembered for offload_decision_capacity operations
  // (oldest forgotten first), so every chunk and every rank of an operation
  // gets the same answer even when the policy changes mid-operation. Packets
  // of a declined operation are answered on their port with a DECLINED
  // notice (flags FALLBACK|RESULT|DECLINED, empty payload) and dropped as
  // `offload_declined`. [0, UINT64_MAX] (the default) accepts everything;
  // min > max declines everything. Until a group's policy is first set,
  // nothing is recorded for it (no cost).
  void SetOffloadRange(uint8_t group_id, uint64_t min_bytes, uint64_t max_bytes);
  // Decisions made from measurements, per size class (bit b: estimated size
  // in [2^b, 2^(b+1))): for classes in `measured`, `offload` decides and the
  // range does not. Each class in `explore` sends its next operation the
  // other way once (counted as offload_explored_ops); setting it again while
  // it is pending changes nothing. Marks the group's policy as set.
  void SetOffloadBins(uint8_t group_id, uint64_t measured, uint64_t offload, uint64_t explore);
  // The group is held on the host path by the offload controller (its
  // fallback ratio): its declines say so (wire::DeclineReason::kHeld).
  void SetOffloadHold(uint8_t group_id, bool held) { offload_held_[group_id] = held; }
  uint64_t min_offload_bytes(uint8_t group_id) const { return min_offload_bytes_[group_id]; }
  uint64_t max_offload_bytes(uint8_t group_id) const { return max_offload_bytes_[group_id]; }

 private:
  explicit CaisReducer(const CaisConfig& config);

  dp::Outcome DoProcess(std::span<const uint8_t> packet, dp::PortId ingress, dp::TimeNs now,
                        dp::PacketSink& out) override;
  void DoAdvance(dp::TimeNs now, dp::PacketSink& out) override;

  void Expire(dp::TimeNs now, dp::PacketSink& out);
  // Gives pending slot `slot` up: a FALLBACK notice (block = `why`) to each
  // of its input ports, its cells released, the slot closed.
  void HandBack(uint32_t slot, uint8_t why, dp::PacketSink& out);
  void UpdateRates(dp::TimeNs now);
  // What DoProcess found out about a data packet before its slot lookup.
  struct Arrival {
    const wire::CaisHeader& h;
    dp::PortId ingress;
    bool request;  // a result request (no payload)
    bool single;   // AllGather/Broadcast: one contributor per chunk
    PortMask contributors;
    uint8_t block;  // the single contributor's index (AllGather, Broadcast)
  };
  // DoProcess's two cases after the lookup (reducer.cc): the chunk has a
  // slot, or it has none yet. An outcome when the packet ends there.
  std::optional<dp::Outcome> AtSlot(uint32_t slot, const Arrival& arrival, dp::TimeNs now,
                                    dp::PacketSink& out);
  std::optional<dp::Outcome> OpenSlot(const Arrival& arrival, const Rule& rule, dp::TimeNs now,
                                      uint32_t* slot, dp::PacketSink& out);
  dp::Outcome Drop(int group, dp::DropReason reason);  // group < 0: not parsed
  void Contribute(uint32_t slot, dp::PortId ingress, std::span<const uint8_t> payload,
                  dp::TimeNs now);
  void Finish(uint32_t slot, dp::TimeNs now, dp::PacketSink& out);
  // Finish's two halves: the reduction into cell 0 in wire format (the
  // other cells freed), and the result's emission to the outputs, each
  // port's copy saying how long its contribution waited: until `wait_end`,
  // plus `extra_wait` (a parent's wait).
  void Fold(uint32_t slot);
  void Deliver(uint32_t slot, dp::TimeNs now, dp::TimeNs wait_end, dp::TimeNs extra_wait,
               dp::PacketSink& out);
  // A tree of switches (Rule::uplink; src/cais/uplink.cc). SendUp: every
  // input contributed, the partial goes to the parent. AskParent: an input
  // asked again, so a request goes up (uplink_probe_ns apart at most).
  // FromParent: the parent's answer (result, notice or PENDING) for a chunk.
  void SendUp(uint32_t slot, dp::TimeNs now, dp::PacketSink& out);
  // The uplink timer: ArmUp sets slot's next own request (uplink_rto_ns,
  // doubled per unanswered one); RunUpTimers makes the requests now due.
  void ArmUp(uint32_t slot, dp::TimeNs now);
  void RunUpTimers(dp::TimeNs now, dp::PacketSink& out);
  void AskParent(uint32_t slot, dp::TimeNs now, dp::PacketSink& out);
  void EmitUp(uint32_t slot, bool request, dp::PacketSink& out);
  dp::Outcome FromParent(const wire::CaisPacketView& pkt, const Rule& rule, dp::TimeNs now,
                         dp::PacketSink& out);
  // An AllGather or Broadcast chunk contributed beyond the parent: its
  // result comes down with no slot here, goes to the outputs and is kept
  // (when there is room) for the hosts' requests, which otherwise go up
  // (AskParentFor, within the asking port's resend credit).
  dp::Outcome FromAbove(const wire::CaisPacketView& pkt, const Rule& rule, dp::TimeNs now,
                        dp::PacketSink& out);
  dp::Outcome AskParentFor(const wire::CaisHeader& asked, dp::PortId ingress, dp::PortId uplink,
                           dp::PacketSink& out);
  // A slot for `key` (evicting retained results if need be), or why not.
  std::optional<dp::DropReason> Admit(const internal::SlotKey& key, int ncells, dp::TimeNs now,
                                      uint32_t* slot);
  // The parent declined the operation: DECLINED notices (`why`) to the
  // slot's inputs, the slot closed, the decision kept for its other chunks.
  void DeclineFromParent(uint32_t slot, uint8_t why, dp::PacketSink& out);
  // At a switch with an uplink only the root decides: the decline it sent
  // for this chunk's operation (kept by DeclineFromParent), else 0. This
  // switch's own offload policy does not apply to the group.
  uint8_t ParentDecision(const wire::CaisHeader& h) const;
  void RememberDecision(uint64_t op_key, uint8_t decision);
  // An operation's key among the offload decisions: group, layer, seq.
  static uint64_t OpKey(const wire::CaisHeader& h) {
    return (uint64_t{h.group_id} << 48) | (uint64_t{h.layer_id} << 32) | uint64_t{h.seq_num};
  }
  void SendRetained(uint32_t slot, dp::PortId port, dp::PacketSink& out);
  // Emits `head` and the result in `slot`'s cell 0, with `share`
  // (dp::PacketSink::EmitGather).
  void EmitResult(uint32_t slot, dp::PortId port, std::span<const uint8_t> head, uint64_t share,
                  dp::PacketSink& out);
  void ReleaseCells(uint8_t group, uint64_t n) {
    groups_[group].sram_cells -= n;
    totals_.sram_cells -= n;
  }
  void Bump(uint8_t group, uint64_t GroupCounters::*field, uint64_t n = 1) {
    groups_[group].*field += n;
    totals_.*field += n;
  }

  // Recomputes the groups' shares from the rule table and group_share.
  void Reshare();

  CaisConfig config_;
  RuleTable rules_;
  std::unique_ptr<internal::SlotPool> pool_;
  uint64_t shares_version_ = UINT64_MAX;  // rules_.version() the shares follow
  std::vector<uint8_t> out_buf_;          // header + max payload, reused per emission
  std::vector<uint32_t> scratch_;         // deterministic-mode accumulator
  uint64_t results_emitted_ = 0;          // the `share` of each result's copies
  std::array<GroupCounters, 256> groups_{};
  GroupCounters totals_;
  // Resends each port may still get (CaisConfig::resend_credit_*).
  std::array<uint32_t, dp::kMaxPorts> resend_credit_{};
  void EarnResend(dp::PortId port) {
    resend_credit_[port] = std::min(config_.resend_credit_max,
                                    resend_credit_[port] + config_.resend_credit_per_result);
  }
  CaisRates rates_;
  bool rate_started_ = false;
  dp::TimeNs rate_start_ = 0;
  uint64_t rate_base_chunks_ = 0, rate_base_bytes_ = 0, rate_base_packets_ = 0;

  // Offload admission state (SetOffloadRange).
  // Why the operation of `h` is declined (wire::DeclineReason), or 0 when it
  // is accepted, deciding it first (by_rule: a host_path rule matched, which
  // declines it).
  uint8_t OffloadDeclined(const wire::CaisHeader& h, bool by_rule);
  std::array<bool, 256> offload_held_{};  // SetOffloadHold
  std::array<uint64_t, 256> min_offload_bytes_{};
  std::array<uint64_t, 256> max_offload_bytes_;
  std::array<bool, 256> offload_policy_set_{};  // decisions are kept from then on
  std::array<uint64_t, 256> measured_bins_{}, offload_bins_{}, explore_bins_{};
  absl::flat_hash_map<uint64_t, uint8_t> op_decisions_;  // op key -> OffloadDeclined
  std::vector<uint64_t> op_ring_;                        // insertion order, for eviction
  size_t op_ring_next_ = 0;
  // The decision last looked up or made, so that the chunks of one operation
  // skip the map. Always one of op_decisions_: only inserting an operation
  // evicts one, and the inserted one becomes the last.
  std::optional<std::pair<uint64_t, uint8_t>> last_decision_;
  // Partials waiting on the parent, by when this switch asks about them
  // (a slot's entry is stale once its up_due moved or it closed). At most
  // kMaxUpTimersPerSlot x max_pending_chunks: past that a partial is asked
  // about only when its inputs ask.
  struct UpTimer {
    dp::TimeNs due;
    uint32_t slot;
    friend bool operator>(const UpTimer& a, const UpTimer& b) { return a.due > b.due; }
  };
  static constexpr size_t kMaxUpTimersPerSlot = 2;
  std::priority_queue<UpTimer, std::vector<UpTimer>, std::greater<>> up_timers_;
};

}  // namespace inca::cais
