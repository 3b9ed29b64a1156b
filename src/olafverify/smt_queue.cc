// The OlafQueue rules in the Z3 encoding (docs/olaf-verify.md, "The
// queue"). Each family mirrors a branch of src/olaf/update_queue.cc:
//
//   cap(c,n)             DoEnqueue's room test: not full and the cluster
//                        below max(1, floor(depth / N_active)) or empty;
//                        otherwise merged (an entry to merge with) or queued
//                        by displacement (none)
//   merge(c,n)           merged into the cluster's oldest queued entry
//   displace(c,n)        the victim: head of the cluster with most entries,
//                        ties the freshest delivery, then the lowest index
//   service / threshold  S >= A; dequeued before queued_at + ΔT (DoExpire)
//   fifo(c,n), order(c,n) DoDequeue: FIFO within a cluster; across clusters
//                        the oldest freshest delivery (never first), ties
//                        the lowest index
//   work_conserving(c,n) the link dequeues whenever it is free and an entry
//                        waits: at an arrival to an idle link, and at the end
//                        of every service
//   single_server(c,n)   deliveries at least 1/C apart (lazy for kFair)
//
// Conventions shared with queue_sim.cc: arrivals at one instant come before
// a dequeue at that instant, in cluster order; S = D - 1/C.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "olafverify/smt_encoder.h"

