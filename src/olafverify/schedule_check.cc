// CheckSchedule: the model's constraints evaluated directly on a schedule,
// independently of the Z3 encoding (docs/olaf-verify.md lists them).
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "olafverify/fairness_model.h"
#include "olafverify/smt_encoding.h"

namespace inca::olafverify {
namespace {

struct Flat {
  int cluster = 0;
  const UpdateRecord* r = nullptr;
  bool accepted() const { return r->fate != UpdateFate::kTailDropped; }
  bool delivered() const { return r->fate == UpdateFate::kDelivered; }
  double a() const { return r->generated_ms; }
  double d() const { return *r->delivered_ms; }
};

}  // namespace

absl::Status CheckSchedule(const FairnessConfig& cfg, const Schedule& s, double tolerance_ms) {
  if (absl::Status v = Validate(cfg); !v.ok()) return v;
  const double tol = tolerance_ms;
  const double dt = cfg.aom_threshold_ms;
  const double svc = 1.0 / cfg.capacity_updates_per_ms;
  const std::vector<int> counts = UpdatesPerCluster(cfg);
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (s.clusters.size() != cfg.clusters.size()) {
    return bad("schedule has ", s.clusters.size(), " clusters, the config ", cfg.clusters.size());
  }

  std::vector<Flat> all;
  for (size_t c = 0; c < s.clusters.size(); ++c) {
    const ClusterTrace& t = s.clusters[c];
    const ClusterSpec& spec = cfg.clusters[c];
    if (t.name != spec.name || static_cast<int>(t.updates.size()) != counts[c]) {
      return bad("cluster ", c, ": expected '", spec.name, "' with ", counts[c], " updates, got '",
                 t.name, "' with ", t.updates.size());
    }
    for (size_t n = 0; n < t.updates.size(); ++n) {
      const UpdateRecord& r = t.updates[n];
      const std::string at = absl::StrCat(spec.name, ",n=", n);
      if (r.index != static_cast<int>(n)) return bad("update ", at, " has index ", r.index);
      if (r.delivered_ms.has_value() != (r.fate == UpdateFate::kDelivered)) {
        return bad("update ", at, ": a delivery time iff delivered");
      }
      if (n == 0 && (r.generated_ms < -tol || r.generated_ms > spec.update_period_ms + tol)) {
        return bad("phase(", spec.name, "): A(0) = ", r.generated_ms, " outside [0, ",
                   spec.update_period_ms, "]");
      }
      if (n > 0) {
        const double gap = r.generated_ms - t.updates[n - 1].generated_ms;
        if (gap < spec.update_period_ms - spec.jitter_ms - tol) {
          return bad("period(", spec.name, ",n=", n - 1, "): interval ", gap, " ms < ",
                     spec.update_period_ms - spec.jitter_ms);
        }
        if (gap > spec.update_period_ms + spec.jitter_ms + tol) {
          return bad("rate(", spec.name, ",n=", n - 1, "): interval ", gap, " ms > ",
                     spec.update_period_ms + spec.jitter_ms);
        }
      }
      if (r.delivered_ms) {
        const double w = *r.delivered_ms - r.generated_ms;
        if (w < svc - tol) return bad("service(", at, "): D - A = ", w, " ms < 1/C = ", svc);
        if (w > dt + tol) return bad("threshold(", at, "): D - A = ", w, " ms > ΔT ", dt, " ms");
      }
      all.push_back(Flat{static_cast<int>(c), &r});
    }
  }

  const double m_busy = internal::SaturationDepartures(cfg);
  for (size_t i = 0; i < all.size(); ++i) {
    const Flat& x = all[i];
    const std::string at =
        absl::StrCat(cfg.clusters[static_cast<size_t>(x.cluster)].name, ",n=", x.r->index);
    int resident = 0, busy = 0;
    for (size_t j = 0; j < all.size(); ++j) {
      if (j == i) continue;
      const Flat& y = all[j];
      if (x.delivered() && y.delivered()) {
        const double sep = y.d() - x.d();
        if (std::abs(sep) < svc - tol) {
          return bad("single_server(", at, "): another delivery ", sep, " ms away < 1/C = ", svc);
        }
        if (y.cluster == x.cluster && y.r->index > x.r->index && sep < svc - tol) {
          return bad("single_server(", at, "): the cluster's later update is delivered first");
        }
      }
      const bool before = y.cluster == x.cluster
                              ? y.r->index < x.r->index
                              : (y.a() < x.a() || (y.a() == x.a() && y.cluster < x.cluster));
      const double leaves = y.delivered() ? y.d() : y.a() + dt;
      resident += y.accepted() && before && x.a() < leaves;
      busy += y.delivered() && y.d() > x.a() && y.d() <= x.a() + dt;
    }
    if (resident != x.r->queue_occupancy) {
      return bad("update ", at, ": Q(n) recorded ", x.r->queue_occupancy, ", schedule gives ",
                 resident);
    }
    if (x.accepted() != (resident < cfg.queue_size)) {
      return bad("queue_capacity(", at, "): ", UpdateFateName(x.r->fate), " with ", resident,
                 " updates queued and queue_size ", cfg.queue_size);
    }
    if (x.r->fate == UpdateFate::kEvicted && m_busy > 0 && busy < m_busy) {
      return bad("eviction(", at, "): evicted with only ", busy,
                 " departures within ΔT; saturation takes ", m_busy);
    }
  }

  for (size_t c = 0; c < s.clusters.size(); ++c) {
    const ClusterTrace& t = s.clusters[c];
    double last = t.updates[0].generated_ms - cfg.clusters[c].update_period_ms;
    double sum = 0;
    for (const UpdateRecord& r : t.updates) {
      const double peak = (r.delivered_ms ? *r.delivered_ms : r.generated_ms + dt) - last;
      if (std::abs(peak - r.peak_aom_ms) > tol) {
        return bad("peak(", t.name, ",n=", r.index, "): recorded ", r.peak_aom_ms,
                   " ms, schedule gives ", peak);
      }
      if (r.delivered_ms) last = r.generated_ms;
      sum += peak;
    }
    const double avg = sum / static_cast<double>(t.updates.size());
    if (std::abs(avg - t.avg_peak_aom_ms) > tol) {
      return bad("avg(", t.name, "): recorded ", t.avg_peak_aom_ms, " ms, schedule gives ", avg);
    }
  }
  return absl::OkStatus();
}

}  // namespace inca::olafverify
