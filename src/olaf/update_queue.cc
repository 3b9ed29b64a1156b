#include "inca/olaf/update_queue.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace inca::olaf {

using dp::TimeNs;

// Payloads are f32 little-endian on the wire and are merged in place.
static_assert(std::endian::native == std::endian::little,
              "OLAF merges f32 LE payloads in place; add byte swaps for big-endian hosts");

namespace {

constexpr uint32_t kMaxUdpOlafPayload = 65507 - kOlafUpdateHeaderBytes;
constexpr TimeNs kNever = std::numeric_limits<TimeNs>::min();

// gen_time on the queue's clock: a generation time in the future (clock
// skew) counts as `now`, so ages are never negative.
TimeNs GenTime(uint64_t gen, TimeNs now) {
  return gen > static_cast<uint64_t>(std::max<TimeNs>(now, 0)) ? now : static_cast<TimeNs>(gen);
}

}  // namespace

TimeNs UpdateQueue::GenOnOurClock(const UpdateHeader& h, TimeNs now) const {
  if ((h.flags & kUpdateFlagPsClock) == 0) return GenTime(h.gen_time_ns, now);
  if (!ps_clock_offset_ || h.gen_time_ns == kGenTimeUnknown) return now;
  const auto max = static_cast<uint64_t>(std::numeric_limits<TimeNs>::max());
  const TimeNs ps = static_cast<TimeNs>(std::min(h.gen_time_ns, max));
  return GenTime(static_cast<uint64_t>(std::max<TimeNs>(0, ps - *ps_clock_offset_)), now);
}

std::string_view ToString(QueuePolicy p) {
  switch (p) {
    case QueuePolicy::kFifo: return "fifo";
    case QueuePolicy::kOlaf: return "olaf";
  }
  return "unknown";
}

std::optional<QueuePolicy> ParseQueuePolicy(std::string_view s) {
  if (s == "fifo") return QueuePolicy::kFifo;
  if (s == "olaf") return QueuePolicy::kOlaf;
  return std::nullopt;
}

uint64_t QueueCounters::arrival_drops() const {
  uint64_t n = 0;
  for (size_t r = 0; r < kQueueDropReasonCount; ++r) {
    if (!IsEviction(kQueueDropReasons[r])) n += dropped[r];
  }
  return n;
}

uint64_t QueueCounters::evictions() const {
  return drops(dp::DropReason::kStaleEvicted) + drops(dp::DropReason::kDisplaced);
}

bool QueueCounters::Conserved() const {
  return offered == enqueued + merged + arrival_drops() &&
         enqueued == dequeued + evictions() + occupancy;
}

absl::Status QueueConfig::Validate() const {
  if (depth == 0 || depth > 65536) {
    return absl::InvalidArgumentError(absl::StrCat("depth ", depth, " must be in 1..65536"));
  }
  if (max_payload_bytes < 4 || max_payload_bytes > kMaxUdpOlafPayload ||
      max_payload_bytes % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_payload_bytes ", max_payload_bytes,
                                                   " must be a multiple of 4 in 4..",
                                                   kMaxUdpOlafPayload / 4 * 4));
  }
  if (uint64_t{depth} * max_payload_bytes > (uint64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("depth ", depth, " x max_payload_bytes ",
                                                   max_payload_bytes,
                                                   " exceeds the 1 GiB queue memory bound"));
  }
  if (delta_t_ns <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("delta_t_ns ", delta_t_ns, " must be > 0"));
  }
  if (tau_ns <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("tau_ns ", tau_ns, " must be > 0"));
  }
  if (max_clusters == 0 || max_clusters > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_clusters ", max_clusters, " must be in 1..65535"));
  }
  return absl::OkStatus();
}

void MergeF32(float* __restrict q, const uint8_t* __restrict src, size_t n, float alpha) noexcept {
  const float beta = 1.0f - alpha;
  // Blocks of 8 with a constant trip count vectorise under g++ -O2's
  // very-cheap cost model; the tail is scalar.
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float x[8];
    std::memcpy(x, src + 4 * i, sizeof(x));
    for (size_t j = 0; j < 8; ++j) q[i + j] = alpha * q[i + j] + beta * x[j];
  }
  for (; i < n; ++i) {
    float x;
    std::memcpy(&x, src + 4 * i, 4);
    q[i] = alpha * q[i] + beta * x;
  }
}

// ---- UpdateQueue ----

absl::StatusOr<std::unique_ptr<UpdateQueue>> UpdateQueue::Create(QueuePolicy policy,
                                                                 const QueueConfig& config) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  switch (policy) {
    case QueuePolicy::kFifo: return std::unique_ptr<UpdateQueue>(new FifoQueue(config));
    case QueuePolicy::kOlaf: return std::unique_ptr<UpdateQueue>(new OlafQueue(config));
  }
  return absl::InvalidArgumentError("unknown queue policy");
}

