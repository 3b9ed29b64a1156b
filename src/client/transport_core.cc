#include "client/transport_core.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace inca::client {

using wire::CaisOp;

uint64_t ChunkCount(const SwitchOp& op, uint32_t chunk_size, int world_size) {
  const size_t per = chunk_size / wire::ElementBytes(op.type);
  const uint64_t chunks = (op.count + per - 1) / per;
  return op.op == CaisOp::kAllGather || op.op == CaisOp::kReduceScatter
             ? chunks * static_cast<uint64_t>(world_size)
             : chunks;
}

uint64_t OffloadEstimate(const SwitchOp& op, uint32_t chunk_size, int world_size) {
  const size_t esize = wire::ElementBytes(op.type);
  const size_t per = chunk_size / esize;
  return ChunkCount(op, chunk_size, world_size) * std::min(per, op.count) * esize;
}

GroupLayout LayoutFromPorts(std::span<const uint16_t> rank_ports, int rank,
                            wire::BlockOrder order) {
  GroupLayout layout;
  const int n = static_cast<int>(rank_ports.size());
  // Index i (ascending port order, the switch's input order, or under a
  // tree rank order) and the rank there.
  std::vector<int>& at = layout.rank_at_index;
  at.resize(static_cast<size_t>(n));
  std::iota(at.begin(), at.end(), 0);
  if (order == wire::BlockOrder::kPorts) {
    std::sort(at.begin(), at.end(), [&](int a, int b) {
      const uint16_t pa = rank_ports[static_cast<size_t>(a)],
                     pb = rank_ports[static_cast<size_t>(b)];
      return pa != pb ? pa < pb : a < b;
    });
  }
  layout.index_of_rank.resize(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k)
    layout.index_of_rank[static_cast<size_t>(at[static_cast<size_t>(k)])] = k;
  layout.my_index = rank >= 0 && rank < n ? layout.index_of_rank[static_cast<size_t>(rank)] : 0;
  return layout;
}

// ------------------------------------------------------------------ PathState

PathState::PathState(const TransportConfig& c)
    : c_(c),
      cwnd_(std::clamp<double>(c.initial_window, c.min_window,
                               std::max(c.min_window, c.max_window))) {}

uint32_t PathState::max_window() const {
  return cap_ != 0 ? std::min(c_.max_window, cap_) : c_.max_window;
}

uint32_t PathState::window_chunks() const {
  if (probe_until_ != 0) return std::min(c_.min_window, max_window());
  const auto w = static_cast<uint32_t>(std::floor(cwnd_));
  // The switch's advice bounds the window below min_window too: a window
  // it has no slots for only loses chunks.
  return std::min(std::clamp(w, c_.min_window, std::max(c_.min_window, c_.max_window)),
                  std::max<uint32_t>(1, max_window()));
}

void PathState::set_window_cap(uint32_t cap) {
  cap_ = cap;
  cwnd_ = std::min<double>(cwnd_, std::max<uint32_t>(1, max_window()));
}

int64_t PathState::rto_ns() const {
  int64_t base = srtt_ == 0 ? c_.rto_min_ns : static_cast<int64_t>(srtt_ + 4 * rttvar_);
  base = std::clamp(base, c_.rto_min_ns, c_.rto_max_ns);
  for (int i = 0; i < backoff_ && base < c_.rto_max_ns; ++i) base *= 2;
  return std::min(base, c_.rto_max_ns);
}

int64_t PathState::target_ns() const {
  const auto jitter = static_cast<int64_t>(c_.jitter_factor * noise_);
  const int64_t floor = c_.switch_on_host ? c_.host_target_floor_ns : c_.target_floor_ns;
  return base_rtt_ + std::max({floor, base_rtt_ / 4, std::min(jitter, base_rtt_)});
}

int64_t PathState::reorder_window_ns() const {
  return std::max(base_rtt_ / 4, static_cast<int64_t>(c_.jitter_factor * noise_));
}

