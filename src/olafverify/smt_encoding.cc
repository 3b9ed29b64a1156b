// The Z3 encoding of the OLAF fairness model: linear real arithmetic plus
// Booleans (QF_LRA with ite and pseudo-Boolean cardinality). Every
// constraint is linear in the A and D variables. docs/olaf-verify.md has the
// model; the constraint families carry the names seen in unsat cores. This
// file holds the slots, generation timing, peaks, fairness and the solving;
// the OlafQueue rules are in smt_queue.cc.
//
// Static bounds below round towards "more updates interact", so an
// approximation can only keep a constraint that was not needed, never drop
// one that was.
//
// Solving strategy (docs, "Performance"): the question is solved with every
// constraint asserted plainly (fast; single-server spacing lazily); only an
// unsat answer to kFair is solved again with each constraint behind a named
// assumption literal, and the core is shrunk group by group within a time
// budget.
#include "olafverify/smt_encoding.h"

#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "olafverify/smt_encoder.h"

namespace inca::olafverify::internal {
namespace {

using Clock = std::chrono::steady_clock;

// Margin for the static bounds: constants reach Z3 as 9-decimal rationals,
// so doubles may be off by ~1e-9; the bounds lean conservative by more.
constexpr double kSlackMs = 1e-6;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The family(cluster) part of "family(cluster,n=K)", or the whole name.
std::string GroupOf(const std::string& name) {
  const size_t at = name.rfind(",n=");
  return at == std::string::npos ? name : name.substr(0, at);
}

}  // namespace

z3::expr Encoder::Or(const std::vector<z3::expr>& v) const {
  z3::expr_vector terms(ctx_);
  for (const z3::expr& e : v) {
    if (e.is_true()) return ctx_.bool_val(true);
    if (!e.is_false()) terms.push_back(e);
  }
  if (terms.empty()) return ctx_.bool_val(false);
  return terms.size() == 1 ? terms[0] : z3::mk_or(terms);
}

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

bool Encoder::Interact(int i, int j, double reach) const {
  // Two updates generated more than `reach` apart never constrain each
  // other (exact pruning, docs). Within a cluster the distance is known:
  // |n - m| intervals of at least p - j; across clusters, the static bounds.
  const Slot& x = slot(i);
  const Slot& y = slot(j);
  reach += kSlackMs;
  if (x.cluster == y.cluster) return std::abs(x.n - y.n) * MinInterval(x.cluster) <= reach;
  return y.a_lo <= x.a_hi + reach && x.a_lo <= y.a_hi + reach;
}

double BusyPeriodBound(const FairnessConfig& cfg) {
  // A busy period of the link that starts at t0 serves only updates that
  // arrive in [t0, t0 + L] (the queue was empty before, work conservation),
  // at most floor(L / m_c) + 1 per cluster (m_c its minimum interval), each
  // taking 1/C: L <= (K + L × sum 1/m_c) / C. With load rho = sum 1/(m_c C)
  // < 1: L <= K / (C (1 - rho)). Infinite at rho >= 1.
  double rate = 0;
  for (const ClusterSpec& c : cfg.clusters) rate += 1.0 / (c.update_period_ms - c.jitter_ms);
  const double rho = rate / cfg.capacity_updates_per_ms;
  if (rho >= 1) return std::numeric_limits<double>::infinity();
  // Transit (FIFO within a cluster) lets a cluster's updates that were
  // generated up to max_transit earlier arrive in the busy period too:
  // floor((L + transit) / m_c) + 1 per cluster.
  return (static_cast<double>(cfg.clusters.size()) + cfg.max_transit_ms * rate) /
         (cfg.capacity_updates_per_ms * (1 - rho));
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
  // An update waits at most a busy period (and less than ΔT): everything it
  // does happens within that of its arrival, its delivery 1/C later.
  const double busy = BusyPeriodBound(cfg_);
  // Rounded up so that the stated bound stays implied.
  busy_ms_ = busy * (1 + 1e-9) + kSlackMs;
  const double wait = std::min(busy, cfg_.aom_threshold_ms);
  const bool may_evict = busy >= cfg_.aom_threshold_ms;
  const int total = static_cast<int>(slots_.size());
  partners_.resize(static_cast<size_t>(total));
  offers_.resize(static_cast<size_t>(total));
  for (int i = 0; i < total; ++i) {
    for (int j = 0; j < total; ++j) {
      if (i == j) continue;
      if (Interact(i, j, cfg_.max_transit_ms + wait + service_ms_)) {
        partners_[static_cast<size_t>(i)].push_back(j);
      }
      if (slot(j).cluster != slot(i).cluster &&
          Interact(i, j, cfg_.max_transit_ms + cfg_.aom_threshold_ms)) {
        offers_[static_cast<size_t>(i)].push_back(j);
      }
    }
  }
  // Room is short only with `depth` entries queued or the cluster at its
  // cap (at least depth / K); displacement only with the queue full.
  const int cap_min = std::max(1, cfg_.queue_size / static_cast<int>(k));
  std::vector<int> short_room(k, 0);
  for (int i = 0; i < total; ++i) {
    Slot& si = slots_[static_cast<size_t>(i)];
    si.may_evict = may_evict;
    int all = 0, own = 0;
    for (int j : partners_[static_cast<size_t>(i)]) {
      if (slot(j).cluster != si.cluster) ++all;
      if (slot(j).cluster == si.cluster && slot(j).n < si.n) ++all, ++own;
    }
    si.may_displace = all >= cfg_.queue_size;
    si.may_merge = own > 0 && (all >= cfg_.queue_size || own >= cap_min);
    short_room[static_cast<size_t>(si.cluster)] += si.may_displace || si.may_merge;
  }
  for (int i = 0; i < total; ++i) {
    for (int j : partners_[static_cast<size_t>(i)]) {
      if (slot(j).cluster != slot(i).cluster && slot(j).may_displace) {
        slots_[static_cast<size_t>(i)].may_be_displaced = true;
      }
    }
  }
  for (size_t c = 0; c < k; ++c) {
    if (short_room[c] == 0) {
      static_facts_.push_back(absl::StrFormat(
          "no merge or displacement for %s: too few entries can be queued when one arrives "
          "(cap >= %d, depth %d)",
          cfg_.clusters[c].name, cap_min, cfg_.queue_size));
    }
  }
  if (!may_evict) {
    static_facts_.push_back(
        absl::StrFormat("no eviction: a busy period of the link lasts at most %.4g ms < ΔT %g ms",
                        busy, cfg_.aom_threshold_ms));
  }
}

z3::expr Encoder::ArrivedBefore(int j, int i) const {
  if (slot(j).cluster == slot(i).cluster) return ctx_.bool_val(slot(j).n < slot(i).n);
  // Ties between clusters break by cluster index: a strict total order.
  const z3::expr& aj = E(j);
  const z3::expr& ai = E(i);
  return slot(j).cluster < slot(i).cluster ? aj <= ai : aj < ai;
}

void Encoder::Build(Question q) {
  const auto t0 = Clock::now();
  service_ms_ = 1.0 / cfg_.capacity_updates_per_ms;
  service_ = Real(service_ms_);
  lazy_server_ = q == Question::kFair;
  dt_ = Real(cfg_.aom_threshold_ms);
  Analyse();
  const int total = static_cast<int>(slots_.size());
  const size_t k = cfg_.clusters.size();
  for (int i = 0; i < total; ++i) DeclareSlot(i);
  for (int i = 0; i < total; ++i) DeclareLinks(i);
  for (size_t c = 0; c < k; ++c) DefineEntries(c);
  for (size_t c = 0; c < k; ++c) RequireTiming(c);
  for (int i = 0; i < total; ++i) DefineResidency(i);
  for (int i = 0; i < total; ++i) RequireArrival(i);
  for (int i = 0; i < total; ++i) RequireDeparture(i);
  for (int i = 0; i < total; ++i) RequireLink(i);
  for (size_t c = 0; c < k; ++c) DefinePeaks(c);
  RequireFairness(q);
  encode_ms_ = MsSince(t0);
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
  // Transit: E in [A, A + max_transit], FIFO within the cluster.
  if (cfg_.max_transit_ms <= 0) return;
  for (size_t n = 0; n < sl.size(); ++n) {
    const int i = sl[n];
    z3::expr t = E(i) >= A(i) && E(i) <= A(i) + Real(cfg_.max_transit_ms);
    if (n > 0) t = t && E(i) >= E(sl[n - 1]);
    Require(absl::StrCat("transit(", Name(i), ")"), t);
  }
}

// Peak AoM per update (UpdateRecord::peak_aom_ms): R - F, F the freshest
// gen_time delivered from the cluster's earlier entries (A(0) - p before the
// horizon), R the delivery of the update's own entry or of the entry it was
// merged into, or A + ΔT when that entry never left the queue for the PS.
void Encoder::DefinePeaks(size_t c) {
  const ClusterSpec& cs = cfg_.clusters[c];
  const std::vector<int>& sl = slots_of_cluster_[c];
  auto fresh = [&](int i) { return fresh_[static_cast<size_t>(i)]; };
  z3::expr_vector peaks(ctx_);
  for (int i : sl) {
    const size_t ui = static_cast<size_t>(i);
    const z3::expr lost = A(i) + dt_ - fresh(i);
    z3::expr merged = ctx_.real_val(0);
    for (const Link& l : into_[ui]) {
      const size_t h = static_cast<size_t>(l.first);
      merged = merged + Ite(l.second, Ite(del_[h], d_[h] - fresh(l.first), lost), ctx_.real_val(0));
    }
    peak_.push_back(Ite(own_[ui], Ite(del_[ui], d_[ui] - fresh(i), lost), merged));
    peaks.push_back(peak_.back());
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
  Schedule out;
  for (size_t c = 0; c < cfg_.clusters.size(); ++c) {
    ClusterTrace t;
    t.name = cfg_.clusters[c].name;
    double sum = 0;
    for (int i : slots_of_cluster_[c]) {
      const size_t ui = static_cast<size_t>(i);
      auto is = [&](const z3::expr& e) { return m.eval(e, true).is_true(); };
      UpdateRecord r;
      r.index = slot(i).n;
      r.generated_ms = ModelValue(m, a_[ui]);
      if (cfg_.max_transit_ms > 0) r.arrived_ms = ModelValue(m, e_[ui]);
      if (!is(own_[ui])) {
        r.fate = UpdateFate::kMerged;
        for (const Link& l : into_[ui]) {
          if (is(l.second)) r.merged_into = slot(l.first).n;
        }
      } else if (is(del_[ui])) {
        r.fate = UpdateFate::kDelivered;
        r.delivered_ms = ModelValue(m, d_[ui]);
      } else {
        r.fate = is(dis_[ui]) ? UpdateFate::kDisplaced : UpdateFate::kEvicted;
      }
      r.queue_occupancy = static_cast<int>(std::lround(ModelValue(m, q_[ui])));
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