UpdateQueue::UpdateQueue(QueuePolicy policy, const QueueConfig& config)
    : policy_(policy),
      config_(config),
      capacity_(config.depth),
      stride_floats_((config.max_payload_bytes / 4 + 15) / 16 * 16),
      payloads_(size_t{config.depth} * stride_floats_),
      entries_(config.depth),
      aom_(config.max_clusters) {
  free_.reserve(config.depth);
  for (uint32_t e = config.depth; e-- > 0;) free_.push_back(e);
  clusters_.reserve(config.max_clusters);
  cluster_index_.reserve(config.max_clusters);
}

UpdateQueue::~UpdateQueue() = default;

int UpdateQueue::FindCluster(uint16_t id) const {
  const auto it = cluster_index_.find(id);
  return it == cluster_index_.end() ? -1 : static_cast<int>(it->second);
}

bool UpdateQueue::RegisterCluster(uint16_t id) {
  if (id == kUnassignedCluster) return false;
  if (FindCluster(id) >= 0) return true;
  if (clusters_.size() >= config_.max_clusters) return false;
  cluster_index_.emplace(id, static_cast<uint32_t>(clusters_.size()));
  Cluster c;
  c.id = id;
  c.last_offer_ns = kNever;
  clusters_.push_back(c);
  return true;
}

const QueueCounters* UpdateQueue::cluster(uint16_t id) const {
  const int c = FindCluster(id);
  return c < 0 ? nullptr : &clusters_[static_cast<size_t>(c)].counters;
}

std::vector<uint16_t> UpdateQueue::Clusters() const {
  std::vector<uint16_t> out;
  out.reserve(clusters_.size());
  for (const Cluster& c : clusters_) out.push_back(c.id);
  std::sort(out.begin(), out.end());
  return out;
}

uint32_t UpdateQueue::queue_util() const {
  // Above 1 only after a run-time depth cut, until the queue drains below it.
  return static_cast<uint32_t>(
      std::min<uint64_t>(kQueueUtilOne, totals_.occupancy * kQueueUtilOne / config_.depth));
}

absl::Status UpdateQueue::SetRunTimeParams(TimeNs delta_t_ns, TimeNs tau_ns, uint32_t depth) {
  if (depth < 1 || depth > capacity_) {
    return absl::InvalidArgumentError(
        absl::StrCat("depth ", depth, " must be in 1..", capacity_,
                     " (the storage allocated at start; restart with a larger depth for more)"));
  }
  QueueConfig next = config_;
  next.delta_t_ns = delta_t_ns;
  next.tau_ns = tau_ns;
  next.depth = depth;
  if (absl::Status s = next.Validate(); !s.ok()) return s;
  config_ = next;
  return absl::OkStatus();
}

std::optional<double> UpdateQueue::MeanOfferIntervalNs(uint16_t cluster, TimeNs now) const {
  const int c = FindCluster(cluster);
  if (c < 0) return std::nullopt;
  const Cluster& cs = clusters_[static_cast<size_t>(c)];
  if (cs.counters.offered < kMinOffersForPeriod) return std::nullopt;
  const double quiet =
      std::max(static_cast<double>(config_.delta_t_ns), kQuietPeriods * cs.offer_interval_ns);
  if (static_cast<double>(now - cs.last_offer_ns) > quiet) return std::nullopt;
  return cs.offer_interval_ns;
}

uint32_t UpdateQueue::ActiveClusters(TimeNs now) const {
  uint32_t n = 0;
  for (const Cluster& c : clusters_) {
    if (c.counters.occupancy > 0 ||
        (c.last_offer_ns != kNever && c.last_offer_ns > now - config_.delta_t_ns)) {
      ++n;
    }
  }
  return n;
}

EnqueueResult UpdateQueue::Enqueue(const UpdateHeader& h, std::span<const uint8_t> payload,
                                   TimeNs now) {
  DoExpire(now);
  if (!RegisterCluster(h.cluster_id)) {
    ++totals_.offered;
    ++totals_.dropped[QueueDropIndex(dp::DropReason::kClustersExhausted)];
    return EnqueueResult::Dropped(dp::DropReason::kClustersExhausted);
  }
  const auto c = static_cast<uint32_t>(FindCluster(h.cluster_id));
  Cluster& cs = clusters_[c];
  if (cs.last_offer_ns != kNever) {
    const auto gap = static_cast<double>(now - cs.last_offer_ns);
    // The first gap seeds the average; later ones move it by 1/8.
    cs.offer_interval_ns =
        cs.counters.offered <= 1 ? gap : cs.offer_interval_ns + (gap - cs.offer_interval_ns) / 8;
  }
  cs.last_offer_ns = now;
  Count(c, &QueueCounters::offered);
  const EnqueueResult r = payload.size() > config_.max_payload_bytes
                              ? EnqueueResult::Dropped(dp::DropReason::kPayloadTooLarge)
                              : DoEnqueue(h, payload, c, now);
  if (r.action == EnqueueAction::kDropped) {
    clusters_[c].counters.dropped[QueueDropIndex(r.reason)]++;
    totals_.dropped[QueueDropIndex(r.reason)]++;
  }
  return r;
}

