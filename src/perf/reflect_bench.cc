#include "perf/reflect_bench.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/wire/cais.h"
#include "inca/wire/mgmt.h"
#include "launch/process.h"

namespace inca::perf {

namespace {

constexpr uint8_t kGroup = 250;

// Joins group 250 as its only rank (a no-op for the forwarder, which
// reflects the JOIN and the client ignores the echo).
bool JoinSolo(const net::UdpSocket& s, const sockaddr_storage& to, socklen_t to_len) {
  wire::MgmtMessage j;
  j.type = wire::MgmtType::kJoin;
  j.group_id = kGroup;
  j.rank = 0;
  j.world_size = 1;
  j.nonce = 99;
  std::vector<uint8_t> b;
  wire::SerializeMgmt(j, &b);
  net::RecvBatch rx = net::RecvBatch::For(s, 4, 512);
  for (int tries = 0; tries < 50; ++tries) {
    sendto(s.fd.get(), b.data(), b.size(), 0, reinterpret_cast<const sockaddr*>(&to), to_len);
    pollfd p{s.fd.get(), POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int n = rx.Receive(s.fd.get());
    for (int i = 0; i < n; ++i) {
      wire::MgmtMessage m;
      if (wire::ParseMgmt(rx.data(static_cast<size_t>(i)), &m)) {
        return m.type == wire::MgmtType::kJoin ||  // reflected by the forwarder
               (m.type == wire::MgmtType::kJoinReply && m.status == wire::MgmtStatus::kOk);
      }
    }
  }
  return false;
}

// `o.packets` replies from `target`, or `o.max_seconds`. CPU time of `pid`
// meanwhile when pid > 0.
absl::StatusOr<TargetLoad> Drive(const net::Endpoint& target, pid_t pid, net::IoMode io,
                                 const ReflectOptions& o) {
  auto local = net::Endpoint::Parse(target.is_v6() ? "[::]:0" : "0.0.0.0:0");
  auto sock = net::BindUdp(*local, net::UdpOptions{.buffer_bytes = 16 << 20, .io = io});
  if (!sock.ok()) return sock.status();
  sockaddr_storage to;
  const socklen_t to_len = target.ToSockaddr(sock->family, &to);
  if (!JoinSolo(*sock, to, to_len)) {
    return absl::UnavailableError(absl::StrCat("no answer from ", target.ToString()));
  }
  const std::vector<uint8_t> payload(o.payload_bytes, 0);
  wire::CaisHeader h;
  h.group_id = kGroup;
  h.payload_len = static_cast<uint16_t>(o.payload_bytes);
  uint32_t seq = 1;
  net::SendBatch tx = net::SendBatch::For(*sock, o.window, wire::kCaisHeaderBytes);
  net::RecvBatch rx = net::RecvBatch::For(*sock, 32, wire::kCaisHeaderBytes + o.payload_bytes);
  auto send = [&](uint64_t count) {
    for (uint64_t i = 0; i < count; ++i) {
      std::array<uint8_t, wire::kCaisHeaderBytes> head;
      h.seq_num = seq++;
      wire::SerializeCaisHeader(h, head);
      if (tx.full()) (void)tx.Flush(sock->fd.get());
      (void)tx.AddGather(to, to_len, head, payload);
    }
    (void)tx.Flush(sock->fd.get());
  };
  TargetLoad load;
  const double cpu0 = pid > 0 ? ProcessCpuSeconds(pid) : 0;
  const double busy0 = MachineBusySeconds();
  const auto t0 = std::chrono::steady_clock::now();
  const auto limit = t0 + std::chrono::duration<double>(o.max_seconds);
  send(o.window);
  while (load.packets < o.packets && std::chrono::steady_clock::now() < limit) {
    pollfd p{sock->fd.get(), POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) {  // replies lost: refill the window
      load.lost += o.window;
      send(o.window);
      continue;
    }
    uint64_t got = 0;
    for (int n; (n = rx.Receive(sock->fd.get())) > 0;) got += static_cast<uint64_t>(n);
    load.packets += got;
    send(got);
  }
  load.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (pid > 0) load.cpu_seconds = ProcessCpuSeconds(pid) - cpu0;
  load.machine_cpu_seconds = MachineBusySeconds() - busy0;
  return load;
}

// The target on `io` (the client too); `target_io` overrides the target's
// --io (the forwarder's "uring").
absl::StatusOr<TargetLoad> Measure(bool switchd, net::IoMode io, const ReflectOptions& o,
                                   const std::string& target_io = "") {
  const std::string addr = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(true));
  const std::string mode = target_io.empty() ? std::string(net::ToString(io)) : target_io;
  launch::Process proc =
      switchd ? launch::Process::Spawn(o.switchd_path,
                                       {"--listen", addr, "--log-level", "warn", "--control-listen",
                                        "off", "--http-listen", "off", "--chunk-size",
                                        absl::StrCat(o.payload_bytes), "--io", mode},
                                       true)
              : launch::Process::Spawn(o.forwarder_path, {"--listen", addr, "--io", mode}, true);
  if (!proc.running()) return absl::UnavailableError("could not start the target");
  auto load = Drive(*net::Endpoint::Parse(addr), proc.pid(), io, o);
  proc.Signal(SIGTERM);
  proc.Wait(std::chrono::seconds(5));
  return load;
}

// inca-switchd --threads `threads`, one client thread per shard.
absl::StatusOr<TargetLoad> MeasureShards(uint32_t threads, net::IoMode io,
                                         const ReflectOptions& o) {
  const std::string addr = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(true));
  launch::Process proc = launch::Process::Spawn(
      o.switchd_path,
      {"--listen", addr, "--log-level", "warn", "--control-listen", "off", "--http-listen", "off",
       "--chunk-size", absl::StrCat(o.payload_bytes), "--io", std::string(net::ToString(io)),
       "--threads", absl::StrCat(threads)},
      true);
  if (!proc.running()) return absl::UnavailableError("could not start inca-switchd");
  const net::Endpoint base = *net::Endpoint::Parse(addr);
  ReflectOptions each = o;
  each.packets = o.packets / threads;
  std::vector<absl::StatusOr<TargetLoad>> loads(threads, TargetLoad{});
  const double cpu0 = ProcessCpuSeconds(proc.pid());
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::vector<std::thread> clients;
    for (uint32_t i = 0; i < threads; ++i) {
      clients.emplace_back([&, i] {
        loads[i] = Drive(base.WithPort(static_cast<uint16_t>(base.port() + i)), -1, io, each);
      });
    }
    for (auto& t : clients) t.join();
  }
  TargetLoad sum;
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sum.cpu_seconds = ProcessCpuSeconds(proc.pid()) - cpu0;
  proc.Signal(SIGTERM);
  proc.Wait(std::chrono::seconds(5));
  for (const auto& l : loads) {
    if (!l.ok()) return l.status();
    sum.packets += l->packets;
    sum.lost += l->lost;
  }
  return sum;
}

