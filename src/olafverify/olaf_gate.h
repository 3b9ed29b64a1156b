// The verifier's gate on run-time OLAF changes (issue 20, item 6): a
// proposed ΔT and depth, checked by olaf-verify's model (src/olafverify)
// against what the switch has observed: each cluster's update period (the
// mean interval between its offers at the queue), the PS link's capacity in
// updates (egress rate over the mean update size). Pure: the control plane
// (olaf_control.cc) gathers the observation on the switch thread and runs
// this on its own, so the solver never runs on the data path.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "olafverify/fairness_model.h"

namespace inca::olafverify {

struct OlafObserved {
  // (cluster, mean interval between its offers in ms), for clusters with
  // enough offers to have one (UpdateQueue::MeanOfferIntervalNs).
  std::vector<std::pair<uint16_t, double>> cluster_periods_ms;
  double mean_update_bytes = 0;  // UDP payload of the updates dequeued; 0 = none yet
  uint32_t max_payload_bytes = 8952;
  uint64_t egress_rate_bps = 0;  // 0 = unpaced
  uint32_t egress_overhead_bytes = 66;
};

struct OlafProposal {
  double delta_t_ms = 400;
  uint32_t depth = 8;
  double epsilon = 0.1;
  int solver_timeout_ms = 10000;
};

struct OlafGateVerdict {
  bool verified = false;  // the solver answered
  bool fair = true;       // verified and can be ε-fair (true when not verified)
  // Why not verified, or the refusal (the unsat core's families), or "".
  std::string reason;
};

// The model's configuration for `p` given `o`; FailedPrecondition (the
// reason) when there is nothing to verify: fewer than two clusters with an
// observed period, or an unpaced egress (the switch does not own the
// bottleneck, its queue never holds updates back).
absl::StatusOr<olafverify::FairnessConfig> FairnessConfigFor(const OlafProposal& p,
                                                             const OlafObserved& o);

// Runs the feasibility question ("can it be fair?") on FairnessConfigFor.
OlafGateVerdict VerifyOlafChange(const OlafProposal& p, const OlafObserved& o);

}  // namespace inca::olafverify
