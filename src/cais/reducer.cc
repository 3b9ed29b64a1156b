#include "inca/cais/reducer.h"

#include <algorithm>
#include <bit>
#include <bitset>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cais/blocks.h"
#include "cais/notices.h"
#include "cais/slot_pool.h"
#include "inca/wire/mgmt.h"
#include "reduce/kernels.h"

namespace inca::cais {

int HoldingBucket(dp::TimeNs held) {
  const uint64_t us = held <= 0 ? 0 : static_cast<uint64_t>(held) / 1000;
  const int b = us == 0 ? 0 : 63 - std::countl_zero(us);
  return std::min(b, kHoldingBuckets - 1);
}

double HoldingQuantileUs(const std::array<uint64_t, kHoldingBuckets>& buckets, double q) {
  uint64_t total = 0;
  for (uint64_t n : buckets) total += n;
  if (total == 0) return 0;
  const double want = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  double below = 0;
  for (int b = 0; b < kHoldingBuckets; ++b) {
    const auto n = static_cast<double>(buckets[static_cast<size_t>(b)]);
    if (n > 0 && below + n >= want) {
      const double lo = b == 0 ? 0 : std::ldexp(1.0, b), hi = std::ldexp(1.0, b + 1);
      return lo + (hi - lo) * std::clamp((want - below) / n, 0.0, 1.0);
    }
    below += n;
  }
  return std::ldexp(1.0, kHoldingBuckets);
}

using dp::DropReason;
using dp::Outcome;
using dp::PortId;
using dp::TimeNs;
using internal::BlockOf;
using internal::Carries;
using internal::IsSingleContributor;
using internal::kAckNotice;
using internal::kDeclinedNotice;
using internal::kFallbackNotice;
using internal::kNoSlot;
using internal::kPendingNotice;
using internal::MemberPort;
using internal::Members;
using internal::SendNotice;
using internal::Slot;
using internal::SlotKey;
using internal::SlotPool;
using internal::SlotState;
using wire::CaisOp;
using wire::CaisParseError;
namespace flags = wire::cais_flags;

namespace {

// The switch wait of `port`'s contribution to a pending slot whose wait
// ended at `end`, plus `extra` (a parent's; wire::EncodeWait; 0 for a port
// that did not contribute).
uint8_t WaitCode(const Slot& s, PortId port, TimeNs end, TimeNs extra = 0) {
  if (!s.inputs.contains(port)) return 0;
  const TimeNs at = s.since + s.arrival[static_cast<size_t>(s.inputs.rank_of(port))];
  return wire::EncodeWait(end - at + extra);
}

DropReason FromParseError(CaisParseError e) {
  switch (e) {
    case CaisParseError::kOk: return DropReason::kNone;
    case CaisParseError::kTooShort: return DropReason::kTooShort;
    case CaisParseError::kBadVersion: return DropReason::kBadVersion;
    case CaisParseError::kUnknownOp: return DropReason::kUnknownOp;
    case CaisParseError::kUnknownReduceOp: return DropReason::kUnknownReduceOp;
    case CaisParseError::kUnknownDType: return DropReason::kUnknownDType;
    case CaisParseError::kUnknownFlags: return DropReason::kUnknownFlags;
    case CaisParseError::kPayloadLenMismatch: return DropReason::kPayloadLenMismatch;
    case CaisParseError::kChunkOutOfRange: return DropReason::kChunkOutOfRange;
    case CaisParseError::kPayloadMisaligned: return DropReason::kPayloadMisaligned;
    case CaisParseError::kEmptyPayload: return DropReason::kEmptyPayload;
  }
  return DropReason::kTooShort;
}

// The fields every contribution to one chunk must agree on.
// (A result request carries no payload, so its length is not compared.)
// Whether `b` is a packet of the operation slot `s` was opened for: the
// ranks agree on the collective, op, type, sizes and (Broadcast, or a
// broadcast carried as an AllReduce) the root.
bool SameShape(const Slot& s, const wire::CaisHeader& b, bool request) {
  const wire::CaisHeader& a = s.header;
  return a.op == b.op && a.reduce_op == b.reduce_op && a.dtype == b.dtype &&
         (request || a.payload_len == b.payload_len) && a.total_chunks == b.total_chunks &&
         (a.op == CaisOp::kBroadcast   ? a.block == b.block
          : a.op == CaisOp::kAllGather ? true
                                       : s.tag == b.block);
}

}  // namespace

double SramPressure(double pending_usage, double usage_limit, double usage) {
  return usage_limit > 0 ? pending_usage / usage_limit : usage;
}

double SramUsage::pressure() const {
  return SramPressure(pending_usage(), usage_limit, usage());
}

absl::StatusOr<std::unique_ptr<CaisReducer>> CaisReducer::Create(const CaisConfig& config) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  return std::unique_ptr<CaisReducer>(new CaisReducer(config));
}

