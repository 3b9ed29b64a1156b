// A UDP endpoint (IPv4 or IPv6 address + port) as a small, comparable,
// hashable value: what inca-switchd's port table keys on.
//
// IPv4-mapped IPv6 addresses (::ffff:a.b.c.d, what a dual-stack socket
// reports for IPv4 peers) are stored as IPv4, so one peer compares equal
// whichever socket family saw it. ToSockaddr() maps back when sending.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace inca::net {

class Endpoint {
 public:
  Endpoint() = default;  // invalid: family 0, matches nothing a socket reports

  // "a.b.c.d:port" or "[v6addr]:port", numeric only. InvalidArgument quoting
  // the text otherwise.
  static absl::StatusOr<Endpoint> Parse(std::string_view host_port);
  // As Parse, but the host may also be a name (getaddrinfo; first result).
  static absl::StatusOr<Endpoint> Resolve(std::string_view host_port);
  // From an AF_INET / AF_INET6 socket address; any other family (or a short
  // length) gives an invalid Endpoint.
  static Endpoint FromSockaddr(const sockaddr_storage& addr, socklen_t len);

  bool valid() const { return family_ != 0; }
  bool is_v6() const { return family_ == 6; }
  uint16_t port() const { return port_; }
  // The same address with another port.
  Endpoint WithPort(uint16_t port) const {
    Endpoint e = *this;
    e.port_ = port;
    return e;
  }

  // Writes this endpoint as an address for a socket of `socket_family`
  // (AF_INET or AF_INET6; IPv6 sockets reach IPv4 peers through mapped
  // addresses). Returns the address length, or 0 when it cannot be expressed
  // (an IPv6 peer on an IPv4 socket, or an invalid endpoint).
  socklen_t ToSockaddr(int socket_family, sockaddr_storage* out) const;

  // The address as 16 bytes, IPv4 written v4-mapped (::ffff:a.b.c.d).
  std::array<uint8_t, 16> V6MappedAddress() const;

  // "127.0.0.1:9410", "[::1]:9410"; "invalid" for a default Endpoint.
  std::string ToString() const;

  // 127.0.0.0/8, ::1, or an IPv4 loopback address written v4-mapped.
  bool IsLoopback() const;

  friend bool operator==(const Endpoint&, const Endpoint&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Endpoint& e) {
    return H::combine(std::move(h), e.family_, e.port_, e.scope_id_, e.addr_);
  }

 private:
  uint8_t family_ = 0;  // 4, 6, or 0 (invalid)
  uint16_t port_ = 0;
  uint32_t scope_id_ = 0;           // IPv6 link-local scope
  std::array<uint8_t, 16> addr_{};  // IPv4 uses the first 4 bytes
};

// Whether datagrams to `e` stay on this host: a loopback address, or an
// address of one of this network namespace's interfaces (getifaddrs), which
// the kernel delivers through the loopback device too. False when the
// interfaces cannot be listed.
bool OnThisHost(const Endpoint& e);

// Splits "host:port" / "[v6]:port" into host and port. InvalidArgument if
// the port is missing, not a number, or out of 0..65535.
absl::StatusOr<std::pair<std::string, uint16_t>> SplitHostPort(std::string_view host_port);

}  // namespace inca::net
