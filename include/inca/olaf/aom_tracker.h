// Age-of-Model (AoM) bookkeeping per cluster (seed 000, section 2.1): the
// Age-of-Information process of the updates of one cluster delivered to an
// observer (the PS, or the switch's PS-facing link when it dequeues).
//
// Definitions (times in ns, all on the observer's clock; exact formulas and a
// worked example in docs/design/olaf-core.md):
//  u(t)      generation time of the freshest update of the cluster delivered
//            at or before t. A gen_time later than the delivery time (clock
//            skew) is clamped to the delivery time, so ages are never negative.
//  Δ(t)      = t − u(t), the instantaneous AoM; defined from the cluster's
//            first delivery on.
//  peak      Δ just before a delivery that makes the age younger (gen_time >
//            u): Δp = D(k) − u(D(k)⁻). The first delivery has no peak.
//  average   (1 / (t − t0)) ∫_{t0}^{t} Δ(s) ds, t0 = start of the window (the
//            first delivery, or the last ResetWindow()); Δ grows with slope 1
//            between deliveries, so the integral is an exact sum of
//            trapezoids. Equals Δ(t) while the window is empty.
//
// Bounded: at most max_clusters clusters; memory is reserved up front. Not
// thread-safe. Per cluster, delivery times must not go backwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "inca/dataplane/program.h"

namespace inca::olaf {

struct AomStats {
  uint16_t cluster_id = 0;
  uint64_t deliveries = 0;          // in the window, including ones that did not refresh
  uint64_t refreshes = 0;           // deliveries that made the age younger
  dp::TimeNs freshest_gen_ns = 0;   // u(now)
  dp::TimeNs last_delivery_ns = 0;  // time of the latest delivery
  dp::TimeNs window_start_ns = 0;
  dp::TimeNs current_ns = 0;    // Δ(now)
  dp::TimeNs peak_last_ns = 0;  // latest peak (0 until one)
  dp::TimeNs peak_max_ns = 0;   // largest peak in the window
  double peak_mean_ns = 0;      // mean of the peaks in the window (0 if none)
  uint64_t peaks = 0;           // peaks in the window (= refreshes after the first delivery)
  double average_ns = 0;        // time-average AoM over [window_start, now]
};

class AomTracker {
 public:
  static constexpr size_t kDefaultMaxClusters = 64;

  explicit AomTracker(size_t max_clusters = kDefaultMaxClusters);

  // Records that an update of `cluster` generated at `gen_time_ns` was
  // delivered at `now`. Returns false, recording nothing, when the cluster is
  // new and max_clusters clusters are tracked already.
  bool OnDelivery(uint16_t cluster, dp::TimeNs gen_time_ns, dp::TimeNs now);

  // Δ(now); nullopt before the cluster's first delivery.
  std::optional<dp::TimeNs> Aom(uint16_t cluster, dp::TimeNs now) const;
  // u(now); nullopt before the cluster's first delivery.
  std::optional<dp::TimeNs> FreshestGen(uint16_t cluster) const;
  // Everything above at `now` (>= the cluster's last delivery); nullopt for
  // a cluster never delivered.
  std::optional<AomStats> Stats(uint16_t cluster, dp::TimeNs now) const;

  // Restarts every cluster's window at `now`: the average, peaks and counts
  // start over; u(t) is kept (the age itself is not reset). E.g. after a
  // simulator's warm-up.
  void ResetWindow(dp::TimeNs now);

  // Tracked clusters, ascending.
  std::vector<uint16_t> Clusters() const;
  size_t size() const { return series_.size(); }
  size_t max_clusters() const { return max_clusters_; }

 private:
  struct Series {
    uint16_t cluster_id = 0;
    dp::TimeNs freshest_gen = 0;
    dp::TimeNs last_event = 0;  // end of the integrated part: last delivery or window start
    dp::TimeNs last_delivery = 0;
    dp::TimeNs window_start = 0;
    double area = 0;  // ∫ Δ over [window_start, last_event], ns²
    uint64_t deliveries = 0, refreshes = 0, peaks = 0;
    dp::TimeNs peak_last = 0, peak_max = 0;
    double peak_sum = 0;
  };
  const Series* Find(uint16_t cluster) const;

  size_t max_clusters_;
  absl::flat_hash_map<uint16_t, uint32_t> index_;  // cluster -> series_ index
  std::vector<Series> series_;
};

}  // namespace inca::olaf