CaisReducer::CaisReducer(const CaisConfig& config)
    : config_(config),
      rules_(config.rule_capacity),
      pool_(std::make_unique<SlotPool>(config.sram_bytes, config.cell_bytes(),
                                       config.max_pending_chunks, config.sram_usage_limit,
                                       config.tombstone_capacity)),
      out_buf_(wire::kCaisHeaderBytes + config.max_payload_bytes),
      scratch_(config.cell_bytes() / 4) {
  max_offload_bytes_.fill(UINT64_MAX);
  resend_credit_.fill(config.resend_credit_max);
}

CaisReducer::~CaisReducer() = default;

absl::Status CaisReducer::UpdateConfig(const CaisConfig& c) {
  if (absl::Status s = c.Validate(); !s.ok()) return s;
  const char* fixed = c.sram_bytes != config_.sram_bytes                   ? "sram_bytes"
                      : c.max_payload_bytes != config_.max_payload_bytes   ? "max_payload_bytes"
                      : c.deterministic != config_.deterministic           ? "deterministic"
                      : c.rule_capacity != config_.rule_capacity           ? "rule_capacity"
                      : c.tombstone_capacity != config_.tombstone_capacity ? "tombstone_capacity"
                      : c.offload_decision_capacity != config_.offload_decision_capacity
                          ? "offload_decision_capacity"
                          : nullptr;
  if (fixed != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(fixed,
                     " sizes the switch's memory and cannot change while it runs; "
                     "restart the switch with the new value"));
  }
  config_ = c;
  for (uint32_t& credit : resend_credit_) credit = std::min(credit, c.resend_credit_max);
  pool_->SetLimits(c.max_pending_chunks, c.sram_usage_limit, c.sram_bytes);
  Reshare();
  return absl::OkStatus();
}

void CaisReducer::Reshare() {
  std::bitset<256> claims;
  for (unsigned g = 0; g < 256; ++g) claims[g] = rules_.HasGroup(static_cast<uint8_t>(g));
  pool_->SetShares(config_.group_share, claims);
  shares_version_ = rules_.version();
}

GroupShare CaisReducer::share(uint8_t group_id) const {
  GroupShare s;
  const auto& chunks = pool_->chunk_shares();
  const auto& cells = pool_->cell_shares();
  s.claims = chunks.claims(group_id);
  s.pending_chunks = chunks.usage(group_id);
  s.share_chunks = s.claims ? chunks.share() : 0;
  s.pending_cells = cells.usage(group_id);
  s.share_cells = s.claims ? cells.share() : 0;
  return s;
}

size_t CaisReducer::claiming_groups() const {
  size_t n = 0;
  for (unsigned g = 0; g < 256; ++g) n += rules_.HasGroup(static_cast<uint8_t>(g)) ? 1 : 0;
  return n;
}