int64_t PathState::Standing(int64_t rtt, int64_t now) {
  recent_[recent_head_] = {now, rtt};
  recent_head_ = (recent_head_ + 1) % kRecent;
  recent_n_ = std::min(recent_n_ + 1, kRecent);
  const int64_t horizon = now - static_cast<int64_t>(srtt_ / 2);
  int64_t m = rtt;
  for (size_t k = 1; k < recent_n_; ++k) {
    const auto& [at, r] = recent_[(recent_head_ + kRecent - 1 - k) % kRecent];
    if (k >= c_.standing_samples && at < horizon) break;
    m = std::min(m, r);
  }
  return m;
}

void PathState::OnRtt(int64_t rtt, int64_t now, int64_t switch_wait) {
  Sample(rtt, now, switch_wait);
  Trace(now, false);
}

void PathState::Trace(int64_t now, bool force) {
  if (c_.trace_capacity == 0 || (!force && now - last_trace_ < static_cast<int64_t>(srtt_ / 4)))
    return;
  trace_.push_back(WindowSample{now, cwnd_, static_cast<int64_t>(srtt_)});
  if (trace_.size() > c_.trace_capacity) trace_.pop_front();
  ++traced_;
  last_trace_ = now;
}

void PathState::Sample(int64_t rtt, int64_t now, int64_t switch_wait) {
  if (rtt <= 0) rtt = 1;
  // The round trip less the time this rank's contribution waited in the
  // switch for the others: what this rank's own path (and its queues) took.
  const int64_t own = std::max<int64_t>(1, rtt - std::max<int64_t>(0, switch_wait));
  if (switch_wait >= 0) wait_ += (static_cast<double>(switch_wait) - wait_) / 8.0;
  backoff_ = 0;
  const auto r = static_cast<double>(rtt);
  if (srtt_ == 0) {
    srtt_ = r;
    rttvar_ = r / 2;
  } else {
    rttvar_ = 0.75 * rttvar_ + 0.25 * std::abs(srtt_ - r);
    srtt_ = 0.875 * srtt_ + 0.125 * r;
  }
  if (base_rtt_ == 0 || rtt < base_rtt_ || now - base_rtt_at_ > c_.base_rtt_window_ns) {
    base_rtt_ = rtt;
    base_rtt_at_ = now;
  }
  standing_ = Standing(rtt, now);
  noise_ += (static_cast<double>(rtt - standing_) - noise_) / 16.0;
  if (probe_until_ != 0) {
    probe_min_ = std::min(probe_min_, rtt);
    if (now >= probe_until_) EndProbe(now);
    return;
  }
  TrackEpoch(rtt, own, now);
  if (competitive_) {
    // AIMD: grow by ai per round trip; losses (OnLoss, OnTimeout) halve.
    cwnd_ = std::min<double>(cwnd_ + c_.ai / std::max(1.0, cwnd_), max_window());
    if (now >= next_probe_) {
      probe_until_ = now + 2 * Rtt();
      probe_min_ = INT64_MAX;
      probe_saved_cwnd_ = cwnd_;
      probe_saved_srtt_ = Rtt();
      ++probes_;
    }
    return;
  }
  const int64_t target = target_ns();
  if (standing_ <= target) {
    cwnd_ = std::min<double>(cwnd_ + c_.ai / std::max(1.0, cwnd_), max_window());
  } else {
    const double f =
        1.0 - c_.beta * static_cast<double>(standing_ - target) / static_cast<double>(standing_);
    Decrease(std::max(f, 1.0 - c_.max_decrease), now);
  }
}

int64_t PathState::Rtt() const {
  return srtt_ == 0 ? c_.rto_min_ns : static_cast<int64_t>(srtt_);
}

