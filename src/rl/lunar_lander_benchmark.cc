// Environment steps per second on one core.
#include <random>

#include "benchmark/benchmark.h"
#include "inca/rl/lunar_lander.h"

namespace inca::rl {
namespace {

// Steps with the actions `policy` picks, resetting on episode end (resets
// are counted in the time).
template <typename Policy>
void RunSteps(benchmark::State& state, Policy policy) {
  auto env = std::move(LunarLander::Create({})).value();
  LunarObservation s = env->Reset(1);
  for (auto _ : state) {
    const LunarStep r = env->Step(policy(s));
    s = r.observation;
    if (r.terminated || r.truncated) s = env->Reset();
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}

// Random actions.
void BM_LunarLanderStepRandom(benchmark::State& state) {
  std::mt19937_64 rng(1);
  RunSteps(state, [&](const LunarObservation&) {
    return static_cast<LunarAction>(rng() % kLunarActionCount);
  });
}
BENCHMARK(BM_LunarLanderStepRandom);

// The heuristic controller: long episodes with legs on the ground (more contacts).
void BM_LunarLanderStepHeuristic(benchmark::State& state) {
  RunSteps(state, [](const LunarObservation& s) { return HeuristicAction(s); });
}
BENCHMARK(BM_LunarLanderStepHeuristic);

void BM_LunarLanderReset(benchmark::State& state) {
  auto env = std::move(LunarLander::Create({})).value();
  for (auto _ : state) benchmark::DoNotOptimize(env->Reset());
}
BENCHMARK(BM_LunarLanderReset);

}  // namespace
}  // namespace inca::rl

BENCHMARK_MAIN();
