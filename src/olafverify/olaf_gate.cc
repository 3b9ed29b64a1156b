#include "olafverify/olaf_gate.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "inca/wire/olaf.h"

namespace inca::olafverify {

absl::StatusOr<olafverify::FairnessConfig> FairnessConfigFor(const OlafProposal& p,
                                                             const OlafObserved& o) {
  if (o.egress_rate_bps == 0) {
    return absl::FailedPreconditionError(
        "not verified: the egress is unpaced, so the switch's queue never holds updates back");
  }
  if (o.cluster_periods_ms.size() < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("not verified: ", o.cluster_periods_ms.size(),
                     " cluster(s) with an observed update period; fairness needs two"));
  }
  olafverify::FairnessConfig cfg;
  cfg.aom_threshold_ms = p.delta_t_ms;
  cfg.queue_size = static_cast<int>(p.depth);
  cfg.epsilon = p.epsilon;
  cfg.solver_timeout_ms = p.solver_timeout_ms;
  const double payload =
      o.mean_update_bytes > 0
          ? o.mean_update_bytes
          : static_cast<double>(o.max_payload_bytes + olaf::kOlafUpdateHeaderBytes);
  cfg.capacity_updates_per_ms = std::min(1e6, static_cast<double>(o.egress_rate_bps) /
                                                  (8 * (payload + o.egress_overhead_bytes)) / 1e3);
  // The model bounds the clusters it encodes: the busiest ones matter most.
  std::vector<std::pair<uint16_t, double>> periods = o.cluster_periods_ms;
  std::sort(periods.begin(), periods.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  if (periods.size() > olafverify::kMaxClusters) periods.resize(olafverify::kMaxClusters);
  // Periods span orders of magnitude; the horizon (updates of the slowest
  // cluster) shrinks so every cluster's updates fit the encoding bound.
  const double ratio = periods.back().second / std::max(1e-3, periods.front().second);
  cfg.horizon =
      static_cast<int>(std::clamp(std::floor(olafverify::kMaxEncodedUpdates / 4.0 /
                                             (ratio * static_cast<double>(periods.size()))),
                                  1.0, 8.0));
  for (const auto& [id, ms] : periods) {
    cfg.clusters.push_back({absl::StrCat("c", id), std::max(ms, 1e-3), 0});
  }
  if (absl::Status s = olafverify::Validate(cfg); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("not verified: ", s.message()));
  }
  return cfg;
}

OlafGateVerdict VerifyOlafChange(const OlafProposal& p, const OlafObserved& o) {
  OlafGateVerdict v;
  absl::StatusOr<olafverify::FairnessConfig> cfg = FairnessConfigFor(p, o);
  if (!cfg.ok()) {
    v.reason = std::string(cfg.status().message());
    return v;
  }
  const absl::Status s = olafverify::CheckBeforeApply(*cfg);
  if (s.ok()) {
    v.verified = true;
    return v;
  }
  if (s.code() == absl::StatusCode::kFailedPrecondition) {
    v.verified = true;
    v.fair = false;
    v.reason = std::string(s.message());
    return v;
  }
  v.reason = absl::StrCat("not verified: the solver did not answer (", s.message(), ")");
  return v;
}

}  // namespace inca::olafverify