void PathState::TrackEpoch(int64_t rtt, int64_t own, int64_t now) {
  if (!c_.competitive) return;
  const bool small = cwnd_ <= c_.competitive_gate;
  if (epoch_start_ < 0) {
    epoch_start_ = now;
    epoch_min_ = rtt;
    epoch_own_min_ = own;
    epoch_small_ = small;
    return;
  }
  epoch_min_ = std::min(epoch_min_, rtt);
  epoch_own_min_ = std::min(epoch_own_min_, own);
  epoch_small_ = epoch_small_ && small;
  if (now - epoch_start_ < c_.epoch_rtts * std::max(Rtt(), target_ns())) return;
  // The queue never came down near the target in this epoch.
  const double slack = static_cast<double>(target_ns() - base_rtt_);
  const bool queued =
      static_cast<double>(epoch_own_min_ - base_rtt_) > c_.competitive_queue_factor * slack;
  if (!competitive_ && queued && epoch_small_) {
    competitive_ = true;
    ++competitive_entries_;
    next_probe_ = now + c_.probe_interval_ns;
  } else if (competitive_ && epoch_min_ <= target_ns()) {
    competitive_ = false;  // the queue drained: its sender left
  }
  epoch_start_ = -1;
}

void PathState::EndProbe(int64_t now) {
  probe_until_ = 0;
  epoch_start_ = -1;
  if (probe_min_ <= target_ns()) {
    // The queue drained once this rank held back: it was this rank's own.
    // Resume delay control from about one bandwidth-delay product.
    competitive_ = false;
    cwnd_ = std::max<double>(c_.min_window, probe_saved_cwnd_ * static_cast<double>(base_rtt_) /
                                                static_cast<double>(std::max<int64_t>(
                                                    1, std::max(base_rtt_, probe_saved_srtt_))));
    return;
  }
  cwnd_ = probe_saved_cwnd_;
  next_probe_ = now + c_.probe_interval_ns;
}

void PathState::OnLoss(int64_t now) {
  if (competitive_ && probe_until_ == 0) Decrease(0.5, now);
  Trace(now, true);
}

void PathState::OnTimeout(int64_t now) {
  ++timeouts_;
  if (backoff_ < 8) ++backoff_;
  Decrease(0.5, now);
  Trace(now, true);
}

void PathState::Decrease(double factor, int64_t now) {
  // Once per round trip: the window's effect shows a round trip later.
  const int64_t rtt = srtt_ == 0 ? c_.rto_min_ns : static_cast<int64_t>(srtt_);
  if (now - last_decrease_ < rtt) return;
  cwnd_ = std::max<double>(c_.min_window, cwnd_ * factor);
  last_decrease_ = now;
  ++decreases_;
}

// ------------------------------------------------------------------ OpCore

OpCore::OpCore(const TransportConfig& c, const GroupLayout& layout, const SwitchOp& op,
               PathState* path, SwitchPhaseResult* result)
    : c_(c),
      layout_(layout),
      op_(op),
      path_(*path),
      r_(*result),
      esize_(wire::ElementBytes(op.type)),
      per_(c.chunk_size / wire::ElementBytes(op.type)),
      cpb_((op.count + per_ - 1) / per_),
      root_index_(op.op == CaisOp::kBroadcast ? layout.index_of_rank[static_cast<size_t>(op.root)]
                                              : 0) {}

void OpCore::Start(int64_t now) {
  r_.total_chunks = static_cast<uint32_t>(ChunkCount(op_, c_.chunk_size, c_.world_size));
  r_.have.assign(r_.total_chunks, 0);
  sent_at_.assign(r_.total_chunks, -1);
  first_at_.assign(r_.total_chunks, -1);
  order_.assign(r_.total_chunks, 0);
  fast_done_.assign(r_.total_chunks, 0);
  remaining_ = r_.total_chunks;
  last_progress_ = now;
  rto_deadline_ = now;
  request_rto_ = path_.rto_ns();
  request_at_ = now + request_rto_;
  if (op_.op == CaisOp::kAllGather) {
    highest_.resize(static_cast<size_t>(c_.world_size));
    for (size_t b = 0; b < highest_.size(); ++b) highest_[b] = static_cast<int64_t>(b * cpb_) - 1;
  }
  if (remaining_ == 0) Finish();
}

