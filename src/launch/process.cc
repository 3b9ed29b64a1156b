#include "launch/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "client/switch_transport.h"
#include "inca/wire/mgmt.h"

extern char** environ;

namespace inca::launch {

int BindLoopback(int type, uint16_t* port) {
  const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

namespace {

// The low end of the kernel's ephemeral range (ports it hands to bind(0),
// connect() and unbound sendto()); 32768 when it cannot be read.
int EphemeralLow() {
  int low = 32768;
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (fscanf(f, "%d", &low) != 1) low = 32768;
    fclose(f);
  }
  return low;
}

}  // namespace

// A port below the ephemeral range: between this check and the caller's
// bind, a port from bind(0) could be handed to any socket another test opens
// (and under ctest -j2 something always does); a port outside that range can
// only be taken by another FreeLoopbackPort, chosen at random from thousands.
int FreeLoopbackPort(bool udp) {
  const int type = udp ? SOCK_DGRAM : SOCK_STREAM;
  const int high = EphemeralLow();
  const int low = std::max(1024, high - 12000);
  std::mt19937 rng(
      static_cast<unsigned>(getpid()) ^
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_int_distribution<int> pick(low, high - 1);
  for (int attempt = 0; attempt < 200 && high - low > 100; ++attempt) {
    const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int port = pick(rng);
    sa.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
    close(fd);
    if (ok) return port;
  }
  uint16_t port = 0;
  const int fd = BindLoopback(type, &port);
  if (fd >= 0) close(fd);
  return port;
}

void DieWithParent(pid_t parent, int sig) {
  prctl(PR_SET_PDEATHSIG, sig);
  // The parent may have died between fork and prctl: then no signal comes.
  if (getppid() != parent) _exit(128 + sig);
}

Process& Process::operator=(Process&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = o.pid_;
    o.pid_ = -1;
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

namespace {

// fork and exec of `path` with `args`; stdout to `stdout_path` (created or
// truncated) unless it is null. Not posix_spawn: the child must ask for its
// parent-death signal between the two (DieWithParent). An exec that fails
// is reported through a close-on-exec pipe, so that the caller sees a
// Process that is not running at once, as posix_spawn gave it.
Process SpawnWithStdout(const std::string& path, const std::vector<std::string>& args,
                        const char* stdout_path, int flags) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return Process();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec: the parent may have threads.
    close(report[0]);
    DieWithParent(parent, SIGTERM);  // a started program gets to stop cleanly
    int err = 0;
    if (stdout_path != nullptr) {
      const int fd = open(stdout_path, flags | O_CLOEXEC, 0644);
      if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) err = errno;
      if (fd >= 0) close(fd);
    }
    if (err == 0) {
      execve(path.c_str(), argv.data(), environ);
      err = errno;
    }
    ssize_t ignored = write(report[1], &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    return Process();
  }
  int err = 0;
  ssize_t n;
  do {
    n = read(report[0], &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n > 0) {  // the child could not exec: reap it
    waitpid(pid, nullptr, 0);
    return Process();
  }
  return Process(pid);
}

}  // namespace

Process Process::Spawn(const std::string& path, const std::vector<std::string>& args,
                       bool quiet_stdout) {
  return SpawnWithStdout(path, args, quiet_stdout ? "/dev/null" : nullptr, O_WRONLY);
}

Process Process::SpawnToFile(const std::string& path, const std::vector<std::string>& args,
                             const std::string& stdout_path) {
  return SpawnWithStdout(path, args, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC);
}

void Process::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

int Process::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<int> RunRanks(int n, const std::function<int(int)>& fn,
                          std::chrono::milliseconds timeout) {
  std::vector<Process> procs;
  const pid_t parent = getpid();
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      DieWithParent(parent, SIGKILL);  // a forked copy: nothing to clean up
      int code = 1;
      try {
        code = fn(r);
      } catch (...) {
        code = 3;
      }
      _exit(code);
    }
    procs.emplace_back(pid);
  }
  std::vector<int> codes;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& p : procs) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    codes.push_back(p.Wait(std::max(left, std::chrono::milliseconds(0))));
  }
  return codes;  // Process destructors kill any still running
}

bool WaitForSwitch(const std::string& address, std::chrono::milliseconds timeout) {
  auto addrs = client::ResolveSwitchAddresses(address, "");
  if (!addrs.ok()) return false;
  sockaddr_storage to;
  const int family = addrs->switch_endpoint.is_v6() ? AF_INET6 : AF_INET;
  const socklen_t to_len = addrs->switch_endpoint.ToSockaddr(family, &to);
  const int fd = socket(family, SOCK_DGRAM, 0);
  wire::MgmtMessage ping;
  ping.type = wire::MgmtType::kPing;
  ping.nonce = 7;
  std::vector<uint8_t> bytes;
  wire::SerializeMgmt(ping, &bytes);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool ok = false;
  while (!ok && std::chrono::steady_clock::now() < deadline) {
    sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), to_len);
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) {
      uint8_t buf[256];
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      wire::MgmtMessage m;
      ok = n > 0 && wire::ParseMgmt({buf, static_cast<size_t>(n)}, &m) &&
           m.type == wire::MgmtType::kPong;
    }
  }
  close(fd);
  return ok;
}

}  // namespace inca::launch
