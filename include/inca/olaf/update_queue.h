// The queue in front of the PS-facing link of an OLAF switch: one interface,
// two policies (seed 000, sections 2.2 and 3.1).
//
//  FifoQueue  the seed's baseline: one FIFO of `depth` entries, tail drop.
//  OlafQueue  per-cluster slots (a cluster holds at most
//             cap = max(1, floor(depth / N_active)) entries), stale-entry
//             eviction, time-decayed merging of same-cluster updates when
//             room is short, displacement so a cluster with nothing queued
//             always gets a slot, and AoM-aware dequeue order.
//
// Contracts (both policies):
//  - UpdateQueue::Enqueue/Dequeue are the public, non-virtual entry points;
//    they own the counters, the switch-side AomTracker and the invariants
//        offered  == enqueued + merged + arrival drops
//        enqueued == dequeued + evictions (stale_evicted, displaced) + occupancy
//    (QueueCounters::Conserved(), per cluster and in total).
//  - Storage is preallocated at Create(): `depth` entries x max_payload_bytes.
//    Nothing on the hot path allocates.
//  - Time is injected; calls must not go backwards in time.
//  - Not thread-safe: owned by the data-plane thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "inca/dataplane/program.h"
#include "inca/olaf/aom_tracker.h"
#include "inca/util/counters.h"
#include "inca/wire/olaf.h"

namespace inca::olaf {

enum class QueuePolicy : uint8_t { kFifo, kOlaf };
std::string_view ToString(QueuePolicy p);  // "fifo", "olaf"
std::optional<QueuePolicy> ParseQueuePolicy(std::string_view s);

// Why an update left without being dequeued: the subset of dp::DropReason
// the queue gives. The first five happen on arrival (the update is never
// queued); the last two to queued entries. QueueCounters count them in this
// order, so that a cluster's counters stay small.
inline constexpr std::array<dp::DropReason, 7> kQueueDropReasons = {
    dp::DropReason::kQueueFull,          // no room, nothing to merge with, nothing to displace
    dp::DropReason::kClusterCap,         // OLAF: the cluster holds cap entries, none to merge with
    dp::DropReason::kStaleOnArrival,     // OLAF: now − gen_time >= delta_t
    dp::DropReason::kPayloadTooLarge,    // payload_len > max_payload_bytes
    dp::DropReason::kClustersExhausted,  // a new cluster beyond max_clusters
    dp::DropReason::kStaleEvicted,       // OLAF: queued_at + delta_t <= now
    dp::DropReason::kDisplaced,          // OLAF: removed to give a cluster without entries a slot
};
inline constexpr size_t kQueueDropReasonCount = kQueueDropReasons.size();
// The index of `r` in kQueueDropReasons; kQueueDropReasonCount if the queue never gives it.
constexpr size_t QueueDropIndex(dp::DropReason r) {
  for (size_t i = 0; i < kQueueDropReasonCount; ++i) {
    if (kQueueDropReasons[i] == r) return i;
  }
  return kQueueDropReasonCount;
}
// True for kStaleEvicted and kDisplaced (entries removed after being queued).
constexpr bool IsEviction(dp::DropReason r) {
  return r == dp::DropReason::kStaleEvicted || r == dp::DropReason::kDisplaced;
}

struct QueueCounters {
  uint64_t offered = 0;                  // Enqueue() calls
  uint64_t enqueued = 0;                 // took an entry of their own
  uint64_t merged = 0;                   // folded into a queued entry
  uint64_t dequeued = 0;                 // entries handed to the link
  uint64_t dequeued_bytes = 0;           // payload bytes dequeued
  uint64_t dequeued_worker_updates = 0;  // sum of merged_count over dequeued entries
  std::array<uint64_t, kQueueDropReasonCount> dropped{};  // in kQueueDropReasons' order
  uint64_t occupancy = 0;                                 // gauge: entries queued now

