// Runs a tool to its end with its stderr captured, for the tests of one-line
// usage errors (issue 46): exit 2 and one line, never an abort or a hang.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "launch/process.h"

namespace inca::integration {

struct Ended {
  int code = -1;  // exit code, 128+signal, or -1: still running after the bound (then killed)
  std::string err;
};

// Runs `path` with `args` and the variables `env` added, stdout discarded,
// until it exits or `bound` passes (then it is killed); returns how it
// ended and its stderr.
inline Ended RunToEnd(const std::string& path, const std::vector<std::string>& args,
                      const std::vector<std::pair<std::string, std::string>>& env = {},
                      std::chrono::milliseconds bound = std::chrono::seconds(20)) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return {};
  std::vector<char*> argv = {const_cast<char*>(path.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], STDERR_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
  close(p[1]);
  launch::Process proc(pid);
  Ended e;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  const auto left = [&] {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()),
                    std::chrono::milliseconds(0));
  };
  for (;;) {
    pollfd pf{p[0], POLLIN, 0};
    if (poll(&pf, 1, static_cast<int>(left().count())) <= 0) break;
    char buf[4096];
    const ssize_t n = read(p[0], buf, sizeof(buf));
    if (n <= 0) break;  // EOF: the process has exited (or closed stderr)
    e.err.append(buf, static_cast<size_t>(n));
  }
  close(p[0]);
  e.code = proc.Wait(left());
  return e;
}

// Exit 2 and one line on stderr that contains `says`.
inline void ExpectOneLineUsageError(const Ended& e, const std::string& says,
                                    const std::string& what) {
  EXPECT_EQ(e.code, 2) << what << ": " << e.err;
  EXPECT_NE(e.err.find(says), std::string::npos) << what << ": " << e.err;
  EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << what << ": " << e.err;
}

}  // namespace inca::integration
