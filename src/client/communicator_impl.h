// The communicator's implementation (private to src/client): the progress
// thread and the switch/host decision are defined here, the host recovery
// protocol in communicator_recovery.cc; communicator.cc validates options
// and creates it. Design: docs/design/cais-client.md.
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/group_roster.h"
#include "client/op_agreement.h"
#include "client/recovery_cache.h"
#include "client/switch_transport.h"
#include "client/transport_options.h"
#include "hostpath/host_group.h"
#include "hostpath/tcp_store.h"
#include "inca/client/communicator.h"

namespace inca::client_internal {

using client::OpDescriptor;
using client::SwitchOp;
using client::SwitchSet;
using wire::CaisOp;

class WorkImpl final : public Work {
 public:
  absl::Status Wait() override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return status_;
  }
  bool Done() const override {
    std::lock_guard lock(mu_);
    return done_;
  }
  void Finish(absl::Status s) {
    {
      std::lock_guard lock(mu_);
      status_ = std::move(s);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  absl::Status status_;
};

// Fixed-size record every rank contributes when entering host recovery:
// where it is, and what it was asked to do (client/op_agreement.h).
struct AgreeRecord {
  uint64_t op_index;
  uint32_t total_chunks;
  uint32_t flags;
  OpDescriptor desc;
};
constexpr uint32_t kReady = 1;       // joined and willing to use the switch
constexpr uint32_t kCacheValid = 2;  // holds the result of op_index - 1
constexpr uint32_t kHaveChunks = 4;  // received some chunks of op_index from the switch

class CommunicatorImpl final : public Communicator {
 public:
  explicit CommunicatorImpl(const CommunicatorOptions& o) : o_(o) {}
  ~CommunicatorImpl() override {
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

  absl::Status Init() {
    if (o_.rank == 0 && o_.serve_store) {
      auto server = hostpath::TcpStoreServer::Start(o_.store_address);
      if (!server.ok()) {
        return absl::UnavailableError(absl::StrCat("rank 0 cannot serve the store at ",
                                                   o_.store_address, ": ",
                                                   server.status().message()));
      }
      store_server_ = std::move(*server);
    }
    auto store = hostpath::TcpStore::Connect(o_.store_address,
                                             std::chrono::milliseconds(o_.host_timeout_ms));
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
      auto t = SwitchSet::Create(client::SwitchTransportOptionsFrom(o_));
      if (!t.ok()) return t.status();
      transport_ = std::move(*t);
      ready = transport_->Join(std::chrono::milliseconds(o_.join_timeout_ms));
      last_join_ = std::chrono::steady_clock::now();
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

  std::shared_ptr<Work> AllReduceAsync(void* data, size_t count, DType type, ReduceOp op,
                                       const OpOptions& oo) override {
    SwitchOp s;
    s.op = CaisOp::kAllReduce;
    s.type = type;
    s.reduce = op;
    s.layer_id = oo.layer_id;
    s.data = static_cast<uint8_t*>(data);
    s.count = count;
    return Enqueue([=, this] { return RunPieces(s); }, oo.on_done);
  }
  std::shared_ptr<Work> AllGatherAsync(const void* in, void* out, size_t count, DType type,
                                       const OpOptions& oo) override {
    SwitchOp s;
    s.op = CaisOp::kAllGather;
    s.type = type;
    s.layer_id = oo.layer_id;
    s.in = static_cast<const uint8_t*>(in);
    s.out = static_cast<uint8_t*>(out);
    s.count = count;
    s.block_stride_bytes = count * wire::ElementBytes(type);
    return Enqueue([=, this] { return RunPieces(s); }, oo.on_done);
  }
  std::shared_ptr<Work> ReduceScatterAsync(const void* in, void* out, size_t count, DType type,
                                           ReduceOp op, const OpOptions& oo) override {
    SwitchOp s;
    s.op = CaisOp::kReduceScatter;
    s.type = type;
    s.reduce = op;
    s.layer_id = oo.layer_id;
    s.in = static_cast<const uint8_t*>(in);
    s.out = static_cast<uint8_t*>(out);
    s.count = count;
    s.block_stride_bytes = count * wire::ElementBytes(type);  // between input blocks
    return Enqueue([=, this] { return RunPieces(s); }, oo.on_done);
  }
  std::shared_ptr<Work> BroadcastAsync(void* data, size_t count, DType type, int root,
                                       const OpOptions& oo) override {
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
    SwitchOp s;
    s.op = CaisOp::kAllReduce;
    s.reduce = ReduceOp::kSum;
    s.broadcast = true;
    s.type = type;
    s.layer_id = oo.layer_id;
    s.data = static_cast<uint8_t*>(data);
    s.count = count;
    s.root = root;
    return Enqueue([=, this] { return RunPieces(s); }, oo.on_done);
  }
  absl::Status Synchronize() override {
    return Enqueue([] { return absl::OkStatus(); })->Wait();
  }
  void SetOffload(bool enabled) override { want_offload_ = enabled; }

  CommunicatorStats stats() const override {
    absl::MutexLock lock(&stats_mu_);
    CommunicatorStats s = stats_;
    s.offload_active = switch_mode_;
    return s;
  }
  std::vector<WindowSample> window_trace() const override {
    absl::MutexLock lock(&stats_mu_);
    return {trace_.begin(), trace_.end()};
  }
  int rank() const override { return o_.rank; }
  int world_size() const override { return o_.world_size; }

 private:
  using OnDone = std::function<void(const absl::Status&)>;
  struct Item {
    std::function<absl::Status()> run;
    OnDone on_done;
    std::shared_ptr<WorkImpl> work;
  };

  std::shared_ptr<Work> Enqueue(std::function<absl::Status()> fn, OnDone on_done = {}) {
    auto w = std::make_shared<WorkImpl>();
    {
      std::lock_guard lock(mu_);
      queue_.push_back(Item{std::move(fn), std::move(on_done), w});
    }
    cv_.notify_one();
    return w;
  }

  void Loop() {
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

  // A failure that leaves the group's ranks at different operations (a peer
  // gone, silent past host_timeout_ms, data lost): no later operation can
  // be matched up. Refused input and INCA_REQUIRE_SWITCH refusals are not.
  static bool IsFatal(const absl::Status& st) {
    switch (st.code()) {
      case absl::StatusCode::kOk:
      case absl::StatusCode::kInvalidArgument:
      case absl::StatusCode::kFailedPrecondition:
      case absl::StatusCode::kOutOfRange:
      case absl::StatusCode::kUnimplemented: return false;
      default: return true;
    }
  }
  // On the first fatal failure: leave the switch group at once (issue 18),
  // so that the switch frees its ports and slots and a re-run can form
  // without waiting for a lease; no more keep-alives.
  void Fail(const absl::Status& st) {
    if (!failed_.ok()) return;
    failed_ = st;
    if (transport_) transport_->Leave();
    std::fprintf(stderr,
                 "inca rank %d: group %u failed and left the switch: %s; create a new "
                 "communicator to go on\n",
                 o_.rank, static_cast<unsigned>(o_.group_id), std::string(st.message()).c_str());
  }
  absl::Status Failed() const {
    return absl::FailedPreconditionError(
        absl::StrCat("group ", o_.group_id, " failed at an earlier operation and left the switch (",
                     failed_.message(), "); create a new communicator to go on"));
  }

  // Splits an operation into pieces of at most 65,535 chunks
  // (client::PieceElements), one after the other.
  absl::Status RunPieces(const SwitchOp& whole) {
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

  // Ranks that disagree (communicator_recovery.cc; docs/design/cais-client.md,
  // "Ranks that disagree").
  absl::Status RunEmpty(const SwitchOp& s);
  absl::Status AgreeDelegated(const DelegatedOp& d) override;  // communicator_recovery.cc
  absl::Status MeetInRoster();                                 // communicator.cc
  absl::Status SharedVerdict(int64_t mine, const client::RosterJudgement& j,
                             const std::vector<int64_t>& at);
  absl::Status AgreeOnHost(const SwitchOp& s);
  absl::Status Refused(absl::Status st);

  // stats(): why operation `whole` used the host path (communicator.cc).
  void CountHostReason(const SwitchOp& whole);

  static void FillNegativeZero(const SwitchOp& s) {
    const size_t esize = wire::ElementBytes(s.type);
    const uint32_t pattern = s.type == DType::kI32   ? 0u
                             : s.type == DType::kF32 ? 0x80000000u
                                                     : 0x8000u;
    for (size_t i = 0; i < s.count; ++i) std::memcpy(s.data + i * esize, &pattern, esize);
  }

  absl::Status RunOne(SwitchOp& s, bool* used_host) {
    ++op_index_;
    const uint64_t total = client::ChunkCount(s, o_.chunk_size, o_.world_size);
    if (switch_mode_ && want_offload_ && transport_ && transport_->ready()) {
      const auto start = std::chrono::steady_clock::now();
      bool declined = false;
      absl::Status st = RunOnSwitch(s, used_host, &declined);
      // What this operation cost on the path it took, for the switch's
      // offload controller (rank 0 speaks for the group).
      if (st.ok() && o_.rank == 0) {
        transport_->Report(s, std::chrono::steady_clock::now() - start,
                           declined ? wire::ReportPath::kHost : wire::ReportPath::kSwitch);
      }
      return st;
    }
    *used_host = true;
    if (!transport_) {  // no switch configured
      if (o_.check_agreement) {
        if (auto st = AgreeOnHost(s); !st.ok()) return st;
      }
      return HostOnly(s);
    }
    if (want_offload_ && o_.require_switch) {
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

  // Once per communicator: operations run on the host path although a
  // switch is configured and wanted (issue 18: only cais-perf's path column
  // showed it). Declines and SetOffload(false) are decisions, not
  // fallbacks, and stay quiet; stats() counts every case.
  void WarnFallback(const char* why);  // communicator.cc

  // yield_to_local_switch: once, on this (the progress) thread, when the
  // switch is on this host. The stat reads the policy back, so it says what
  // the kernel applied; a refusal leaves the thread as it was.
  void MaybeYieldToLocalSwitch() {
    if (batch_tried_ || !o_.yield_to_local_switch || !transport_->path().switch_on_host()) return;
    batch_tried_ = true;
    sched_param sp{};
    (void)sched_setscheduler(0, SCHED_BATCH, &sp);
    const bool batch = sched_getscheduler(0) == SCHED_BATCH;
    absl::MutexLock lock(&stats_mu_);
    stats_.progress_batch = batch;
  }

  absl::Status RunOnSwitch(SwitchOp& s, bool* used_host, bool* declined) {
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
    if (r.complete) {
      if (debug_) {
        std::fprintf(
            stderr,
            "inca rank %d: op %lu done on the switch: %u chunks, sent %lu, %lu "
            "retransmits, %lu requests, %lu tail probes; srtt %ld us, switch wait %ld "
            "us, window %.1f\n",
            o_.rank, static_cast<unsigned long>(op_index_), r.total_chunks,
            static_cast<unsigned long>(r.sent), static_cast<unsigned long>(r.retransmitted),
            static_cast<unsigned long>(r.requests), static_cast<unsigned long>(r.tail_probes),
            static_cast<long>(transport_->path().srtt_ns() / 1000),
            static_cast<long>(transport_->path().switch_wait_ns() / 1000),
            transport_->path().window());
      }
      cache_.Keep(op_index_, s, mirrored);
      return absl::OkStatus();
    }
    if (r.declined) {
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
    if (debug_) {
      size_t have = 0;
      for (uint8_t h : r.have) have += h;
      std::fprintf(stderr,
                   "inca rank %d: op %lu seq %u left the switch: %zu/%u chunks, %lu notices, "
                   "%lu retransmits, %lu requests\n",
                   o_.rank, static_cast<unsigned long>(op_index_), s.seq, have, r.total_chunks,
                   static_cast<unsigned long>(r.notices),
                   static_cast<unsigned long>(r.retransmitted),
                   static_cast<unsigned long>(r.requests));
    }
    *used_host = true;
    if (r.disagreed) {
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

  // Plain Gloo, used when no switch is configured at all (--backend gloo),
  // after AgreeOnHost unless check_agreement is off.
  absl::Status HostOnly(const SwitchOp& s) {
    const size_t bytes = s.count * wire::ElementBytes(s.type);
    absl::Status st = s.broadcast                  ? host_->Broadcast(s.data, bytes, s.root)
                      : s.op == CaisOp::kAllGather ? host_->AllGather(s.in, s.out, bytes)
                      : s.op == CaisOp::kReduceScatter
                          ? HostReduceScatter(s)
                          : host_->AllReduce(s.data, s.count, s.type, s.reduce);
    return st;
  }

  // On the host path a ReduceScatter is an all-reduce of the whole input of
  // which each rank keeps its block (Gloo in torch 1.13 has no
  // reduce-scatter; the host path is the fallback, not the fast path).
  absl::Status HostReduceScatter(const SwitchOp& s) {
    std::vector<uint8_t> buf = client::PackedInput(s, o_.world_size);
    return ReduceScatterOnHost(s, &buf);
  }
  absl::Status ReduceScatterOnHost(const SwitchOp& s, std::vector<uint8_t>* packed) {
    const size_t b = s.count * wire::ElementBytes(s.type);
    if (auto st = host_->AllReduce(packed->data(), s.count * static_cast<size_t>(o_.world_size),
                                   s.type, s.reduce);
        !st.ok()) {
      return st;
    }
    if (b != 0) std::memcpy(s.out, packed->data() + static_cast<size_t>(o_.rank) * b, b);
    return absl::OkStatus();
  }

  void MaybeRejoin() {
    if (!transport_ || transport_->ready() || !want_offload_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_join_ < std::chrono::milliseconds(o_.rejoin_interval_ms)) return;
    last_join_ = now;
    transport_->Join(std::chrono::milliseconds(20));
  }

  // Host recovery (communicator_recovery.cc); every rank that could not
  // finish an op through the switch ends up here. See
  // docs/design/cais-client.md, "Recovery".
  std::string AliveKey(int r) const;
  absl::Status HostPathFailed(const SwitchOp& s, const absl::Status& st);
  absl::Status Recover(const SwitchOp& s, const std::vector<uint8_t>& have);
  absl::Status RecoverRounds(const SwitchOp& s, const std::vector<uint8_t>& have);
  static int PickServer(const std::vector<AgreeRecord>& all, uint64_t ahead, bool rs);
  absl::Status ServeFromCache(int server);
  absl::Status Finalize();
  void Restore(const SwitchOp& s, const std::vector<uint8_t>& result);
  absl::Status RecoverAllReduce(const SwitchOp& s, const std::vector<uint8_t>& have);

  void Bump(uint64_t CommunicatorStats::*field, uint64_t n = 1) {
    absl::MutexLock lock(&stats_mu_);
    stats_.*field += n;
  }

  CommunicatorOptions o_;
  const bool debug_ = std::getenv("INCA_DEBUG") != nullptr;
  bool fallback_warned_ = false;  // WarnFallback, on the communicator's thread
  bool batch_tried_ = false;      // MaybeYieldToLocalSwitch, on that thread
  absl::Status failed_;           // the first fatal failure (Fail), on that thread
  std::unique_ptr<hostpath::TcpStoreServer> store_server_;
  std::shared_ptr<hostpath::TcpStore> store_;
  std::unique_ptr<hostpath::HostGroup> host_;
  std::unique_ptr<SwitchSet> transport_;  // one transport per switch striped over
  std::chrono::steady_clock::time_point last_join_{};

  // Progress-thread state.
  std::atomic<bool> switch_mode_{false};
  std::atomic<bool> want_offload_{true};
  uint64_t op_index_ = 0;
  OpDescriptor desc_;  // the operation under way, as the peers must describe it
  HostReason host_reason_ = HostReason::kOff;  // why the piece under way used the host path
  client::RecoveryCache cache_{o_.recovery_cache_bytes, o_.world_size};

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  std::thread thread_;

  mutable absl::Mutex stats_mu_;
  CommunicatorStats stats_ ABSL_GUARDED_BY(stats_mu_);
  std::deque<WindowSample> trace_ ABSL_GUARDED_BY(stats_mu_);  // window_trace()
  uint64_t traced_ ABSL_GUARDED_BY(stats_mu_) = 0;             // the core samples already copied
};

}  // namespace inca::client_internal