  uint64_t drops(dp::DropReason r) const {
    const size_t i = QueueDropIndex(r);
    return i < kQueueDropReasonCount ? dropped[i] : 0;
  }
  uint64_t arrival_drops() const;
  uint64_t evictions() const;
  bool Conserved() const;
};

// QueueCounters' figures, declared once (inca/util/counters.h): per cluster
// in /metrics (inca_olaf_cluster_<prom>{cluster}), /stats.json, olaf-cli and
// the control API (OlafClusterStats.queue). Drops, by reason, beside them.
inline constexpr counters::Counter<QueueCounters> kQueueCounters[] = {
    {1, "offered", "offered_total", counters::Kind::kCounter, 1,
     "Updates of the cluster offered to the queue.", &QueueCounters::offered},
    {2, "enqueued", "enqueued_total", counters::Kind::kCounter, 1,
     "Updates that took a queue entry of their own.", &QueueCounters::enqueued},
    {3, "merged", "merged_total", counters::Kind::kCounter, 1,
     "Updates merged into a queued update of the cluster (OLAF 3.1).", &QueueCounters::merged},
    {4, "dequeued", "dequeued_total", counters::Kind::kCounter, 1,
     "Queue entries sent toward the PS.", &QueueCounters::dequeued},
    {5, "dequeued_bytes", "dequeued_bytes_total", counters::Kind::kCounter, 1,
     "Payload bytes of the entries sent toward the PS.", &QueueCounters::dequeued_bytes},
    {6, "dequeued_worker_updates", "dequeued_worker_updates_total", counters::Kind::kCounter, 1,
     "Worker updates carried by the entries sent toward the PS.",
     &QueueCounters::dequeued_worker_updates},
    {7, "occupancy", "queue_occupancy", counters::Kind::kGauge, 1, "The cluster's queued updates.",
     &QueueCounters::occupancy},
};

struct QueueConfig {
  uint32_t depth = 8;                          // entries (the seed's microbenchmark: 8)
  uint32_t max_payload_bytes = 8952;           // per entry; multiple of 4
  dp::TimeNs delta_t_ns = 400 * dp::kNsPerMs;  // the seed's ΔT (staleness bound)
  // Merge time constant: alpha = exp(−(now − queued_at) / tau). Default ΔT/4
  // (docs/design/olaf-core.md explains the choice).
  dp::TimeNs tau_ns = 100 * dp::kNsPerMs;
  uint32_t max_clusters = 64;

  // InvalidArgument naming the field and the accepted range.
  absl::Status Validate() const;
};

enum class EnqueueAction : uint8_t { kEnqueued, kMerged, kDropped };
struct EnqueueResult {
  EnqueueAction action = EnqueueAction::kDropped;
  dp::DropReason reason = dp::DropReason::kNone;  // one of kQueueDropReasons when kDropped
  static constexpr EnqueueResult Enqueued() { return {EnqueueAction::kEnqueued, {}}; }
  static constexpr EnqueueResult Merged() { return {EnqueueAction::kMerged, {}}; }
  static constexpr EnqueueResult Dropped(dp::DropReason r) { return {EnqueueAction::kDropped, r}; }
};

class UpdateQueue {
 public:
  static absl::StatusOr<std::unique_ptr<UpdateQueue>> Create(QueuePolicy policy,
                                                             const QueueConfig& config);
  virtual ~UpdateQueue();
  UpdateQueue(const UpdateQueue&) = delete;
  UpdateQueue& operator=(const UpdateQueue&) = delete;

  // Offers one update: `h.cluster_id` must be assigned (!= 0xFFFF: dropped
  // as kClustersExhausted otherwise); `payload` holds h.payload_len bytes of
  // f32 LE. The payload is copied (or merged) into preallocated storage.
  EnqueueResult Enqueue(const UpdateHeader& h, std::span<const uint8_t> payload, dp::TimeNs now);

  // Evicts stale entries at `now` (OLAF), picks the next entry by policy and
  // writes it as a complete UPDATE datagram into `out`, which must hold
  // kOlafUpdateHeaderBytes + max_payload_bytes. Returns the bytes written, 0
  // when nothing is queued. Records the dequeue as a delivery in aom().
  size_t Dequeue(dp::TimeNs now, std::span<uint8_t> out, UpdateHeader* header = nullptr);

  // Evicts stale entries at `now` without dequeuing (OLAF; FIFO: no-op).
  void Expire(dp::TimeNs now);

  // Registers `cluster` for per-cluster state if new. False when it is new
  // and max_clusters clusters exist already (or cluster == 0xFFFF).
  bool RegisterCluster(uint16_t cluster);