void PrintTarget(std::ostream& out, const char* name, const TargetLoad& t, double gbit) {
  out << "  " << std::left << std::setw(15) << name << ' ' << std::right << std::fixed
      << std::setprecision(0) << t.pps() << " pkt/s (" << std::setprecision(2) << t.pps() * gbit
      << " Gbit/s), " << std::setprecision(0) << t.per_cpu_second()
      << " pkt per target CPU-second, " << t.per_machine_cpu_second()
      << " per machine CPU-second\n";
}

// options.target: that reflector alone, on each of the client's --io paths.
absl::StatusOr<ReflectResult> RunExternal(const ReflectOptions& o, std::ostream& out) {
  auto target = net::Endpoint::Resolve(o.target);
  if (!target.ok()) return target.status();
  ReflectResult result;
  const double gbit = 8.0 * (wire::kCaisHeaderBytes + o.payload_bytes) / 1e9;
  for (net::IoMode io : o.io) {
    auto load = Drive(*target, o.target_pid, io, o);
    if (!load.ok()) return load.status();
    out << "payload " << o.payload_bytes << " B, window " << o.window << ", client io "
        << net::ToString(io) << "\n";
    PrintTarget(out, o.target.c_str(), *load, gbit);
    result.external.push_back(*load);
  }
  return result;
}

}  // namespace