bool OpCore::Blocked() const {
  return op_.op == CaisOp::kAllGather || op_.op == CaisOp::kReduceScatter;
}

bool OpCore::Own(uint32_t c) const {
  switch (op_.op) {
    case CaisOp::kAllGather: return static_cast<int>(c / cpb_) == layout_.my_index;
    case CaisOp::kBroadcast: return layout_.my_index == root_index_;
    default: return true;
  }
}

bool OpCore::Receives(uint32_t c) const {
  return op_.op != CaisOp::kReduceScatter || static_cast<int>(c / cpb_) == layout_.my_index;
}

size_t OpCore::Length(uint32_t c) const {
  const uint64_t j = Blocked() ? c % cpb_ : c;
  return std::min<size_t>(per_, op_.count - j * per_) * esize_;
}

uint8_t* OpCore::Locate(uint32_t c) const {
  if (op_.op == CaisOp::kAllGather) {
    const uint64_t block = c / cpb_, j = c % cpb_;
    const int rank = layout_.rank_at_index[block];
    return op_.out + static_cast<size_t>(rank) * op_.block_stride_bytes + j * per_ * esize_;
  }
  if (op_.op == CaisOp::kReduceScatter) return op_.out + (c % cpb_) * per_ * esize_;
  return op_.data + size_t{c} * per_ * esize_;
}

const uint8_t* OpCore::Source(uint32_t c) const {
  if (op_.op == CaisOp::kAllGather) return op_.in + (c % cpb_) * per_ * esize_;
  if (op_.op == CaisOp::kReduceScatter) {
    const int rank = layout_.rank_at_index[c / cpb_];
    return op_.in + static_cast<size_t>(rank) * op_.block_stride_bytes + (c % cpb_) * per_ * esize_;
  }
  return op_.data + size_t{c} * per_ * esize_;
}

// Worth asking the switch for chunk c (not owned here, still missing)?
// Gaps below a later chunk of the same owner at once; the next window of
// chunks above it only after two quiet spells (a lost tail).
bool OpCore::WorthRequesting(uint32_t c, bool tail_ok) const {
  if (op_.op != CaisOp::kAllGather) return tail_ok;
  const int64_t h = highest_[c / cpb_];
  return static_cast<int64_t>(c) < h ||
         (tail_ok && static_cast<int64_t>(c) <= h + static_cast<int64_t>(c_.max_window));
}

void OpCore::Send(uint32_t c, bool retransmit, bool request, DatagramSink& out) {
  wire::CaisHeader h;
  h.op = op_.op;
  h.group_id = c_.group_id;
  h.layer_id = op_.layer_id;
  h.chunk_id = static_cast<uint16_t>(c);
  h.total_chunks = static_cast<uint16_t>(r_.total_chunks);
  h.seq_num = op_.seq;
  h.reduce_op = op_.reduce;
  h.dtype = op_.type;
  h.block = op_.op == CaisOp::kBroadcast ? static_cast<uint8_t>(root_index_)
            : op_.broadcast              ? wire::BroadcastTag(op_.root)
                                         : uint8_t{0};
  h.flags = retransmit ? wire::cais_flags::kRetransmit : uint8_t{0};
  const size_t len = request ? 0 : Length(c);
  h.payload_len = static_cast<uint32_t>(len);
  out.Send(h, request ? std::span<const uint8_t>() : std::span<const uint8_t>(Source(c), len));
}

void OpCore::Resend(uint32_t c, int64_t now, DatagramSink& out) {
  Send(c, true, false, out);
  ++r_.retransmitted;
  first_at_[c] = -1;
  sent_at_[c] = now;
}

