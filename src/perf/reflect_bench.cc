#include "perf/reflect_bench.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iomanip>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/switch_transport.h"
#include "inca/wire/cais.h"
#include "inca/wire/mgmt.h"
#include "testing/process.h"

namespace inca::perf {

namespace {

struct Load {
  double pps = 0;
  uint64_t lost = 0;
};

// Joins group 250 as its only rank (a no-op for the forwarder, which
// reflects the JOIN and the client ignores the echo).
bool JoinSolo(int fd, const sockaddr_in& to) {
  wire::MgmtMessage j;
  j.type = wire::MgmtType::kJoin;
  j.group_id = 250;
  j.rank = 0;
  j.world_size = 1;
  j.nonce = 99;
  std::vector<uint8_t> b;
  wire::SerializeMgmt(j, &b);
  for (int tries = 0; tries < 50; ++tries) {
    sendto(fd, b.data(), b.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to));
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    uint8_t buf[512];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    wire::MgmtMessage m;
    if (n > 0 && wire::ParseMgmt({buf, static_cast<size_t>(n)}, &m)) {
      return m.type == wire::MgmtType::kJoin ||  // reflected by the forwarder
             (m.type == wire::MgmtType::kJoinReply && m.status == wire::MgmtStatus::kOk);
    }
  }
  return false;
}

absl::StatusOr<Load> Drive(const std::string& addr, const ReflectOptions& o) {
  auto to = client::ParseIpv4Endpoint(addr);
  if (!to.ok()) return to.status();
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  const int big = 16 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
  if (!JoinSolo(fd, *to)) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("no answer from ", addr));
  }
  std::vector<uint8_t> pkt(wire::kCaisHeaderBytes + o.payload_bytes, 0);
  wire::CaisHeader h;
  h.group_id = 250;
  h.payload_len = o.payload_bytes;
  uint32_t seq = 1;
  auto send_one = [&] {
    h.seq_num = seq++;
    wire::SerializeCaisHeader(h, pkt);
    sendto(fd, pkt.data(), pkt.size(), 0, reinterpret_cast<const sockaddr*>(&*to), sizeof(*to));
  };
  Load load;
  for (uint32_t i = 0; i < o.window; ++i) send_one();
  std::vector<uint8_t> buf(pkt.size() + 64);
  uint64_t got = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const auto limit = t0 + std::chrono::duration<double>(o.max_seconds);
  while (got < o.packets && std::chrono::steady_clock::now() < limit) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) {  // replies lost: refill the window
      load.lost += o.window;
      for (uint32_t i = 0; i < o.window; ++i) send_one();
      continue;
    }
    while (recv(fd, buf.data(), buf.size(), MSG_DONTWAIT) > 0) {
      ++got;
      send_one();
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  load.pps = static_cast<double>(got) / s;
  close(fd);
  return load;
}

}  // namespace

absl::StatusOr<ReflectResult> RunReflectBench(const ReflectOptions& o, std::ostream& out) {
  ReflectResult r;
  for (int which = 0; which < 2; ++which) {
    const std::string addr = absl::StrCat("127.0.0.1:", testing::FreeLoopbackPort(true));
    testing::Process proc =
        which == 0 ? testing::Process::Spawn(o.forwarder_path, {"--listen", addr}, true)
                   : testing::Process::Spawn(
                         o.switchd_path,
                         {"--listen", addr, "--log-level", "warn", "--control-listen", "off",
                          "--http-listen", "off", "--chunk-size", absl::StrCat(o.payload_bytes)},
                         true);
    if (!proc.running()) return absl::UnavailableError("could not start the target");
    auto load = Drive(addr, o);
    proc.Signal(SIGTERM);
    proc.Wait(std::chrono::seconds(5));
    if (!load.ok()) return load.status();
    (which == 0 ? r.forwarder_pps : r.switchd_pps) = load->pps;
    (which == 0 ? r.forwarder_lost : r.switchd_lost) = load->lost;
  }
  const double gbit = 8.0 * (wire::kCaisHeaderBytes + o.payload_bytes) / 1e9;
  out << std::fixed << std::setprecision(0) << "payload " << o.payload_bytes << " B, window "
      << o.window << "\n"
      << "  udp-forwarder  " << r.forwarder_pps << " pkt/s (" << std::setprecision(2)
      << r.forwarder_pps * gbit << " Gbit/s)\n"
      << std::setprecision(0) << "  inca-switchd   " << r.switchd_pps << " pkt/s ("
      << std::setprecision(2) << r.switchd_pps * gbit << " Gbit/s)\n"
      << "  ratio switchd / forwarder: " << r.switchd_pps / r.forwarder_pps << "\n";
  return r;
}

}  // namespace inca::perf
