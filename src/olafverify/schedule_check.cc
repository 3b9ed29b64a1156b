// CheckSchedule: the model evaluated directly on a schedule, independently
// of the Z3 encoding (docs/olaf-verify.md lists the rules): generation
// constraints, then a replay of the generation times through the reference
// OlafQueue (queue_sim.h), then peaks and averages.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "olafverify/fairness_model.h"
#include "olafverify/queue_sim.h"

namespace inca::olafverify {
namespace {

template <typename... Parts>
absl::Status Bad(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

// Phase, period, rate, and the bounds on one update's own record.
absl::Status CheckTrace(const FairnessConfig& cfg, size_t c, const ClusterTrace& t, int count,
                        double tol) {
  const ClusterSpec& spec = cfg.clusters[c];
  const double svc = 1.0 / cfg.capacity_updates_per_ms;
  if (t.name != spec.name || static_cast<int>(t.updates.size()) != count) {
    return Bad("cluster ", c, ": expected '", spec.name, "' with ", count, " updates, got '",
               t.name, "' with ", t.updates.size());
  }
  for (size_t n = 0; n < t.updates.size(); ++n) {
    const UpdateRecord& r = t.updates[n];
    const std::string at = absl::StrCat(spec.name, ",n=", n);
    if (r.index != static_cast<int>(n)) return Bad("update ", at, " has index ", r.index);
    if (!std::isfinite(r.generated_ms) || (r.delivered_ms && !std::isfinite(*r.delivered_ms))) {
      return Bad("update ", at, ": times must be finite numbers");
    }
    if (r.delivered_ms.has_value() != (r.fate == UpdateFate::kDelivered)) {
      return Bad("update ", at, ": a delivery time iff delivered");
    }
    if (r.fate == UpdateFate::kTailDropped) {
      return Bad("queue(", at, "): tail-dropped, which the OLAF queue never does");
    }
    if ((r.fate == UpdateFate::kMerged) !=
        (r.merged_into >= 0 && r.merged_into < static_cast<int>(n))) {
      return Bad("merge(", at, "): merged_into ", r.merged_into, " with fate ",
                 UpdateFateName(r.fate));
    }
    if (n == 0 && (r.generated_ms < -tol || r.generated_ms > spec.update_period_ms + tol)) {
      return Bad("phase(", spec.name, "): A(0) = ", r.generated_ms, " outside [0, ",
                 spec.update_period_ms, "]");
    }
    if (n > 0) {
      const double gap = r.generated_ms - t.updates[n - 1].generated_ms;
      if (gap < spec.update_period_ms - spec.jitter_ms - tol) {
        return Bad("period(", spec.name, ",n=", n - 1, "): interval ", gap, " ms < ",
                   spec.update_period_ms - spec.jitter_ms);
      }
      if (gap > spec.update_period_ms + spec.jitter_ms + tol) {
        return Bad("rate(", spec.name, ",n=", n - 1, "): interval ", gap, " ms > ",
                   spec.update_period_ms + spec.jitter_ms);
      }
    }
    const double e = r.arrived_ms.value_or(r.generated_ms);
    if (!std::isfinite(e) || e < r.generated_ms - tol ||
        e > r.generated_ms + cfg.max_transit_ms + tol ||
        (n > 0 && e < t.updates[n - 1].arrived_ms.value_or(t.updates[n - 1].generated_ms) - tol)) {
      return Bad("transit(", at, "): arrival ", e, " ms outside [A, A + ", cfg.max_transit_ms,
                 "] or before the previous update's");
    }
    if (r.delivered_ms) {
      const double waited = *r.delivered_ms - svc - e;
      if (waited < -tol) {
        return Bad("service(", at, "): D - E = ", *r.delivered_ms - e, " ms < 1/C = ", svc);
      }
      if (waited >= cfg.aom_threshold_ms - tol) {
        return Bad("threshold(", at, "): dequeued ", waited, " ms after queueing >= ΔT ",
                   cfg.aom_threshold_ms, " ms");
      }
    }
  }
  return absl::OkStatus();
}

// Peaks and averages of one cluster; sim holds the replayed entries' gen
// times (flat indices from `base`).
absl::Status CheckPeaks(const FairnessConfig& cfg, size_t c, const ClusterTrace& t,
                        const std::vector<internal::SimResult>& sim, size_t base, double tol) {
  const double dt = cfg.aom_threshold_ms;
  // fresh[n]: freshest gen_time delivered from entries before n.
  std::vector<double> fresh(t.updates.size());
  double f = t.updates[0].generated_ms - cfg.clusters[c].update_period_ms;
  for (size_t n = 0; n < t.updates.size(); ++n) {
    fresh[n] = f;
    if (t.updates[n].fate == UpdateFate::kDelivered) f = std::max(f, sim[base + n].gen_ms);
  }
  double sum = 0;
  for (size_t n = 0; n < t.updates.size(); ++n) {
    const UpdateRecord& r = t.updates[n];
    double peak = r.generated_ms + dt - fresh[n];
    if (r.delivered_ms) peak = *r.delivered_ms - fresh[n];
    if (r.fate == UpdateFate::kMerged) {
      const UpdateRecord& h = t.updates[static_cast<size_t>(r.merged_into)];
      if (h.delivered_ms) peak = *h.delivered_ms - fresh[static_cast<size_t>(r.merged_into)];
    }
    if (std::abs(peak - r.peak_aom_ms) > tol) {
      return Bad("peak(", t.name, ",n=", r.index, "): recorded ", r.peak_aom_ms,
                 " ms, schedule gives ", peak);
    }
    sum += peak;
  }
  const double avg = sum / static_cast<double>(t.updates.size());
  if (std::abs(avg - t.avg_peak_aom_ms) > tol) {
    return Bad("avg(", t.name, "): recorded ", t.avg_peak_aom_ms, " ms, schedule gives ", avg);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSchedule(const FairnessConfig& cfg, const Schedule& s, double tolerance_ms) {
  if (absl::Status v = Validate(cfg); !v.ok()) return v;
  const double tol = tolerance_ms;
  const std::vector<int> counts = UpdatesPerCluster(cfg);
  if (s.clusters.size() != cfg.clusters.size()) {
    return Bad("schedule has ", s.clusters.size(), " clusters, the config ", cfg.clusters.size());
  }
  std::vector<internal::SimArrival> arrivals;
  std::vector<size_t> base;
  for (size_t c = 0; c < s.clusters.size(); ++c) {
    if (absl::Status st = CheckTrace(cfg, c, s.clusters[c], counts[c], tol); !st.ok()) return st;
    base.push_back(arrivals.size());
    for (const UpdateRecord& r : s.clusters[c].updates) {
      arrivals.push_back(
          {static_cast<int>(c), r.index, r.generated_ms, r.arrived_ms.value_or(r.generated_ms)});
    }
  }
  internal::SimParams p;
  p.depth = cfg.queue_size;
  p.delta_t_ms = cfg.aom_threshold_ms;
  p.service_ms = 1.0 / cfg.capacity_updates_per_ms;
  p.tie_ms = std::max(1e-9, tol / 10);
  const std::vector<internal::SimResult> sim = internal::SimulateOlafQueue(p, arrivals);
  for (size_t c = 0; c < s.clusters.size(); ++c) {
    const ClusterTrace& t = s.clusters[c];
    for (size_t n = 0; n < t.updates.size(); ++n) {
      const UpdateRecord& r = t.updates[n];
      const internal::SimResult& q = sim[base[c] + n];
      const std::string at = absl::StrCat(t.name, ",n=", n);
      const int host = q.merged_into < 0 ? -1 : static_cast<int>(q.merged_into - base[c]);
      if (r.fate != q.fate || r.merged_into != host) {
        return Bad("queue(", at, "): recorded ", UpdateFateName(r.fate),
                   r.merged_into >= 0 ? absl::StrCat(" into n=", r.merged_into) : "",
                   ", the OLAF queue gives ", UpdateFateName(q.fate),
                   host >= 0 ? absl::StrCat(" into n=", host) : "");
      }
      if (r.delivered_ms && std::abs(*r.delivered_ms - (q.dequeued_ms + p.service_ms)) > tol) {
        return Bad("work_conserving(", at, "): delivered at ", *r.delivered_ms,
                   " ms, the OLAF queue delivers it at ", q.dequeued_ms + p.service_ms, " ms");
      }
      if (r.queue_occupancy != q.queued) {
        return Bad("update ", at, ": Q(n) recorded ", r.queue_occupancy, ", the queue held ",
                   q.queued);
      }
    }
    if (absl::Status st = CheckPeaks(cfg, c, t, sim, base[c], tol); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace inca::olafverify
