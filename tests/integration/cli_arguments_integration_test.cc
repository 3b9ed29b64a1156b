// Issue 46's argument checks of the tools, run as processes: each bad
// argument is one line on stderr and exit 2, before any work starts (no
// abort, no CLI11 exit code, no line per rank, no silent default).
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "run_to_end.h"

namespace inca::integration {
namespace {

#ifdef INCA_SIM_PATH  // built with INCA_BUILD_ALL_TOOLS

// A short OLAF scenario, so that a check that comes too late shows as a
// run rather than a long wait.
const std::vector<std::string> kShortOlaf = {INCA_SOURCE_DIR "/scenarios/olaf/a-star.yaml", "--set",
                                             "warmup_s=0", "--set", "duration_s=0.2"};

std::vector<std::string> With(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// --out that cannot be a directory: an uncaught std::filesystem_error
// (abort) after the run.
TEST(IncaSimArgumentsTest, AnOutDirectoryThatCannotBeMadeIsOneLine) {
  ExpectOneLineUsageError(RunToEnd(INCA_SIM_PATH, With(kShortOlaf, {"--out", "/proc/nope"})),
                          "--out /proc/nope", "/proc/nope");
  const std::string file = ::testing::TempDir() + "inca-sim-out-is-a-file";
  std::ofstream(file) << "x";
  ExpectOneLineUsageError(RunToEnd(INCA_SIM_PATH, With(kShortOlaf, {"--out", file})),
                          "is not a directory", "a regular file");
  unlink(file.c_str());
}

// --sweep KEY= ran nothing and exited 0.
TEST(IncaSimArgumentsTest, ASweepWithNoValuesIsOneLine) {
  ExpectOneLineUsageError(RunToEnd(INCA_SIM_PATH, With(kShortOlaf, {"--sweep", "duration_s="})),
                          "at least one value", "--sweep duration_s=");
  ExpectOneLineUsageError(RunToEnd(INCA_SIM_PATH, With(kShortOlaf, {"--sweep", "=1,2"})),
                          "at least one value", "--sweep =1,2");
}

// A scenario that names /dev/zero (it passes CLI11's ExistingFile) was
// read forever.
TEST(IncaSimArgumentsTest, AnEndlessScenarioFileIsOneLine) {
  ExpectOneLineUsageError(RunToEnd(INCA_SIM_PATH, {"/dev/zero"}), "is larger than", "/dev/zero");
}

// A period of 1e-6 ms was accepted and grew to gigabytes: every key that
// sets work has a range, and a run past its event budget is one line
// (exit 1: the scenario was valid, the run too large).
TEST(IncaSimArgumentsTest, UnboundedWorkAndASpentEventBudgetAreOneLine) {
  ExpectOneLineUsageError(
      RunToEnd(INCA_SIM_PATH,
               With(kShortOlaf, {"--set", "clusters=[{count: 1, period_ms: 0.000001}]"})),
      "period_ms", "period_ms 1e-6");
  const Ended e = RunToEnd(INCA_SIM_PATH, With(kShortOlaf, {"--set", "max_events=1000", "--out",
                                                            ::testing::TempDir() + "sim-budget"}));
  EXPECT_EQ(e.code, 1) << e.err;
  EXPECT_NE(e.err.find("budget of 1000 events (max_events)"), std::string::npos) << e.err;
  EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
}

// --set keys that constrain each other (a fabric's racks and hosts) were
// checked one at a time, so that no order of them was accepted: the
// scenario is now checked once, after every --set.
TEST(IncaSimArgumentsTest, SetsThatOnlyAgreeTogetherAreCheckedTogether) {
  const std::vector<std::string> fabric = {INCA_SOURCE_DIR "/scenarios/cais/leaf-spine.yaml",
                                           "--set",
                                           "backends=inca",
                                           "--set",
                                           "sizes=64K",
                                           "--set",
                                           "ops=1",
                                           "--out",
                                           ::testing::TempDir() + "sim-fabric"};
  for (const auto& order : {std::vector<std::string>{"--set", "hosts=126", "--set", "racks=63"},
                            std::vector<std::string>{"--set", "racks=63", "--set", "hosts=126"}}) {
    const Ended e = RunToEnd(INCA_SIM_PATH, With(fabric, order));
    EXPECT_EQ(e.code, 0) << e.err;
  }
  ExpectOneLineUsageError(RunToEnd(INCA_SIM_PATH, With(fabric, {"--set", "hosts=126"})),
                          "dividing hosts 126", "hosts=126 with racks=4");
}

// A sweep in two processes gives what it gives in one, and its runs'
// results merged into <name>-sweep.csv and .json.
TEST(IncaSimArgumentsTest, ASweepInProcessesGivesTheSameMergedResults) {
  auto merged = [](int jobs) {
    const std::string out = ::testing::TempDir() + "sim-sweep-" + std::to_string(jobs);
    const Ended e =
        RunToEnd(INCA_SIM_PATH, {INCA_SOURCE_DIR "/scenarios/cais/leaf-spine.yaml", "--set",
                                 "racks=2", "--set", "sizes=64K", "--set", "ops=1", "--sweep",
                                 "hosts=4,8,16", "--jobs", std::to_string(jobs), "--out", out});
    EXPECT_EQ(e.code, 0) << e.err;
    std::ifstream f(out + "/leaf-spine-sweep.csv");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::ifstream j(out + "/leaf-spine-sweep.json");
    EXPECT_TRUE(j.good()) << out;
    return text;
  };
  const std::string one = merged(1), two = merged(2);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one.rfind("hosts,backend,bytes,", 0), 0u) << one;
  EXPECT_EQ(std::count(one.begin(), one.end(), '\n'), 1 + 3 * 3) << one;  // 3 runs x 3 backends
  for (const char* row : {"\n4,inca,65536,", "\n8,ring,65536,", "\n16,tree,65536,"}) {
    EXPECT_NE(one.find(row), std::string::npos) << row << " in " << one;
  }
  ExpectOneLineUsageError(RunToEnd(INCA_SIM_PATH, With(kShortOlaf, {"--jobs", "0"})), "--jobs",
                          "--jobs 0");
}

#endif  // INCA_SIM_PATH

// CLI11's own exit codes (105, 109, ...) and two lines; a negative
// timeout accepted; a bad --switch reported once per rank.
TEST(CaisPerfArgumentsTest, BadArgumentsAreOneLineAndExitTwo) {
  ExpectOneLineUsageError(RunToEnd(INCA_CAIS_PERF_PATH, {"--ranks", "100"}), "--ranks",
                          "--ranks 100");
  ExpectOneLineUsageError(RunToEnd(INCA_CAIS_PERF_PATH, {"--iters", "x"}), "--iters", "--iters x");
  ExpectOneLineUsageError(RunToEnd(INCA_CAIS_PERF_PATH, {"--bogus"}), "--bogus", "--bogus");
  ExpectOneLineUsageError(RunToEnd(INCA_CAIS_PERF_PATH, {"--timeout-s", "-1"}), "--timeout-s",
                          "--timeout-s -1");
  ExpectOneLineUsageError(
      RunToEnd(INCA_CAIS_PERF_PATH, {"--switch", "nohost", "--ranks", "4", "-b", "4", "-e", "4"}),
      "--switch nohost", "--switch nohost");
}

#ifdef INCA_OLAF_VERIFY_PATH
// --capacity 0 and -1 were silently the link's capacity.
TEST(OlafVerifyArgumentsTest, ACapacityThatIsNotPositiveIsOneLine) {
  for (const char* c : {"0", "-1", "-0.5"}) {
    ExpectOneLineUsageError(RunToEnd(INCA_OLAF_VERIFY_PATH, {"--periods", "100,300", "--capacity",
                                                             c, "--question", "feasible"}),
                            "--capacity", c);
  }
}

#endif  // INCA_OLAF_VERIFY_PATH

// --fast-clusters above --clusters was silently "all fast".
TEST(OlafTrainArgumentsTest, MoreFastClustersThanClustersIsOneLine) {
  ExpectOneLineUsageError(
      RunToEnd(INCA_OLAF_TRAIN_PATH, {"run", "--clusters", "9", "--fast-clusters", "100", "--out",
                                      ::testing::TempDir() + "olaf-train-args"}),
      "--fast-clusters 100 is more than the 9 clusters", "--fast-clusters 100");
}

}  // namespace
}  // namespace inca::integration
