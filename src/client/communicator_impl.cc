#include "client/communicator_impl.h"
#include "client/op_route.h"

#include <sched.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "absl/strings/str_format.h"

namespace inca::client_internal {

CommunicatorImpl::~CommunicatorImpl() {
  // Collective: a rank that finished the last operation through the switch
  // stays until every peer that could not has been served (see Finalize).
  if (thread_.joinable() && transport_) (void)Enqueue([this] { return Finalize(); })->Wait();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (transport_ && failed_.ok()) transport_->Leave();
}

absl::Status CommunicatorImpl::Init() {
  if (o_.rank == 0 && o_.serve_store) {
    auto server = hostpath::TcpStoreServer::Start(o_.store_address);
    if (!server.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "rank 0 cannot serve the store at ", o_.store_address, ": ", server.status().message()));
    }
    store_server_ = std::move(*server);
  }
  auto store =
      hostpath::TcpStore::Connect(o_.store_address, std::chrono::milliseconds(o_.host_timeout_ms));
  if (!store.ok()) return store.status();
  store_ = *store;
  if (auto s = MeetInRoster(); !s.ok()) return s;
  hostpath::HostGroupOptions ho;
  ho.rank = o_.rank;
  ho.world_size = o_.world_size;
  ho.bind_ip = o_.bind_ip;
  ho.store_prefix = absl::StrCat("inca/g", o_.group_id);
  ho.timeout = std::chrono::milliseconds(o_.host_timeout_ms);
  auto host = hostpath::HostGroup::Create(ho, *store);
  if (!host.ok()) return host.status();
  host_ = std::move(*host);

  want_offload_ = o_.offload;
  bool ready = false;
  if (!o_.switch_address.empty() && o_.job == 0) {
    // One job id for every rank: rank 0's draw (a re-run draws another).
    uint64_t mine = 0;
    if (o_.rank == 0) {
      std::random_device rd;
      while (mine == 0) mine = (uint64_t{rd()} << 32) | rd();
    }
    std::vector<uint64_t> jobs(static_cast<size_t>(o_.world_size));
    if (auto s = host_->AllGather(&mine, jobs.data(), sizeof(mine)); !s.ok()) return s;
    o_.job = jobs[0];
  }
  if (!o_.switch_address.empty()) {
    client::SwitchTransportOptions to = client::SwitchTransportOptionsFrom(o_);
    to.time = &clock_;
    auto t = SwitchSet::Create(to);
    if (!t.ok()) return t.status();
    transport_ = std::move(*t);
    ready = transport_->Join(std::chrono::milliseconds(o_.join_timeout_ms));
    last_join_ns_ = NowNs();
  }
  // Start on the switch only if every rank joined it.
  std::vector<uint8_t> all(static_cast<size_t>(o_.world_size));
  uint8_t mine = ready && want_offload_ ? 1 : 0;
  if (auto s = host_->AllGather(&mine, all.data(), 1); !s.ok()) return s;
  switch_mode_ = std::all_of(all.begin(), all.end(), [](uint8_t v) { return v == 1; });
  if (o_.require_switch && want_offload_ && !switch_mode_) {
    // Every rank sees the same `all`: the failure is collective.
    std::string missing;
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r] != 1) absl::StrAppend(&missing, missing.empty() ? "" : ",", r);
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "group ", o_.group_id, " could not form on the switch at ",
        o_.switch_address.empty() ? std::string("(none configured)") : o_.switch_address,
        " (ranks not joined: ", missing.empty() ? std::string("none") : missing,
        transport_ && transport_->last_refusal() != wire::MgmtReason::kNone
            ? absl::StrCat("; this rank was refused: ",
                           std::string(wire::ToString(transport_->last_refusal())))
            : std::string(),
        ") and INCA_REQUIRE_SWITCH is set"));
  }
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

namespace {

// An operation as the switch path runs it: one of the four collectives of
// `count` elements of `type`, reduced with `reduce`.
SwitchOp OpOf(CaisOp op, DType type, ReduceOp reduce, size_t count, const OpOptions& oo) {
  SwitchOp s;
  s.op = op;
  s.type = type;
  s.reduce = reduce;
  s.layer_id = oo.layer_id;
  s.count = count;
  return s;
}

// AllGather and ReduceScatter: `count` elements per block, blocks
// `count` elements apart (AllGather: in the output; ReduceScatter: in the
// input).
SwitchOp BlockedOp(CaisOp op, const void* in, void* out, size_t count, DType type, ReduceOp reduce,
                   const OpOptions& oo) {
  SwitchOp s = OpOf(op, type, reduce, count, oo);
  s.in = static_cast<const uint8_t*>(in);
  s.out = static_cast<uint8_t*>(out);
  s.block_stride_bytes = count * wire::ElementBytes(type);
  return s;
}

}  // namespace