uint32_t CaisReducer::FairWindow(size_t groups, size_t cells_per_chunk) const {
  const size_t chunks =
      std::min<size_t>(config_.max_pending_chunks,
                       pool_->pending_cell_limit() / std::max<size_t>(1, cells_per_chunk));
  return static_cast<uint32_t>(std::max<size_t>(1, chunks / std::max<size_t>(1, groups)));
}

SramUsage CaisReducer::sram() const {
  SramUsage u;
  u.sram_bytes = config_.sram_bytes;
  u.cell_bytes = pool_->cell_bytes();
  u.cells_total = pool_->cells_total();
  u.cells_pending = pool_->cells_pending();
  u.cells_retained = pool_->cells_retained();
  u.pending_chunks = pool_->pending_chunks();
  u.retained_chunks = pool_->retained_chunks();
  u.max_pending_chunks = config_.max_pending_chunks;
  u.tombstones = pool_->tombstones();
  u.usage_limit = config_.sram_usage_limit;
  return u;
}

Outcome CaisReducer::Drop(int group, DropReason reason) {
  const auto r = static_cast<size_t>(reason);
  ++totals_.dropped;
  ++totals_.drops_by_reason[r];
  if (group >= 0) {
    ++groups_[static_cast<size_t>(group)].dropped;
    ++groups_[static_cast<size_t>(group)].drops_by_reason[r];
  }
  return Outcome::Dropped(reason);
}

void CaisReducer::DoAdvance(TimeNs now, dp::PacketSink& out) {
  Expire(now, out);
  RunUpTimers(now, out);
}

void CaisReducer::UpdateRates(TimeNs now) {
  if (!rate_started_) {
    rate_started_ = true;
    rate_start_ = now;
    return;
  }
  const TimeNs dt = now - rate_start_;
  if (dt < config_.rate_window_ns) return;
  const double per_s = 1e9 / static_cast<double>(dt);
  const uint64_t packets = counters().rx_packets;
  rates_.reductions_per_s =
      static_cast<double>(totals_.completed_chunks - rate_base_chunks_) * per_s;
  rates_.reduced_bytes_per_s =
      static_cast<double>(totals_.reduced_bytes - rate_base_bytes_) * per_s;
  rates_.packets_per_s = static_cast<double>(packets - rate_base_packets_) * per_s;
  rates_.window_end_ns = now;
  rate_start_ = now;
  rate_base_chunks_ = totals_.completed_chunks;
  rate_base_bytes_ = totals_.reduced_bytes;
  rate_base_packets_ = packets;
}

void CaisReducer::Expire(TimeNs now, dp::PacketSink& out) {
  UpdateRates(now);
  for (uint32_t i = pool_->oldest_pending();
       i != kNoSlot && pool_->slot(i).since + config_.timeout_ns <= now;
       i = pool_->oldest_pending()) {
    Bump(pool_->slot(i).key.group, &GroupCounters::timeouts);
    HandBack(i, wire::kFallbackClosed, out);
  }
  for (uint32_t i = pool_->oldest_completed();
       i != kNoSlot && pool_->slot(i).since + config_.result_hold_ns <= now;
       i = pool_->oldest_completed()) {
    Bump(pool_->slot(i).key.group, &GroupCounters::evicted_results);
    ReleaseCells(pool_->slot(i).key.group, pool_->slot(i).ncells);
    pool_->Close(i);
  }
}

void CaisReducer::HandBack(uint32_t i, uint8_t why, dp::PacketSink& out) {
  const Slot& s = pool_->slot(i);
  ReleaseCells(s.key.group, s.ncells);
  s.inputs.ForEach([&](PortId p) {
    SendNotice(s.header, kFallbackNotice, why, p, out);
    Bump(s.key.group, &GroupCounters::fallback_notices);
  });
  pool_->Close(i);
}

