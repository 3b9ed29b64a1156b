// olaf-verify: SMT (Z3) verification of OLAF's AoM fairness between clusters,
// after section 3.2 of the OLAF paper (arXiv 2507.05876). The model, its
// assumptions and the mapping of the paper's variables are in
// docs/olaf-verify.md; in short, over a bounded horizon of updates:
//
//   A(c,n)  generation time of update n of cluster c (free within the
//           cluster's phase, period and jitter: A(n+1) >= A(n) + delta)
//   D(c,n)  delivery time at the PS of a delivered update; one shared server
//           of capacity C: D(n) >= A(n) + 1/C, departures >= 1/C apart
//           (which implies the paper's D(n) >= A(n) + Q(n)/C); the queue may
//           hold an update, so D is bounded below, not pinned
//   Q(c,n)  updates in the switch when n arrives (tail drop at queue_size)
//   ΔT      AoM threshold: delivered updates are at most ΔT old; the others
//           are evicted when their age reaches ΔT (only while the server is
//           saturated)
//   Δp      peak AoM D(k) - A(l), l the cluster's previous delivered update
//   fair    |avg Δp(u) - avg Δp(v)| <= ε × normaliser for every pair u, v
//
// Two questions: CheckFeasible (is there a schedule under which the
// configuration is fair? witness or named conflicting constraints) and
// CheckAlwaysFair (is every schedule fair? proof or counterexample).
// CheckBeforeApply is the control-plane hook: refuse a configuration that
// cannot be fair, with the reason.
//
// All functions are thread-compatible: each call builds and owns its own Z3
// context, so concurrent calls on different threads are safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace inca::olafverify {

// Bounds enforced by Validate.
inline constexpr int kMaxHorizon = 256;          // updates of the slowest cluster
inline constexpr int kMaxEncodedUpdates = 1024;  // all clusters together
inline constexpr size_t kMaxClusters = 16;

struct ClusterSpec {
  std::string name;  // [A-Za-z0-9_.-]+, unique; used in constraint names
  // Nominal interval between two updates of the cluster (the paper's delta).
  double update_period_ms = 0;
  // Consecutive updates are [period - jitter, period + jitter] apart
  // (0 = strictly periodic). Must be < update_period_ms.
  double jitter_ms = 0;
};

// What |avg(Δu_p) - avg(Δv_p)| is compared against: ε × normaliser.
enum class FairnessNorm {
  kPairMean,   // (avg(Δu_p) + avg(Δv_p)) / 2: ε is a relative gap (default)
  kThreshold,  // ΔT: ε is a fraction of the AoM threshold
};

struct FairnessConfig {
  double aom_threshold_ms = 400;      // ΔT, > 0
  std::vector<ClusterSpec> clusters;  // at least two
  // C: updates the PS link can deliver per ms (service time 1/C ms). Default:
  // the paper's 40 Gbit/s link and one 9000-byte jumbo frame per update
  // (CapacityFromLink(40, 9000), about 555.6).
  double capacity_updates_per_ms = 40e6 / (9000 * 8);
  int queue_size = 8;    // updates the switch holds, waiting + in service; >= 1
  double epsilon = 0.1;  // in [0, 1]
  FairnessNorm norm = FairnessNorm::kPairMean;
  // Updates of the slowest cluster; cluster c gets
  // ceil(horizon × max_period / period_c) so all clusters span the same time.
  int horizon = 8;
  int solver_timeout_ms = 60000;  // per question, all solver calls together; 0 = no limit
  // Also assert the paper's aggregate D(n) >= A(n) + Q(n)/C per update. It is
  // implied by the per-pair single-server constraints (docs), so it never
  // changes an answer, only costs solve time; for cross-checking the model.
  bool assert_queue_dynamics = false;
};

// C for a link of `link_gbps` carrying updates of `update_bytes` each.
double CapacityFromLink(double link_gbps, double update_bytes);

// Checks a configuration on its own. InvalidArgument naming the field and
// the accepted range.
absl::Status Validate(const FairnessConfig& cfg);

// "NAME:PERIOD_MS[:JITTER_MS]" -> ClusterSpec; InvalidArgument otherwise.
absl::StatusOr<ClusterSpec> ParseClusterSpec(const std::string& text);

// Number of updates encoded for each cluster (same order as cfg.clusters).
// Precondition: Validate(cfg).ok().
std::vector<int> UpdatesPerCluster(const FairnessConfig& cfg);

enum class UpdateFate { kDelivered, kEvicted, kTailDropped };
const char* UpdateFateName(UpdateFate f);  // "delivered", "evicted", "tail-dropped"

