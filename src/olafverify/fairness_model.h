// olaf-verify: SMT (Z3) verification of OLAF's AoM fairness between clusters,
// after section 3.2 of the OLAF paper (arXiv 2507.05876), with the switch
// queue modelled as the real OlafQueue (include/inca/olaf/update_queue.h)
// behaves. The model, its assumptions and every place where it abstracts
// the code are in docs/olaf-verify.md; in short, over a bounded horizon:
//
//   A(c,n)  generation time of update n of cluster c (free within the
//           cluster's phase, period and jitter), its gen_time
//   E(c,n)  its arrival at the switch (queued_at): A + a transit delay in
//           [0, max_transit_ms] (< ΔT, so never stale on arrival), FIFO
//   arrival room = queue not full and the cluster below its cap
//           max(1, floor(depth / N_active)) (or holding nothing): queued;
//           no room and the cluster holds an entry: merged into its oldest
//           entry (the entry keeps its queued time, takes the newest
//           gen_time); no room and nothing queued for the cluster: the head
//           of the cluster with most entries is displaced. No tail drops.
//   S, D    a work-conserving link of capacity C: the queue is dequeued
//           whenever the link is free (S = arrival or the end of the previous
//           service), D = S + 1/C; the cluster with the largest AoM at the
//           queue goes first (never delivered first, ties lowest index),
//           FIFO within a cluster
//   ΔT      entries are evicted when queued_at + ΔT <= now (time queued:
//           with transit an update can reach the PS aged nearly 2ΔT; a
//           merged entry carries the newest gen_time out)
//   Δp      peak AoM D - freshest gen_time delivered before, per update
//   fair    |avg Δp(u) - avg Δp(v)| <= ε × normaliser for every pair u, v
//
// The queue is deterministic given the generation and arrival times, so the
// only freedom is in A and E. Two questions: CheckFeasible (are there generation times
// under which the configuration is fair? witness or named conflicting
// constraints) and CheckAlwaysFair (is every schedule fair? proof or
// counterexample, which replays on OlafQueue). CheckBeforeApply is the
// control-plane hook: refuse a configuration that cannot be fair, with the
// reason.
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
  int queue_size = 8;    // OlafQueue depth: entries queued (not counting the one in service); >= 1
  double epsilon = 0.1;  // in [0, 1]
  FairnessNorm norm = FairnessNorm::kPairMean;
  // Updates of the slowest cluster; cluster c gets
  // ceil(horizon × max_period / period_c) so all clusters span the same time.
  int horizon = 8;
  // Transit from worker to switch: update n reaches the queue at E(n) in
  // [A(n), A(n) + max_transit_ms], in generation order within a cluster
  // (a FIFO path). OlafQueue ages entries from E (queued_at) but stamps
  // them with A (gen_time), so with transit an update can reach the PS aged
  // up to max_transit + ΔT + 1/C. In [0, ΔT): an update older than ΔT on
  // arrival (dropped stale_on_arrival) is not modelled.
  double max_transit_ms = 0;
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

// kTailDropped is never produced by the OLAF queue model (an update without
// room merges or displaces); it stays for reading older schedules and is
// rejected by CheckSchedule.
enum class UpdateFate { kDelivered, kEvicted, kTailDropped, kMerged, kDisplaced };
// "delivered", "evicted", "tail-dropped", "merged", "displaced"
const char* UpdateFateName(UpdateFate f);

struct UpdateRecord {
  int index = 0;                       // n
  double generated_ms = 0;             // A(n)
  std::optional<double> arrived_ms;    // E(n), its queued_at; unset: = A(n)
  std::optional<double> delivered_ms;  // D(n); set iff fate == kDelivered
  UpdateFate fate = UpdateFate::kDelivered;
  // kMerged: the index of the cluster's queued update it was merged into.
  int merged_into = -1;
  // Q(n): entries queued when n arrived (after evicting stale ones; the
  // update in service is not counted).
  int queue_occupancy = 0;
  // Δp(n), F the freshest gen_time the PS has from the cluster before:
  // delivered: D(n) - F; merged into an entry delivered at D: D - F (the
  // same peak as the entry); otherwise (evicted, displaced, or merged into
  // an entry that was) A(n) + ΔT - F. Before the horizon F = A(0) - period.
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
// period, rate), delivery bounds (service, threshold), then replays the
// generation times through a reference implementation of OlafQueue's rules
// on a work-conserving link (queue_sim.h) and compares every fate, merge
// target, delivery time and Q(n), then the peaks and averages. Fairness
// itself is in s.gaps. InvalidArgument naming the first broken constraint,
// e.g. "threshold(c0,n=3): dequeued 401 ms after queueing >= ΔT 400 ms" or
// "queue(c1,n=2): recorded delivered, the OLAF queue gives merged". Tests
// use it on every witness and counterexample and on traces of the real
// OlafQueue. Comparisons allow `tolerance_ms`; events closer than that
// count as simultaneous.
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
