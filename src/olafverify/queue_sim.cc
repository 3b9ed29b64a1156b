// The reference OlafQueue (queue_sim.h): each step mirrors a branch of
// OlafQueue::DoEnqueue / DoDequeue / DoExpire in src/olaf/update_queue.cc.
#include "olafverify/queue_sim.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <numeric>

namespace inca::olafverify::internal {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct ClusterState {
  std::deque<int> entries;  // own entries, FIFO (queued_at order)
  bool offered = false;
  double last_offer = 0;
  bool delivered = false;
  double freshest = 0;  // max gen_time dequeued
};

class Sim {
 public:
  Sim(const SimParams& p, const std::vector<SimArrival>& a, size_t clusters)
      : p_(p), a_(a), out_(a.size()), cl_(clusters) {
    for (size_t i = 0; i < a.size(); ++i) out_[i].gen_ms = a[i].a_ms;
  }
  std::vector<SimResult> Run();

 private:
  bool Less(double x, double y) const { return x < y - p_.tie_ms; }
  bool LessEq(double x, double y) const { return x <= y + p_.tie_ms; }
  int Occupancy() const {
    int n = 0;
    for (const ClusterState& c : cl_) n += static_cast<int>(c.entries.size());
    return n;
  }
  // DoExpire: entries with queued_at + ΔT <= now.
  void Expire(double now) {
    for (ClusterState& c : cl_) {
      while (!c.entries.empty() &&
             LessEq(a_[static_cast<size_t>(c.entries.front())].e_ms + p_.delta_t_ms, now)) {
        out_[static_cast<size_t>(c.entries.front())].fate = UpdateFate::kEvicted;
        c.entries.pop_front();
      }
    }
  }
  // ActiveClusters: an entry queued or an offer within ΔT (strictly).
  int Active(double now) const {
    int n = 0;
    for (const ClusterState& c : cl_) {
      n += !c.entries.empty() || (c.offered && Less(now - p_.delta_t_ms, c.last_offer));
    }
    return n;
  }
  // Freshest delivered gen_time as a sort key (never delivered: lowest).
  double Key(const ClusterState& c) const { return c.delivered ? c.freshest : -kInf; }
  void Enqueue(size_t i, double now);
  bool Dequeue(double now);

  const SimParams& p_;
  const std::vector<SimArrival>& a_;
  std::vector<SimResult> out_;
  std::vector<ClusterState> cl_;
};

void Sim::Enqueue(size_t i, double now) {
  Expire(now);
  const size_t c = static_cast<size_t>(a_[i].cluster);
  ClusterState& cs = cl_[c];
  cs.offered = true;
  cs.last_offer = now;
  out_[i].queued = Occupancy();
  const int cap = std::max(1, p_.depth / std::max(1, Active(now)));
  const int own = static_cast<int>(cs.entries.size());
  const bool full = Occupancy() >= p_.depth;
  const bool room = !full && (own == 0 || own < cap);
  if (!room && own > 0) {
    // Merge into the oldest entry: it keeps its queued time, gen = max.
    const int head = cs.entries.front();
    SimResult& h = out_[static_cast<size_t>(head)];
    h.gen_ms = std::max(h.gen_ms, a_[i].a_ms);
    out_[i].fate = UpdateFate::kMerged;
    out_[i].merged_into = head;
    return;
  }
  if (!room) {
    // Displace the head of the cluster with most entries; ties: the
    // freshest delivery (smallest AoM), then the lowest index.
    size_t victim = cl_.size();
    for (size_t v = 0; v < cl_.size(); ++v) {
      if (cl_[v].entries.empty()) continue;
      if (victim == cl_.size()) {
        victim = v;
        continue;
      }
      const size_t ov = cl_[v].entries.size(), ob = cl_[victim].entries.size();
      const double fv = Key(cl_[v]), fb = Key(cl_[victim]);
      if (ov != ob) {
        if (ov > ob) victim = v;
      } else if (Less(fb, fv)) {
        victim = v;
      }  // equal keys: the lower index, visited first, stays
    }
    out_[static_cast<size_t>(cl_[victim].entries.front())].fate = UpdateFate::kDisplaced;
    cl_[victim].entries.pop_front();
  }
  cs.entries.push_back(static_cast<int>(i));
}

bool Sim::Dequeue(double now) {
  Expire(now);
  size_t best = cl_.size();
  for (size_t v = 0; v < cl_.size(); ++v) {
    if (cl_[v].entries.empty()) continue;
    if (best == cl_.size() || Less(Key(cl_[v]), Key(cl_[best]))) best = v;
  }
  if (best == cl_.size()) return false;
  ClusterState& cs = cl_[best];
  const size_t e = static_cast<size_t>(cs.entries.front());
  cs.entries.pop_front();
  out_[e].fate = UpdateFate::kDelivered;
  out_[e].dequeued_ms = now;
  if (!cs.delivered || out_[e].gen_ms > cs.freshest) cs.freshest = out_[e].gen_ms;
  cs.delivered = true;
  return true;
}

std::vector<SimResult> Sim::Run() {
  std::vector<size_t> order(a_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    if (Less(a_[x].e_ms, a_[y].e_ms)) return true;
    if (Less(a_[y].e_ms, a_[x].e_ms)) return false;
    if (a_[x].cluster != a_[y].cluster) return a_[x].cluster < a_[y].cluster;
    return a_[x].n < a_[y].n;
  });
  double link_free = -kInf, last = -kInf;
  size_t k = 0;
  for (;;) {
    const bool queued = Occupancy() > 0;
    if (k == order.size() && !queued) break;
    const double t_deq = std::max(link_free, last);
    if (k < order.size() && (!queued || LessEq(a_[order[k]].e_ms, t_deq))) {
      // Arrivals first, all of one instant.
      const double t = a_[order[k]].e_ms;
      while (k < order.size() && LessEq(a_[order[k]].e_ms, t)) Enqueue(order[k++], t);
      last = t;
      continue;
    }
    last = t_deq;
    if (Dequeue(t_deq)) link_free = t_deq + p_.service_ms;
  }
  return std::move(out_);
}

}  // namespace

std::vector<SimResult> SimulateOlafQueue(const SimParams& p,
                                         const std::vector<SimArrival>& arrivals) {
  size_t clusters = 0;
  for (const SimArrival& a : arrivals) {
    clusters = std::max(clusters, static_cast<size_t>(a.cluster) + 1);
  }
  return Sim(p, arrivals, clusters).Run();
}

}  // namespace inca::olafverify::internal