std::shared_ptr<Work> CommunicatorImpl::AllReduceAsync(void* data, size_t count, DType type,
                                                       ReduceOp op, const OpOptions& oo) {
  SwitchOp s = OpOf(CaisOp::kAllReduce, type, op, count, oo);
  s.data = static_cast<uint8_t*>(data);
  return Enqueue([=, this] { return RunPieces(s); }, oo.on_done);
}

std::shared_ptr<Work> CommunicatorImpl::AllGatherAsync(const void* in, void* out, size_t count,
                                                       DType type, const OpOptions& oo) {
  const SwitchOp s = BlockedOp(CaisOp::kAllGather, in, out, count, type, ReduceOp::kSum, oo);
  return Enqueue([=, this] { return RunPieces(s); }, oo.on_done);
}

std::shared_ptr<Work> CommunicatorImpl::ReduceScatterAsync(const void* in, void* out, size_t count,
                                                           DType type, ReduceOp op,
                                                           const OpOptions& oo) {
  const SwitchOp s = BlockedOp(CaisOp::kReduceScatter, in, out, count, type, op, oo);
  return Enqueue([=, this] { return RunPieces(s); }, oo.on_done);
}

std::shared_ptr<Work> CommunicatorImpl::BroadcastAsync(void* data, size_t count, DType type,
                                                       int root, const OpOptions& oo) {
  if (root < 0 || root >= o_.world_size) {
    auto w = std::make_shared<WorkImpl>();
    absl::Status st = absl::InvalidArgumentError(
        absl::StrCat("broadcast root ", root, " must be in [0, ", o_.world_size, ")"));
    if (oo.on_done) oo.on_done(st);
    w->Finish(std::move(st));
    return w;
  }
  // Through the switch a broadcast is an AllReduce-sum in which the
  // other ranks contribute negative zeros (x + -0 == x bit for bit): every
  // rank takes part, so no rank can finish an operation without the
  // others (the recovery protocol relies on that), and each link still
  // carries the tensor once.
  SwitchOp s = OpOf(CaisOp::kAllReduce, type, ReduceOp::kSum, count, oo);
  s.broadcast = true;
  s.data = static_cast<uint8_t*>(data);
  s.root = root;
  return Enqueue([=, this] { return RunPieces(s); }, oo.on_done);
}

CommunicatorStats CommunicatorImpl::stats() const {
  absl::MutexLock lock(&stats_mu_);
  CommunicatorStats s = stats_;
  s.offload_active = switch_mode_;
  return s;
}

std::shared_ptr<Work> CommunicatorImpl::Enqueue(std::function<absl::Status()> fn, OnDone on_done) {
  auto w = std::make_shared<WorkImpl>();
  {
    std::lock_guard lock(mu_);
    queue_.push_back(Item{std::move(fn), std::move(on_done), w});
  }
  cv_.notify_one();
  return w;
}

void CommunicatorImpl::Loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mu_);
      // Idle: keep the group's lease on the switch (the transport is this
      // thread's, so the lock is dropped around it).
      while (!stopping_ && queue_.empty()) {
        std::chrono::milliseconds next{60'000};
        if (transport_ && failed_.ok()) {
          lock.unlock();
          next = transport_->KeepAlive();
          lock.lock();
        }
        cv_.wait_for(lock, next, [&] { return stopping_ || !queue_.empty(); });
      }
      if (queue_.empty()) return;  // stopping, drained
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::Status st = failed_.ok() ? item.run() : Failed();
    if (IsFatal(st)) Fail(st);
    item.run = nullptr;  // drop the captures before the work completes
    if (item.on_done) {
      item.on_done(st);
      item.on_done = nullptr;  // releases the buffers' owners here, not in a waiter
    }
    item.work->Finish(std::move(st));
  }
}

bool CommunicatorImpl::IsFatal(const absl::Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented: return false;
    default: return true;
  }
}

void CommunicatorImpl::Fail(const absl::Status& st) {
  if (!failed_.ok()) return;
  failed_ = st;
  if (transport_) transport_->Leave();
  Log(absl::StrCat("inca rank ", o_.rank, ": group ", o_.group_id, " failed and left the switch: ",
                   st.message(), "; create a new communicator to go on"));
}

absl::Status CommunicatorImpl::RunPieces(const SwitchOp& whole) {
  Bump(&CommunicatorStats::ops);
  desc_ = client::Describe(whole, whole.count);
  if (whole.count == 0) return RunEmpty(whole);
  const size_t piece = client::PieceElements(whole, o_.chunk_size, o_.world_size);
  bool any_host = false;
  for (size_t off = 0; off < whole.count; off += piece) {
    SwitchOp s = client::PieceOf(whole, off, std::min(piece, whole.count - off));
    bool used_host = false;
    host_reason_ = HostReason::kOff;
    if (s.broadcast && o_.rank != s.root) FillNegativeZero(s);
    if (auto st = RunOne(s, &used_host); !st.ok()) return st;
    any_host = any_host || used_host;
  }
  Bump(any_host ? &CommunicatorStats::ops_host : &CommunicatorStats::ops_switch);
  if (any_host) CountHostReason(whole);
  return absl::OkStatus();
}