  // Run-time changes (the control plane: OlafSwitch::SetRunTimeParams).
  // ΔT and τ take effect from the next call. depth may be 1..capacity()
  // (the storage allocated at Create): a smaller depth evicts nothing, it
  // refuses new entries until occupancy is below it. InvalidArgument naming
  // the field and range otherwise (nothing changed).
  absl::Status SetRunTimeParams(dp::TimeNs delta_t_ns, dp::TimeNs tau_ns, uint32_t depth);
  // Entries of storage: the depth the queue was created with.
  uint32_t capacity() const { return capacity_; }
  // The mean interval between offers of `cluster` (an EWMA of weight 1/8),
  // once it has made kMinOffersForPeriod offers and while it is current:
  // its last offer within max(ΔT, kQuietPeriods intervals) of `now`. nullopt
  // otherwise (too few offers, gone quiet, never offered). What a control
  // plane takes as the cluster's update period when it verifies a change.
  static constexpr uint64_t kMinOffersForPeriod = 4;
  static constexpr double kQuietPeriods = 8;
  std::optional<double> MeanOfferIntervalNs(uint16_t cluster, dp::TimeNs now) const;

  QueuePolicy policy() const { return policy_; }
  const QueueConfig& config() const { return config_; }
  size_t occupancy() const { return totals_.occupancy; }
  bool empty() const { return totals_.occupancy == 0; }
  // occupancy/depth as 24-bit fixed point (kQueueUtilOne = full).
  uint32_t queue_util() const;
  // Clusters with an entry queued or an update offered within delta_t of
  // `now` (the N_active of the per-cluster cap).
  uint32_t ActiveClusters(dp::TimeNs now) const;

  const QueueCounters& totals() const { return totals_; }
  // Per-cluster counters; nullptr for a cluster never offered.
  const QueueCounters* cluster(uint16_t cluster_id) const;
  // Clusters with per-cluster state, ascending.
  std::vector<uint16_t> Clusters() const;
  // AoM of each cluster as seen at this queue's output (deliveries = dequeues).
  const AomTracker& aom() const { return aom_; }
  AomTracker& aom() { return aom_; }

  // PS clock − this queue's clock, for updates flagged PS_CLOCK (their
  // gen_time is on the PS's clock; OlafSwitch estimates the offset from
  // MODELs, ps_clock.h). Unknown (nullopt): such updates count as
  // generated on arrival. Unflagged updates are taken on this clock.
  void set_ps_clock_offset(std::optional<dp::TimeNs> offset) { ps_clock_offset_ = offset; }

  // Told of every queued entry removed without being dequeued (kStaleEvicted,
  // kDisplaced), with the header the entry carries (its first update's
  // worker_id, update_id and fragment): what a host that keeps its own
  // handle per queued update (ns-3's OlafQueueDisc) needs to let it go.
  using EvictionObserver = std::function<void(const UpdateHeader&, dp::DropReason)>;
  void set_eviction_observer(EvictionObserver observer) { on_evict_ = std::move(observer); }

 protected:
  static constexpr uint32_t kNone = 0xFFFFFFFF;
  // h's generation time on this queue's clock, never later than `now`.
  dp::TimeNs GenOnOurClock(const UpdateHeader& h, dp::TimeNs now) const;

  struct Entry {
    UpdateHeader header;
    dp::TimeNs queued_at = 0;  // enqueue time: t_queued of the merge, age for eviction
    uint32_t cluster = kNone;  // cluster state index
    uint32_t next = kNone;     // policy's list link
  };
  struct Cluster {
    uint16_t id = 0;
    dp::TimeNs last_offer_ns = 0;
    double offer_interval_ns = 0;         // EWMA (1/8) of the gaps between offers
    bool delivered = false;               // dequeued at least once
    dp::TimeNs freshest_gen = 0;          // u(t) at this queue's output, if delivered
    uint32_t head = kNone, tail = kNone;  // OLAF: FIFO list of this cluster's entries
    QueueCounters counters;
  };

  UpdateQueue(QueuePolicy policy, const QueueConfig& config);

  // Copies the update into a free entry (there must be one) for `cluster`.
  uint32_t Store(const UpdateHeader& h, std::span<const uint8_t> payload, uint32_t cluster,
                 dp::TimeNs now);
  // Merges the update into queued entry `e` (seed 3.1), see OlafQueue.
  void Merge(uint32_t e, const UpdateHeader& h, std::span<const uint8_t> payload, dp::TimeNs now);
  // Counts and frees entry `e`, which the policy has already unlinked.
  void Evict(uint32_t e, dp::DropReason reason);

