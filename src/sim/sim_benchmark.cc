// inca-sim speed: raw events per second on one core, and whole scenarios
// (the OLAF paper's 4.1 setting for 10 simulated seconds; 1,000 workers in
// 100 clusters on the two-switch tree).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "inca/sim/olaf_scenario.h"
#include "inca/sim/simulator.h"

namespace inca::sim {
namespace {

void BM_Events(benchmark::State& state) {
  for (auto _ : state) {
    Simulator sim;
    uint64_t n = 0;
    // 1,000 self-rescheduling timers, 1,000 events each.
    std::function<void(int)> tick;
    for (int i = 0; i < 1000; ++i) {
      sim.Schedule(i, [&sim, &n, i] {
        struct T {
          static void Go(Simulator& s, uint64_t& c, int left) {
            ++c;
            if (left > 0) s.ScheduleIn(1000, [&s, &c, left] { Go(s, c, left - 1); });
          }
        };
        T::Go(sim, n, 999);
      });
    }
    sim.RunUntil(INT64_MAX / 2);
    benchmark::DoNotOptimize(n);
    state.counters["events"] = static_cast<double>(sim.events_run());
  }
  state.SetItemsProcessed(state.iterations() * 1'000'000);
}
BENCHMARK(BM_Events)->Unit(benchmark::kMillisecond);

void RunScenario(benchmark::State& state, const char* yaml) {
  auto s = ParseOlafScenario(yaml, "bench");
  if (!s.ok()) {
    state.SkipWithError(std::string(s.status().message()).c_str());
    return;
  }
  uint64_t events = 0;
  for (auto _ : state) {
    auto r = RunOlafScenario(*s);
    events = r->events;
    benchmark::DoNotOptimize(r->mean_aom_ms);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  state.counters["events"] = static_cast<double>(events);
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(events), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_rss_MiB"] = static_cast<double>(ru.ru_maxrss) / 1024;
}

void BM_ScenarioA10s(benchmark::State& state) {
  RunScenario(state, R"(
duration_s: 10
warmup_s: 1
policy: olaf
clusters: [{count: 9, workers: 28, period_ms: 100, jitter_us: 200}]
)");
}
BENCHMARK(BM_ScenarioA10s)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_Tree1000Workers(benchmark::State& state) {
  RunScenario(state, R"(
duration_s: 2
warmup_s: 0.5
topology: tree
policy: olaf
send_control: priority
clusters:
  - {count: 50, workers: 10, period_ms: 100, jitter_us: 200, behind_sw2: true}
  - {count: 50, workers: 10, period_ms: 100, jitter_us: 200}
)");
}
BENCHMARK(BM_Tree1000Workers)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace inca::sim

BENCHMARK_MAIN();
