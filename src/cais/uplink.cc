// A switch in a tree of switches (Rule::uplink; docs/design/tree.md): the
// reducer's way up (a chunk's partial to the parent, requests when an input
// asks again) and down (the parent's result or notice to the inputs).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cais/blocks.h"
#include "cais/notices.h"
#include "cais/slot_pool.h"
#include "inca/cais/reducer.h"

namespace inca::cais {

using dp::DropReason;
using dp::Outcome;
using dp::PortId;
using dp::TimeNs;
using internal::BlockOf;
using internal::Carries;
using internal::IsSingleContributor;
using internal::kNoSlot;
using internal::MemberPort;
using internal::Members;
using internal::Slot;
using internal::SlotKey;
using internal::SlotState;
using wire::CaisOp;
namespace flags = wire::cais_flags;

void CaisReducer::SendUp(uint32_t i, TimeNs now, dp::PacketSink& out) {
  Fold(i);  // the partial, in wire format, in cell 0: kept until the parent answers
  Slot& s = pool_->slot(i);
  s.sent_up = true;
  s.up_asks = 0;
  s.up_first = s.up_last = now;
  EmitUp(i, /*request=*/false, out);
  Bump(s.key.group, &GroupCounters::uplink_partials);
  ArmUp(i, now);
}

void CaisReducer::ArmUp(uint32_t i, TimeNs now) {
  if (config_.uplink_rto_ns <= 0 ||
      up_timers_.size() >= kMaxUpTimersPerSlot * config_.max_pending_chunks) {
    return;  // bounded: this partial is asked about when its inputs ask
  }
  Slot& s = pool_->slot(i);
  s.up_due = now + (config_.uplink_rto_ns << std::min<int>(s.up_asks, 5));
  up_timers_.push({s.up_due, i});
}

void CaisReducer::RunUpTimers(TimeNs now, dp::PacketSink& out) {
  while (!up_timers_.empty() && up_timers_.top().due <= now) {
    const UpTimer t = up_timers_.top();
    up_timers_.pop();
    Slot& s = pool_->slot(t.slot);
    if (s.state != SlotState::kPending || !s.sent_up || s.up_due != t.due) continue;  // stale
    if (s.up_asks < UINT8_MAX) ++s.up_asks;
    s.up_last = now;
    EmitUp(t.slot, /*request=*/true, out);
    Bump(s.key.group, &GroupCounters::uplink_requests);
    ArmUp(t.slot, now);
  }
}

void CaisReducer::AskParent(uint32_t i, TimeNs now, dp::PacketSink& out) {
  Slot& s = pool_->slot(i);
  if (now - s.up_last < config_.uplink_probe_ns) return;
  s.up_last = now;
  EmitUp(i, /*request=*/true, out);
  Bump(s.key.group, &GroupCounters::uplink_requests);
}

// The partial (or a request: the header alone) goes up as the contribution
// of this switch's port at the parent: the chunk's header as the inputs
// sent it, RETRANSMIT on a request or a resend.
void CaisReducer::EmitUp(uint32_t i, bool request, dp::PacketSink& out) {
  const Slot& s = pool_->slot(i);
  wire::CaisHeader h = s.header;
  // A reduction's tag; an AllGather's or Broadcast's member (its root).
  h.block = IsSingleContributor(h.op) ? s.header.block : s.tag;
  const bool again = request || s.up_last != s.up_first;
  h.flags = again ? flags::kRetransmit : uint8_t{0};
  h.payload_len = request ? 0 : s.header.payload_len;
  uint8_t head[wire::kCaisHeaderBytes];
  wire::SerializeCaisHeader(h, head);
  if (request) {
    out.Emit(s.uplink, head);
  } else {
    out.EmitGather(s.uplink, head, std::span<const uint8_t>(pool_->cell(i, 0), h.payload_len),
                   /*share=*/0);
  }
}

void CaisReducer::DeclineFromParent(uint32_t i, uint8_t why, dp::PacketSink& out) {
  const Slot& s = pool_->slot(i);
  s.inputs.ForEach([&](dp::PortId p) {
    internal::SendNotice(s.header, internal::kDeclinedNotice, why, p, out);
    Bump(s.key.group, &GroupCounters::declined_notices);
  });
  // The operation's later chunks here are declined without going up.
  RememberDecision(OpKey(s.header), why);
  ReleaseCells(s.key.group, s.ncells);
  pool_->Close(i);
}

uint8_t CaisReducer::ParentDecision(const wire::CaisHeader& h) const {
  const uint64_t op_key = OpKey(h);
  if (last_decision_ && last_decision_->first == op_key) return last_decision_->second;
  const auto it = op_decisions_.find(op_key);
  return it == op_decisions_.end() ? 0 : it->second;
}

Outcome CaisReducer::AskParentFor(const wire::CaisHeader& asked, dp::PortId ingress,
                                  dp::PortId uplink, dp::PacketSink& out) {
  // The answer comes back as a result to this port: within its credit.
  if (resend_credit_[ingress] == 0) return Drop(asked.group_id, DropReason::kResendLimit);
  --resend_credit_[ingress];
  wire::CaisHeader h = asked;
  h.flags = flags::kRetransmit;
  h.payload_len = 0;
  uint8_t head[wire::kCaisHeaderBytes];
  wire::SerializeCaisHeader(h, head);
  out.Emit(uplink, head);
  Bump(h.group_id, &GroupCounters::uplink_requests);
  return Outcome::Forwarded();
}

Outcome CaisReducer::FromAbove(const wire::CaisPacketView& pkt, const Rule& rule, TimeNs now,
                               dp::PacketSink& out) {
  const wire::CaisHeader& h = pkt.header;
  const uint8_t g = h.group_id;
  if (!IsSingleContributor(h.op) || !Carries(rule, h.op) || h.flags != flags::kResult ||
      pkt.payload.empty() || h.payload_len > config_.max_payload_bytes) {
    return Drop(g, DropReason::kParentStale);  // an answer to nothing here
  }
  const int n = Members(rule, rule.input_ports);
  const uint64_t m = h.op == CaisOp::kAllGather ? BlockOf(h, n) : h.block;
  if (m >= static_cast<uint64_t>(n) ||
      MemberPort(rule, rule.input_ports, static_cast<int>(m)) != rule.uplink) {
    return Drop(g, DropReason::kParentStale);  // its contributor is not beyond the parent
  }
  Bump(g, &GroupCounters::parent_results);
  uint32_t i = kNoSlot;
  if (Admit(SlotKey{g, h.layer_id, h.seq_num, h.chunk_id}, 1, now, &i)) {
    // No room to keep it: multicast from the packet. A host here that
    // loses it asks, and the request goes up.
    uint8_t head[wire::kCaisHeaderBytes];
    wire::SerializeCaisHeader(h, head);
    const uint64_t share = ++results_emitted_;
    rule.output_ports.ForEach([&](PortId p) { out.EmitGather(p, head, pkt.payload, share); });
    Bump(g, &GroupCounters::replicated);
    return Outcome::Forwarded();
  }
  Bump(g, &GroupCounters::sram_cells);
  Slot& s = pool_->slot(i);
  s.header = h;
  s.header.flags = 0;
  s.header.block = static_cast<uint8_t>(m);
  s.tag = 0;
  s.inputs = PortMask();
  s.outputs = rule.output_ports;
  s.uplink = *rule.uplink;
  std::memcpy(pool_->cell(i, 0), pkt.payload.data(), pkt.payload.size());
  Deliver(i, now, now, 0, out);  // kept for the hosts' requests, like a result
  return Outcome::Forwarded();
}

Outcome CaisReducer::FromParent(const wire::CaisPacketView& pkt, const Rule& rule, TimeNs now,
                                dp::PacketSink& out) {
  const wire::CaisHeader& h = pkt.header;
  const uint8_t g = h.group_id;
  const uint32_t i = pool_->Find(SlotKey{g, h.layer_id, h.seq_num, h.chunk_id});
  if (i == kNoSlot) return FromAbove(pkt, rule, now, out);
  if (pool_->slot(i).state != SlotState::kPending) {
    return Drop(g, DropReason::kParentStale);  // answered already (a duplicate) or closed
  }
  Slot& s = pool_->slot(i);
  if (h.has_flag(flags::kFallback)) {
    // The root decides for the whole tree: a decline or a hand-back (a
    // timeout there, ranks that disagree) reaches every input here, with
    // the root's reason, whether or not this switch's partial went up.
    if (h.has_flag(flags::kDeclined)) {
      DeclineFromParent(i, h.block, out);
    } else {
      HandBack(i, h.block, out);
    }
    return Outcome::Forwarded();
  }
  if (!s.sent_up) return Drop(g, DropReason::kParentStale);
  if (h.has_flag(flags::kPending)) {
    // The answer to a request: block 0, the parent lacks this partial.
    if (h.block != 0) return Outcome::Aggregated();
    s.up_last = now;
    EmitUp(i, /*request=*/false, out);
    Bump(g, &GroupCounters::uplink_resent);
    return Outcome::Forwarded();
  }
  // The answer carries the chunk's data, but for a ReduceScatter chunk
  // whose owner is not an input here: an ACK (Deliver tells them apart).
  const bool ack = s.header.op == CaisOp::kReduceScatter && !s.inputs.contains(s.owner);
  if (h.has_flag(flags::kAck) != ack) return Drop(g, DropReason::kParentStale);
  if (!ack) {
    if (pkt.payload.size() != s.header.payload_len) return Drop(g, DropReason::kShapeMismatch);
    std::memcpy(pool_->cell(i, 0), pkt.payload.data(), pkt.payload.size());
  }
  // Each input's wait: here until the partial went up, plus the parent's
  // (never the uplink's round trip, which is the inputs' own path).
  Deliver(i, now, s.up_first, wire::DecodeWait(h.block), out);
  Bump(g, &GroupCounters::parent_results);
  return Outcome::Forwarded();
}

}  // namespace inca::cais
