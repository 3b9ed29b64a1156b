// The Z3 encoding of the OLAF fairness model: linear real arithmetic plus
// Booleans (QF_LRA with ite and pseudo-Boolean cardinality). Every
// constraint is linear in the A and D variables. docs/olaf-verify.md has the
// model; the constraint families below carry the names seen in unsat cores.
//
// Static bounds below round towards "more updates interact / fit", so an
// approximation can only keep a constraint that was not needed, never drop
// one that was.
//
// Solving strategy (docs, "Performance"): static analysis first removes the
// drop decisions that cannot happen; the question is then solved with every
// constraint asserted plainly (fast); only an unsat answer to kFair is solved
// again with each constraint behind a named assumption literal, and the core
// is shrunk group by group within a time budget.
#include "olafverify/smt_encoding.h"

#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace inca::olafverify::internal {
namespace {

using Clock = std::chrono::steady_clock;

// Margins for the static bounds: constants reach Z3 as 9-decimal rationals,
// so doubles may be off by ~1e-9; the bounds lean conservative by more.
constexpr double kSlackMs = 1e-6;
constexpr double kSlackRatio = 1e-9;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One update of one cluster, with static bounds on its generation time that
// follow from phase in [0, p] and intervals in [p - j, p + j].
struct Slot {
  int cluster = 0;
  int n = 0;
  double a_lo = 0;
  double a_hi = 0;
  bool may_tail_drop = true;  // static analysis: can the queue be full at A(n)?
  bool may_evict = true;      // static analysis: can the server be saturated for ΔT?
};

// The family(cluster) part of "family(cluster,n=K)", or the whole name.
std::string GroupOf(const std::string& name) {
  const size_t at = name.rfind(",n=");
  return at == std::string::npos ? name : name.substr(0, at);
}

class Encoder {
 public:
  Encoder(const FairnessConfig& cfg, z3::context& ctx) : cfg_(cfg), ctx_(ctx), violation_(ctx) {}

  void Build(Question q);
  absl::StatusOr<SolveOutcome> Run(Question q);

 private:
  // Build's steps, called in the order that fixes the constraints' order.
  void DeclareSlot(int i);
  void RequireTiming(size_t c);
  void RequireSlot(int i, const z3::expr& s, const z3::expr& dt);
  void DefinePeaks(size_t c, const z3::expr& dt);
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
  // Constant-folding helpers: drop decisions removed by static analysis are
  // the constant true, and the formula stays free of trivial ites.
  z3::expr Ite(const z3::expr& c, const z3::expr& t, const z3::expr& e) const {
    if (c.is_true()) return t;
    if (c.is_false()) return e;
    return z3::ite(c, t, e);
  }
  z3::expr Implies(const z3::expr& c, const z3::expr& e) const {
    return c.is_true() ? e : z3::implies(c, e);
  }
  z3::expr And(const z3::expr& a, const z3::expr& b) const {
    if (a.is_true()) return b;
    if (b.is_true()) return a;
    return a && b;
  }
  z3::expr Count(const std::vector<z3::expr>& conds) const;
  // Cardinality constraints go to Z3's pseudo-Boolean support, which refutes
  // them far faster than sums of ite(c, 1, 0) in arithmetic.
  z3::expr AtMost(const std::vector<z3::expr>& conds, int k) const;
  z3::expr AtLeast(const std::vector<z3::expr>& conds, double k) const;