double ProcessCpuSeconds(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(f, line)) return -1;
  // Fields after the command (which may hold spaces) start after the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double MachineBusySeconds() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  if (!(f >> cpu) || cpu != "cpu") return -1;
  unsigned long long v = 0, busy = 0;
  // user nice system [idle iowait] irq softirq [steal: another guest's]
  for (int i = 0; i < 8 && f >> v; ++i) {
    if (i != 3 && i != 4 && i != 7) busy += v;
  }
  return static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

absl::StatusOr<ReflectResult> RunReflectBench(const ReflectOptions& o, std::ostream& out) {
  if (!o.target.empty()) return RunExternal(o, out);
  ReflectResult result;
  const double gbit = 8.0 * (wire::kCaisHeaderBytes + o.payload_bytes) / 1e9;
  for (net::IoMode io : o.io) {
    ReflectRow row;
    row.io = io;
    auto fwd = Measure(false, io, o);
    if (!fwd.ok()) return fwd.status();
    auto sw = Measure(true, io, o);
    if (!sw.ok()) return sw.status();
    row.forwarder = *fwd;
    row.switchd = *sw;
    out << "payload " << o.payload_bytes << " B, window " << o.window << ", io "
        << net::ToString(io) << "\n";
    PrintTarget(out, "udp-forwarder", row.forwarder, gbit);
    PrintTarget(out, "inca-switchd", row.switchd, gbit);
    out << std::setprecision(2)
        << "  ratio switchd / forwarder: " << row.switchd.pps() / row.forwarder.pps()
        << " (per target CPU-second: "
        << row.switchd.per_cpu_second() / row.forwarder.per_cpu_second() << ")\n";
    if (o.threads > 1) {
      auto one = MeasureShards(1, io, o);
      if (!one.ok()) return one.status();
      auto many = MeasureShards(o.threads, io, o);
      if (!many.ok()) return many.status();
      row.one_shard = *one;
      row.sharded = *many;
      const std::string name = absl::StrCat("--threads ", o.threads);
      PrintTarget(out, "--threads 1", row.one_shard, gbit);
      PrintTarget(out, name.c_str(), row.sharded, gbit);
      out << std::setprecision(2) << "  --threads " << o.threads
          << " / --threads 1: " << row.sharded.pps() / row.one_shard.pps() << "x pkt/s (wall), "
          << row.sharded.per_cpu_second() / row.one_shard.per_cpu_second()
          << "x pkt per switchd CPU-second\n";
    }
    result.rows.push_back(row);
  }
  const ReflectRow* mmsg = nullptr;
  const ReflectRow* gso = nullptr;
  for (const ReflectRow& r : result.rows) (r.io == net::IoMode::kGso ? gso : mmsg) = &r;
  if (mmsg != nullptr && gso != nullptr) {
    out << std::setprecision(2) << "  gso / mmsg, payload " << o.payload_bytes
        << " B: inca-switchd " << gso->switchd.pps() / mmsg->switchd.pps() << "x pkt/s, "
        << gso->switchd.per_cpu_second() / mmsg->switchd.per_cpu_second()
        << "x pkt per CPU-second; udp-forwarder " << gso->forwarder.pps() / mmsg->forwarder.pps()
        << "x, " << gso->forwarder.per_cpu_second() / mmsg->forwarder.per_cpu_second() << "x\n";
  }
  if (o.uring) {
    auto u = Measure(false, net::IoMode::kMmsg, o, "uring");
    if (!u.ok()) return u.status();
    result.uring = *u;
    PrintTarget(out, "io_uring fwd", result.uring, gbit);
    for (const ReflectRow& r : result.rows) {
      out << std::setprecision(2) << "  uring / " << net::ToString(r.io)
          << " forwarder: " << result.uring.pps() / r.forwarder.pps() << "x pkt/s, "
          << result.uring.per_cpu_second() / r.forwarder.per_cpu_second()
          << "x pkt per CPU-second\n";
    }
  }
  return result;
}

}  // namespace inca::perf