void CaisReducer::SetOffloadRange(uint8_t group_id, uint64_t min_bytes, uint64_t max_bytes) {
  min_offload_bytes_[group_id] = min_bytes;
  max_offload_bytes_[group_id] = max_bytes;
  offload_policy_set_[group_id] = true;
}

void CaisReducer::SetOffloadBins(uint8_t group_id, uint64_t measured, uint64_t offload,
                                 uint64_t explore) {
  measured_bins_[group_id] = measured;
  offload_bins_[group_id] = offload;
  explore_bins_[group_id] |= explore;
  offload_policy_set_[group_id] = true;
}

uint8_t CaisReducer::OffloadDeclined(const wire::CaisHeader& h, bool by_rule) {
  const uint64_t op_key = OpKey(h);
  if (last_decision_ && last_decision_->first == op_key) return last_decision_->second;
  if (auto it = op_decisions_.find(op_key); it != op_decisions_.end()) {
    last_decision_ = *it;
    return it->second;
  }
  using wire::DeclineReason;
  const uint64_t estimate = uint64_t{h.total_chunks} * h.payload_len;
  bool declined = by_rule || estimate < min_offload_bytes_[h.group_id] ||
                  estimate > max_offload_bytes_[h.group_id];
  DeclineReason why = by_rule                     ? DeclineReason::kRule
                      : offload_held_[h.group_id] ? DeclineReason::kHeld
                                                  : DeclineReason::kModel;
  if (!by_rule && estimate > 0) {
    const uint64_t bit = uint64_t{1} << wire::SizeClass(estimate);
    if ((measured_bins_[h.group_id] & bit) != 0) {
      declined = (offload_bins_[h.group_id] & bit) == 0;
      why = DeclineReason::kMeasured;
    }
    if ((explore_bins_[h.group_id] & bit) != 0) {
      explore_bins_[h.group_id] &= ~bit;
      declined = !declined;
      why = DeclineReason::kExplore;
      Bump(h.group_id, &GroupCounters::offload_explored_ops);
    }
  }
  const uint8_t decision = declined ? static_cast<uint8_t>(why) : uint8_t{0};
  Bump(h.group_id,
       declined ? &GroupCounters::offload_declined_ops : &GroupCounters::offload_accepted_ops);
  RememberDecision(op_key, decision);
  return decision;
}

void CaisReducer::RememberDecision(uint64_t op_key, uint8_t decision) {
  if (op_ring_.size() < config_.offload_decision_capacity) {
    op_ring_.push_back(op_key);
  } else {
    op_decisions_.erase(op_ring_[op_ring_next_]);
    op_ring_[op_ring_next_] = op_key;
    op_ring_next_ = (op_ring_next_ + 1) % op_ring_.size();
  }
  op_decisions_.insert_or_assign(op_key, decision);
  last_decision_ = {op_key, decision};
}

void CaisReducer::Contribute(uint32_t i, PortId ingress, std::span<const uint8_t> payload,
                             TimeNs now) {
  Slot& s = pool_->slot(i);
  s.arrival[static_cast<size_t>(s.inputs.rank_of(ingress))] =
      static_cast<uint32_t>(std::clamp<TimeNs>(now - s.since, 0, UINT32_MAX));
  const size_t n = s.header.element_count();
  if (IsSingleContributor(s.header.op)) {
    std::memcpy(pool_->cell(i, 0), payload.data(), payload.size());
  } else if (config_.deterministic) {
    std::memcpy(pool_->cell(i, s.inputs.rank_of(ingress)), payload.data(), payload.size());
  } else if (s.arrived.empty()) {
    reduce::LoadAcc(s.header.dtype, payload.data(), n, pool_->cell(i, 0));
  } else {
    reduce::ReduceInto(s.header.reduce_op, s.header.dtype, pool_->cell(i, 0), payload.data(), n);
  }
  s.arrived.add(ingress);
}

void CaisReducer::Finish(uint32_t i, TimeNs now, dp::PacketSink& out) {
  Fold(i);
  Deliver(i, now, now, 0, out);
}