void CommunicatorImpl::FillNegativeZero(const SwitchOp& s) {
  const size_t esize = wire::ElementBytes(s.type);
  const uint32_t pattern = s.type == DType::kI32   ? 0u
                           : s.type == DType::kF32 ? 0x80000000u
                                                   : 0x8000u;
  for (size_t i = 0; i < s.count; ++i) std::memcpy(s.data + i * esize, &pattern, esize);
}

absl::Status CommunicatorImpl::RunOne(SwitchOp& s, bool* used_host) {
  ++op_index_;
  const uint64_t total = client::ChunkCount(s, o_.chunk_size, o_.world_size);
  const client::OpRoute route = client::RouteOf({.has_switch = transport_ != nullptr,
                                                 .switch_mode = switch_mode_,
                                                 .want_offload = want_offload_,
                                                 .formed = transport_ && transport_->ready(),
                                                 .require_switch = o_.require_switch});
  if (route == client::OpRoute::kSwitch) {
    const int64_t start = NowNs();
    bool declined = false;
    absl::Status st = RunOnSwitch(s, used_host, &declined);
    // What this operation cost on the path it took, for the switch's
    // offload controller (rank 0 speaks for the group).
    if (st.ok() && o_.rank == 0) {
      transport_->Report(s, std::chrono::nanoseconds(NowNs() - start),
                         declined ? wire::ReportPath::kHost : wire::ReportPath::kSwitch);
    }
    return st;
  }
  *used_host = true;
  if (route == client::OpRoute::kHostNoSwitch) {
    if (o_.check_agreement) {
      if (auto st = AgreeOnHost(s); !st.ok()) return st;
    }
    return HostOnly(s);
  }
  if (route == client::OpRoute::kRefused) {
    MaybeRejoin();
    return absl::FailedPreconditionError(
        absl::StrCat("group ", o_.group_id, " is not on the switch at ", o_.switch_address,
                     transport_->ready() ? " (a rank left it)" : " (this rank cannot join it)",
                     "; INCA_REQUIRE_SWITCH is set, so operation ", op_index_,
                     " does not fall back to the host path"));
  }
  if (want_offload_) {
    WarnFallback(transport_->ready() ? "the group is not on the switch (a rank could not join "
                                       "it, or the group lost it)"
                                     : "this rank cannot join the switch");
  }
  MaybeRejoin();
  return Recover(s, std::vector<uint8_t>(total, 0));
}

void CommunicatorImpl::MaybeYieldToLocalSwitch() {
  if (batch_tried_ || !o_.yield_to_local_switch || !transport_->path().switch_on_host()) return;
  batch_tried_ = true;
  sched_param sp{};
  (void)sched_setscheduler(0, SCHED_BATCH, &sp);
  const bool batch = sched_getscheduler(0) == SCHED_BATCH;
  absl::MutexLock lock(&stats_mu_);
  stats_.progress_batch = batch;
}