size_t UpdateQueue::Dequeue(TimeNs now, std::span<uint8_t> out, UpdateHeader* header) {
  DoExpire(now);
  if (empty() || out.size() < kOlafUpdateHeaderBytes + config_.max_payload_bytes) return 0;
  const uint32_t e = DoDequeue(now);
  if (e == kNone) return 0;
  Entry& x = entries_[e];
  const uint32_t len = x.header.payload_len;
  SerializeUpdateHeader(x.header, out);
  std::memcpy(out.data() + kOlafUpdateHeaderBytes, &payloads_[size_t{e} * stride_floats_], len);
  if (header != nullptr) *header = x.header;

  Cluster& cs = clusters_[x.cluster];
  Count(x.cluster, &QueueCounters::dequeued);
  Count(x.cluster, &QueueCounters::dequeued_bytes, len);
  Count(x.cluster, &QueueCounters::dequeued_worker_updates, x.header.merged_count);
  --cs.counters.occupancy;
  --totals_.occupancy;
  const TimeNs gen = GenOnOurClock(x.header, now);
  if (!cs.delivered || gen > cs.freshest_gen) cs.freshest_gen = gen;
  cs.delivered = true;
  aom_.OnDelivery(cs.id, gen, now);
  free_.push_back(e);
  return kOlafUpdateHeaderBytes + len;
}

void UpdateQueue::Expire(TimeNs now) {
  DoExpire(now);
}

uint32_t UpdateQueue::Store(const UpdateHeader& h, std::span<const uint8_t> payload,
                            uint32_t cluster, TimeNs now) {
  const uint32_t e = free_.back();
  free_.pop_back();
  Entry& x = entries_[e];
  x.header = h;
  x.header.payload_len = static_cast<uint32_t>(payload.size());
  x.queued_at = now;
  x.cluster = cluster;
  x.next = kNone;
  if (!payload.empty()) {
    std::memcpy(&payloads_[size_t{e} * stride_floats_], payload.data(), payload.size());
  }
  Count(cluster, &QueueCounters::enqueued);
  Count(cluster, &QueueCounters::occupancy);
  return e;
}

void UpdateQueue::Merge(uint32_t e, const UpdateHeader& h, std::span<const uint8_t> payload,
                        TimeNs now) {
  Entry& x = entries_[e];
  const double waited = static_cast<double>(std::max<TimeNs>(0, now - x.queued_at));
  const auto alpha = static_cast<float>(std::exp(-waited / static_cast<double>(config_.tau_ns)));
  MergeF32(&payloads_[size_t{e} * stride_floats_], payload.data(), payload.size() / 4, alpha);
  UpdateHeader& q = x.header;
  q.merged_count = static_cast<uint32_t>(
      std::min<uint64_t>(uint64_t{q.merged_count} + h.merged_count, 0xFFFFFFFFu));
  q.gen_time_ns = std::max(q.gen_time_ns, h.gen_time_ns);
  q.model_version = std::max(q.model_version, h.model_version);
  Count(x.cluster, &QueueCounters::merged);
}

void UpdateQueue::Evict(uint32_t e, dp::DropReason reason) {
  const uint32_t c = entries_[e].cluster;
  clusters_[c].counters.dropped[QueueDropIndex(reason)]++;
  totals_.dropped[QueueDropIndex(reason)]++;
  --clusters_[c].counters.occupancy;
  --totals_.occupancy;
  free_.push_back(e);
  if (on_evict_) on_evict_(entries_[e].header, reason);
}

// ---- FifoQueue ----

FifoQueue::FifoQueue(const QueueConfig& config)
    : UpdateQueue(QueuePolicy::kFifo, config), ring_(config.depth, kNone) {}

EnqueueResult FifoQueue::DoEnqueue(const UpdateHeader& h, std::span<const uint8_t> payload,
                                   uint32_t cluster, TimeNs now) {
  if (occupancy() >= depth()) return EnqueueResult::Dropped(dp::DropReason::kQueueFull);
  const size_t tail = (head_ + occupancy()) % ring_.size();
  ring_[tail] = Store(h, payload, cluster, now);
  return EnqueueResult::Enqueued();
}