void CaisReducer::Fold(uint32_t i) {
  Slot& s = pool_->slot(i);
  const size_t n = s.header.element_count();
  const void* acc = pool_->cell(i, 0);
  const bool single = IsSingleContributor(s.header.op);
  if (config_.deterministic && !single) {
    // Lanes are in ascending input-port order: a fixed reduction order.
    reduce::LoadAcc(s.header.dtype, pool_->cell(i, 0), n, scratch_.data());
    for (int lane = 1; lane < s.ncells; ++lane) {
      reduce::ReduceInto(s.header.reduce_op, s.header.dtype, scratch_.data(), pool_->cell(i, lane),
                         n);
    }
    acc = scratch_.data();
  }
  // The wire-format result goes to cell 0, which keeps it for
  // retransmissions; every port's copy is sent from there.
  const wire::CaisHeader& h = s.header;
  uint8_t* const result = pool_->cell(i, 0);
  if (single) {
    // data, not a reduction: already there
  } else if (reduce::AccIsWire(h.dtype)) {
    if (acc != result) std::memcpy(result, acc, h.payload_len);
  } else {
    uint8_t* payload = out_buf_.data() + wire::kCaisHeaderBytes;
    reduce::StoreAcc(h.dtype, acc, n, payload);
    std::memcpy(result, payload, h.payload_len);
  }
  ReleaseCells(h.group_id, s.ncells - 1u);
  pool_->Shrink(i);
}

void CaisReducer::Deliver(uint32_t i, TimeNs now, TimeNs wait_end, TimeNs extra_wait,
                          dp::PacketSink& out) {
  Slot& s = pool_->slot(i);
  wire::CaisHeader h = s.header;
  h.flags = wire::cais_flags::kResult;
  wire::SerializeCaisHeader(h, out_buf_);
  if (IsSingleContributor(h.op)) Bump(h.group_id, &GroupCounters::replicated);
  Bump(h.group_id, &GroupCounters::pending_ns_total, static_cast<uint64_t>(now - s.since));
  const int hb = HoldingBucket(now - s.since);
  ++groups_[h.group_id].holding_us_log2[static_cast<size_t>(hb)];
  ++totals_.holding_us_log2[static_cast<size_t>(hb)];

  // Each port's copy of an AllReduce or ReduceScatter result says how long
  // that port's contribution waited here for the others (in `block`, which
  // these ops do not otherwise use): a rank tells waiting for slower ranks
  // from a queue on its own path (docs/design/cais-client.md).
  const bool wait = wire::CarriesWait(h.op);
  uint8_t* const block = out_buf_.data() + offsetof(wire::CaisWireHeader, block);
  const std::span<const uint8_t> head(out_buf_.data(), wire::kCaisHeaderBytes);
  if (h.op == CaisOp::kReduceScatter) {
    // The result to its owner only; the other contributors get a 20-byte
    // ACK so that their windows move (they never see this chunk's data).
    // Under a tree the owner may be beyond the uplink: every input here
    // gets an ACK (the parent's answer was one).
    const PortId owner = s.owner;
    if (s.inputs.contains(owner)) {
      *block = WaitCode(s, owner, wait_end, extra_wait);
      EmitResult(i, owner, head, /*share=*/0, out);
      EarnResend(owner);
    }
    s.inputs.ForEach([&](PortId p) {
      if (p != owner) {
        SendNotice(h, kAckNotice, WaitCode(s, p, wait_end, extra_wait), p, out);
        EarnResend(p);
      }
    });
  } else {
    const uint64_t share = ++results_emitted_;
    s.outputs.ForEach([&](PortId p) {
      if (wait) *block = WaitCode(s, p, wait_end, extra_wait);
      EmitResult(i, p, head, share, out);
      EarnResend(p);
    });
  }
  *block = 0;
  pool_->Complete(i, now);
  Bump(h.group_id, &GroupCounters::completed_chunks);
}