absl::Status CommunicatorImpl::RunOnSwitch(SwitchOp& s, bool* used_host, bool* declined) {
  MaybeYieldToLocalSwitch();
  s.seq = transport_->seq_base() + static_cast<uint32_t>(op_index_);
  s.mirror = cache_.Mirror(s);
  const bool mirrored = s.mirror != nullptr;
  client::SwitchPhaseResult r = transport_->Run(s);
  s.mirror = nullptr;
  if (mirrored && std::any_of(r.have.begin(), r.have.end(), [](uint8_t h) { return h != 0; })) {
    cache_.Invalidate();  // the last operation's bytes are (partly) overwritten
  }
  {
    absl::MutexLock lock(&stats_mu_);
    stats_.chunks_sent += r.sent;
    stats_.chunks_retransmitted += r.retransmitted;
    stats_.tail_probes += r.tail_probes;
    stats_.result_requests += r.requests;
    stats_.fallback_notices += r.notices;
    const client::PathState& p = transport_->path();
    stats_.window_chunks = p.window();
    stats_.srtt_us = static_cast<double>(p.srtt_ns()) / 1e3;
    stats_.base_rtt_us = static_cast<double>(p.base_rtt_ns()) / 1e3;
    stats_.competitive = p.competitive();
    stats_.switch_on_host = p.switch_on_host();
    stats_.competitive_entries = p.competitive_entries();
    stats_.drain_probes = p.probes();
    // The samples recorded since the last operation, bounded as the core's
    // (a rejoin starts a new core, which counts from zero).
    if (p.traced() < traced_) traced_ = 0;
    const uint64_t fresh = std::min<uint64_t>(p.traced() - traced_, p.trace().size());
    for (size_t i = p.trace().size() - fresh; i < p.trace().size(); ++i) {
      const client::WindowSample& w = p.trace()[i];
      trace_.push_back(WindowSample{w.at_ns, w.window, static_cast<double>(w.srtt_ns) / 1e3});
    }
    traced_ = p.traced();
    while (trace_.size() > o_.window_trace_samples) trace_.pop_front();
  }
  const client::SwitchOutcome outcome = client::OutcomeOf(r);
  if (outcome == client::SwitchOutcome::kComplete) {
    if (o_.debug) {
      const client::PathState& p = transport_->path();
      Log(absl::StrCat("inca rank ", o_.rank, ": op ", op_index_,
                       " done on the switch: ", r.total_chunks, " chunks, sent ", r.sent, ", ",
                       r.retransmitted, " retransmits, ", r.requests, " requests, ", r.tail_probes,
                       " tail probes; srtt ", p.srtt_ns() / 1000, " us, switch wait ",
                       p.switch_wait_ns() / 1000, " us, window ",
                       absl::StrFormat("%.1f", p.window())));
    }
    cache_.Keep(op_index_, s, mirrored);
    return absl::OkStatus();
  }
  if (outcome == client::SwitchOutcome::kDeclined) {
    // The offload controller's decision for this operation: every rank
    // gets the same answer from the switch, so all run it on the host
    // path (through the agreement round, which also covers a rank
    // left behind) and stay joined for the next one.
    Bump(&CommunicatorStats::ops_declined);
    host_reason_ = static_cast<HostReason>(r.declined_reason);
    *used_host = true;
    *declined = true;
    return Recover(s, r.have);
  }
  if (o_.debug) {
    size_t have = 0;
    for (uint8_t h : r.have) have += h;
    Log(absl::StrCat("inca rank ", o_.rank, ": op ", op_index_, " seq ", s.seq,
                     " left the switch: ", have, "/", r.total_chunks, " chunks, ", r.notices,
                     " notices, ", r.retransmitted, " retransmits, ", r.requests, " requests"));
  }
  *used_host = true;
  if (outcome == client::SwitchOutcome::kDisagreed) {
    // The switch saw the ranks' chunks differ in shape and handed the
    // operation back: the agreement round names what differs. The group
    // stays on the switch.
    return Recover(s, r.have);
  }
  // Lost the switch for this op (timeout or hand-back): recover on hosts.
  host_reason_ = HostReason::kFallback;
  if (!o_.require_switch) WarnFallback("an operation left the switch (timeout or hand-back)");
  transport_->MarkStale();
  switch_mode_ = false;
  absl::Status st = Recover(s, r.have);
  if (st.ok() && o_.require_switch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "operation ", op_index_, " of group ", o_.group_id,
        " left the switch (timeout or hand-back) and completed on the host path; its result "
        "is exact, but INCA_REQUIRE_SWITCH is set"));
  }
  return st;
}

absl::Status CommunicatorImpl::HostOnly(const SwitchOp& s) {
  const size_t bytes = s.count * wire::ElementBytes(s.type);
  absl::Status st = s.broadcast                  ? host_->Broadcast(s.data, bytes, s.root)
                    : s.op == CaisOp::kAllGather ? host_->AllGather(s.in, s.out, bytes)
                    : s.op == CaisOp::kReduceScatter
                        ? HostReduceScatter(s)
                        : host_->AllReduce(s.data, s.count, s.type, s.reduce);
  return st;
}

absl::Status CommunicatorImpl::ReduceScatterOnHost(const SwitchOp& s,
                                                   std::vector<uint8_t>* packed) {
  const size_t b = s.count * wire::ElementBytes(s.type);
  if (auto st = host_->AllReduce(packed->data(), s.count * static_cast<size_t>(o_.world_size),
                                 s.type, s.reduce);
      !st.ok()) {
    return st;
  }
  if (b != 0) std::memcpy(s.out, packed->data() + static_cast<size_t>(o_.rank) * b, b);
  return absl::OkStatus();
}

void CommunicatorImpl::Log(std::string_view line) const {
  if (o_.log) {
    o_.log(line);
  } else {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  }
}

void CommunicatorImpl::MaybeRejoin() {
  if (!transport_ || transport_->ready() || !want_offload_) return;
  const int64_t now = NowNs();
  if (now - last_join_ns_ < int64_t{o_.rejoin_interval_ms} * 1'000'000) return;
  last_join_ns_ = now;
  transport_->Join(std::chrono::milliseconds(20));
}

}  // namespace inca::client_internal