uint32_t FifoQueue::DoDequeue(TimeNs /*now*/) {
  const uint32_t e = ring_[head_];
  head_ = (head_ + 1) % ring_.size();
  return e;
}

// ---- OlafQueue ----

OlafQueue::OlafQueue(const QueueConfig& config) : UpdateQueue(QueuePolicy::kOlaf, config) {
  busy_.reserve(config.depth);
}

uint32_t OlafQueue::ClusterCap(TimeNs now) const {
  return std::max<uint32_t>(1, depth() / std::max<uint32_t>(1, ActiveClusters(now)));
}

void OlafQueue::Push(uint32_t c, uint32_t e) {
  Cluster& cs = cluster_state(c);
  if (cs.head == kNone) {
    cs.head = e;
    busy_.push_back(c);
  } else {
    entry(cs.tail).next = e;
  }
  cs.tail = e;
}

uint32_t OlafQueue::PopHead(uint32_t c) {
  Cluster& cs = cluster_state(c);
  const uint32_t e = cs.head;
  cs.head = entry(e).next;
  entry(e).next = kNone;
  if (cs.head == kNone) {
    cs.tail = kNone;
    const auto it = std::find(busy_.begin(), busy_.end(), c);
    *it = busy_.back();
    busy_.pop_back();
  }
  return e;
}

void OlafQueue::DoExpire(TimeNs now) {
  const TimeNs dt = config().delta_t_ns;
  // Backwards: PopHead swap-pops busy_, moving an already visited index here.
  for (size_t i = busy_.size(); i-- > 0;) {
    const uint32_t c = busy_[i];
    while (cluster_state(c).head != kNone && entry(cluster_state(c).head).queued_at + dt <= now) {
      Evict(PopHead(c), dp::DropReason::kStaleEvicted);
    }
  }
}

EnqueueResult OlafQueue::DoEnqueue(const UpdateHeader& h, std::span<const uint8_t> payload,
                                   uint32_t c, TimeNs now) {
  if (now - GenOnOurClock(h, now) >= config().delta_t_ns) {
    return EnqueueResult::Dropped(dp::DropReason::kStaleOnArrival);
  }
  const Cluster& cs = cluster_state(c);
  const bool full = occupancy() >= depth();
  const bool room =
      !full && (cs.counters.occupancy == 0 || cs.counters.occupancy < ClusterCap(now));
  if (!room) {
    for (uint32_t e = cs.head; e != kNone; e = entry(e).next) {
      const UpdateHeader& q = entry(e).header;
      if (q.frag_index == h.frag_index && q.frag_count == h.frag_count &&
          q.payload_len == payload.size()) {
        Merge(e, h, payload, now);
        return EnqueueResult::Merged();
      }
    }
  }
  if (!room && cs.counters.occupancy == 0) {
    // Displace the oldest entry of the cluster with the most entries; ties:
    // the smallest AoM at this queue (freshest delivery; never = oldest),
    // then the lowest id.
    uint32_t victim = kNone;
    for (const uint32_t v : busy_) {
      if (victim == kNone) {
        victim = v;
        continue;
      }
      const Cluster& a = cluster_state(v);
      const Cluster& b = cluster_state(victim);
      const TimeNs fa = a.delivered ? a.freshest_gen : kNever;
      const TimeNs fb = b.delivered ? b.freshest_gen : kNever;
      if (a.counters.occupancy != b.counters.occupancy) {
        if (a.counters.occupancy > b.counters.occupancy) victim = v;
      } else if (fa != fb) {
        if (fa > fb) victim = v;
      } else if (a.id < b.id) {
        victim = v;
      }
    }
    Evict(PopHead(victim), dp::DropReason::kDisplaced);
  } else if (!room) {
    return EnqueueResult::Dropped(full ? dp::DropReason::kQueueFull : dp::DropReason::kClusterCap);
  }
  Push(c, Store(h, payload, c, now));
  return EnqueueResult::Enqueued();
}

uint32_t OlafQueue::DoDequeue(TimeNs /*now*/) {
  // Largest AoM = oldest freshest delivery; never delivered first; ties:
  // lowest cluster id.
  uint32_t best = kNone;
  for (const uint32_t v : busy_) {
    if (best == kNone) {
      best = v;
      continue;
    }
    const Cluster& a = cluster_state(v);
    const Cluster& b = cluster_state(best);
    const TimeNs fa = a.delivered ? a.freshest_gen : kNever;
    const TimeNs fb = b.delivered ? b.freshest_gen : kNever;
    if (fa < fb || (fa == fb && a.id < b.id)) best = v;
  }
  return best == kNone ? kNone : PopHead(best);
}

}  // namespace inca::olaf
