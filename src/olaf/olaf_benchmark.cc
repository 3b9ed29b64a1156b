// OLAF data-plane core throughput with 9000-byte updates (payload 8952 B),
// against a memcpy of 9000 bytes measured in the same run (report ratios:
// absolute timings are noisy on shared machines).
//
//   build/<dir>/bench/olaf_queue_benchmark --benchmark_min_time=1
//
// Target: >= 555k updates/s per core (40 Gbit/s of 9000-byte updates).
//  BM_Memcpy9000     baseline: one 9000-byte copy per item
//  BM_Queue/fifo     UpdateQueue: one Enqueue + one Dequeue per item
//  BM_Queue/olaf     same, 9 clusters, depth 8 (every arrival enqueued)
//  BM_QueueMerge     OlafQueue, 9 clusters, depth 8, two arrivals per
//                    dequeue: half the arrivals merge (items = arrivals)
//  BM_Switch/fifo|olaf  the whole OlafSwitch Program (parse, stamp, queue,
//                    pace at 40 Gbit/s, emit), arrivals at twice the egress
//                    rate (items = packets processed)
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "inca/olaf/olaf_switch.h"

namespace inca::olaf {
namespace {

constexpr uint32_t kPayload = 8952;
constexpr uint16_t kClusters = 9;

struct NullSink final : dp::PacketSink {
  size_t bytes = 0;
  void Emit(dp::PortId, std::span<const uint8_t> p) override { bytes += p.size(); }
};

std::vector<uint8_t> Payload() {
  std::vector<uint8_t> b(kPayload);
  for (size_t i = 0; i < kPayload; i += 4) {
    const float v = 0.001f * static_cast<float>(i);
    std::memcpy(&b[i], &v, 4);
  }
  return b;
}

void BM_Memcpy9000(benchmark::State& state) {
  std::vector<uint8_t> src(9000, 1), dst(9000);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * 9000);
}
BENCHMARK(BM_Memcpy9000);

QueueConfig BenchQueueConfig() {
  QueueConfig c;
  c.depth = 8;
  c.max_payload_bytes = kPayload;
  return c;
}

// Offers updates to a queue, each 100 ns after the last, the clusters in
// turn.
struct Offer {
  std::vector<uint8_t> payload = Payload();
  std::vector<uint8_t> out = std::vector<uint8_t>(kOlafUpdateHeaderBytes + kPayload);
  UpdateHeader h;
  dp::TimeNs now = 0;
  uint64_t k = 0;
  Offer() { h.payload_len = kPayload; }
  void Next(UpdateQueue& q) {
    now += 100;
    h.cluster_id = static_cast<uint16_t>(k++ % kClusters);
    h.gen_time_ns = static_cast<uint64_t>(now);
    q.Enqueue(h, payload, now);
  }
};

void BM_Queue(benchmark::State& state) {
  const auto policy = static_cast<QueuePolicy>(state.range(0));
  auto q = *UpdateQueue::Create(policy, BenchQueueConfig());
  Offer o;
  for (auto _ : state) {
    o.Next(*q);
    benchmark::DoNotOptimize(q->Dequeue(o.now, o.out));
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * (kOlafUpdateHeaderBytes + kPayload));
  state.SetLabel(std::string(ToString(policy)));
  if (!q->totals().Conserved()) state.SkipWithError("not conserved");
}
BENCHMARK(BM_Queue)
    ->Arg(static_cast<int>(QueuePolicy::kFifo))
    ->Arg(static_cast<int>(QueuePolicy::kOlaf));

void BM_QueueMerge(benchmark::State& state) {
  auto q = *UpdateQueue::Create(QueuePolicy::kOlaf, BenchQueueConfig());
  Offer o;
  for (auto _ : state) {
    o.Next(*q);
    o.Next(*q);
    benchmark::DoNotOptimize(q->Dequeue(o.now, o.out));
  }
  const QueueCounters& t = q->totals();
  state.SetItemsProcessed(static_cast<int64_t>(t.offered));
  state.SetBytesProcessed(static_cast<int64_t>(t.offered) * (kOlafUpdateHeaderBytes + kPayload));
  state.counters["merged_frac"] =
      static_cast<double>(t.merged) / static_cast<double>(std::max<uint64_t>(1, t.offered));
  state.counters["dequeued_frac"] =
      static_cast<double>(t.dequeued) / static_cast<double>(std::max<uint64_t>(1, t.offered));
  if (!t.Conserved()) state.SkipWithError("not conserved");
}
BENCHMARK(BM_QueueMerge);

void BM_Switch(benchmark::State& state) {
  OlafSwitchConfig c;
  c.policy = static_cast<QueuePolicy>(state.range(0));
  c.max_payload_bytes = kPayload;
  c.egress_rate_bps = 40'000'000'000;
  auto sw = *OlafSwitch::Create(c);
  const auto payload = Payload();
  std::vector<std::vector<uint8_t>> pkts;
  for (uint16_t cl = 0; cl < kClusters; ++cl) {
    UpdateHeader h;
    h.cluster_id = cl;
    h.worker_id = 100u + cl;
    pkts.push_back(BuildUpdate(h, payload));
  }
  // One update holds the 40 Gbit/s link (8992 + 66) * 8 / 40 = 1811 ns;
  // arrivals every 905 ns are twice the egress rate.
  const dp::TimeNs step = 905;
  NullSink sink;
  dp::TimeNs now = 0;
  uint64_t k = 0;
  for (auto _ : state) {
    now += step;
    auto& p = pkts[k++ % kClusters];
    // gen_time = now, so nothing is stale.
    const uint64_t gen = __builtin_bswap64(static_cast<uint64_t>(now));
    std::memcpy(&p[16], &gen, 8);
    sw->Process(p, 1, now, sink);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(pkts[0].size()));
  state.SetLabel(std::string(sw->name()));
  const QueueCounters& t = sw->queue().totals();
  const double n = static_cast<double>(std::max<uint64_t>(1, t.offered));
  state.counters["merged_frac"] = static_cast<double>(t.merged) / n;
  state.counters["sent_frac"] = static_cast<double>(sw->totals().updates_tx) / n;
  if (!sw->counters().Conserved()) state.SkipWithError("not conserved");
}
BENCHMARK(BM_Switch)
    ->Arg(static_cast<int>(QueuePolicy::kFifo))
    ->Arg(static_cast<int>(QueuePolicy::kOlaf));

}  // namespace
}  // namespace inca::olaf

BENCHMARK_MAIN();
