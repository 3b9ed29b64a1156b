// cais-perf end to end: forked ranks through a real inca-switchd, exact
// results on both backends, the JSON row's host-path count, a straggler.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include "cluster.h"
#include "launch/process.h"

namespace inca::integration {
namespace {

TEST(CaisPerfTest, ReportsCorrectResultsForBothBackends) {
  for (const char* op : {"allreduce", "reducescatter"}) {
    for (const char* backend : {"switch", "gloo"}) {
      Process p =
          Process::Spawn(INCA_CAIS_PERF_PATH,
                         {"--op", op, "--ranks", "3", "-b", "4K", "-e", "64K", "-f", "4",
                          "--backend", backend, "--iters", "2", "--switchd", INCA_SWITCHD_PATH});
      // Exit 0 only if every rank's result was exact (#wrong 0 on every row).
      EXPECT_EQ(p.Wait(std::chrono::seconds(120)), 0) << op << " " << backend;
    }
  }
}

// The JSON row counts the operations that ran on the host path: none
// through the switch; with --offload false every timed one and the check
// (2 + 1), the path column then saying host/mixed.
TEST(CaisPerfTest, TheJsonRowCountsHostPathOperations) {
  const std::string out = ::testing::TempDir() + "cais_perf_host_ops.json";
  for (const char* offload : {"true", "false"}) {
    Process p =
        Process::SpawnToFile(INCA_CAIS_PERF_PATH,
                             {"--ranks", "2", "-b", "64K", "-e", "64K", "--iters", "2", "--warmup",
                              "1", "--offload", offload, "--json", "--switchd", INCA_SWITCHD_PATH},
                             out);
    ASSERT_EQ(p.Wait(std::chrono::seconds(120)), 0) << offload;
    std::ifstream f(out);
    std::string line, last;
    while (std::getline(f, line)) last = line;
    const bool host = std::string(offload) == "false";
    EXPECT_NE(last.find(host ? "\"path\":\"host/mixed\",\"host_ops\":3,\"why\":\"off\","
                             : "\"path\":\"switch\",\"host_ops\":0,\"why\":\"\","),
              std::string::npos)
        << last;
  }
}

// --straggler-ms: the last rank starts each timed operation that much
// later, so every timed operation takes at least as long, and the results
// stay exact (the exit code).
TEST(CaisPerfTest, AStragglerDelaysEveryTimedOperation) {
  const std::string out = ::testing::TempDir() + "cais_perf_straggler.json";
  Process p =
      Process::SpawnToFile(INCA_CAIS_PERF_PATH,
                           {"--ranks", "3", "-b", "4K", "-e", "4K", "--iters", "3", "--warmup", "1",
                            "--straggler-ms", "40", "--json", "--switchd", INCA_SWITCHD_PATH},
                           out);
  ASSERT_EQ(p.Wait(std::chrono::seconds(120)), 0);
  std::ifstream f(out);
  std::string line, last;
  while (std::getline(f, line)) last = line;
  const size_t at = last.find("\"time_us\":");
  ASSERT_NE(at, std::string::npos) << last;
  EXPECT_GE(std::stod(last.substr(at + 10)), 40'000.0) << last;
}

}  // namespace
}  // namespace inca::integration