void OpCore::Complete(uint32_t c, bool fallback, int64_t now, int64_t switch_wait) {
  if (Own(c) && sent_at_[c] >= 0) {
    if (first_at_[c] >= 0 && !fallback) path_.OnRtt(now - first_at_[c], now, switch_wait);
    --outstanding_;
    completed_order_hi_ = std::max(completed_order_hi_, order_[c] + 1);
  }
  r_.have[c] = fallback ? 0 : 1;
  if (fallback) r_.fallback_notice = true;
  sent_at_[c] = -2;  // done
  --remaining_;
  last_progress_ = now;
  held_rounds_ = 0;
  rto_deadline_ = now;  // the timer restarts on progress (as TCP's on a new ACK)
  probed_ = false;
  request_rto_ = path_.rto_ns();
  request_at_ = now + request_rto_;
  if (remaining_ == 0) Finish();
}

void OpCore::Finish() {
  finished_ = true;
  r_.complete = remaining_ == 0 && !r_.fallback_notice && !handed_back_;
}

bool OpCore::IsEarly(std::span<const uint8_t> d) const {
  if (d.size() < wire::kCaisHeaderBytes) return false;
  wire::CaisPacketView v;
  if (wire::ParseCais(d, &v) != wire::CaisParseError::kOk) return false;
  const uint32_t ahead = v.header.seq_num - op_.seq;  // modulo 2^32
  return ahead == 1 || ahead == 2;
}

void OpCore::OnDatagram(std::span<const uint8_t> d, int64_t now) {
  if (finished_) return;
  wire::CaisPacketView v;
  if (wire::ParseCais(d, &v) != wire::CaisParseError::kOk) return;
  const wire::CaisHeader& h = v.header;
  if (!h.has_flag(wire::cais_flags::kResult) || h.seq_num != op_.seq || h.group_id != c_.group_id ||
      h.layer_id != op_.layer_id || h.op != op_.op || h.total_chunks != r_.total_chunks) {
    return;  // a late packet of an earlier operation, or not ours
  }
  const uint32_t c = h.chunk_id;
  if (sent_at_[c] == -2) return;  // already done
  if (h.has_flag(wire::cais_flags::kDeclined)) {
    // The offload policy sent the whole operation to the host path; no
    // chunk of it was reduced in the switch.
    r_.declined = true;
    r_.declined_reason = h.block < wire::kDeclineReasonCount ? h.block : uint8_t{0};
    handed_back_ = true;
    Complete(c, true, now);
    Finish();
    return;
  }
  if (h.has_flag(wire::cais_flags::kFallback)) {
    // The switch gave this chunk up, so the operation needs the host path
    // anyway: stop here rather than trickle on (the chunks already done are
    // kept; recovery completes the rest).
    ++r_.notices;
    if (h.block == wire::kFallbackShapeMismatch) r_.disagreed = true;
    handed_back_ = true;
    Complete(c, true, now);
    Finish();
    return;
  }
  if (h.has_flag(wire::cais_flags::kPending)) {
    // The answer to a tail probe (Pump): block 0 = the switch lacks this
    // rank's contribution to a chunk still pending there.
    if (Own(c) && sent_at_[c] >= 0 && fast_done_[c] == 0 && h.block == 0) missing_ = true;
    // block 1: it is there and waits for slower ranks (Pump: no resend).
    if (Own(c) && sent_at_[c] >= 0 && h.block == 1) held_ = true;
    return;
  }
  const int64_t wait = wire::CarriesWait(h.op) ? wire::DecodeWait(h.block) : -1;
  if (h.has_flag(wire::cais_flags::kAck)) {
    // ReduceScatter: another rank's chunk is complete; nothing to copy.
    if (!Receives(c)) Complete(c, false, now, wait);
    return;
  }
  if (!Receives(c) || v.payload.size() != Length(c)) return;
  uint8_t* at = Locate(c);
  std::memcpy(at, v.payload.data(), v.payload.size());
  if (op_.mirror != nullptr && op_.op == CaisOp::kAllReduce) {
    std::memcpy(op_.mirror + (at - op_.data), v.payload.data(), v.payload.size());
  }
  if (!highest_.empty()) {
    int64_t& top = highest_[c / cpb_];
    top = std::max<int64_t>(top, c);
  }
  Complete(c, false, now, wait);
}

