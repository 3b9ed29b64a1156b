// The communicator's implementation (private to src/client): the progress
// thread and the switch/host decision in communicator_impl.cc, the host
// recovery protocol in communicator_recovery.cc, the roster and option
// checks in communicator.cc (which also creates it). Design:
// docs/design/cais-client.md.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
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
#include "net/clock.h"

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
  ~CommunicatorImpl() override;

  absl::Status Init();

  std::shared_ptr<Work> AllReduceAsync(void* data, size_t count, DType type, ReduceOp op,
                                       const OpOptions& oo) override;
  std::shared_ptr<Work> AllGatherAsync(const void* in, void* out, size_t count, DType type,
                                       const OpOptions& oo) override;
  std::shared_ptr<Work> ReduceScatterAsync(const void* in, void* out, size_t count, DType type,
                                           ReduceOp op, const OpOptions& oo) override;
  std::shared_ptr<Work> BroadcastAsync(void* data, size_t count, DType type, int root,
                                       const OpOptions& oo) override;
  absl::Status Synchronize() override {
    return Enqueue([] { return absl::OkStatus(); })->Wait();
  }
  void SetOffload(bool enabled) override { want_offload_ = enabled; }

  CommunicatorStats stats() const override;
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

  std::shared_ptr<Work> Enqueue(std::function<absl::Status()> fn, OnDone on_done = {});

  void Loop();

  // A failure that leaves the group's ranks at different operations (a peer
  // gone, silent past host_timeout_ms, data lost): no later operation can
  // be matched up. Refused input and INCA_REQUIRE_SWITCH refusals are not.
  static bool IsFatal(const absl::Status& st);
  // On the first fatal failure: leave the switch group at once (issue 18),
  // so that the switch frees its ports and slots and a re-run can form
  // without waiting for a lease; no more keep-alives.
  void Fail(const absl::Status& st);
  absl::Status Failed() const {
    return absl::FailedPreconditionError(
        absl::StrCat("group ", o_.group_id, " failed at an earlier operation and left the switch (",
                     failed_.message(), "); create a new communicator to go on"));
  }

  // Splits an operation into pieces of at most 65,535 chunks
  // (client::PieceElements), one after the other.
  absl::Status RunPieces(const SwitchOp& whole);

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

  static void FillNegativeZero(const SwitchOp& s);

  absl::Status RunOne(SwitchOp& s, bool* used_host);

  // Once per communicator: operations run on the host path although a
  // switch is configured and wanted (issue 18: only cais-perf's path column
  // showed it). Declines and SetOffload(false) are decisions, not
  // fallbacks, and stay quiet; stats() counts every case.
  void WarnFallback(const char* why);  // communicator.cc

  // yield_to_local_switch: once, on this (the progress) thread, when the
  // switch is on this host. The stat reads the policy back, so it says what
  // the kernel applied; a refusal leaves the thread as it was.
  void MaybeYieldToLocalSwitch();

  absl::Status RunOnSwitch(SwitchOp& s, bool* used_host, bool* declined);

  // Plain Gloo, used when no switch is configured at all (--backend gloo),
  // after AgreeOnHost unless check_agreement is off.
  absl::Status HostOnly(const SwitchOp& s);

  // On the host path a ReduceScatter is an all-reduce of the whole input of
  // which each rank keeps its block (Gloo in torch 1.13 has no
  // reduce-scatter; the host path is the fallback, not the fast path).
  absl::Status HostReduceScatter(const SwitchOp& s) {
    std::vector<uint8_t> buf = client::PackedInput(s, o_.world_size);
    return ReduceScatterOnHost(s, &buf);
  }
  absl::Status ReduceScatterOnHost(const SwitchOp& s, std::vector<uint8_t>* packed);

  void MaybeRejoin();

  // One line to CommunicatorOptions::log, or to standard error.
  void Log(std::string_view line) const;
  int64_t NowNs() const { return clock_.NowNs(); }

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
  bool fallback_warned_ = false;  // WarnFallback, on the communicator's thread
  bool batch_tried_ = false;      // MaybeYieldToLocalSwitch, on that thread
  absl::Status failed_;           // the first fatal failure (Fail), on that thread
  std::unique_ptr<hostpath::TcpStoreServer> store_server_;
  std::shared_ptr<hostpath::TcpStore> store_;
  std::unique_ptr<hostpath::HostGroup> host_;
  std::unique_ptr<SwitchSet> transport_;               // one transport per switch striped over
  const net::TimeSource& clock_ = net::SystemClock();  // the client's one clock
  int64_t last_join_ns_ = INT64_MIN / 2;

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
