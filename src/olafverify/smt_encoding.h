// Internal: the Z3 encoding of the OLAF fairness model (docs/olaf-verify.md).
// Kept apart from fairness_model.h so that z3++.h stays out of the public
// header. Each call owns its Z3 context, so calls on different threads are
// independent.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "olafverify/fairness_model.h"

namespace inca::olafverify::internal {

enum class Question {
  kFair,       // model ∧ fairness for every pair; on unsat, a named core
  kViolation,  // model ∧ ¬fairness for some pair
};

struct SolveOutcome {
  bool sat = false;
  std::optional<Schedule> schedule;  // iff sat
  std::vector<std::string> core;     // iff !sat and question == kFair
  bool core_minimized = false;
  std::vector<std::string> static_facts;
  SolveStats stats;
};

// Longest busy period of the work-conserving link (ms), infinite when the
// clusters' peak load reaches C: no update waits longer (docs, static
// analysis).
double BusyPeriodBound(const FairnessConfig& cfg);

// Precondition: Validate(cfg).ok(). DeadlineExceeded when Z3 answers
// unknown because of solver_timeout_ms, Unknown when it gives up otherwise,
// Internal for a Z3 exception.
absl::StatusOr<SolveOutcome> Solve(const FairnessConfig& cfg, Question q);

}  // namespace inca::olafverify::internal
