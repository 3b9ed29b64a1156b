// Issue 46's argument checks of the tools, run as processes: each bad
// argument is one line on stderr and exit 2, before any work starts (no
// abort, no CLI11 exit code, no line per rank, no silent default).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "run_to_end.h"

namespace inca::integration {
namespace {

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