namespace inca::olafverify::internal {

// The freshest-delivery key of a cluster that never delivered: below every
// generation time (which are >= 0).
constexpr double kNeverKey = -1e9;

void Encoder::DeclareSlot(int i) {
  const std::string nm = Name(i);
  a_.push_back(ctx_.real_const(absl::StrCat("A(", nm, ")").c_str()));
  e_.push_back(cfg_.max_transit_ms > 0 ? ctx_.real_const(absl::StrCat("E(", nm, ")").c_str())
                                       : a_.back());
  d_.push_back(ctx_.real_const(absl::StrCat("D(", nm, ")").c_str()));
  // Constants where static analysis rules the choice out (Analyse).
  const Slot& si = slot(i);
  own_.push_back(si.may_merge ? ctx_.bool_const(absl::StrCat("own(", nm, ")").c_str())
                              : ctx_.bool_val(true));
  dis_.push_back(si.may_be_displaced ? ctx_.bool_const(absl::StrCat("displaced(", nm, ")").c_str())
                                     : ctx_.bool_val(false));
  if (si.may_evict) {
    del_.push_back(ctx_.bool_const(absl::StrCat("delivered(", nm, ")").c_str()));
    Define(Implies(del_.back(), own_.back()));
    Define(Implies(dis_.back(), And(own_.back(), Not(del_.back()))));
  } else {
    del_.push_back(And(own_.back(), Not(dis_.back())));
    Define(Implies(dis_.back(), own_.back()));
  }
  into_.emplace_back();
  merges_.emplace_back();
  dby_.emplace_back();
  victim_.emplace_back();
  res_.emplace_back();
}

// Merge and displacement links between partners: a merge goes to an earlier
// entry of the same cluster, a displacement to another cluster's entry.
void Encoder::DeclareLinks(int i) {
  const size_t ui = static_cast<size_t>(i);
  for (int j : partners_[ui]) {
    const size_t uj = static_cast<size_t>(j);
    if (slot(j).cluster == slot(i).cluster) {
      if (slot(j).n > slot(i).n || !slot(i).may_merge) continue;
      z3::expr b = ctx_.bool_const(absl::StrCat("into(", Name(i), "->", slot(j).n, ")").c_str());
      into_[ui].push_back({j, b});
      merges_[uj].push_back({i, b});
    } else if (slot(i).may_displace) {
      z3::expr b = ctx_.bool_const(absl::StrCat("displaces(", Name(i), "->", Name(j), ")").c_str());
      dby_[ui].push_back({j, b});
      victim_[uj].push_back({i, b});
    }
  }
}

// Per entry: merged (not own) iff merged into one entry; displaced iff some
// arrival displaced it; its gen_time when it leaves (the newest update
// merged into it: generation times grow within a cluster); when it leaves
// the queue; the freshest gen_time delivered from the cluster before it.
void Encoder::DefineEntries(size_t c) {
  const std::vector<int>& sl = slots_of_cluster_[c];
  // Without merges an entry's gen_time is its own, growing with n, so the
  // freshest delivery is the last one.
  bool merges = false;
  for (int i : sl) merges = merges || slot(i).may_merge;
  z3::expr key = Real(kNeverKey);
  // The same for the peaks, starting from the update the PS holds before
  // the horizon (no comparison with kNeverKey needed).
  z3::expr fresh = A(sl[0]) - Real(cfg_.clusters[c].update_period_ms);
  for (int i : sl) {
    const size_t ui = static_cast<size_t>(i);
    std::vector<z3::expr> into, by;
    for (const Link& l : into_[ui]) into.push_back(l.second);
    for (const Link& l : victim_[ui]) by.push_back(l.second);
    Define(Not(own_[ui]) == Or(into));
    if (into.size() > 1) Define(AtMost(into, 1));
    if (!dis_[ui].is_false()) Define(dis_[ui] == Or(by));
    if (by.size() > 1) Define(AtMost(by, 1));
    z3::expr gen = A(i);
    for (const Link& l : merges_[ui]) gen = Ite(l.second, A(l.first), gen);
    if (merges_[ui].empty()) {
      g_.push_back(gen);
    } else {
      g_.push_back(ctx_.real_const(absl::StrCat("G(", Name(i), ")").c_str()));
      Define(g_.back() == gen);
    }
    z3::expr x = ctx_.real_val(0);
    for (const Link& l : victim_[ui]) x = x + Ite(l.second, E(l.first), ctx_.real_val(0));
    leave_.push_back(Ite(del_[ui], S(i), Ite(dis_[ui], x, E(i) + dt_)));
    key_.push_back(key);
    fresh_.push_back(fresh);
    if (merges) {
      z3::expr next = ctx_.real_const(absl::StrCat("K(", Name(i), ")").c_str());
      Define(next == Ite(And(del_[ui], g_.back() > key), g_.back(), key));
      key = next;
      z3::expr f = ctx_.real_const(absl::StrCat("F(", Name(i), ")").c_str());
      Define(f == Ite(And(del_[ui], g_.back() > fresh), g_.back(), fresh));
      fresh = f;
    } else if (del_[ui].is_true()) {
      key = fresh = g_.back();
    } else {
      z3::expr next = ctx_.real_const(absl::StrCat("K(", Name(i), ")").c_str());
      Define(next == Ite(del_[ui], g_.back(), key));
      key = next;
      z3::expr f = ctx_.real_const(absl::StrCat("F(", Name(i), ")").c_str());
      Define(f == Ite(del_[ui], g_.back(), fresh));
      fresh = f;
    }
  }
}

z3::expr Encoder::WaitingAt(int k, const z3::expr& t) const {
  const size_t uk = static_cast<size_t>(k);
  return And(own_[uk], E(k) <= t && t < leave_[uk]);
}

z3::expr Encoder::Resident(int j, int i) const {
  for (const Link& l : res_[static_cast<size_t>(i)]) {
    if (l.first == j) return l.second;
  }
  return ctx_.bool_val(false);
}

z3::expr Encoder::Head(int k, int i) const {
  z3::expr h = Resident(k, i);
  for (const Link& l : res_[static_cast<size_t>(i)]) {
    if (slot(l.first).cluster == slot(k).cluster && slot(l.first).n < slot(k).n) {
      h = And(h, !l.second);
    }
  }
  return h;
}

// res(j, i): j holds an entry when i arrives (after DoExpire at E(i)).
void Encoder::DefineResidency(int i) {
  const size_t ui = static_cast<size_t>(i);
  std::vector<z3::expr> all;
  for (int j : partners_[ui]) {
    const size_t uj = static_cast<size_t>(j);
    if (slot(j).cluster == slot(i).cluster && slot(j).n > slot(i).n) continue;
    std::vector<z3::expr> gone;  // displaced by an arrival before i
    for (const Link& l : victim_[uj]) {
      if (l.first != i) gone.push_back(And(l.second, ArrivedBefore(l.first, i)));
    }
    const z3::expr stay =
        Ite(del_[uj], E(i) <= S(j), Ite(dis_[uj], Not(Or(gone)), E(i) < E(j) + dt_));
    z3::expr r = ctx_.bool_const(absl::StrCat("queued(", Name(j), "@", Name(i), ")").c_str());
    Define(r == And(And(own_[uj], ArrivedBefore(j, i)), stay));
    res_[ui].push_back({j, r});
    all.push_back(r);
  }
  q_.push_back(Count(all));
}

void Encoder::RequireArrival(int i) {
  const size_t ui = static_cast<size_t>(i);
  if (!slot(i).may_merge && !slot(i).may_displace) return;  // room for sure (Analyse)
  const int c = slot(i).cluster;
  const std::string nm = Name(i);
  std::vector<z3::expr> own, all;
  for (const Link& l : res_[ui]) {
    all.push_back(l.second);
    if (slot(l.first).cluster == c) own.push_back(l.second);
  }
  // N_active - 1: other clusters with an offer within ΔT before (an entry
  // queued implies one).
  std::vector<z3::expr> active;
  for (size_t d = 0; d < cfg_.clusters.size(); ++d) {
    if (static_cast<int>(d) == c) continue;
    std::vector<z3::expr> offers;
    for (int j : offers_[ui]) {
      if (slot(j).cluster == static_cast<int>(d)) {
        offers.push_back(And(ArrivedBefore(j, i), E(j) > E(i) - dt_));
      }
    }
    active.push_back(Or(offers));
  }
  std::vector<z3::expr> cap_ok;
  for (int k = 1; k <= static_cast<int>(cfg_.clusters.size()); ++k) {
    const int cap = std::max(1, cfg_.queue_size / k);
    cap_ok.push_back(And(And(AtLeast(active, k - 1), AtMost(active, k - 1)), AtMost(own, cap - 1)));
  }
  z3::expr room = ctx_.bool_const(absl::StrCat("room(", nm, ")").c_str());
  Define(room == (!AtLeast(all, cfg_.queue_size) && Or(cap_ok)));
  const z3::expr has = Or(own);
  Require(absl::StrCat("cap(", nm, ")"), own_[ui] == (room || Not(has)));
  for (const Link& l : into_[ui]) {
    Require(absl::StrCat("merge(", nm, ")"), Implies(l.second, Head(l.first, i)));
  }
  std::vector<z3::expr> by;
  for (const Link& l : dby_[ui]) by.push_back(l.second);
  Require(absl::StrCat("displace(", nm, ")"), And(own_[ui], !room) == Or(by));
  for (const Link& l : dby_[ui]) RequireVictim(i, l.second, l.first);
}

// Displacement by i of v (cluster e): v heads e, and e holds the most
// entries; ties: e's freshest delivery is the freshest, then e's index is
// the lowest.
void Encoder::RequireVictim(int i, const z3::expr& link, int v) {
  const size_t ui = static_cast<size_t>(i);
  const int e = slot(v).cluster;
  const std::string name = absl::StrCat("displace(", Name(i), ")");
  Require(name, Implies(link, Head(v, i)));
  auto occupancy = [&](int cl) {
    std::vector<z3::expr> in;
    for (const Link& l : res_[ui]) {
      if (slot(l.first).cluster == cl) in.push_back(l.second);
    }
    return Count(in);
  };
  const z3::expr occ_e = occupancy(e);
  const z3::expr& key_v = key_[static_cast<size_t>(v)];
  for (const Link& l : res_[ui]) {
    const int d = slot(l.first).cluster;
    if (d == e || d == slot(i).cluster) continue;
    const z3::expr occ_d = occupancy(d);
    const z3::expr& key_k = key_[static_cast<size_t>(l.first)];
    const z3::expr tie = e < d ? key_v >= key_k : key_v > key_k;
    Require(name, Implies(And(link, Head(l.first, i)), occ_e > occ_d || (occ_e == occ_d && tie)));
  }
}

void Encoder::RequireDeparture(int i) {
  const size_t ui = static_cast<size_t>(i);
  const std::string nm = Name(i);
  const int c = slot(i).cluster;
  const z3::expr& deli = del_[ui];
  const z3::expr si = S(i);
  Require(absl::StrCat("service(", nm, ")"), Implies(deli, si >= E(i)));
  Require(absl::StrCat("threshold(", nm, ")"), Implies(deli, si - E(i) < dt_));
  // Implied by the rules (BusyPeriodBound); stated to help the solver.
  if (busy_ms_ < cfg_.aom_threshold_ms) Define(Implies(deli, si - E(i) <= Real(busy_ms_)));
  std::vector<z3::expr> busy, start_a, start_d, waiting_d;
  start_a.push_back(And(deli, si == E(i)));
  for (int j : partners_[ui]) {
    const size_t uj = static_cast<size_t>(j);
    const z3::expr sj = S(j);
    if (slot(j).cluster == c) {
      if (slot(j).n < slot(i).n) {
        Require(absl::StrCat("fifo(", nm, ")"), Implies(deli, Not(WaitingAt(j, si))));
      }
    } else {
      const z3::expr& ki = key_[ui];
      const z3::expr& kj = key_[uj];
      const z3::expr first = c < slot(j).cluster ? ki <= kj : ki < kj;
      Require(absl::StrCat("order(", nm, ")"), Implies(And(deli, WaitingAt(j, si)), first));
    }
    busy.push_back(And(del_[uj], sj < E(i) && E(i) < d_[uj]));
    start_a.push_back(And(del_[uj], sj == E(i)));
    start_d.push_back(And(del_[uj], sj == d_[ui]));
    waiting_d.push_back(WaitingAt(j, d_[ui]));
  }
  const std::string wc = absl::StrCat("work_conserving(", nm, ")");
  busy.insert(busy.end(), start_a.begin(), start_a.end());
  Require(wc, Implies(own_[ui], Or(busy)));
  Require(wc, Implies(And(deli, Or(waiting_d)), Or(start_d)));

  // The paper's D(n) >= A(n) + Q(n)/C with Q(n) the updates delivered
  // while n waits; implied by single_server + service, so optional.
  if (cfg_.assert_queue_dynamics && !partners_[ui].empty()) {
    std::vector<z3::expr> ahead;
    for (int j : partners_[ui]) {
      const size_t uj = static_cast<size_t>(j);
      ahead.push_back(And(del_[uj], d_[uj] > E(i) && d_[uj] < d_[ui]));
    }
    Require(absl::StrCat("queue_dynamics(", nm, ")"),
            Implies(deli, d_[ui] >= E(i) + Count(ahead) * service_));
  }
}

// One link: any two deliveries at least 1/C apart; within a cluster in
// generation order. Named after the earlier slot; lazy for kFair (docs,
// "Performance": measured faster there, slower for kViolation).
void Encoder::RequireLink(int i) {
  const size_t ui = static_cast<size_t>(i);
  const std::string server = absl::StrCat("single_server(", Name(i), ")");
  for (int j : partners_[ui]) {
    if (j < i) continue;
    const size_t uj = static_cast<size_t>(j);
    const z3::expr both = And(del_[ui], del_[uj]);
    const z3::expr& di = d_[ui];
    const z3::expr& dj = d_[uj];
    if (slot(j).cluster == slot(i).cluster) {
      Require(server, Implies(both, dj - di >= service_), lazy_server_);
    } else {
      Require(server, Implies(both, dj - di >= service_ || di - dj >= service_), lazy_server_);
    }
  }
}

}  // namespace inca::olafverify::internal
