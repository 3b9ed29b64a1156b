// Private to olafnet: the small IPv4 UDP socket the OLAF endpoints use.
// Linux only; not thread-safe.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "inca/dataplane/program.h"

namespace inca::olaf::net {

// "host:port" (IPv4 dotted quad or "localhost"); port 0 only when
// `allow_port0` (a bind address).
absl::StatusOr<sockaddr_in> ParseV4(const std::string& address, bool allow_port0);
std::string ToString(const sockaddr_in& a);
// Host-order address and port, as FlowKey::V4 takes them.
inline uint32_t HostIp(const sockaddr_in& a) {
  return ntohl(a.sin_addr.s_addr);
}
inline uint16_t HostPort(const sockaddr_in& a) {
  return ntohs(a.sin_port);
}
bool SameAddress(const sockaddr_in& a, const sockaddr_in& b);

// steady_clock (CLOCK_MONOTONIC) in ns: the clock inca-switchd stamps with.
dp::TimeNs MonotonicNs();

class UdpSocket {
 public:
  // Bound to `bind`, non-blocking, with SO_RCVBUF/SO_SNDBUF of about
  // `buffer_bytes` (0 = kernel defaults).
  static absl::StatusOr<UdpSocket> Bind(const std::string& bind, size_t buffer_bytes);
  UdpSocket(UdpSocket&& o) noexcept;
  UdpSocket& operator=(UdpSocket&& o) noexcept;
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;
  ~UdpSocket();

  const sockaddr_in& local() const { return local_; }

  // Sends one datagram, waiting (poll, up to 1 s) while the buffer is full.
  // False when the kernel refuses it.
  bool SendTo(const sockaddr_in& to, std::span<const uint8_t> data);

  struct Received {
    std::span<const uint8_t> data;
    sockaddr_in from{};
    bool truncated = false;
  };
  // Waits up to `timeout` for the socket to be readable, then calls
  // `handle` for every waiting datagram, at most `max` of them. The span is
  // valid during the call only. Returns the datagrams handed over.
  size_t Receive(std::chrono::milliseconds timeout, size_t max,
                 absl::FunctionRef<void(const Received&)> handle);

 private:
  explicit UdpSocket(int fd) : fd_(fd) {}
  int fd_ = -1;
  sockaddr_in local_{};
  std::vector<uint8_t> buf_;
};

}  // namespace inca::olaf::net