void CaisReducer::SendRetained(uint32_t i, PortId port, dp::PacketSink& out) {
  const Slot& s = pool_->slot(i);
  if (s.header.op == CaisOp::kReduceScatter && port != s.owner) {
    SendNotice(s.header, kAckNotice, 0, port, out);  // a non-owner's resend: its part is done
    return;
  }
  wire::CaisHeader h = s.header;
  h.flags = wire::cais_flags::kResult;
  wire::SerializeCaisHeader(h, out_buf_);
  EmitResult(i, port, std::span<const uint8_t>(out_buf_.data(), wire::kCaisHeaderBytes),
             /*share=*/0, out);
}

void CaisReducer::EmitResult(uint32_t i, PortId port, std::span<const uint8_t> head, uint64_t share,
                             dp::PacketSink& out) {
  out.EmitGather(port, head,
                 std::span<const uint8_t>(pool_->cell(i, 0), pool_->slot(i).header.payload_len),
                 share);
}

// A chunk that has a slot: its shape checked, a completed result asked for
// again, a tail probe answered, a duplicate dropped. An outcome when the
// packet ends here; nothing when it contributes.
std::optional<Outcome> CaisReducer::AtSlot(uint32_t i, const Arrival& arrival, TimeNs now,
                                           dp::PacketSink& out) {
  const auto& [h, ingress, request, single, contributors, block] = arrival;
  const uint8_t g = h.group_id;
  Slot& s = pool_->slot(i);
  if (!SameShape(s, h, request)) {
    // The ranks disagree about this operation: hand the chunk back to
    // every contributor and to the sender at once (each with its own
    // header), rather than let it time out, so that every rank reaches
    // the agreement round that names what differs.
    if (s.state == SlotState::kPending) HandBack(i, wire::kFallbackShapeMismatch, out);
    SendNotice(h, kFallbackNotice, wire::kFallbackShapeMismatch, ingress, out);
    Bump(g, &GroupCounters::fallback_notices);
    return Drop(g, DropReason::kShapeMismatch);
  }
  if (s.state == SlotState::kCompleted) {
    // A host that lost the result (or a contributor awaiting its echo)
    // asks again: answer on its port only, within its resend credit.
    if (resend_credit_[ingress] == 0) return Drop(g, DropReason::kResendLimit);
    --resend_credit_[ingress];
    SendRetained(i, ingress, out);
    Bump(g, &GroupCounters::results_resent);
    return Outcome::Forwarded();
  }
  // An input asks again while the tree's answer is due: that answer may
  // be lost on the way down, so this switch asks its parent in turn.
  if (s.sent_up && s.inputs.contains(ingress)) AskParent(i, now, out);
  if (request) {
    // A host's tail probe: say whether its contribution is here, so that
    // it resends only what the switch lacks (docs/protocol.md, PENDING).
    if (!s.inputs.contains(ingress)) return Drop(g, DropReason::kNotReady);
    SendNotice(h, kPendingNotice, s.arrived.contains(ingress) ? 1 : 0, ingress, out);
    Bump(g, &GroupCounters::pending_answers);
    return Outcome::Forwarded();
  }
  if (!s.inputs.contains(ingress)) {
    return Drop(g, single ? DropReason::kNotContributor : DropReason::kPortNotInRule);
  }
  if (s.arrived.contains(ingress)) return Drop(g, DropReason::kDuplicate);
  return std::nullopt;
}

