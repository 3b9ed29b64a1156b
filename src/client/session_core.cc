#include "client/session_core.h"

#include <algorithm>

namespace inca::client {

namespace {

constexpr int64_t kNsPerMs = 1'000'000;
// KeepAlive's answer when there is nothing to keep alive.
constexpr int64_t kIdleNs = 60'000 * kNsPerMs;

// Rank r at port index r: a static group (inca-sim without formation).
GroupLayout IdentityLayout(int rank, int world_size) {
  GroupLayout layout;
  layout.my_index = rank;
  for (int k = 0; k < world_size; ++k) {
    layout.rank_at_index.push_back(k);
    layout.index_of_rank.push_back(k);
  }
  return layout;
}

}  // namespace

SessionCore::SessionCore(const SessionConfig& config)
    : config_(config),
      nonce_(config.first_nonce - 1),
      layout_(IdentityLayout(config.rank, config.transport.world_size)),
      early_limit_(2 * size_t{config.transport.max_window} *
                   static_cast<size_t>(config.transport.world_size)) {
  for (auto& per_path : last_report_) per_path.fill(INT64_MIN / 2);
}

wire::MgmtMessage SessionCore::Mgmt(wire::MgmtType type) {
  wire::MgmtMessage m;
  m.type = type;
  m.group_id = config_.transport.group_id;
  m.rank = static_cast<uint16_t>(config_.rank);
  m.world_size = static_cast<uint16_t>(config_.transport.world_size);
  m.nonce = ++nonce_;
  return m;
}

void SessionCore::SendMgmt(const wire::MgmtMessage& m, int64_t now, MgmtSink& out) {
  wire::SerializeMgmt(m, &buf_);
  out.Send(buf_);
  last_sent_ = now;
}

// ---------------------------------------------------------------- joining

int64_t SessionCore::StartJoin(int64_t now, MgmtSink& out) {
  join_ = Mgmt(wire::MgmtType::kJoin);
  join_.port = config_.port < 0 ? wire::kAnyPort : static_cast<uint16_t>(config_.port);
  join_.job = config_.job;
  state_ = State::kJoining;
  next_join_ = now;
  return JoinTick(now, out);
}

int64_t SessionCore::JoinTick(int64_t now, MgmtSink& out) {
  if (state_ != State::kJoining) return now + kIdleNs;
  if (now >= next_join_) {
    SendMgmt(join_, now, out);
    ++joins_sent_;
    next_join_ = now + config_.join_resend_ns;
  }
  return next_join_;
}

void SessionCore::JoinTimedOut() {
  if (state_ == State::kJoining) state_ = State::kIdle;
}

void SessionCore::OnJoinReply(const wire::MgmtMessage& reply, int64_t now) {
  // Only the reply to the attempt under way: a duplicate arriving later
  // must not change the layout of an operation that runs.
  if (state_ != State::kJoining || reply.nonce != join_.nonce) return;
  if (reply.status == wire::MgmtStatus::kRefused) {
    last_refusal_ = reply.reason;
    // Both may give way: a dead group after half a lease; another member
    // of this group creating it for a source at its limit.
    if (reply.reason == wire::MgmtReason::kGroupBusy ||
        reply.reason == wire::MgmtReason::kSourceLimit) {
      return;
    }
    state_ = State::kRefused;
    return;
  }
  if (reply.lease_ms != 0) lease_ms_ = reply.lease_ms;
  window_chunks_ = reply.window_chunks;
  advised_at_ = now;
  if (reply.status != wire::MgmtStatus::kOk) return;  // pending
  if (reply.rank_ports.size() != static_cast<size_t>(config_.transport.world_size)) return;
  seq_base_ = reply.seq_base;
  shards_ = reply.shards;
  shard_ = reply.shard;
  layout_ = LayoutFromPorts(reply.rank_ports, config_.rank, reply.block_order);
  last_refusal_ = wire::MgmtReason::kNone;
  state_ = State::kFormed;
}

void SessionCore::OnPong(const wire::MgmtMessage& pong, int64_t now) {
  if (pong.status == wire::MgmtStatus::kUnknown) {
    // Dissolved (lease, operator, restart): join again before the next op.
    if (state_ == State::kFormed) state_ = State::kIdle;
  } else {
    if (pong.lease_ms != 0) lease_ms_ = pong.lease_ms;
    window_chunks_ = pong.window_chunks;
    advised_at_ = now;
  }
}

// ------------------------------------------------------------- datagrams

bool SessionCore::OnDatagram(std::span<const uint8_t> d, int64_t now, OpCore* op) {
  if (wire::IsMgmtDatagram(d)) {
    wire::MgmtMessage m;
    if (wire::ParseMgmt(d, &m)) {
      if (m.type == wire::MgmtType::kJoinReply) OnJoinReply(m, now);
      if (m.type == wire::MgmtType::kPong) OnPong(m, now);
    }
    return true;
  }
  if (op != nullptr && !op->Finished() && !op->IsEarly(d)) {
    op->OnDatagram(d, now);
  } else {
    KeepEarly(d);
  }
  return false;
}

void SessionCore::KeepEarly(std::span<const uint8_t> d) {
  if (early_limit_ == 0) return;
  if (early_.size() >= early_limit_) early_.pop_front();
  early_.emplace_back(d.begin(), d.end());
}

std::unique_ptr<OpCore> SessionCore::StartOp(const SwitchOp& op, PathState* path,
                                             SwitchPhaseResult* result, int64_t now) {
  path->set_window_cap(window_chunks_);
  auto core = std::make_unique<OpCore>(config_.transport, layout_, op, path, result);
  core->Start(now);
  // Replay what arrived for this operation before it started; keep what
  // belongs to a later one.
  std::deque<std::vector<uint8_t>> early;
  early.swap(early_);
  for (const auto& d : early) {
    if (core->IsEarly(d)) {
      early_.push_back(d);
    } else {
      core->OnDatagram(d, now);
    }
  }
  return core;
}

// ------------------------------------------------------- keep-alive, report

int64_t SessionCore::KeepAlive(int64_t now, MgmtSink& out) {
  if (state_ != State::kFormed || lease_ms_ == 0) return now + kIdleNs;
  const int64_t every = std::max<int64_t>(lease_ms_ / 4, 1) * kNsPerMs;
  // Data renews the lease, but only a PONG renews the window advice: a
  // busy member still asks once a quarter lease, so that a group that
  // formed before others learns its smaller share.
  const int64_t since = now - std::min(last_sent_, advised_at_);
  if (since >= every) {
    SendMgmt(Mgmt(wire::MgmtType::kPing), now, out);
    advised_at_ = now;  // asked; the PONG sets it again
    return now + every;
  }
  return now + (every - since) + kNsPerMs;
}

void SessionCore::Report(uint64_t bytes, int64_t took_ns, wire::ReportPath path, int64_t now,
                         MgmtSink& out) {
  if (bytes == 0) return;
  int64_t& last =
      last_report_[static_cast<size_t>(path)][static_cast<size_t>(wire::SizeClass(bytes))];
  if (now - last < config_.report_interval_ns) return;
  last = now;
  wire::MgmtMessage m = Mgmt(wire::MgmtType::kReport);
  m.report_bytes = bytes;
  const int64_t us = took_ns / 1000;
  m.report_duration_us = static_cast<uint32_t>(std::clamp<int64_t>(us, 1, UINT32_MAX));
  m.report_path = path;
  SendMgmt(m, now, out);
}

void SessionCore::Leave(int64_t now, MgmtSink& out) {
  SendMgmt(Mgmt(wire::MgmtType::kLeave), now, out);
  state_ = State::kIdle;
}

void SessionCore::MarkStale() {
  if (state_ == State::kFormed) state_ = State::kIdle;
}

}  // namespace inca::client