  void Analyse();
  bool Interact(int i, int j) const;
  int MaxFromCluster(int i, int d, double window_ms) const;
  int MaxResident(int i) const;
  z3::expr ArrivedBefore(int j, int i) const;
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
  double m_busy_ = 0;  // departures within ΔT that prove the server saturated
  std::vector<Slot> slots_;
  std::vector<std::vector<int>> slots_of_cluster_;
  std::vector<std::vector<int>> partners_;  // per slot: the slots it may interact with
  std::vector<z3::expr> a_, d_, acc_, del_, peak_;
  std::vector<z3::expr> avg_;  // per cluster
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

z3::expr Encoder::Count(const std::vector<z3::expr>& conds) const {
  z3::expr_vector terms(ctx_);
  for (const z3::expr& c : conds) terms.push_back(Ite(c, ctx_.real_val(1), ctx_.real_val(0)));
  if (terms.empty()) return ctx_.real_val(0);
  return z3::sum(terms);
}

z3::expr Encoder::AtMost(const std::vector<z3::expr>& conds, int k) const {
  if (static_cast<int>(conds.size()) <= k) return ctx_.bool_val(true);
  z3::expr_vector v(ctx_);
  for (const z3::expr& c : conds) v.push_back(c);
  return z3::atmost(v, static_cast<unsigned>(k));
}

z3::expr Encoder::AtLeast(const std::vector<z3::expr>& conds, double k) const {
  if (k <= 0) return ctx_.bool_val(true);
  if (static_cast<double>(conds.size()) < k) return ctx_.bool_val(false);
  z3::expr_vector v(ctx_);
  for (const z3::expr& c : conds) v.push_back(c);
  return z3::atleast(v, static_cast<unsigned>(std::ceil(k)));
}

bool Encoder::Interact(int i, int j) const {
  // Everything an update does (wait, delivery, eviction) happens within ΔT of
  // its generation, and departures are >= 1/C after arrival, so two updates
  // generated more than ΔT + 1/C apart never constrain each other (exact
  // pruning, docs). Within a cluster the distance is known: |n - m|
  // intervals of at least p - j; across clusters, the static bounds.
  const Slot& x = slot(i);
  const Slot& y = slot(j);
  const double reach = cfg_.aom_threshold_ms + service_ms_ + kSlackMs;
  if (x.cluster == y.cluster) return std::abs(x.n - y.n) * MinInterval(x.cluster) <= reach;
  return y.a_lo <= x.a_hi + reach && x.a_lo <= y.a_hi + reach;
}

int Encoder::MaxFromCluster(int i, int d, double window_ms) const {
  // Partners of i from cluster d that fit in a window of `window_ms`: at
  // most ceil(window / min interval), and at most the partners there are.
  const double by_rate = std::ceil(window_ms / MinInterval(d) + kSlackRatio);
  int cands = 0;
  for (int j : partners_[static_cast<size_t>(i)]) cands += slot(j).cluster == d;
  return std::min(cands, static_cast<int>(by_rate));
}

int Encoder::MaxResident(int i) const {
  // Resident at A(i): accepted, generated in (A(i) - ΔT, A(i)]. Own cluster:
  // the earlier updates less than ΔT back; others: what fits in ΔT.
  int total = 0;
  for (size_t d = 0; d < cfg_.clusters.size(); ++d) {
    const int dc = static_cast<int>(d);
    if (dc == slot(i).cluster) {
      const int back =
          static_cast<int>(std::ceil(cfg_.aom_threshold_ms / MinInterval(dc) + kSlackRatio));
      total += std::min(slot(i).n, back - 1);
    } else {
      total += MaxFromCluster(i, dc, cfg_.aom_threshold_ms);
    }
  }
  return total;
}

void Encoder::Analyse() {
  const size_t k = cfg_.clusters.size();
  const std::vector<int> counts = UpdatesPerCluster(cfg_);
  slots_of_cluster_.resize(k);
  for (size_t c = 0; c < k; ++c) {
    const double p = cfg_.clusters[c].update_period_ms;
    const double j = cfg_.clusters[c].jitter_ms;
    for (int n = 0; n < counts[c]; ++n) {
      slots_of_cluster_[c].push_back(static_cast<int>(slots_.size()));
      slots_.push_back(Slot{static_cast<int>(c), n, n * (p - j), p + n * (p + j)});
    }
  }
  const int total = static_cast<int>(slots_.size());
  partners_.resize(static_cast<size_t>(total));
  for (int i = 0; i < total; ++i) {
    for (int j = 0; j < total; ++j) {
      if (i != j && Interact(i, j)) partners_[static_cast<size_t>(i)].push_back(j);
    }
  }
  // A tail drop needs queue_size residents; an eviction needs m_busy other
  // departures in (A, A + ΔT], all generated within ΔT either side.
  for (size_t c = 0; c < k; ++c) {
    int max_res = 0, max_busy = 0, no_drop = 0, no_evict = 0;
    for (int i : slots_of_cluster_[c]) {
      Slot& s = slots_[static_cast<size_t>(i)];
      const int res = MaxResident(i);
      int busy = 0;
      for (size_t d = 0; d < k; ++d) {
        busy += MaxFromCluster(i, static_cast<int>(d), 2 * cfg_.aom_threshold_ms);
      }
      s.may_tail_drop = res >= cfg_.queue_size;
      s.may_evict = m_busy_ <= 0 || m_busy_ <= busy;
      max_res = std::max(max_res, res);
      max_busy = std::max(max_busy, busy);
      no_drop += !s.may_tail_drop;
      no_evict += !s.may_evict;
    }
    const std::string& name = cfg_.clusters[c].name;
    const int n = static_cast<int>(slots_of_cluster_[c].size());
    if (no_drop == n) {
      static_facts_.push_back(
          absl::StrFormat("no tail drop for %s: at most %d updates can be in the switch when one "
                          "arrives (< queue_size %d)",
                          name, max_res, cfg_.queue_size));
    }
    if (no_evict == n) {
      static_facts_.push_back(absl::StrFormat(
          "no eviction for %s: saturating the server for ΔT takes %.0f departures, at most %d "
          "are possible",
          name, m_busy_, max_busy));
    }
  }
}

z3::expr Encoder::ArrivedBefore(int j, int i) const {
  if (slot(j).cluster == slot(i).cluster) return ctx_.bool_val(slot(j).n < slot(i).n);
  // Ties between clusters break by cluster index: a strict total order.
  const z3::expr& aj = a_[static_cast<size_t>(j)];
  const z3::expr& ai = a_[static_cast<size_t>(i)];
  return slot(j).cluster < slot(i).cluster ? aj <= ai : aj < ai;
}

void Encoder::Build(Question q) {
  const auto t0 = Clock::now();
  service_ms_ = 1.0 / cfg_.capacity_updates_per_ms;
  m_busy_ = SaturationDepartures(cfg_);
  Analyse();
  const z3::expr s = Real(service_ms_);
  const z3::expr dt = Real(cfg_.aom_threshold_ms);
  const int total = static_cast<int>(slots_.size());
  for (int i = 0; i < total; ++i) DeclareSlot(i);
  for (size_t c = 0; c < cfg_.clusters.size(); ++c) RequireTiming(c);
  for (int i = 0; i < total; ++i) RequireSlot(i, s, dt);
  for (size_t c = 0; c < cfg_.clusters.size(); ++c) DefinePeaks(c, dt);
  RequireFairness(q);
  encode_ms_ = MsSince(t0);
}

// The slot's variables. accepted/delivered are constants where static
// analysis rules the drop out.
void Encoder::DeclareSlot(int i) {
  const std::string nm = Name(i);
  const Slot& si = slot(i);
  a_.push_back(ctx_.real_const(absl::StrCat("A(", nm, ")").c_str()));
  d_.push_back(ctx_.real_const(absl::StrCat("D(", nm, ")").c_str()));
  acc_.push_back(si.may_tail_drop ? ctx_.bool_const(absl::StrCat("accepted(", nm, ")").c_str())
                                  : ctx_.bool_val(true));
  if (si.may_evict) {
    del_.push_back(ctx_.bool_const(absl::StrCat("delivered(", nm, ")").c_str()));
    Define(Implies(del_.back(), acc_.back()));
  } else {
    del_.push_back(acc_.back());
  }
}

// Time progression (the paper's A(n+1) >= A(n) + delta) and the cluster's
// nominal rate.
void Encoder::RequireTiming(size_t c) {
  const ClusterSpec& cs = cfg_.clusters[c];
  const std::vector<int>& sl = slots_of_cluster_[c];
  const z3::expr& a0 = a_[static_cast<size_t>(sl[0])];
  Require(absl::StrCat("phase(", cs.name, ")"), a0 >= 0 && a0 <= Real(cs.update_period_ms));
  for (size_t n = 0; n + 1 < sl.size(); ++n) {
    const z3::expr gap = a_[static_cast<size_t>(sl[n + 1])] - a_[static_cast<size_t>(sl[n])];
    Require(absl::StrCat("period(", cs.name, ",n=", n, ")"),
            gap >= Real(cs.update_period_ms - cs.jitter_ms));
    Require(absl::StrCat("rate(", cs.name, ",n=", n, ")"),
            gap <= Real(cs.update_period_ms + cs.jitter_ms));
  }
}

// The constraints on one update: service, threshold, server, queue and eviction.
void Encoder::RequireSlot(int i, const z3::expr& s, const z3::expr& dt) {
  const size_t ui = static_cast<size_t>(i);
  const std::string nm = Name(i);
  const z3::expr& ai = a_[ui];
  const z3::expr& di = d_[ui];
  const z3::expr& deli = del_[ui];
  const std::vector<int>& part = partners_[ui];

  Require(absl::StrCat("service(", nm, ")"), Implies(deli, di - ai >= s));
  Require(absl::StrCat("threshold(", nm, ")"), Implies(deli, di - ai <= dt));

  // One server: any two delivered updates leave >= 1/C apart, in either
  // order across clusters (per-cluster queues); in generation order within
  // a cluster. One lazy constraint per pair, all named after the earlier
  // slot.
  const std::string server = absl::StrCat("single_server(", nm, ")");
  for (int j : part) {
    if (j < i) continue;
    const size_t uj = static_cast<size_t>(j);
    const z3::expr both = And(deli, del_[uj]);
    if (slot(j).cluster == slot(i).cluster) {
      Require(server, Implies(both, d_[uj] - di >= s), /*lazy=*/true);
    } else {
      Require(server, Implies(both, d_[uj] - di >= s || di - d_[uj] >= s), /*lazy=*/true);
    }
  }

  // Tail drop iff the switch already holds queue_size updates when n
  // arrives (accepted, generated earlier, not yet delivered or evicted).
  if (slot(i).may_tail_drop) {
    std::vector<z3::expr> resident;
    for (int j : part) {
      const size_t uj = static_cast<size_t>(j);
      if (slot(j).cluster == slot(i).cluster && slot(j).n > slot(i).n) continue;
      const z3::expr leaves = Ite(del_[uj], d_[uj], a_[uj] + dt);
      resident.push_back(And(And(acc_[uj], ArrivedBefore(j, i)), ai < leaves));
    }
    Require(absl::StrCat("queue_capacity(", nm, ")"),
            acc_[ui] == AtMost(resident, cfg_.queue_size - 1));
  }

  // The paper's D(n) >= A(n) + Q(n)/C with Q(n) the updates delivered
  // while n waits; implied by single_server + service, so optional.
  if (cfg_.assert_queue_dynamics && !part.empty()) {
    std::vector<z3::expr> ahead;
    for (int j : part) {
      const size_t uj = static_cast<size_t>(j);
      ahead.push_back(And(del_[uj], d_[uj] > ai && d_[uj] < di));
    }
    Require(absl::StrCat("queue_dynamics(", nm, ")"), Implies(deli, di >= ai + Count(ahead) * s));
  }

  // Eviction only while the server is saturated: an accepted update still
  // undelivered when its age reaches ΔT saw the server busy throughout
  // [A, A + ΔT - 1/C] (SaturationDepartures).
  if (slot(i).may_evict && m_busy_ > 0) {
    std::vector<z3::expr> busy;
    for (int j : part) {
      const size_t uj = static_cast<size_t>(j);
      busy.push_back(And(del_[uj], d_[uj] > ai && d_[uj] <= ai + dt));
    }
    Require(absl::StrCat("eviction(", nm, ")"),
            z3::implies(acc_[ui] && !deli, AtLeast(busy, m_busy_)));
  }
}

// Peak AoM per update: R(n) - A(l), R = D if delivered else A + ΔT, l the
// cluster's latest delivered update before n (a virtual one at A(0) - p
// just before the horizon).
void Encoder::DefinePeaks(size_t c, const z3::expr& dt) {
  const ClusterSpec& cs = cfg_.clusters[c];
  const std::vector<int>& sl = slots_of_cluster_[c];
  z3::expr last = a_[static_cast<size_t>(sl[0])] - Real(cs.update_period_ms);
  z3::expr_vector peaks(ctx_);
  for (int i : sl) {
    const size_t ui = static_cast<size_t>(i);
    const std::string nm = Name(i);
    peak_.push_back(Ite(del_[ui], d_[ui], a_[ui] + dt) - last);
    peaks.push_back(peak_.back());
    if (del_[ui].is_true()) {
      last = a_[ui];
    } else {
      z3::expr l = ctx_.real_const(absl::StrCat("L(", nm, ")").c_str());
      Define(l == z3::ite(del_[ui], a_[ui], last));
      last = l;
    }
  }
  avg_.push_back(ctx_.real_const(absl::StrCat("avg(", cs.name, ")").c_str()));
  Define(avg_.back() * Real(static_cast<double>(sl.size())) == z3::sum(peaks));
}

// Fairness between every pair: |avg_u - avg_v| <= ε × normaliser.
void Encoder::RequireFairness(Question q) {
  const size_t k = cfg_.clusters.size();
  z3::expr_vector violations(ctx_);
  for (size_t u = 0; u < k; ++u) {
    for (size_t v = u + 1; v < k; ++v) {
      const z3::expr gap = avg_[u] - avg_[v];
      const z3::expr bound = cfg_.norm == FairnessNorm::kPairMean
                                 ? Real(cfg_.epsilon / 2) * (avg_[u] + avg_[v])
                                 : Real(cfg_.epsilon * cfg_.aom_threshold_ms);
      if (q == Question::kFair) {
        Require(absl::StrCat("fairness(", cfg_.clusters[u].name, ",", cfg_.clusters[v].name, ")"),
                gap <= bound && -gap <= bound);
      } else {
        violations.push_back(gap > bound || -gap > bound);
      }
    }
  }
  if (q == Question::kViolation) violation_ = z3::mk_or(violations);
}

void Encoder::Configure(z3::solver& s, double budget_ms) const {
  z3::params p(ctx_);
  if (budget_ms > 0) p.set("timeout", static_cast<unsigned>(std::max(1.0, budget_ms)));
  s.set(p);
}

double Encoder::ModelValue(const z3::model& m, const z3::expr& e) const {
  const z3::expr v = m.eval(e, true);
  if (v.is_numeral()) return std::strtod(v.get_decimal_string(9).c_str(), nullptr);
  return 0;
}

Schedule Encoder::Extract(const z3::model& m) const {
  // Values first, then Q(n) recomputed from them with the model's definition
  // (it is only in the formula where tail drops are possible).
  const size_t total = slots_.size();
  std::vector<double> a(total), d(total);
  std::vector<bool> acc(total), del(total);
  for (size_t i = 0; i < total; ++i) {
    a[i] = ModelValue(m, a_[i]);
    d[i] = ModelValue(m, d_[i]);
    acc[i] = m.eval(acc_[i], true).is_true();
    del[i] = m.eval(del_[i], true).is_true();
  }
  Schedule out;
  for (size_t c = 0; c < cfg_.clusters.size(); ++c) {
    ClusterTrace t;
    t.name = cfg_.clusters[c].name;
    double sum = 0;
    for (int i : slots_of_cluster_[c]) {
      const size_t ui = static_cast<size_t>(i);
      UpdateRecord r;
      r.index = slot(i).n;
      r.generated_ms = a[ui];
      r.fate = del[ui] ? UpdateFate::kDelivered
                       : (acc[ui] ? UpdateFate::kEvicted : UpdateFate::kTailDropped);
      if (del[ui]) r.delivered_ms = d[ui];
      for (size_t j = 0; j < total; ++j) {
        if (j == ui || !acc[j]) continue;
        const bool before =
            slots_[j].cluster == slot(i).cluster
                ? slots_[j].n < slot(i).n
                : (a[j] < a[ui] || (a[j] == a[ui] && slots_[j].cluster < slot(i).cluster));
        const double leaves = del[j] ? d[j] : a[j] + cfg_.aom_threshold_ms;
        r.queue_occupancy += before && a[ui] < leaves;
      }
      r.peak_aom_ms = ModelValue(m, peak_[ui]);
      sum += r.peak_aom_ms;
      t.updates.push_back(r);
    }
    t.avg_peak_aom_ms = t.updates.empty() ? 0 : sum / static_cast<double>(t.updates.size());
    out.clusters.push_back(std::move(t));
  }
  for (size_t u = 0; u < out.clusters.size(); ++u) {
    for (size_t v = u + 1; v < out.clusters.size(); ++v) {
      const double au = out.clusters[u].avg_peak_aom_ms;
      const double av = out.clusters[v].avg_peak_aom_ms;
      PairGap g;
      g.u = out.clusters[u].name;
      g.v = out.clusters[v].name;
      g.gap_ms = std::abs(au - av);
      g.bound_ms = cfg_.norm == FairnessNorm::kPairMean ? cfg_.epsilon * (au + av) / 2
                                                        : cfg_.epsilon * cfg_.aom_threshold_ms;
      out.gaps.push_back(g);
    }
  }
  return out;
}

void Encoder::FindCore(double budget_ms, double trial_ms, SolveOutcome& out) {
  // Every tracked constraint behind a literal named after it; the core is a
  // subset of the literals. Z3's own core minimisation is far too slow here,
  // so shrink by groups instead: leave out a whole family(cluster) group and
  // keep it out if the rest of the core is still unsat. Each trial runs on a
  // fresh solver with the constraints asserted plainly, which answers sat
  // (the usual outcome: the group is needed) much faster than a check under
  // assumptions. A trial that runs past trial_ms keeps its group (the core
  // stays valid, only possibly larger); core_minimized says whether every
  // trial was decided.
  const auto t0 = Clock::now();
  auto left = [&] { return budget_ms - MsSince(t0); };
  z3::solver solver(ctx_, "QF_LRA");
  for (const z3::expr& e : definitions_) solver.add(e);
  z3::expr_vector all(ctx_);
  std::vector<std::string> seen;
  for (const Tracked& t : tracked_) {
    if (!t.active) continue;
    z3::expr lit = ctx_.bool_const(t.name.c_str());
    solver.add(z3::implies(lit, t.e));
    if (seen.empty() || seen.back() != t.name) {  // a name's constraints are adjacent
      all.push_back(lit);
      seen.push_back(t.name);
    }
  }
  Configure(solver, left());
  if (solver.check(all) != z3::unsat) {
    // Only a timeout lands here (the same formula was unsat a moment ago):
    // the answer stands, without a core.
    out.stats.core_ms = MsSince(t0);
    return;
  }
  std::vector<std::string> core;
  const z3::expr_vector lits = solver.unsat_core();
  for (unsigned i = 0; i < lits.size(); ++i) {
    core.push_back(lits[static_cast<int>(i)].decl().name().str());
  }
  std::sort(core.begin(), core.end());
  std::vector<std::string> groups;
  for (const std::string& n : core) {
    if (std::find(groups.begin(), groups.end(), GroupOf(n)) == groups.end()) {
      groups.push_back(GroupOf(n));
    }
  }
  bool minimized = true;
  for (const std::string& g : groups) {
    if (left() < 1) {
      minimized = false;
      break;
    }
    z3::solver trial(ctx_, "QF_LRA");
    Configure(trial, std::min(left(), trial_ms));
    for (const z3::expr& e : definitions_) trial.add(e);
    for (const Tracked& t : tracked_) {
      if (t.active && GroupOf(t.name) != g &&
          std::binary_search(core.begin(), core.end(), t.name)) {
        trial.add(t.e);
      }
    }
    const z3::check_result r = trial.check();
    if (r == z3::unsat) {
      core.erase(std::remove_if(core.begin(), core.end(),
                                [&](const std::string& n) { return GroupOf(n) == g; }),
                 core.end());
    } else if (r == z3::unknown) {
      minimized = false;
    }
  }
  out.core = std::move(core);
  out.core_minimized = minimized;
  out.stats.core_ms = MsSince(t0);
}

absl::StatusOr<SolveOutcome> Encoder::Run(Question q) {
  SolveOutcome out;
  out.static_facts = static_facts_;
  out.stats.encode_ms = encode_ms_;
  out.stats.encoded_updates = static_cast<int>(slots_.size());
  out.stats.tracked_constraints = static_cast<int>(tracked_.size());
  const double budget = cfg_.solver_timeout_ms;

  // Lazy constraints (single-server spacing) join only when a model breaks
  // them: most pairs never come within 1/C of each other, and the per-pair
  // disjunctions dominate the search otherwise. Sound both ways: unsat
  // without some constraints is unsat with them, and a model is returned
  // only once it satisfies every constraint. Rounds after the first reuse
  // the solver (incremental, usually fastest); a round that takes much
  // longer than the first is abandoned for a fresh solver over the same
  // constraints, which Z3 preprocesses again.
  auto fresh = [&] {
    auto s = std::make_unique<z3::solver>(ctx_, "QF_LRA");
    for (const z3::expr& e : definitions_) s->add(e);
    for (const Tracked& t : tracked_) {
      if (t.active) s->add(t.e);
    }
    if (q == Question::kViolation) s->add(violation_);
    return s;
  };
  std::unique_ptr<z3::solver> solver = fresh();
  const auto t0 = Clock::now();
  auto left = [&] { return budget > 0 ? budget - MsSince(t0) : 0.0; };
  z3::check_result r = z3::unknown;
  std::string why;
  double first_ms = 0;
  bool incremental = true;
  for (;;) {
    const double round_cap = std::max(200.0, 4 * first_ms);
    const bool capped = out.stats.rounds > 0 && incremental && (budget <= 0 || round_cap < left());
    if (budget > 0 && left() < 1) {
      r = z3::unknown;
      why = "timeout";
      break;
    }
    Configure(*solver, capped ? round_cap : left());
    const auto tr = Clock::now();
    r = solver->check();
    if (out.stats.rounds++ == 0) first_ms = MsSince(tr);
    if (r == z3::unknown && capped) {
      incremental = false;
      solver = fresh();
      continue;
    }
    if (r == z3::unknown) why = solver->reason_unknown();
    if (r != z3::sat) break;
    const z3::model m = solver->get_model();
    int added = 0;
    for (Tracked& t : tracked_) {
      if (t.active || m.eval(t.e, true).is_true()) continue;
      t.active = true;
      if (incremental) solver->add(t.e);
      ++added;
    }
    if (added == 0) {
      out.schedule = Extract(m);
      break;
    }
    if (!incremental) solver = fresh();
  }
  out.stats.solve_ms = MsSince(t0);
  if (r == z3::unknown) {
    const std::string msg = absl::StrFormat("solver gave up after %.0f ms: %s (%d updates)",
                                            out.stats.solve_ms, why, out.stats.encoded_updates);
    if (absl::StrContains(why, "timeout") || absl::StrContains(why, "canceled")) {
      return absl::DeadlineExceededError(
          absl::StrCat(msg, "; raise solver_timeout_ms or lower the horizon"));
    }
    return absl::UnknownError(msg);
  }
  out.sat = r == z3::sat;
  if (!out.sat && q == Question::kFair) {
    // The core gets 3 s or 3x the answer's time, whichever is more, within
    // what is left of the question's budget; each shrinking trial 200 ms or
    // the answer's time.
    double core_budget = std::max(3000.0, 3 * out.stats.solve_ms);
    if (budget > 0) core_budget = std::max(1.0, std::min(core_budget, budget - out.stats.solve_ms));
    FindCore(core_budget, std::max(200.0, out.stats.solve_ms), out);
  }
  return out;
}

}  // namespace

double SaturationDepartures(const FairnessConfig& cfg) {
  return std::floor(cfg.aom_threshold_ms * cfg.capacity_updates_per_ms + 1e-9);
}

absl::StatusOr<SolveOutcome> Solve(const FairnessConfig& cfg, Question q) {
  try {
    z3::context ctx;
    Encoder enc(cfg, ctx);
    enc.Build(q);
    return enc.Run(q);
  } catch (const z3::exception& e) {
    return absl::InternalError(absl::StrCat("z3: ", e.msg()));
  }
}

}  // namespace inca::olafverify::internal
