// Differential test of the OLAF fairness model against the real queue
// (inca::olaf::OlafQueue):
//  - random small configurations, generation times drawn within the
//    model's phase/period/jitter, run through OlafQueue on a
//    work-conserving link with injected time; every observed schedule must
//    satisfy the model (CheckSchedule, the Z3-free evaluation);
//  - the Z3 model's witnesses and counterexamples replayed: their
//    generation times fed to OlafQueue must give the same fates, merge
//    targets and delivery times.
// Fixed seeds: deterministic.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <iostream>
#include <numeric>
#include <vector>

#include "inca/olaf/update_queue.h"
#include "olafverify/fairness_model.h"

namespace inca::olafverify {
namespace {

using olaf::EnqueueAction;

struct Arrival {
  int cluster = 0;
  int n = 0;
  int64_t a_ns = 0;  // generation (gen_time)
  int64_t e_ns = 0;  // arrival at the queue
};

// What the real queue did to each update (flat, in `arrivals` order).
struct Observed {
  UpdateFate fate = UpdateFate::kTailDropped;
  int64_t dequeued_ns = 0;
  int merged_into = -1;  // flat index
  int queued = 0;
  uint64_t gen_out_ns = 0;  // own entries dequeued: the header's gen_time
};

// Drives OlafQueue with the model's link: arrivals at their generation
// time (one instant's arrivals in cluster order, before a dequeue at that
// instant), a dequeue whenever the link is free and the queue is not empty,
// service `svc_ns`. Evictions are attributed from the per-cluster counters
// to the heads of a shadow FIFO, and checked against dequeued update ids.
std::vector<Observed> DriveOlafQueue(const FairnessConfig& cfg, int64_t svc_ns,
                                     const std::vector<Arrival>& arrivals) {
  olaf::QueueConfig qc;
  qc.depth = static_cast<uint32_t>(cfg.queue_size);
  qc.max_payload_bytes = 4;
  qc.delta_t_ns = std::llround(cfg.aom_threshold_ms * 1e6);
  auto made = olaf::UpdateQueue::Create(olaf::QueuePolicy::kOlaf, qc);
  EXPECT_TRUE(made.ok()) << made.status();
  olaf::UpdateQueue& q = **made;
  const size_t k = cfg.clusters.size();
  std::vector<Observed> out(arrivals.size());
  std::vector<std::deque<int>> shadow(k);
  auto id = [](size_t c) { return static_cast<uint16_t>(c + 1); };
  auto drops = [&](size_t c, dp::DropReason r) -> uint64_t {
    const olaf::QueueCounters* cc = q.cluster(id(c));
    return cc == nullptr ? 0 : cc->drops(r);
  };
  // Pops the heads that the counters say left by `r` since `before`.
  auto attribute = [&](const std::vector<uint64_t>& before, dp::DropReason r, UpdateFate f) {
    for (size_t c = 0; c < k; ++c) {
      for (uint64_t n = before[c]; n < drops(c, r); ++n) {
        EXPECT_FALSE(shadow[c].empty());
        if (shadow[c].empty()) return;
        out[static_cast<size_t>(shadow[c].front())].fate = f;
        shadow[c].pop_front();
      }
    }
  };
  auto snapshot = [&](dp::DropReason r) {
    std::vector<uint64_t> v(k);
    for (size_t c = 0; c < k; ++c) v[c] = drops(c, r);
    return v;
  };
  std::vector<size_t> order(arrivals.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const Arrival& a = arrivals[x];
    const Arrival& b = arrivals[y];
    if (a.e_ns != b.e_ns) return a.e_ns < b.e_ns;
    return a.cluster != b.cluster ? a.cluster < b.cluster : a.n < b.n;
  });
  const std::vector<uint8_t> payload(4, 0);
  std::vector<uint8_t> buf(olaf::kOlafUpdateHeaderBytes + 4);
  int64_t link_free = INT64_MIN, last = INT64_MIN;
  size_t next = 0;
  for (;;) {
    if (next == order.size() && q.empty()) break;
    const int64_t t_deq = std::max(link_free, last);
    if (next < order.size() && (q.empty() || arrivals[order[next]].e_ns <= t_deq)) {
      const int64_t t = arrivals[order[next]].e_ns;
      while (next < order.size() && arrivals[order[next]].e_ns == t) {
        const size_t i = order[next++];
        const size_t c = static_cast<size_t>(arrivals[i].cluster);
        const std::vector<uint64_t> stale = snapshot(dp::DropReason::kStaleEvicted);
        q.Expire(t);
        attribute(stale, dp::DropReason::kStaleEvicted, UpdateFate::kEvicted);
        out[i].queued = static_cast<int>(q.occupancy());
        const std::vector<uint64_t> displaced = snapshot(dp::DropReason::kDisplaced);
        olaf::UpdateHeader h;
        h.cluster_id = id(c);
        h.worker_id = 1;
        h.update_id = static_cast<uint32_t>(i + 1);
        h.gen_time_ns = static_cast<uint64_t>(arrivals[i].a_ns);
        h.payload_len = 4;
        const olaf::EnqueueResult r = q.Enqueue(h, payload, t);
        attribute(displaced, dp::DropReason::kDisplaced, UpdateFate::kDisplaced);
        if (r.action == EnqueueAction::kEnqueued) {
          shadow[c].push_back(static_cast<int>(i));
        } else if (r.action == EnqueueAction::kMerged) {
          out[i].fate = UpdateFate::kMerged;
          out[i].merged_into = shadow[c].empty() ? -2 : shadow[c].front();
        } else {
          ADD_FAILURE() << "OlafQueue dropped on arrival: " << dp::ToString(r.reason);
        }
      }
      last = t;
      continue;
    }
    last = t_deq;
    const std::vector<uint64_t> stale = snapshot(dp::DropReason::kStaleEvicted);
    olaf::UpdateHeader h;
    const size_t bytes = q.Dequeue(t_deq, buf, &h);
    attribute(stale, dp::DropReason::kStaleEvicted, UpdateFate::kEvicted);
    if (bytes == 0) continue;
    link_free = t_deq + svc_ns;
    const size_t i = h.update_id - 1;
    const size_t c = h.cluster_id - 1u;
    EXPECT_TRUE(!shadow[c].empty() && shadow[c].front() == static_cast<int>(i))
        << "dequeue is not FIFO within cluster " << c;
    if (!shadow[c].empty()) shadow[c].pop_front();
    out[i].fate = UpdateFate::kDelivered;
    out[i].dequeued_ns = t_deq;
    out[i].gen_out_ns = h.gen_time_ns;
  }
  return out;
}

// The observed schedule in the model's terms; peaks from the gen_times the
// real queue sent out (not from the reference queue).
Schedule ToSchedule(const FairnessConfig& cfg, double svc_ms, const std::vector<Arrival>& arr,
                    const std::vector<Observed>& obs) {
  Schedule s;
  size_t base = 0;
  for (size_t c = 0; c < cfg.clusters.size(); ++c) {
    ClusterTrace t;
    t.name = cfg.clusters[c].name;
    size_t n_here = 0;
    while (base + n_here < arr.size() && arr[base + n_here].cluster == static_cast<int>(c)) {
      ++n_here;
    }
    std::vector<double> fresh(n_here);
    double f = static_cast<double>(arr[base].a_ns) / 1e6 - cfg.clusters[c].update_period_ms;
    for (size_t n = 0; n < n_here; ++n) {
      fresh[n] = f;
      const Observed& o = obs[base + n];
      if (o.fate == UpdateFate::kDelivered) {
        f = std::max(f, static_cast<double>(o.gen_out_ns) / 1e6);
      }
    }
    double sum = 0;
    for (size_t n = 0; n < n_here; ++n) {
      const Observed& o = obs[base + n];
      UpdateRecord r;
      r.index = static_cast<int>(n);
      r.generated_ms = static_cast<double>(arr[base + n].a_ns) / 1e6;
      if (arr[base + n].e_ns != arr[base + n].a_ns) {
        r.arrived_ms = static_cast<double>(arr[base + n].e_ns) / 1e6;
      }
      r.fate = o.fate;
      r.queue_occupancy = o.queued;
      double peak = r.generated_ms + cfg.aom_threshold_ms - fresh[n];
      if (o.fate == UpdateFate::kDelivered) {
        r.delivered_ms = static_cast<double>(o.dequeued_ns) / 1e6 + svc_ms;
        peak = *r.delivered_ms - fresh[n];
      }
      if (o.fate == UpdateFate::kMerged) {
        r.merged_into = o.merged_into - static_cast<int>(base);
        const size_t h = static_cast<size_t>(o.merged_into);
        if (obs[h].fate == UpdateFate::kDelivered) {
          peak = static_cast<double>(obs[h].dequeued_ns) / 1e6 + svc_ms - fresh[h - base];
        }
      }
      r.peak_aom_ms = peak;
      sum += peak;
      t.updates.push_back(r);
    }
    t.avg_peak_aom_ms = sum / static_cast<double>(n_here);
    s.clusters.push_back(std::move(t));
    base += n_here;
  }
  return s;
}

// splitmix64: a fixed, portable stream per seed.
struct Rng {
  uint64_t x;
  uint64_t Next() {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t Uniform(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
};

struct RandomCase {
  FairnessConfig cfg;
  int64_t svc_ns = 0;
  std::vector<Arrival> arrivals;  // cluster-major, generation order
};

// 2-3 clusters with periods 10-60 ms and jitter up to a third of that, a
// link of 3-25 ms per update, ΔT 10-80 ms, depth 1-4, for half the seeds a
// transit of up to ΔT - 1 ms (FIFO per cluster); times on a grid of 1 ms
// (many simultaneous arrivals) or 1 us.
RandomCase MakeRandomCase(uint64_t seed) {
  Rng rng{seed};
  RandomCase rc;
  FairnessConfig& cfg = rc.cfg;
  const int k = static_cast<int>(rng.Uniform(2, 3));
  for (int c = 0; c < k; ++c) {
    const double p = static_cast<double>(rng.Uniform(10, 60));
    const double j = static_cast<double>(rng.Uniform(0, static_cast<int64_t>(p) / 3));
    cfg.clusters.push_back({"c" + std::to_string(c), p, j});
  }
  const int64_t svc_ms = rng.Uniform(3, 25);
  rc.svc_ns = svc_ms * 1'000'000;
  cfg.capacity_updates_per_ms = 1.0 / static_cast<double>(svc_ms);
  cfg.aom_threshold_ms = static_cast<double>(rng.Uniform(10, 80));
  cfg.queue_size = static_cast<int>(rng.Uniform(1, 4));
  cfg.horizon = static_cast<int>(rng.Uniform(2, 4));
  const int64_t grid = rng.Uniform(0, 1) == 0 ? 1'000'000 : 1'000;
  const int64_t dt_ms = static_cast<int64_t>(cfg.aom_threshold_ms);
  cfg.max_transit_ms =
      rng.Uniform(0, 1) == 0 ? 0.0 : static_cast<double>(rng.Uniform(1, dt_ms - 1));
  const auto transit = static_cast<int64_t>(cfg.max_transit_ms * 1e6);
  const std::vector<int> counts = UpdatesPerCluster(cfg);
  for (int c = 0; c < k; ++c) {
    const ClusterSpec& cs = cfg.clusters[static_cast<size_t>(c)];
    const auto p = static_cast<int64_t>(cs.update_period_ms * 1e6);
    const auto j = static_cast<int64_t>(cs.jitter_ms * 1e6);
    int64_t a = rng.Uniform(0, p / grid) * grid;
    int64_t e = 0;
    for (int n = 0; n < counts[static_cast<size_t>(c)]; ++n) {
      if (n > 0) a += rng.Uniform((p - j) / grid, (p + j) / grid) * grid;
      e = std::max(e, a + rng.Uniform(0, transit / grid) * grid);
      rc.arrivals.push_back({c, n, a, e});
    }
  }
  return rc;
}

TEST(OlafQueueDiffTest, RealQueueSchedulesSatisfyTheModel) {
  constexpr uint64_t kSeeds = 400;
  std::vector<int> fates(5, 0);
  int full_cases = 0, older_than_dt = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const RandomCase rc = MakeRandomCase(seed);
    ASSERT_TRUE(Validate(rc.cfg).ok()) << "seed " << seed << ": " << Validate(rc.cfg);
    const std::vector<Observed> obs = DriveOlafQueue(rc.cfg, rc.svc_ns, rc.arrivals);
    const Schedule s = ToSchedule(rc.cfg, static_cast<double>(rc.svc_ns) / 1e6, rc.arrivals, obs);
    const absl::Status ok = CheckSchedule(rc.cfg, s);
    ASSERT_TRUE(ok.ok()) << "seed " << seed << ": " << ok << "\n"
                         << FormatConfig(rc.cfg) << FormatSchedule(s);
    for (const ClusterTrace& t : s.clusters) {
      for (const UpdateRecord& r : t.updates) {
        older_than_dt +=
            r.delivered_ms && *r.delivered_ms - r.generated_ms > rc.cfg.aom_threshold_ms;
      }
    }
    bool all = true;
    for (const Observed& o : obs) {
      ++fates[static_cast<size_t>(o.fate)];
      all = all && o.fate == UpdateFate::kDelivered;
    }
    full_cases += !all;
  }
  std::cout << "fates over " << kSeeds << " configurations: delivered "
            << fates[static_cast<size_t>(UpdateFate::kDelivered)] << ", merged "
            << fates[static_cast<size_t>(UpdateFate::kMerged)] << ", evicted "
            << fates[static_cast<size_t>(UpdateFate::kEvicted)] << ", displaced "
            << fates[static_cast<size_t>(UpdateFate::kDisplaced)] << "; " << full_cases
            << " configurations with queue decisions; " << older_than_dt
            << " updates reached the PS older than ΔT (transit + queueing)\n";
  // The seed set exercises every branch of the queue.
  EXPECT_GT(fates[static_cast<size_t>(UpdateFate::kMerged)], 0);
  EXPECT_GT(fates[static_cast<size_t>(UpdateFate::kEvicted)], 0);
  EXPECT_GT(fates[static_cast<size_t>(UpdateFate::kDisplaced)], 0);
  EXPECT_EQ(fates[static_cast<size_t>(UpdateFate::kTailDropped)], 0);
  // Eviction counts from queued_at, gen_time from generation: with transit
  // an update can reach the PS older than ΔT, and the model allows it.
  EXPECT_GT(older_than_dt, 0);
}

TEST(OlafQueueDiffTest, CheckScheduleRejectsAnAlteredRealSchedule) {
  // The comparison has teeth: the first real schedule with a merge, with
  // the merged update recorded as delivered instead, is rejected.
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    const RandomCase rc = MakeRandomCase(seed);
    const std::vector<Observed> obs = DriveOlafQueue(rc.cfg, rc.svc_ns, rc.arrivals);
    Schedule s = ToSchedule(rc.cfg, static_cast<double>(rc.svc_ns) / 1e6, rc.arrivals, obs);
    for (ClusterTrace& t : s.clusters) {
      for (UpdateRecord& r : t.updates) {
        if (r.fate != UpdateFate::kMerged) continue;
        r.fate = UpdateFate::kEvicted;
        r.merged_into = -1;
        EXPECT_THAT(CheckSchedule(rc.cfg, s).message(), ::testing::HasSubstr("queue("));
        return;
      }
    }
  }
  FAIL() << "no merge in the seed set";
}

// Replays a model schedule on OlafQueue: generation times rounded to whole
// nanoseconds; fates and merge targets must match exactly, delivery times
// within 1e-5 ms (the rounding).
void ExpectReplays(const FairnessConfig& cfg, const Schedule& s, int* queue_decisions) {
  std::vector<Arrival> arr;
  for (size_t c = 0; c < s.clusters.size(); ++c) {
    for (const UpdateRecord& r : s.clusters[c].updates) {
      arr.push_back({static_cast<int>(c), r.index, std::llround(r.generated_ms * 1e6),
                     std::llround(r.arrived_ms.value_or(r.generated_ms) * 1e6)});
    }
  }
  const auto svc_ns = std::llround(1e6 / cfg.capacity_updates_per_ms);
  const std::vector<Observed> obs = DriveOlafQueue(cfg, svc_ns, arr);
  const Schedule real = ToSchedule(cfg, static_cast<double>(svc_ns) / 1e6, arr, obs);
  for (size_t c = 0; c < s.clusters.size(); ++c) {
    for (size_t n = 0; n < s.clusters[c].updates.size(); ++n) {
      const UpdateRecord& m = s.clusters[c].updates[n];
      const UpdateRecord& r = real.clusters[c].updates[n];
      const std::string at = s.clusters[c].name + ",n=" + std::to_string(n);
      EXPECT_EQ(UpdateFateName(m.fate), std::string(UpdateFateName(r.fate))) << at;
      EXPECT_EQ(m.merged_into, r.merged_into) << at;
      EXPECT_EQ(m.queue_occupancy, r.queue_occupancy) << at;
      if (m.delivered_ms && r.delivered_ms) {
        EXPECT_NEAR(*m.delivered_ms, *r.delivered_ms, 1e-5) << at;
      }
      EXPECT_NEAR(m.peak_aom_ms, r.peak_aom_ms, 1e-5) << at;
      *queue_decisions += m.fate != UpdateFate::kDelivered;
    }
  }
  if (::testing::Test::HasFailure()) {
    std::cout << "model:\n" << FormatSchedule(s) << "real OlafQueue:\n" << FormatSchedule(real);
  }
}

std::vector<FairnessConfig> ReplayConfigs() {
  std::vector<FairnessConfig> out;
  FairnessConfig a;  // the congested pair of fairness_model_test
  a.aom_threshold_ms = 100;
  a.clusters = {{"a", 50, 0}, {"b", 500, 0}};
  a.capacity_updates_per_ms = 1.0 / 40;
  a.queue_size = 2;
  a.horizon = 2;
  out.push_back(a);
  FairnessConfig b;  // three clusters, depth 2: caps of 1, displacement
  b.aom_threshold_ms = 60;
  b.clusters = {{"x", 20, 0}, {"y", 30, 5}, {"z", 45, 0}};
  b.capacity_updates_per_ms = 1.0 / 12;
  b.queue_size = 2;
  b.horizon = 2;
  out.push_back(b);
  FairnessConfig c;  // depth 3, two clusters, the link near saturation
  c.aom_threshold_ms = 40;
  c.clusters = {{"p", 15, 3}, {"q", 25, 0}};
  c.capacity_updates_per_ms = 1.0 / 10;
  c.queue_size = 3;
  c.horizon = 3;
  out.push_back(c);
  FairnessConfig d;  // equal clusters overloading a depth-1 queue: displacement
  d.aom_threshold_ms = 20;
  d.clusters = {{"u", 20, 0}, {"v", 20, 0}};
  d.capacity_updates_per_ms = 1.0 / 12;
  d.queue_size = 1;
  d.horizon = 5;
  out.push_back(d);
  FairnessConfig e = d;  // the same with up to 15 ms of transit
  e.max_transit_ms = 15;
  e.horizon = 3;
  out.push_back(e);
  return out;
}

TEST(OlafQueueDiffTest, ModelSchedulesReplayOnTheRealQueue) {
  int decisions = 0, schedules = 0;
  for (const FairnessConfig& cfg : ReplayConfigs()) {
    absl::StatusOr<RobustnessResult> r = CheckAlwaysFair(cfg);
    ASSERT_TRUE(r.ok()) << r.status();
    if (r->counterexample) {
      ASSERT_TRUE(CheckSchedule(cfg, *r->counterexample).ok())
          << CheckSchedule(cfg, *r->counterexample);
      ExpectReplays(cfg, *r->counterexample, &decisions);
      ++schedules;
    }
    absl::StatusOr<FeasibilityResult> f = CheckFeasible(cfg);
    ASSERT_TRUE(f.ok()) << f.status();
    if (f->witness) {
      ASSERT_TRUE(CheckSchedule(cfg, *f->witness).ok()) << CheckSchedule(cfg, *f->witness);
      ExpectReplays(cfg, *f->witness, &decisions);
      ++schedules;
    }
  }
  std::cout << schedules << " model schedules replayed, " << decisions
            << " updates not delivered by themselves\n";
  EXPECT_GT(schedules, 0);
  EXPECT_GT(decisions, 0);
}

}  // namespace
}  // namespace inca::olafverify
