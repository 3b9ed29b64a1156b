#!/usr/bin/env bash
# Quick start, command 2: set up and run the whole test suite:
#   1. release build (g++, warnings as errors): unit tests, benchmark smoke
#      runs, fuzz corpus replays; then the Python tests (`import cais`, the
#      torch.distributed backend, the tensor-parallel example) with Debian's
#      /usr/bin/python3 against build/release/python;
#   2. the same suite under AddressSanitizer + UndefinedBehaviorSanitizer,
#      less the long model runs listed in ASAN_LONG_MODEL_RUNS (below);
#   3. libFuzzer targets (clang), each run bounded in count and time;
#   4. clang-format check of every C++ file;
#   5. code checks (scripts/check-code.sh): no function over 120 lines
#      (clang-tidy), repeated code within its limit (jscpd).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs="$(nproc 2>/dev/null || echo 2)"
failed=()
run_stage() {
  local name="$1"
  shift
  echo "=== $name"
  local t0=$SECONDS
  if "$@"; then echo "=== $name: ok ($((SECONDS - t0)) s)"; else
    echo "=== $name: FAILED ($((SECONDS - t0)) s)"
    failed+=("$name")
  fi
}

t_build=$SECONDS
scripts/setup.sh release -DINCA_WERROR=ON
echo "=== release build: $((SECONDS - t_build)) s"
run_stage "release tests" ctest --test-dir build/release -j "$jobs" --output-on-failure
run_stage "python tests" env PYTHONPATH="$PWD/build/release/python" INCA_BUILD_DIR="$PWD/build/release" \
  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -p no:cacheprovider -q python/tests

# Long model runs: simulations, statistical checks and Z3 searches that
# take 10-90 s each under the sanitizers (2-10x their release time) and
# whose code (the simulator, the transport core, the reducer, the fairness
# model's encoding) the shorter tests of the same binaries run under the
# sanitizers too. They run in the release stage.
ASAN_LONG_MODEL_RUNS=(
  OlafQueueDiffTest.ModelSchedulesReplayOnTheRealQueue
  OlafVerifyTest.CongestedHeavyClusterCannotBeStarvedIntoFairness
  OlafVerifyTest.JitterAndThreeClusters
  TransportCoreSimTest.CompetitiveModeHoldsAShareBesideALossBasedSender
  TransportCoreSimTest.WindowShrinksWhenTheLinkSlowsAndStillFillsIt
  TransportCoreSimTest.AfterARateStepMidOperationTheWindowSettlesWithinTwentyRoundTrips
  TransportCoreSimTest.WindowFillsTheLinksAndKeepsQueuesShort
  CaisSimTest.TheTreeIsExactAndNeverBeatsItsBound
  CaisSimTest.ReduceScatterAndAllGatherAreExactAtTheirClosedForms
  CaisSimTest.OperationsOverChunkIdsRunInPieces
  CaisSimTest.TheRingMatchesItsClosedFormWhenBandwidthOrLatencyBound
  CaisBackground.FlowsShareTheDownlinksOfBothBackends
  CaisBackground.ChunksLeftToTheHostPathAreCountedNotWrong
  QueueingTheoryTest.MM1AverageAgeMatchesKaulYatesGruteser
  QueueingTheoryTest.MD1MeanSojournMatchesPollaczekKhinchine
  QueueingTheoryTest.MM1MeanSojournMatchesTheory
  inca_sim_cais_scenarios
)
asan_exclude="^($(IFS='|'; echo "${ASAN_LONG_MODEL_RUNS[*]}"))\$"

t_build=$SECONDS
scripts/setup.sh asan -DINCA_WERROR=ON
echo "=== asan build: $((SECONDS - t_build)) s"
run_stage "asan+ubsan tests" env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan -j "$jobs" --output-on-failure -E "$asan_exclude"

# Only the fuzz targets need the clang build (packages are installed by now).
cmake --preset fuzz -DINCA_WERROR=ON >/dev/null
cmake --build build/fuzz -j "$jobs" --target cais_parse_fuzz cais_reducer_fuzz olaf_wire_fuzz \
  olaf_switch_fuzz group_manager_fuzz
run_stage "libFuzzer runs" ctest --test-dir build/fuzz -j "$jobs" --output-on-failure

check_format() {
  local files
  mapfile -t files < <(git ls-files '*.h' '*.cc' 2>/dev/null || find include src tools -name '*.h' -o -name '*.cc')
  clang-format --dry-run --Werror "${files[@]}"
}
run_stage "clang-format" check_format
run_stage "code checks" scripts/check-code.sh

if ((${#failed[@]})); then
  echo "FAILED stages: ${failed[*]}"
  exit 1
fi
echo "all test stages passed in $SECONDS s"