void OpCore::Pump(int64_t now, DatagramSink& out) {
  if (finished_) return;
  if (now - last_progress_ > c_.give_up_ns) {
    Finish();  // no progress: leave the switch for the host path
    return;
  }
  while (!inflight_.empty() && sent_at_[inflight_.front()] == -2) inflight_.pop_front();
  if (inflight_.size() > 4 * size_t{c_.max_window} + 64) {
    std::erase_if(inflight_, [&](uint32_t c) { return sent_at_[c] == -2; });
  }
  const int64_t rto = path_.rto_ns();
  const int64_t overdue = path_.srtt_ns() + path_.reorder_window_ns();
  FastRetransmit(now, rto, overdue, out);
  const int64_t pto = ProbeTimeout();
  Probe(now, overdue, pto, out);
  RetransmitTimer(now, rto, overdue, pto, out);
  SendNew(now, out);
  RequestOthers(now, out);
}

void OpCore::FastRetransmit(int64_t now, int64_t rto, int64_t overdue, DatagramSink& out) {
  // Fast retransmission: own chunks that later-sent chunks overtook; again
  // after each RTO while they stay missing (the resend can be lost too).
  // Delay control leaves the window alone: a chunk lost at random says
  // nothing about congestion, which the delay signal already reports (with
  // 1 % random loss, cutting on every loss held the window at its floor).
  // Competitive mode halves it (PathState::OnLoss).
  uint32_t budget = std::max<uint32_t>(1, path_.window_chunks());
  for (size_t i = 0; i < inflight_.size() && budget > 0; ++i) {
    const uint32_t c = inflight_[i];
    if (sent_at_[c] == -2) continue;
    if (fast_done_[c] != 0) {
      if (now - sent_at_[c] < rto) continue;  // a resend: again after each RTO
    } else {
      // First sends are in send order: none after this one was overtaken.
      if (order_[c] + c_.reorder_threshold >= completed_order_hi_) break;
      if (now - sent_at_[c] < overdue) continue;  // maybe just reordered
      path_.OnLoss(now);
    }
    fast_done_[c] = 1;
    Resend(c, now, out);
    --budget;
  }
}

void OpCore::Probe(int64_t now, int64_t overdue, int64_t pto, DatagramSink& out) {
  // The tail probe (after RACK-TLP, RFC 8985, with the switch's answer):
  // nothing completed for a probe timeout, well short of the RTO. Either
  // this rank's flight was lost (one GSO message takes up to seven chunks,
  // often the whole window, and nothing is left to overtake them) or a
  // slower rank has not contributed yet; only the switch can tell. So the
  // probe is a result request (20 bytes) for the oldest and the newest
  // overdue chunk: a pending chunk is answered with PENDING, saying whether
  // this rank's contribution is there (OnDatagram), a completed one with
  // its result (a result lost on the way down). Nothing is resent on a
  // guess; if the probe or its answer is lost, the RTO below still fires.
  if (outstanding_ > 0 && !probed_ && pto > 0 && now >= rto_deadline_ + pto) {
    SendTailProbe(now, overdue, out);
  }
  // The switch lacks a contribution of this rank that a probe asked about:
  // the flight it belonged to was lost. Every overdue chunk not yet resent
  // goes again (the window at most), as a fast retransmission does.
  if (missing_) {
    missing_ = false;
    uint32_t resent = 0;
    const uint32_t most = std::max<uint32_t>(1, path_.window_chunks());
    for (uint32_t c : inflight_) {
      if (resent >= most) break;
      if (sent_at_[c] < 0 || fast_done_[c] != 0 || now - sent_at_[c] < overdue) continue;
      fast_done_[c] = 1;
      Resend(c, now, out);
      ++resent;
    }
    if (resent > 0) path_.OnLoss(now);  // competitive mode halves
  }
  // The switch holds what the probe asked about: this rank's chunks wait
  // there for slower ranks (ranks that reach an operation tens of ms apart,
  // issue 46), and a resend would only be dropped as a duplicate. The
  // retransmission timer restarts and the next probe comes later (the
  // interval doubling, under the RTO), so a rank waits for the others with
  // a few 20-byte probes instead of resending its window every RTO. A chunk
  // lost meanwhile is found as before: overtaken once results flow again,
  // by a probe that finds it missing, or by the RTO if a probe goes
  // unanswered.
  if (held_) {
    held_ = false;
    rto_deadline_ = now;
    probed_ = false;
    held_rounds_ = std::min(held_rounds_ + 1, 16);
  }
}

