// Whole CAIS pipeline (parse, lookup, reduce, deparse/emit) in packets/s.
//
//   build/release/bench/cais_pipeline_benchmark
//
// Each iteration feeds one chunk from each of N input ports; the last one
// completes the chunk and the result is multicast to N output ports (to a
// sink that discards it). items/s = input packets/s; bytes/s = input
// payload bytes/s.
//
// BM_ShardedPipeline is inca-switchd --threads N without sockets: each
// benchmark thread is one shard, with its own reducer and sram_bytes / N,
// as switchd/shards.h runs them; rates are over wall-clock time, so
// threads:2 against threads:1 is the sharded data plane's scaling.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "inca/cais/reducer.h"

namespace inca::cais {
namespace {

struct NullSink final : dp::PacketSink {
  size_t bytes = 0;
  void Emit(dp::PortId, std::span<const uint8_t> p) override { bytes += p.size(); }
};

void RunPipeline(benchmark::State& state, int ports, uint32_t payload, bool deterministic,
                 size_t sram_bytes) {
  CaisConfig cfg;
  cfg.max_payload_bytes = std::max<uint32_t>(payload, 8952);
  cfg.deterministic = deterministic;
  cfg.sram_bytes = sram_bytes;
  auto reducer = *CaisReducer::Create(cfg);
  PortMask mask;
  for (int p = 0; p < ports; ++p) mask.add(static_cast<dp::PortId>(p));
  (void)reducer->rules().Add(
      Rule{RuleKey{0, std::nullopt, std::nullopt}, mask, mask, wire::CaisOp::kAllReduce});
  std::vector<std::vector<uint8_t>> pkts;
  for (int p = 0; p < ports; ++p) {
    wire::CaisHeader h;
    h.payload_len = payload;
    h.total_chunks = 1;
    std::vector<uint8_t> b(wire::kCaisHeaderBytes + payload);
    wire::SerializeCaisHeader(h, b);
    for (size_t i = wire::kCaisHeaderBytes; i + 4 <= b.size(); i += 4) {
      const float v = 0.5f * static_cast<float>(p);
      std::memcpy(&b[i], &v, 4);
    }
    pkts.push_back(std::move(b));
  }
  NullSink sink;
  uint32_t seq = 0;
  dp::TimeNs now = 0;
  for (auto _ : state) {
    ++seq;
    const uint32_t be = __builtin_bswap32(seq);
    for (int p = 0; p < ports; ++p) {
      auto& b = pkts[static_cast<size_t>(p)];
      std::memcpy(&b[8], &be, 4);
      reducer->Process(b, static_cast<dp::PortId>(p), now, sink);
    }
    now += 1000;
  }
  if (reducer->totals().completed_chunks != static_cast<uint64_t>(state.iterations())) {
    state.SkipWithError("not every chunk completed");
  }
  state.SetItemsProcessed(state.iterations() * ports);
  state.SetBytesProcessed(state.iterations() * ports * payload);
  state.counters["pending"] = reducer->sram().pending_chunks;
}

void BM_Pipeline(benchmark::State& state) {
  RunPipeline(state, static_cast<int>(state.range(0)), static_cast<uint32_t>(state.range(1)),
              state.range(2) != 0, size_t{64} << 20);
}

void BM_ShardedPipeline(benchmark::State& state) {
  RunPipeline(state, 8, 8952, false, (size_t{64} << 20) / static_cast<size_t>(state.threads()));
}
BENCHMARK(BM_ShardedPipeline)->Threads(1)->Threads(2)->UseRealTime();

BENCHMARK(BM_Pipeline)
    ->ArgNames({"ports", "payload", "det"})
    ->Args({8, 8952, 0})
    ->Args({8, 8952, 1})
    ->Args({8, 1024, 0})
    ->Args({4, 8952, 0})
    ->Args({8, 65472, 0});

}  // namespace
}  // namespace inca::cais

BENCHMARK_MAIN();