std::optional<DropReason> CaisReducer::Admit(const internal::SlotKey& key, int ncells, TimeNs now,
                                             uint32_t* slot) {
  if (rules_.version() != shares_version_) Reshare();
  switch (pool_->Allocate(key, ncells, now, slot, [&](uint32_t victim) {
    Bump(pool_->slot(victim).key.group, &GroupCounters::evicted_results);
    ReleaseCells(pool_->slot(victim).key.group, pool_->slot(victim).ncells);
  })) {
    case SlotPool::Admit::kOk: return std::nullopt;
    case SlotPool::Admit::kSlotsExhausted: return DropReason::kSlotsExhausted;
    case SlotPool::Admit::kSramLimit: return DropReason::kSramLimit;
    case SlotPool::Admit::kGroupShare: return DropReason::kGroupShare;
  }
  return DropReason::kSlotsExhausted;
}

// A chunk without a slot: closed, declined, a tail probe answered, or a
// slot admitted (*i) for this first contribution.
std::optional<Outcome> CaisReducer::OpenSlot(const Arrival& arrival, const Rule& rule, TimeNs now,
                                             uint32_t* slot, dp::PacketSink& out) {
  const auto& [h, ingress, request, single, contributors, block] = arrival;
  const uint8_t g = h.group_id;
  const SlotKey key{g, h.layer_id, h.seq_num, h.chunk_id};
  uint32_t& i = *slot;
  if (pool_->IsTombstoned(key)) {
    // Too late: the chunk timed out or its result is gone.
    SendNotice(h, kFallbackNotice, 0, ingress, out);
    Bump(g, &GroupCounters::fallback_notices);
    return Drop(g, DropReason::kChunkClosed);
  }
  const uint8_t why = rule.uplink              ? ParentDecision(h)
                      : offload_policy_set_[g] ? OffloadDeclined(h, /*by_rule=*/false)
                                               : 0;
  if (why != 0) {
    SendNotice(h, kDeclinedNotice, why, ingress, out);
    Bump(g, &GroupCounters::declined_notices);
    return Drop(g, DropReason::kOffloadDeclined);
  }
  if (request) {
    // An AllGather or Broadcast chunk from beyond the parent: the parent
    // has it or will, and its answer comes down to every output here.
    if (rule.uplink && contributors.contains(*rule.uplink) && rule.input_ports.contains(ingress)) {
      return AskParentFor(h, ingress, *rule.uplink, out);
    }
    // No slot: nothing of this chunk is here, the asker's part neither.
    if (!contributors.contains(ingress)) return Drop(g, DropReason::kNotReady);
    SendNotice(h, kPendingNotice, 0, ingress, out);
    Bump(g, &GroupCounters::pending_answers);
    return Outcome::Forwarded();
  }
  if (!contributors.contains(ingress)) return Drop(g, DropReason::kNotContributor);
  const int ncells = (config_.deterministic && !single) ? contributors.count() : 1;
  if (const std::optional<DropReason> full = Admit(key, ncells, now, &i)) return Drop(g, *full);
  // Without a policy every operation is accepted: counted once, at its
  // first chunk's slot (with one, OffloadDeclined counts it).
  if ((!offload_policy_set_[g] || rule.uplink) && h.chunk_id == 0) {
    Bump(g, &GroupCounters::offload_accepted_ops);
  }
  Bump(g, &GroupCounters::sram_cells, static_cast<uint64_t>(ncells));
  Slot& s = pool_->slot(i);
  s.header = h;
  s.header.flags = 0;
  s.header.block = block;
  s.tag = single ? uint8_t{0} : h.block;
  s.inputs = contributors;
  s.outputs = rule.output_ports;
  s.uplink = rule.uplink.value_or(dp::kMaxPorts);
  if (h.op == CaisOp::kReduceScatter) {
    s.owner = MemberPort(rule, rule.output_ports,
                         static_cast<int>(BlockOf(h, Members(rule, rule.output_ports))));
  }
  return std::nullopt;
}

