// The CAIS client: collectives among the ranks of one group, through an
// inca switch when it is there and willing, through Gloo on the hosts when
// it is not. See docs/design/cais-client.md.
//
// Collective contract (as in MPI/NCCL): every rank of the group calls the
// same operations in the same order with matching sizes and types. Calls on
// one Communicator are executed in issue order by its progress thread; the
// blocking forms wait for their operation, the async forms return a Work.
// A Communicator is thread-safe for issuing operations. Buffers passed to an
// async operation must stay valid and untouched until its Work completes;
// OpOptions::on_done is where a binding releases what keeps them alive, so
// the buffers outlive the operation even when every Work handle is dropped.
//
// Errors: every call returns within a bounded time (host_timeout_ms plus
// switch_timeout_ms per 65,535 chunks at most) with the right result or an
// absl::Status saying what failed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/client/delegated_op.h"
#include "inca/wire/cais.h"

namespace inca {

using wire::DType;
using wire::ReduceOp;

struct CommunicatorOptions {
  int rank = 0;
  int world_size = 1;
  uint8_t group_id = 0;
  // inca-switchd address; empty = no switch, host path only.
  std::string switch_address = "127.0.0.1:9410";
  // Rendezvous store for the host path ("host:port"). Rank 0 serves it when
  // serve_store is set; every rank connects to it.
  std::string store_address = "127.0.0.1:29500";
  bool serve_store = true;
  // The store serves this group alone (rank 0 serving it, as with
  // serve_store, or its owner, as in the torch backend): ranks of another
  // group id there disagree with this one, reported at once rather than at
  // host_timeout_ms (docs/design/cais-client.md, "Ranks that disagree on
  // the group"). A store shared by groups must leave it false.
  bool own_store = false;
  // Switch port to ask for when joining (0..1023), or -1 for any. Asking for
  // port = rank makes the switch's ascending-port reduction order the rank
  // order (deterministic mode then reduces in rank order).
  int switch_port = -1;
  // Use the switch when it is there (false: host path until SetOffload).
  bool offload = true;
  // Local IP the data socket and Gloo bind to (IPv4 or IPv6; with an IPv6
  // switch the default becomes "::").
  std::string bind_ip = "127.0.0.1";
  // The switch socket's I/O path: "gso" (UDP GSO sends and GRO receives
  // where the kernel has them) or "mmsg" (one datagram per message).
  std::string io = "gso";
  // Tensor payload bytes per packet (the CAIS write-up's chunk_size).
  // Must fit the switch's max payload and the path MTU.
  uint32_t chunk_size = 8952;
  // Largest congestion window: chunks in flight per rank (the write-up's
  // max_pending_chunks is the switch's). 128 was measured and not adopted
  // (docs/design/cais-client.md, "Window").
  uint32_t max_pending_chunks = 64;
  // Competitive mode of the transport (docs/design/cais-client.md): AIMD on
  // loss while the bottleneck queue belongs to a loss-based sender such as a
  // Gloo job on the same hosts. On by default since its entry test leaves
  // out the time a rank waited in the switch for slower ranks (which had
  // looked like that queue); false keeps delay control alone.
  bool competitive = true;
  // Pace new chunks at this multiple of window / smoothed round trip (a
  // bucket of pacing_burst chunks); 0 sends a window at once
  // (docs/design/cais-client.md).
  double pacing_gain = 0;
  uint32_t pacing_burst = 4;
  // When the switch runs on this host (loopback, or an address of one of
  // this host's interfaces), the progress thread runs under SCHED_BATCH from
  // its first operation on the switch path: a result arriving then wakes it
  // without preempting the switch, whose CPU every rank waits on
  // (docs/design/cais-client.md, "A switch on this host").
  bool yield_to_local_switch = true;
  // Keep this many samples of the switch path's congestion window
  // (window_trace()); 0 keeps none.
  size_t window_trace_samples = 0;
  // Retransmission timeout: initial and cap of the exponential backoff.
  int retransmit_timeout_ms = 5;
  int max_retransmit_timeout_ms = 100;
  // An operation that makes no progress through the switch for this long
  // goes to the host path (the write-up's 5.5 tip 4: seconds at most).
  int switch_timeout_ms = 1000;
  // How long Create() waits for the group to form at the switch before
  // starting on the host path.
  int join_timeout_ms = 3000;
  // While on the host path, how often to try the switch again.
  int rejoin_interval_ms = 500;
  // Gloo connection/operation timeout.
  int host_timeout_ms = 60000;
  // Fail instead of falling back (INCA_REQUIRE_SWITCH=1): creation fails
  // when the group cannot form on the switch, and an operation that would
  // run on the host path because the group is not (or no longer) on the
  // switch returns FailedPrecondition. One that leaves the switch part-way
  // still completes exactly on the host path, as every rank must take part
  // in that recovery, and then returns the error. Declines by the switch's
  // offload policy are decisions and still run on the host path.
  bool require_switch = false;
  // On the host path with no switch configured, exchange each operation's
  // description (one small allgather) so that ranks that disagree get an
  // error instead of a wrong result or an abort. With a switch the check
  // costs nothing and is always made. false: plain Gloo, for baselines.
  bool check_agreement = true;
  // Debug lines (INCA_DEBUG=1): one per operation on the switch path and
  // per operation that leaves it.
  bool debug = false;
  // Where the communicator's warnings and debug lines go, one line each
  // without its newline (called on the progress thread); unset: standard
  // error.
  std::function<void(std::string_view line)> log;
  // The job this communicator belongs to, sent in JOIN so that a re-run
  // replaces its own dead group on the switch (docs/protocol.md). 0: rank 0
  // draws one at random and every rank takes it at creation.
  uint64_t job = 0;
  // Results of the last operation are kept (up to this size) so a rank that
  // lost the end of an operation when the switch died can be served by its
  // peers.
  size_t recovery_cache_bytes = size_t{256} << 20;
  // Validates; InvalidArgument names the field.
  absl::Status Validate() const;
};

// Reads rank/world size/addresses the way torchrun sets them (RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus INCA_SWITCH (switch address,
// "none" for host only), INCA_OFFLOAD=0 (start on the host path),
// INCA_IO (gso or mmsg) and INCA_REQUIRE_SWITCH=1 (require_switch).
absl::StatusOr<CommunicatorOptions> OptionsFromEnvironment(CommunicatorOptions base = {});

// Why an operation ran on the host path (CommunicatorStats::host_reasons):
// the switch's reason in its DECLINED notice (wire::DeclineReason; 0 from a
// switch that gives none), or the client's own.
enum class HostReason : uint8_t {
  kDeclined = 0,  // declined by a switch that says no more
  kRule = 1,      // a host-path rule for its layer
  kModel = 2,     // outside the offload model's size range (size class not measured)
  kMeasured = 3,  // the host path measured faster for its size class
  kExplore = 4,   // one operation sent the other way to measure that path
  kHeld = 5,      // the group is held on the host path: its chunks fell back
  kFallback = 6,  // it left the switch part-way (timeout, hand-back)
  kOff = 7,       // not on the switch: none configured, not joined, or SetOffload(false)
};
inline constexpr size_t kHostReasons = 8;
inline constexpr const char* kHostReasonNames[kHostReasons] = {
    "declined", "rule", "model", "measured", "explore", "held", "fallback", "off"};
using HostReasonCounts = std::array<uint64_t, kHostReasons>;

struct CommunicatorStats {
  uint64_t ops = 0;
  uint64_t ops_switch = 0;    // completed entirely through the switch
  uint64_t ops_host = 0;      // completed (at least partly) on the host path
  uint64_t ops_declined = 0;  // of ops_host: the switch's offload policy declined them
  uint64_t ops_refused = 0;   // operations the ranks disagreed on (an error on every rank)
  uint64_t chunks_sent = 0;
  uint64_t chunks_retransmitted = 0;
  uint64_t tail_probes = 0;  // quiet spells ended by a tail probe (of chunks_retransmitted)
  uint64_t result_requests = 0;
  uint64_t fallback_notices = 0;
  uint64_t chunks_recovered_on_host = 0;
  uint64_t served_peers = 0;  // times this rank's cache completed a peer's op
  uint64_t rejoins = 0;       // times offload resumed after a host period
  bool offload_active = false;
  // The switch path's congestion state after the last operation on it
  // (docs/design/cais-client.md, "Transport core").
  double window_chunks = 0;     // congestion window
  double srtt_us = 0;           // smoothed round trip
  double base_rtt_us = 0;       // smallest recent round trip
  bool competitive = false;     // AIMD beside a loss-based sender
  bool switch_on_host = false;  // the switch is on this host (the delay target's looser floor)
  bool progress_batch = false;  // progress thread under SCHED_BATCH (yield_to_local_switch)
  uint64_t competitive_entries = 0;
  uint64_t drain_probes = 0;
  // Of ops_host, why (HostReason), in all and per size class (class b:
  // operations of [2^b, 2^(b+1)) bytes as the switch estimates them, the
  // classes the offload controller decides by).
  HostReasonCounts host_reasons{};
  std::map<int, HostReasonCounts> host_by_class;
};

// CommunicatorStats' figures, declared once: the key and help of each, in
// the order `cais.stats()` and the torch backend's stats() give them (both
// bindings build their dict from this table; src/python/stats_dict.h).
struct CommunicatorStatsField {
  const char* name;
  std::variant<uint64_t CommunicatorStats::*, double CommunicatorStats::*,
               bool CommunicatorStats::*>
      member;
  const char* help;
};
inline constexpr CommunicatorStatsField kCommunicatorStatsFields[] = {
    {"ops", &CommunicatorStats::ops, "Operations completed."},
    {"ops_switch", &CommunicatorStats::ops_switch, "Operations completed entirely on the switch."},
    {"ops_host", &CommunicatorStats::ops_host,
     "Operations completed (at least partly) on the host path."},
    {"ops_declined", &CommunicatorStats::ops_declined,
     "Of ops_host: operations the switch's offload policy declined."},
    {"ops_refused", &CommunicatorStats::ops_refused,
     "Operations the ranks disagreed on (count, dtype, op, collective, root or layer): each "
     "rank got the same error and none ran it."},
    {"chunks_sent", &CommunicatorStats::chunks_sent, "Chunk packets sent to the switch."},
    {"chunks_retransmitted", &CommunicatorStats::chunks_retransmitted, "Chunks sent again."},
    {"tail_probes", &CommunicatorStats::tail_probes,
     "Quiet spells ended by a tail probe (of chunks_retransmitted)."},
    {"result_requests", &CommunicatorStats::result_requests,
     "Result requests sent (for a chunk whose result did not arrive)."},
    {"fallback_notices", &CommunicatorStats::fallback_notices,
     "FALLBACK notices received from the switch."},
    {"chunks_recovered_on_host", &CommunicatorStats::chunks_recovered_on_host,
     "Chunks finished on the host path after leaving the switch part-way."},
    {"served_peers", &CommunicatorStats::served_peers,
     "Times this rank's recovery cache completed a peer's operation."},
    {"rejoins", &CommunicatorStats::rejoins, "Times offload resumed after a host period."},
    {"offload_active", &CommunicatorStats::offload_active, "The switch path is in use now."},
    {"window_chunks", &CommunicatorStats::window_chunks,
     "Congestion window after the last operation on the switch path, chunks."},
    {"srtt_us", &CommunicatorStats::srtt_us, "Smoothed round trip, us."},
    {"base_rtt_us", &CommunicatorStats::base_rtt_us, "Smallest recent round trip, us."},
    {"switch_on_host", &CommunicatorStats::switch_on_host,
     "The switch is on this host: the delay target's floor is a scheduler time slice, not 300 "
     "us."},
    {"progress_batch", &CommunicatorStats::progress_batch,
     "The progress thread runs under SCHED_BATCH, so that results do not preempt a switch on "
     "this host (yield_to_local_switch)."},
    {"competitive", &CommunicatorStats::competitive,
     "AIMD beside a loss-based sender (competitive mode) now."},
    {"competitive_entries", &CommunicatorStats::competitive_entries,
     "Entries into competitive mode."},
    {"drain_probes", &CommunicatorStats::drain_probes,
     "Drain probes in competitive mode: the window held at its floor for 2 round trips."},
};

// The switch path's congestion window at one moment: at most one sample per
// quarter round trip, and one at every loss or timeout.
struct WindowSample {
  int64_t at_ns = 0;  // CLOCK_MONOTONIC (std::chrono::steady_clock)
  double window_chunks = 0;
  double srtt_us = 0;
};

// Per-operation options.
struct OpOptions {
  // The model layer this operation belongs to, carried in every packet's
  // `layer_id`: per-layer switch rules and per-layer offload decisions act
  // on it (CAIS write-up 3.1, 4.1). 0 = untagged.
  uint16_t layer_id = 0;
  // Runs on the progress thread once the operation has finished (with its
  // status), before its Work is marked done and before any later operation
  // starts. Bindings use it to release the buffers' owners (a dropped async
  // handle must not free memory the operation still writes) and to copy
  // results into non-contiguous originals. Must not block or throw.
  std::function<void(const absl::Status&)> on_done;
};

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation finished; returns its status.
  virtual absl::Status Wait() = 0;
  virtual bool Done() const = 0;
};