void OpCore::RetransmitTimer(int64_t now, int64_t rto, int64_t overdue, int64_t pto,
                             DatagramSink& out) {
  // The retransmission timer: nothing completed for an RTO. Resend every
  // chunk as old as the RTO (the window at most), back off, and restart the
  // timer. A flight lost whole, as one GSO message of up to seven chunks
  // is, gets nothing back to overtake it: resending only the oldest brought
  // it back one chunk per backed-off RTO (5, 10, 20 ... 100 ms).
  if (outstanding_ > 0 && now >= rto_deadline_ + path_.rto_ns() && !probed_ && pto == 0 &&
      c_.probe_timeout_rtts > 0) {
    // A round trip too close to the RTO for a tail probe before it (or no
    // round trip measured yet): the timer's first expiry asks the switch
    // instead, and only the next one resends. Without this, a rank waiting
    // for a late one resent its window at every RTO of the wait; a loss
    // costs one round trip more here, and only here.
    SendTailProbe(now, overdue, out);
    rto_deadline_ = now;
  }
  if (outstanding_ > 0 && now >= rto_deadline_ + path_.rto_ns()) {
    uint32_t resent = 0;
    const uint32_t most = std::max<uint32_t>(1, path_.window_chunks());
    for (uint32_t c : inflight_) {
      if (sent_at_[c] == -2) continue;
      if (resent > 0 && (resent >= most || now - sent_at_[c] < rto)) continue;
      fast_done_[c] = 1;
      Resend(c, now, out);
      ++resent;
    }
    path_.OnTimeout(now);
    rto_deadline_ = now;
  }
}

void OpCore::SendNew(int64_t now, DatagramSink& out) {
  // Fill the window with new chunks, paced.
  const uint32_t window = path_.window_chunks();
  const int64_t interval = PacingInterval();
  // Credit for at most pacing_burst chunks back to back after a pause.
  if (interval > 0) {
    pace_at_ = std::max(pace_at_, now - int64_t{std::max(c_.pacing_burst, 1u) - 1} * interval);
  }
  while (next_own_ < r_.total_chunks && outstanding_ < window) {
    if (interval > 0 && pace_at_ > now) break;  // NextDeadline wakes for it
    const uint32_t c = next_own_++;
    if (!Own(c) || sent_at_[c] == -2) continue;
    pace_at_ += interval;
    if (outstanding_ == 0) rto_deadline_ = now;
    Send(c, false, false, out);
    ++r_.sent;
    sent_at_[c] = now;
    first_at_[c] = now;
    order_[c] = send_counter_++;
    inflight_.push_back(c);
    ++outstanding_;
  }
}

