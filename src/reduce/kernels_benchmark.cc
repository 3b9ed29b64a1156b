// Throughput of the reduction kernels on CAIS-sized chunks, next to a memcpy
// of the same byte count as the baseline. Bytes processed = wire payload
// bytes per call, so every line's GB/s is directly comparable:
//
//   BM_Memcpy/9000                   memcpy of 9000 bytes
//   BM_ReduceSum_F32/9000            ReduceInto(kSum, kF32) on a 9000-byte
//                                    payload, ISA chosen by the dispatcher
//   BM_ReduceSum_F32_Portable/9000   the same, forced to the portable loops
//   BM_ReduceSum_F32_Avx2/9000       the same, forced to AVX2 (if supported)
//   BM_LoadAcc_F16/9000, BM_StoreAcc_F16_Portable/9000, ...  likewise
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "reduce/kernels.h"

namespace inca::reduce {
namespace {

constexpr int64_t kChunkBytes[] = {9000, 65536};

std::vector<uint8_t> RandomPayload(DType t, size_t n) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(0.5f, 1.0f);
  std::vector<uint8_t> v(n * wire::ElementBytes(t));
  std::vector<float> f(n);
  for (float& x : f) x = dist(rng);
  // Widen-then-narrow through the library itself gives valid wire values.
  if (t == DType::kI32) {
    for (size_t i = 0; i < n; ++i) {
      const auto x = static_cast<uint32_t>(rng());
      std::memcpy(v.data() + 4 * i, &x, 4);
    }
  } else {
    StoreAcc(t, f.data(), n, v.data());
  }
  return v;
}

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

enum class Kind { kReduceSum, kLoad, kStore };

// isa_or_auto: -1 = whatever the dispatcher picked at start-up.
void RunKernel(benchmark::State& state, Kind kind, DType t, int isa_or_auto, Isa auto_isa) {
  const Isa isa = isa_or_auto < 0 ? auto_isa : static_cast<Isa>(isa_or_auto);
  if (!ForceIsa(isa)) {
    state.SkipWithError("ISA not supported");
    return;
  }
  const auto bytes = static_cast<size_t>(state.range(0));
  const size_t n = bytes / wire::ElementBytes(t);
  const std::vector<uint8_t> src = RandomPayload(t, n);
  std::vector<uint8_t> dst(src.size());
  std::vector<float> acc(n);  // 4-byte elements for every dtype
  LoadAcc(t, src.data(), n, acc.data());
  for (auto _ : state) {
    switch (kind) {
      case Kind::kReduceSum: ReduceInto(ReduceOp::kSum, t, acc.data(), src.data(), n); break;
      case Kind::kLoad: LoadAcc(t, src.data(), n, acc.data()); break;
      case Kind::kStore: StoreAcc(t, acc.data(), n, dst.data()); break;
    }
    benchmark::DoNotOptimize(acc.data());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(n * wire::ElementBytes(t)));
  state.SetLabel(isa == Isa::kAvx2 ? "avx2" : "portable");
}

void RegisterAll() {
  const Isa auto_isa = ActiveIsa();
  auto with_sizes = [](benchmark::internal::Benchmark* b) {
    for (int64_t bytes : kChunkBytes) b->Arg(bytes);
  };
  with_sizes(benchmark::RegisterBenchmark("BM_Memcpy", BM_Memcpy));

  struct T {
    DType t;
    const char* name;
  };
  const T types[] = {
      {DType::kF32, "F32"}, {DType::kF16, "F16"}, {DType::kBF16, "BF16"}, {DType::kI32, "I32"}};
  struct K {
    Kind kind;
    const char* name;
  };
  const K kinds[] = {{Kind::kReduceSum, "BM_ReduceSum_"},
                     {Kind::kLoad, "BM_LoadAcc_"},
                     {Kind::kStore, "BM_StoreAcc_"}};
  for (const K& k : kinds) {
    for (const T& t : types) {
      const std::string base = std::string(k.name) + t.name;
      with_sizes(benchmark::RegisterBenchmark(base.c_str(), RunKernel, k.kind, t.t, -1, auto_isa));
      with_sizes(benchmark::RegisterBenchmark((base + "_Portable").c_str(), RunKernel, k.kind, t.t,
                                              static_cast<int>(Isa::kPortable), auto_isa));
      if (IsaSupported(Isa::kAvx2)) {
        with_sizes(benchmark::RegisterBenchmark((base + "_Avx2").c_str(), RunKernel, k.kind, t.t,
                                                static_cast<int>(Isa::kAvx2), auto_isa));
      }
    }
  }
}

}  // namespace
}  // namespace inca::reduce

int main(int argc, char** argv) {
  inca::reduce::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
