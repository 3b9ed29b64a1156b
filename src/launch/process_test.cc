// Process launching: children never outlive a killed launcher (issue 46),
// and spawning still reports a program that cannot start.
#include "launch/process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace inca::launch {
namespace {

// Orphans are handed to this test process (a child subreaper), so a test can
// reap the children of a launcher it killed and see how they ended.
class ProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0); }
};

// Reads one pid the launcher wrote to `fd`; -1 when it wrote none.
pid_t ReadPid(int fd) {
  pid_t pid = -1;
  return read(fd, &pid, sizeof(pid)) == sizeof(pid) ? pid : -1;
}

// Waits (polling, bounded) until `pid`, an orphan reparented to this
// process, has ended; its wait status, or -1 if it is still running after
// `timeout` (it is then killed).
int ReapOrphan(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// Kills the launcher with SIGKILL (no destructor runs, so only the kernel
// can stop its children) and reaps it.
void KillLauncher(pid_t launcher) {
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFSIGNALED(status));
}

// `olaf-train run` killed with SIGKILL left its inca-switchd running: a
// spawned program now gets SIGTERM (it stops cleanly) when its launcher
// dies, however the launcher dies.
TEST_F(ProcessTest, ASpawnedProgramStopsWhenItsLauncherIsKilled) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t launcher = fork();
  if (launcher == 0) {
    close(p[0]);
    Process child = Process::Spawn("/bin/sleep", {"600"});
    const pid_t pid = child.pid();
    if (write(p[1], &pid, sizeof(pid)) != sizeof(pid)) _exit(2);
    pause();  // until killed
    _exit(0);
  }
  close(p[1]);
  const pid_t child = ReadPid(p[0]);
  close(p[0]);
  ASSERT_GT(child, 0);
  KillLauncher(launcher);
  const int status = ReapOrphan(child, std::chrono::seconds(10));
  ASSERT_NE(status, -1) << "the spawned program outlived its killed launcher";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
}

// The same for forked ranks (cais-perf's, RunRanks'): they are killed.
TEST_F(ProcessTest, ForkedRanksDieWhenTheirLauncherIsKilled) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const pid_t launcher = fork();
  if (launcher == 0) {
    close(p[0]);
    RunRanks(
        2,
        [&](int) {
          const pid_t me = getpid();
          if (write(p[1], &me, sizeof(me)) != sizeof(me)) return 2;
          pause();
          return 0;
        },
        std::chrono::minutes(10));
    _exit(0);
  }
  close(p[1]);
  std::vector<pid_t> ranks = {ReadPid(p[0]), ReadPid(p[0])};
  close(p[0]);
  ASSERT_GT(ranks[0], 0);
  ASSERT_GT(ranks[1], 0);
  KillLauncher(launcher);
  for (const pid_t r : ranks) {
    const int status = ReapOrphan(r, std::chrono::seconds(10));  // every rank, even on failure
    EXPECT_NE(status, -1) << "rank " << r << " outlived its killed launcher";
    EXPECT_TRUE(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  }
}

// fork and exec instead of posix_spawn: a program that cannot be started
// is still a Process that is not running, at once; stdout still goes to
// the file named.
TEST_F(ProcessTest, SpawnReportsAMissingProgramAndRedirectsStdout) {
  EXPECT_FALSE(Process::Spawn("/nonexistent/inca-switchd", {}).running());
  const std::string path = ::testing::TempDir() + "inca-process-test-stdout";
  Process echo = Process::SpawnToFile("/bin/echo", {"hello", "world"}, path);
  ASSERT_TRUE(echo.running());
  EXPECT_EQ(echo.Wait(std::chrono::seconds(30)), 0);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "hello world\n");
  std::remove(path.c_str());
  EXPECT_FALSE(Process::SpawnToFile("/bin/echo", {"x"}, "/nonexistent/dir/out").running());
}

}  // namespace
}  // namespace inca::launch