struct UpdateRecord {
  int index = 0;                       // n
  double generated_ms = 0;             // A(n)
  std::optional<double> delivered_ms;  // D(n); set iff fate == kDelivered
  UpdateFate fate = UpdateFate::kDelivered;
  int queue_occupancy = 0;  // Q(n): updates in the switch when n arrived
  // Δp(n): D(n) - A(l) when delivered; A(n) + ΔT - A(l) when not (l: the
  // previous delivered update of the cluster).
  double peak_aom_ms = 0;
};

struct ClusterTrace {
  std::string name;
  std::vector<UpdateRecord> updates;
  double avg_peak_aom_ms = 0;
};

struct PairGap {
  std::string u, v;
  double gap_ms = 0;    // |avg Δp(u) - avg Δp(v)|
  double bound_ms = 0;  // ε × normaliser
  bool fair() const { return gap_ms <= bound_ms + 1e-9; }
};

// A schedule satisfying the model: the solver's witness or counterexample.
struct Schedule {
  std::vector<ClusterTrace> clusters;
  std::vector<PairGap> gaps;  // every pair of clusters
};

struct SolveStats {
  double solve_ms = 0;   // wall time of the Z3 check that gave the answer
  double core_ms = 0;    // then extracting and shrinking the unsat core, if any
  double encode_ms = 0;  // building the formula
  int encoded_updates = 0;
  int tracked_constraints = 0;  // named model constraints (per pair for single_server)
  int rounds = 0;               // solver calls until no lazy constraint was violated
};

struct FeasibilityResult {
  bool feasible = false;
  std::optional<Schedule> witness;  // iff feasible
  // iff !feasible: names of tracked constraints in the unsat core, e.g.
  // "fairness(c0,c1)", "threshold(c0,n=3)", "period(c1,n=0)". Minimal per
  // family(cluster) group when core_minimized (no group can be left out),
  // not necessarily per index.
  std::vector<std::string> conflicting_constraints;
  bool core_minimized = false;
  // Facts the encoder derived before solving and built in (so they never
  // appear in a core), e.g. "no tail drop for c0: at most 5 updates resident
  // < queue_size 8".
  std::vector<std::string> static_facts;
  SolveStats stats;
};

struct RobustnessResult {
  bool always_fair = false;                // no schedule within the horizon violates fairness
  std::optional<Schedule> counterexample;  // iff !always_fair
  SolveStats stats;
};

// Is there a schedule under which every pair of clusters is ε-fair?
// InvalidArgument for a bad config; DeadlineExceeded when the solver hit
// solver_timeout_ms; Unknown when it gave up otherwise.
absl::StatusOr<FeasibilityResult> CheckFeasible(const FairnessConfig& cfg);

// Is every schedule ε-fair? Searches for a schedule of the model that
// violates fairness for some pair. Errors as CheckFeasible.
absl::StatusOr<RobustnessResult> CheckAlwaysFair(const FairnessConfig& cfg);

// Control-plane hook, run before applying an OLAF configuration. OK when the
// configuration can be fair (and, if require_always_fair, always is);
// FailedPrecondition whose message names the conflicting constraints or the
// violating pair; InvalidArgument / DeadlineExceeded / Unknown as above.
absl::Status CheckBeforeApply(const FairnessConfig& cfg, bool require_always_fair = false);

// Checks a schedule against the model without Z3: generation times (phase,
// period, rate), each fate against the queue rules (tail drop iff the queue
// was full, eviction only while the server was saturated), delivery within
// [1/C, ΔT], single-server spacing, and the recorded Q(n), peaks and
// averages. Fairness itself is in s.gaps. InvalidArgument naming the first
// broken constraint, e.g. "threshold(c0,n=3): D - A = 401 ms > ΔT 400 ms".
// Tests use it on every witness and counterexample; a control plane can run
// it on a measured trace. Comparisons allow `tolerance_ms`.
absl::Status CheckSchedule(const FairnessConfig& cfg, const Schedule& s,
                           double tolerance_ms = 1e-6);

// Groups constraint names by family and cluster: "threshold(c0,n=0..11)"
// for a run of indices, so a core reads in one line.
std::string SummarizeConstraints(const std::vector<std::string>& names);

// Human-readable reports. FormatSchedule: one row per update, then the
// pairwise gaps. FormatReport: the verdict, the witness / counterexample or
// the unsat core, and the solve time.
std::string FormatConfig(const FairnessConfig& cfg);
std::string FormatSchedule(const Schedule& s);
std::string FormatReport(const FeasibilityResult& r);
std::string FormatReport(const RobustnessResult& r);

// JSON documents (one object, no trailing newline).
std::string ToJson(const FairnessConfig& cfg);
std::string ToJson(const FeasibilityResult& r);
std::string ToJson(const RobustnessResult& r);

}  // namespace inca::olafverify