class Communicator {
 public:
  // Connects the host path (Gloo, through the store) and joins the switch.
  // Every rank of the group must call Create.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const CommunicatorOptions& options);
  virtual ~Communicator() = default;

  // In place: data[i] = op over all ranks of data[i].
  absl::Status AllReduce(void* data, size_t count, DType type, ReduceOp op,
                         const OpOptions& o = {}) {
    return AllReduceAsync(data, count, type, op, o)->Wait();
  }
  virtual std::shared_ptr<Work> AllReduceAsync(void* data, size_t count, DType type, ReduceOp op,
                                               const OpOptions& o = {}) = 0;
  // out (world_size * count elements) = every rank's `in` (count elements),
  // in rank order.
  absl::Status AllGather(const void* in, void* out, size_t count, DType type,
                         const OpOptions& o = {}) {
    return AllGatherAsync(in, out, count, type, o)->Wait();
  }
  virtual std::shared_ptr<Work> AllGatherAsync(const void* in, void* out, size_t count, DType type,
                                               const OpOptions& o = {}) = 0;
  // out (count elements) = op over all ranks of block `rank` of `in`
  // (world_size * count elements, block r at in + r * count elements).
  // Through the switch each rank receives only its own block.
  absl::Status ReduceScatter(const void* in, void* out, size_t count, DType type, ReduceOp op,
                             const OpOptions& o = {}) {
    return ReduceScatterAsync(in, out, count, type, op, o)->Wait();
  }
  virtual std::shared_ptr<Work> ReduceScatterAsync(const void* in, void* out, size_t count,
                                                   DType type, ReduceOp op,
                                                   const OpOptions& o = {}) = 0;
  // data on every rank = data on `root`.
  absl::Status Broadcast(void* data, size_t count, DType type, int root, const OpOptions& o = {}) {
    return BroadcastAsync(data, count, type, root, o)->Wait();
  }
  virtual std::shared_ptr<Work> BroadcastAsync(void* data, size_t count, DType type, int root,
                                               const OpOptions& o = {}) = 0;
  // Waits for every operation issued so far.
  virtual absl::Status Synchronize() = 0;

  // For an operation this rank hands to another library: takes one
  // operation index on every rank, as any operation does, after every
  // operation issued before it, and checks `op` against what each peer runs
  // at that index. OK when every rank delegated the same operation (then run
  // it); otherwise every rank, the ones running an operation through inca
  // included, gets the same InvalidArgument naming what differs, and no
  // library waits out its timeout on the others (docs/design/cais-client.md,
  // "Ranks that disagree"). One small exchange on the host path.
  virtual absl::Status AgreeDelegated(const DelegatedOp& op) = 0;

  // Ask to use (true) or avoid (false) the switch. Takes effect for the
  // whole group within about switch_timeout_ms: the ranks agree on it.
  virtual void SetOffload(bool enabled) = 0;

  virtual CommunicatorStats stats() const = 0;
  // The last CommunicatorOptions::window_trace_samples window samples,
  // oldest first, as of the end of the last operation on the switch path.
  virtual std::vector<WindowSample> window_trace() const { return {}; }
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
};

}  // namespace inca