void OpCore::RequestOthers(int64_t now, DatagramSink& out) {
  // Chunks owned by others: after a quiet spell, ask for missing ones.
  const bool awaits_others = op_.op == CaisOp::kAllGather || op_.op == CaisOp::kBroadcast;
  if (awaits_others && now >= request_at_) {
    const bool tail_ok = request_rto_ > path_.rto_ns();
    uint32_t asked = 0;
    for (uint32_t k = 0; k < r_.total_chunks && asked < c_.max_window; ++k) {
      const uint32_t c = (request_cursor_ + k) % r_.total_chunks;
      if (sent_at_[c] == -2 || Own(c) || !WorthRequesting(c, tail_ok)) continue;
      Send(c, true, true, out);
      ++r_.requests;
      ++asked;
      request_cursor_ = c + 1;
    }
    request_rto_ = std::min(request_rto_ * 2, c_.rto_max_ns);
    request_at_ = now + request_rto_;
  }
}

// A result request (20 bytes) for the oldest and the newest overdue chunk:
// PENDING answers say whether this rank's contribution is at the switch.
void OpCore::SendTailProbe(int64_t now, int64_t overdue, DatagramSink& out) {
  uint32_t first = UINT32_MAX, last = UINT32_MAX;
  for (uint32_t c : inflight_) {
    if (sent_at_[c] < 0 || fast_done_[c] != 0 || now - sent_at_[c] < overdue) continue;
    if (first == UINT32_MAX) first = c;
    last = c;
  }
  if (first != UINT32_MAX) {
    Send(first, true, true, out);
    ++r_.requests;
    if (last != first) {
      Send(last, true, true, out);
      ++r_.requests;
    }
    ++r_.tail_probes;
  }
  probed_ = true;
}

int64_t OpCore::ProbeTimeout() const {
  if (c_.probe_timeout_rtts <= 0 || path_.srtt_ns() <= 0) return 0;
  const int64_t pto =
      std::max(static_cast<int64_t>(c_.probe_timeout_rtts * static_cast<double>(path_.srtt_ns())),
               path_.srtt_ns() + path_.reorder_window_ns());
  const int64_t rto = path_.rto_ns();
  if (pto >= rto) return 0;  // past the RTO it would add nothing
  // After answers that the switch holds this rank's chunks: back off, while
  // staying under the RTO so that the next answer restarts it in time.
  return std::max(pto, std::min(pto << held_rounds_, rto / 2));
}

int64_t OpCore::PacingInterval() const {
  if (c_.pacing_gain <= 0 || path_.srtt_ns() <= 0) return 0;
  return static_cast<int64_t>(static_cast<double>(path_.srtt_ns()) /
                              (c_.pacing_gain * std::max(1.0, path_.window())));
}

int64_t OpCore::NextDeadline() const {
  int64_t t = last_progress_ + c_.give_up_ns + 1;
  if (PacingInterval() > 0 && next_own_ < r_.total_chunks && outstanding_ < path_.window_chunks())
    t = std::min(t, pace_at_);
  if (outstanding_ > 0) t = std::min(t, rto_deadline_ + path_.rto_ns());
  if (outstanding_ > 0 && !probed_ && ProbeTimeout() > 0) {
    t = std::min(t, rto_deadline_ + ProbeTimeout());
  }
  if (missing_) t = std::min(t, last_progress_);  // at once
  // The first overtaken chunk that is not yet overdue (see Pump).
  const int64_t overdue = path_.srtt_ns() + path_.reorder_window_ns();
  for (uint32_t c : inflight_) {
    if (sent_at_[c] == -2 || fast_done_[c] != 0) continue;
    if (order_[c] + c_.reorder_threshold >= completed_order_hi_) break;
    t = std::min(t, sent_at_[c] + overdue);
    break;
  }
  if (op_.op == CaisOp::kAllGather || op_.op == CaisOp::kBroadcast) t = std::min(t, request_at_);
  return t;
}

}  // namespace inca::client