Outcome CaisReducer::DoProcess(std::span<const uint8_t> datagram, PortId ingress, TimeNs now,
                               dp::PacketSink& out) {
  Expire(now, out);

  // --- parse ---
  if (ingress >= dp::kMaxPorts) return Drop(-1, DropReason::kBadIngressPort);
  wire::CaisPacketView pkt;
  if (CaisParseError e = wire::ParseCais(datagram, &pkt); e != CaisParseError::kOk) {
    return Drop(-1, FromParseError(e));
  }
  const wire::CaisHeader& h = pkt.header;
  const uint8_t g = h.group_id;
  Bump(g, &GroupCounters::rx_packets);

  // --- lookup ---
  const Rule* rule = rules_.Lookup(g, h.layer_id, h.chunk_id);
  if (h.has_flag(wire::cais_flags::kSwitchOnly)) {
    // Only a parent switch, on the uplink, sends these to a switch.
    if (rule != nullptr && rule->uplink == ingress) return FromParent(pkt, *rule, now, out);
    return Drop(g, DropReason::kSwitchOriginated);
  }
  if (rule == nullptr) return Drop(g, DropReason::kNoRule);
  if (rule->host_path) {
    // A policy rule: every packet of a matching operation is declined, so
    // its senders run it on the host path and stay joined (an operation
    // under way when the rule was added finishes there too: the client
    // treats one declined chunk as a declined operation). Counted once per
    // operation, as the offload range's decisions.
    SendNotice(h, kDeclinedNotice, OffloadDeclined(h, /*by_rule=*/true), ingress, out);
    Bump(g, &GroupCounters::declined_notices);
    return Drop(g, DropReason::kOffloadDeclined);
  }
  if (!rule->input_ports.contains(ingress)) return Drop(g, DropReason::kPortNotInRule);
  if (rule->op && *rule->op != h.op) return Drop(g, DropReason::kOpMismatch);
  if (!Carries(*rule, h.op)) {
    // A collective this tree does not carry (Carries): it runs on the host
    // path, every chunk of it declined alike.
    SendNotice(h, kDeclinedNotice, static_cast<uint8_t>(wire::DeclineReason::kTree), ingress, out);
    Bump(g, &GroupCounters::declined_notices);
    return Drop(g, DropReason::kOffloadDeclined);
  }
  if (h.payload_len > config_.max_payload_bytes) return Drop(g, DropReason::kPayloadTooLarge);

  // --- compute ---
  const bool request = pkt.payload.empty();  // RETRANSMIT with no data
  const bool single = IsSingleContributor(h.op);
  PortMask contributors = rule->input_ports;
  uint8_t block = 0;
  if (single) {
    // AllGather: chunk c belongs to member floor(c * N / total);
    // Broadcast: to the root, named by `block` (Members, MemberPort). Under
    // a tree that member may be beyond the uplink.
    const int n = Members(*rule, rule->input_ports);
    const uint64_t idx = h.op == CaisOp::kAllGather ? BlockOf(h, n) : h.block;
    if (idx >= static_cast<uint64_t>(n)) return Drop(g, DropReason::kNotContributor);
    block = static_cast<uint8_t>(idx);
    contributors = PortMask{MemberPort(*rule, rule->input_ports, static_cast<int>(idx))};
  }
  const Arrival arrival{h, ingress, request, single, contributors, block};
  uint32_t i = pool_->Find(SlotKey{g, h.layer_id, h.seq_num, h.chunk_id});
  const std::optional<Outcome> ended =
      i != kNoSlot ? AtSlot(i, arrival, now, out) : OpenSlot(arrival, *rule, now, &i, out);
  if (ended.has_value()) return *ended;
  Contribute(i, ingress, pkt.payload, now);
  Bump(g, &GroupCounters::contributions);
  Bump(g, &GroupCounters::reduced_bytes, h.payload_len);

  // --- deparse ---
  if (pool_->slot(i).arrived == pool_->slot(i).inputs) {
    if (pool_->slot(i).uplink < dp::kMaxPorts) {
      SendUp(i, now, out);
    } else {
      Finish(i, now, out);
    }
  }
  return Outcome::Aggregated();
}

}  // namespace inca::cais
