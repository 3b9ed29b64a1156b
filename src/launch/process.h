// Process launching for the launchers (cais-perf, olaf-train run) and the
// multi-process tests: fork ranks, spawn a program, find free loopback
// ports. POSIX only. fork() is called before the caller starts any thread
// (documented on each function).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace inca::launch {

// A UDP or TCP port on 127.0.0.1 that was free a moment ago, chosen below
// the kernel's ephemeral range so that bind(0) and connect() elsewhere do
// not take it before the caller binds it.
int FreeLoopbackPort(bool udp);

// A socket (SOCK_DGRAM or SOCK_STREAM) bound to 127.0.0.1 on a free port,
// written to *port; -1 if it could not be had. The caller closes it.
int BindLoopback(int type, uint16_t* port);

// For a child just forked from `parent` (its getpid() before the fork):
// the kernel sends the child `sig` when the parent dies, however it dies
// (SIGKILL included), and the child exits at once if the parent already
// died between the fork and this call. Only system calls: safe between fork
// and exec in a process with threads. The signal comes when the *thread*
// that forked exits, so fork from one that outlives the child (every
// launcher here forks from its main thread).
void DieWithParent(pid_t parent, int sig);

// A spawned child process, killed (SIGKILL) on destruction if still running,
// and sent SIGTERM by the kernel if this process dies first (DieWithParent):
// a killed launcher leaves no switch or rank behind.
class Process {
 public:
  Process() = default;
  explicit Process(pid_t pid) : pid_(pid) {}
  Process(Process&& o) noexcept : pid_(o.pid_) { o.pid_ = -1; }
  Process& operator=(Process&& o) noexcept;
  ~Process();

  // Starts `path` with `args`; with quiet_stdout its stdout goes to /dev/null.
  static Process Spawn(const std::string& path, const std::vector<std::string>& args,
                       bool quiet_stdout = false);
  // The same with stdout written to `stdout_path` (created or truncated).
  static Process SpawnToFile(const std::string& path, const std::vector<std::string>& args,
                             const std::string& stdout_path);
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  void Signal(int sig);
  // Waits up to `timeout`; returns the exit code, 128+signal, or -1 on
  // timeout (the process is then still running).
  int Wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
};

// Forks `n` children running fn(rank); the child exits with fn's return
// value, or is killed (SIGKILL) when this process dies. Call before
// creating threads in this process. Waits up to
// `timeout` for all; children still running then are killed (exit -1).
std::vector<int> RunRanks(int n, const std::function<int(int)>& fn,
                          std::chrono::milliseconds timeout);

// Sends a management PING to a switch until it answers or `timeout` passes.
bool WaitForSwitch(const std::string& address, std::chrono::milliseconds timeout);

}  // namespace inca::launch
