// Internal: the Encoder behind Solve (smt_encoding.h). Split over two files:
// smt_encoding.cc (slots, timing, peaks, fairness, solving, cores) and
// smt_queue.cc (the OlafQueue rules: arrival, merge, displacement,
// eviction, the work-conserving link and its dequeue order).
#pragma once

#include <z3++.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "olafverify/fairness_model.h"
#include "olafverify/smt_encoding.h"

namespace inca::olafverify::internal {

// One update of one cluster, with static bounds on its generation time that
// follow from phase in [0, p] and intervals in [p - j, p + j].
struct Slot {
  int cluster = 0;
  int n = 0;
  double a_lo = 0;
  double a_hi = 0;
  // Static analysis (Analyse): what the queue can possibly do to it.
  bool may_merge = true;         // arrive without room while its cluster holds an entry
  bool may_displace = true;      // arrive to a full queue
  bool may_be_displaced = true;  // a partner of another cluster may displace
  bool may_evict = true;         // wait ΔT (a busy period may last that long)
};

class Encoder {
 public:
  Encoder(const FairnessConfig& cfg, z3::context& ctx) : cfg_(cfg), ctx_(ctx), violation_(ctx) {}

  void Build(Question q);
  absl::StatusOr<SolveOutcome> Run(Question q);

 private:
  using Link = std::pair<int, z3::expr>;  // (other slot, Boolean)

  // Build's steps, called in the order that fixes the constraints' order.
  void Analyse();
  void DeclareSlot(int i);
  void DeclareLinks(int i);
  void DefineEntries(size_t c);
  void RequireTiming(size_t c);
  void DefineResidency(int i);
  void RequireArrival(int i);
  void RequireVictim(int i, const z3::expr& link, int v);
  void RequireDeparture(int i);
  void RequireLink(int i);
  void DefinePeaks(size_t c);
  void RequireFairness(Question q);

  z3::expr Real(double v) const {
    // Exact decimal: Z3 parses "123.456000000" as a rational.
    return ctx_.real_val(absl::StrFormat("%.9f", v).c_str());
  }
  const Slot& slot(int i) const { return slots_[static_cast<size_t>(i)]; }
  const ClusterSpec& cluster(int c) const { return cfg_.clusters[static_cast<size_t>(c)]; }
  double MinInterval(int c) const { return cluster(c).update_period_ms - cluster(c).jitter_ms; }
  std::string Name(int i) const {
    return absl::StrCat(cluster(slot(i).cluster).name, ",n=", slot(i).n);
  }
  const z3::expr& A(int i) const { return a_[static_cast<size_t>(i)]; }
  // Arrival at the queue (queued_at): A itself without transit.
  const z3::expr& E(int i) const { return e_[static_cast<size_t>(i)]; }
  z3::expr S(int i) const { return d_[static_cast<size_t>(i)] - service_; }
  // Constant-folding helpers keep the formula free of trivial ites.
  z3::expr Ite(const z3::expr& c, const z3::expr& t, const z3::expr& e) const {
    if (c.is_true()) return t;
    if (c.is_false()) return e;
    return z3::ite(c, t, e);
  }
  z3::expr Implies(const z3::expr& c, const z3::expr& e) const {
    return c.is_true() ? e : z3::implies(c, e);
  }
  z3::expr Not(const z3::expr& a) const {
    if (a.is_true()) return ctx_.bool_val(false);
    if (a.is_false()) return ctx_.bool_val(true);
    return !a;
  }
  z3::expr And(const z3::expr& a, const z3::expr& b) const {
    if (a.is_true()) return b;
    if (b.is_true()) return a;
    if (a.is_false() || b.is_false()) return ctx_.bool_val(false);
    return a && b;
  }
  z3::expr Or(const std::vector<z3::expr>& v) const;
  z3::expr Count(const std::vector<z3::expr>& conds) const;
  // Cardinality constraints go to Z3's pseudo-Boolean support, which refutes
  // them far faster than sums of ite(c, 1, 0) in arithmetic.
  z3::expr AtMost(const std::vector<z3::expr>& conds, int k) const;
  z3::expr AtLeast(const std::vector<z3::expr>& conds, double k) const;

  bool Interact(int i, int j, double reach) const;
  z3::expr ArrivedBefore(int j, int i) const;
  // k is queued when the link dequeues at t (arrivals at t come first,
  // entries with queued_at + ΔT <= t are gone).
  z3::expr WaitingAt(int k, const z3::expr& t) const;
  // Residency of j when i arrives (false when j is not a partner or later).
  z3::expr Resident(int j, int i) const;
  z3::expr Head(int k, int i) const;  // k is its cluster's oldest entry at A(i)
  // A model constraint, named for unsat cores. `lazy` ones are left out of
  // the first solve and added when a model violates them (docs).
  void Require(const std::string& name, const z3::expr& e, bool lazy = false) {
    tracked_.push_back(Tracked{name, e, lazy, !lazy});
  }
  void Define(const z3::expr& e) { definitions_.push_back(e); }
  void Configure(z3::solver& s, double budget_ms) const;
  double ModelValue(const z3::model& m, const z3::expr& e) const;
  Schedule Extract(const z3::model& m) const;
  void FindCore(double budget_ms, double trial_ms, SolveOutcome& out);

  const FairnessConfig& cfg_;
  z3::context& ctx_;
  double service_ms_ = 0;
  double busy_ms_ = 0;       // BusyPeriodBound
  bool lazy_server_ = true;  // single_server constraints join lazily
  z3::expr service_{ctx_};
  z3::expr dt_{ctx_};
  std::vector<Slot> slots_;
  std::vector<std::vector<int>> slots_of_cluster_;
  std::vector<std::vector<int>> partners_;  // per slot: the slots it may interact with
  std::vector<std::vector<int>> offers_;    // per slot: others' slots within ΔT (N_active)
  // Per slot: generation, delivery (D = S + 1/C), fate Booleans (own entry,
  // dequeued, displaced; not own = merged), the entry's gen_time when it
  // leaves, when it leaves, the freshest delivered gen_time before it
  // (-1e9 = none) and the same from A(0) - period (peaks), Q(n), peak.
  std::vector<z3::expr> a_, e_, d_, own_, del_, dis_, g_, leave_, key_, fresh_, q_, peak_;
  std::vector<std::vector<Link>> into_;    // per merged slot: (entry, merged into it)
  std::vector<std::vector<Link>> merges_;  // per entry: (slot, merged into it)
  std::vector<std::vector<Link>> dby_;     // per slot: (victim, displaced by it)
  std::vector<std::vector<Link>> victim_;  // per slot: (displacer, displaced by it)
  std::vector<std::vector<Link>> res_;     // per slot: (j, j queued when it arrives)
  std::vector<z3::expr> avg_;              // per cluster
  std::vector<z3::expr> definitions_;
  struct Tracked {
    std::string name;
    z3::expr e;
    bool lazy;
    bool active;  // asserted in the current solve
  };
  std::vector<Tracked> tracked_;
  std::vector<std::string> static_facts_;
  z3::expr violation_;
  double encode_ms_ = 0;
};

}  // namespace inca::olafverify::internal