  Entry& entry(uint32_t e) { return entries_[e]; }
  Cluster& cluster_state(uint32_t c) { return clusters_[c]; }
  const std::vector<Cluster>& clusters() const { return clusters_; }
  uint32_t depth() const { return config_.depth; }

 private:
  // Policy hooks. DoEnqueue decides the fate of an offered update whose
  // cluster state is `cluster` (already registered; size checked) using
  // Store/Merge/Evict. DoDequeue unlinks and returns the next entry, or kNone.
  virtual EnqueueResult DoEnqueue(const UpdateHeader& h, std::span<const uint8_t> payload,
                                  uint32_t cluster, dp::TimeNs now) = 0;
  virtual uint32_t DoDequeue(dp::TimeNs now) = 0;
  virtual void DoExpire(dp::TimeNs /*now*/) {}

  int FindCluster(uint16_t id) const;
  void Count(uint32_t cluster, uint64_t QueueCounters::*field, uint64_t n = 1) {
    clusters_[cluster].counters.*field += n;
    totals_.*field += n;
  }

  QueuePolicy policy_;
  QueueConfig config_;             // depth, delta_t_ns and tau_ns may change at run time
  uint32_t capacity_;              // entries allocated: the depth at Create
  size_t stride_floats_;           // payload floats per entry (64-byte multiple)
  std::vector<float> payloads_;    // depth x stride_floats_, preallocated
  std::vector<Entry> entries_;     // depth
  std::vector<uint32_t> free_;     // free entry indices (stack)
  std::vector<Cluster> clusters_;  // at most max_clusters, reserved
  absl::flat_hash_map<uint16_t, uint32_t> cluster_index_;
  QueueCounters totals_;
  AomTracker aom_;
  std::optional<dp::TimeNs> ps_clock_offset_;
  EvictionObserver on_evict_;
};

// The seed's FIFO baseline: tail drop, no merge, no eviction.
class FifoQueue final : public UpdateQueue {
 public:
  explicit FifoQueue(const QueueConfig& config);

 private:
  EnqueueResult DoEnqueue(const UpdateHeader& h, std::span<const uint8_t> payload, uint32_t cluster,
                          dp::TimeNs now) override;
  uint32_t DoDequeue(dp::TimeNs now) override;

  std::vector<uint32_t> ring_;  // entry indices in arrival order
  size_t head_ = 0;
};

// OLAF: on arrival of update u of cluster c at `now`
//  (a) entries with queued_at + delta_t <= now are evicted (stale_evicted);
//  (b) u with now − gen_time >= delta_t is dropped (stale_on_arrival);
//  (c) if there is no room for u (queue full, or c holds cap entries) and c
//      has a queued entry with u's frag_index/frag_count, u is merged into
//      the oldest such entry: alpha = exp(−(now − queued_at)/tau),
//      x = alpha·x + (1 − alpha)·u element-wise (f32), merged_count summed
//      (saturating), gen_time and model_version = max; the entry keeps its
//      worker_id, update_id and queued_at;
//  (d) else if there is room, u is queued;
//  (e) else if c has no entry (so the queue is full), the oldest entry of the
//      cluster holding the most entries is displaced (ties: the cluster with
//      the smallest AoM at this queue, then the lowest id) and u is queued;
//  (f) else u is dropped: cluster_cap if the queue has room, else queue_full.
// Dequeue: among clusters with entries, the one with the largest AoM at this
// queue's output (never dequeued = infinite; ties: lowest cluster id); FIFO
// within a cluster.
class OlafQueue final : public UpdateQueue {
 public:
  explicit OlafQueue(const QueueConfig& config);

  // cap for a cluster given `now` (for tests and stats).
  uint32_t ClusterCap(dp::TimeNs now) const;

 private:
  EnqueueResult DoEnqueue(const UpdateHeader& h, std::span<const uint8_t> payload, uint32_t cluster,
                          dp::TimeNs now) override;
  uint32_t DoDequeue(dp::TimeNs now) override;
  void DoExpire(dp::TimeNs now) override;

  void Push(uint32_t cluster, uint32_t e);
  uint32_t PopHead(uint32_t cluster);

  std::vector<uint32_t> busy_;  // cluster indices with entries (at most depth)
};

// The merge kernel: q[i] = alpha·q[i] + (1 − alpha)·f32le(src + 4i), i < n.
// Written so that g++ -O2 vectorises it.
void MergeF32(float* __restrict q, const uint8_t* __restrict src, size_t n, float alpha) noexcept;

}  // namespace inca::olaf
