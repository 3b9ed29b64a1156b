// Internal: a reference implementation of OlafQueue's rules (seed 3.1,
// include/inca/olaf/update_queue.h) in front of a work-conserving link, in
// plain code and model time (ms, doubles). CheckSchedule replays a
// schedule's generation times through it; the differential test
// (queue_diff_test.cc) checks it against the real OlafQueue. Pure: no clock,
// no threads; time comes with the arrivals.
//
// The link (the same driver convention as the differential test's):
// updates arrive at e_ms (>= a_ms, their gen_time); all arrivals at one instant are
// enqueued (in cluster order) before the link dequeues at that instant; the
// link dequeues whenever it is free and the queue, after evicting stale
// entries, is not empty; a dequeued update reaches the PS 1/C later.
#pragma once

#include <vector>

#include "olafverify/fairness_model.h"

namespace inca::olafverify::internal {

struct SimArrival {
  int cluster = 0;  // index: also the queue's cluster id order (ties: lowest first)
  int n = 0;        // index within the cluster (generation order)
  double a_ms = 0;  // generation time (gen_time)
  double e_ms = 0;  // arrival at the queue (queued_at), >= a_ms
};

struct SimParams {
  int depth = 8;  // entries
  double delta_t_ms = 400;
  double service_ms = 1;  // 1/C
  // Times closer than this are the same instant (model values carry
  // rounding; real traces are whole nanoseconds).
  double tie_ms = 1e-9;
};

struct SimResult {
  UpdateFate fate = UpdateFate::kDelivered;
  double dequeued_ms = 0;  // S, iff kDelivered
  int merged_into = -1;    // kMerged: index (into `arrivals`) of the entry
  int queued = 0;          // Q: entries queued on arrival, after eviction
  double gen_ms = 0;       // own entries: gen_time when it left (newest merged)
};

// One result per arrival, in the same order. Arrivals of one cluster must
// be in generation order.
std::vector<SimResult> SimulateOlafQueue(const SimParams& p,
                                         const std::vector<SimArrival>& arrivals);

}  // namespace inca::olafverify::internal
