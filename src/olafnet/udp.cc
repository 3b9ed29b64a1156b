#include "olafnet/udp.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace inca::olaf::net {

absl::StatusOr<sockaddr_in> ParseV4(const std::string& address, bool allow_port0) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "' must be HOST:PORT, e.g. 127.0.0.1:9500"));
  }
  std::string host = address.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  uint32_t port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535 ||
      (port == 0 && !allow_port0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "': port must be ", allow_port0 ? "0" : "1", "..65535"));
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "': '", host, "' is not an IPv4 address"));
  }
  return sa;
}

std::string ToString(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
  return absl::StrCat(ip, ":", ntohs(a.sin_port));
}

bool SameAddress(const sockaddr_in& a, const sockaddr_in& b) {
  return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}

dp::TimeNs MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

void SetBuffer(int fd, int opt_force, int opt, size_t bytes) {
  if (bytes == 0) return;
  const int v = static_cast<int>(std::min<size_t>(bytes, size_t{1} << 30));
  // Root may exceed net.core.{r,w}mem_max; others get what the kernel allows.
  if (setsockopt(fd, SOL_SOCKET, opt_force, &v, sizeof(v)) != 0) {
    setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
  }
}

}  // namespace

absl::StatusOr<UdpSocket> UdpSocket::Bind(const std::string& bind_address, size_t buffer_bytes) {
  auto local = ParseV4(bind_address, /*allow_port0=*/true);
  if (!local.ok()) return local.status();
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  UdpSocket s(fd);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*local), sizeof(*local)) != 0) {
    return absl::UnavailableError(absl::StrCat("bind ", bind_address, ": ", std::strerror(errno)));
  }
  socklen_t len = sizeof(s.local_);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&s.local_), &len) != 0) {
    return absl::InternalError(absl::StrCat("getsockname: ", std::strerror(errno)));
  }
  SetBuffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, buffer_bytes);
  SetBuffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, buffer_bytes);
  // One byte more than the largest datagram, so oversize ones are detected.
  s.buf_.resize(65536);
  return s;
}

UdpSocket::UdpSocket(UdpSocket&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), local_(o.local_), buf_(std::move(o.buf_)) {}

UdpSocket& UdpSocket::operator=(UdpSocket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    local_ = o.local_;
    buf_ = std::move(o.buf_);
  }
  return *this;
}

UdpSocket::~UdpSocket() {
  if (fd_ >= 0) close(fd_);
}

bool UdpSocket::SendTo(const sockaddr_in& to, std::span<const uint8_t> data) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const ssize_t n = sendto(fd_, data.data(), data.size(), 0,
                             reinterpret_cast<const sockaddr*>(&to), sizeof(to));
    if (n == static_cast<ssize_t>(data.size())) return true;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)) {
      pollfd p{fd_, POLLOUT, 0};
      poll(&p, 1, 1);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
  return false;
}

size_t UdpSocket::Receive(std::chrono::milliseconds timeout, size_t max,
                          absl::FunctionRef<void(const Received&)> handle) {
  pollfd p{fd_, POLLIN, 0};
  const int ms = static_cast<int>(std::max<int64_t>(0, timeout.count()));
  if (poll(&p, 1, ms) <= 0) return 0;
  size_t n = 0;
  while (n < max) {
    Received r;
    socklen_t len = sizeof(r.from);
    const ssize_t got = recvfrom(fd_, buf_.data(), buf_.size(), MSG_TRUNC,
                                 reinterpret_cast<sockaddr*>(&r.from), &len);
    if (got < 0) {
      if (errno == EINTR) continue;
      break;  // EAGAIN: drained (or an error such as ECONNREFUSED: try later)
    }
    r.truncated = static_cast<size_t>(got) > buf_.size();
    r.data = std::span<const uint8_t>(buf_.data(), std::min(static_cast<size_t>(got), buf_.size()));
    handle(r);
    ++n;
  }
  return n;
}

}  // namespace inca::olaf::net
