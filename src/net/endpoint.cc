#include "net/endpoint.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "util/string_compat.h"

namespace inca::net {

namespace {

using util::Av;

constexpr std::array<uint8_t, 12> kV4MappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

absl::Status BadEndpoint(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad endpoint '", Av(text), "': ", Av(why), " (want HOST:PORT or [IPV6]:PORT)"));
}

}  // namespace

absl::StatusOr<std::pair<std::string, uint16_t>> SplitHostPort(std::string_view text) {
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return BadEndpoint(text, "missing ']'");
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return BadEndpoint(text, "missing ':PORT'");
    port = rest.substr(1);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return BadEndpoint(text, "missing ':PORT'");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return BadEndpoint(text, "IPv6 addresses need brackets");
    }
  }
  if (host.empty()) return BadEndpoint(text, "missing host");
  uint32_t p = 0;
  if (port.empty() || !absl::SimpleAtoi(Av(port), &p) || p > 65535 ||
      port.find_first_not_of("0123456789") != std::string_view::npos) {
    return BadEndpoint(text, "port must be a number in 0..65535");
  }
  return std::make_pair(std::string(host), static_cast<uint16_t>(p));
}

absl::StatusOr<Endpoint> Endpoint::Parse(std::string_view host_port) {
  auto split = SplitHostPort(host_port);
  if (!split.ok()) return split.status();
  const auto& [host, port] = *split;
  sockaddr_storage ss{};
  socklen_t len = 0;
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    std::memcpy(&ss, &v4, sizeof(v4));
    len = sizeof(v4);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    std::memcpy(&ss, &v6, sizeof(v6));
    len = sizeof(v6);
  } else {
    return BadEndpoint(host_port, "host is not a numeric IPv4 or IPv6 address");
  }
  return FromSockaddr(ss, len);
}

absl::StatusOr<Endpoint> Endpoint::Resolve(std::string_view host_port) {
  if (auto parsed = Parse(host_port); parsed.ok()) return parsed;
  auto split = SplitHostPort(host_port);
  if (!split.ok()) return split.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = absl::StrCat(split->second);
  if (int rc = getaddrinfo(split->first.c_str(), service.c_str(), &hints, &res); rc != 0) {
    return BadEndpoint(host_port, absl::StrCat("cannot resolve host: ", gai_strerror(rc)));
  }
  Endpoint ep;
  for (addrinfo* ai = res; ai != nullptr && !ep.valid(); ai = ai->ai_next) {
    sockaddr_storage ss{};
    if (ai->ai_addrlen > sizeof(ss)) continue;
    std::memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    ep = FromSockaddr(ss, ai->ai_addrlen);
  }
  freeaddrinfo(res);
  if (!ep.valid()) return BadEndpoint(host_port, "no IPv4 or IPv6 address");
  return ep;
}

Endpoint Endpoint::FromSockaddr(const sockaddr_storage& addr, socklen_t len) {
  Endpoint e;
  if (addr.ss_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    sockaddr_in v4;
    std::memcpy(&v4, &addr, sizeof(v4));
    e.family_ = 4;
    e.port_ = ntohs(v4.sin_port);
    std::memcpy(e.addr_.data(), &v4.sin_addr, 4);
  } else if (addr.ss_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    sockaddr_in6 v6;
    std::memcpy(&v6, &addr, sizeof(v6));
    e.port_ = ntohs(v6.sin6_port);
    if (std::memcmp(&v6.sin6_addr, kV4MappedPrefix.data(), kV4MappedPrefix.size()) == 0) {
      e.family_ = 4;
      std::memcpy(e.addr_.data(), reinterpret_cast<const uint8_t*>(&v6.sin6_addr) + 12, 4);
    } else {
      e.family_ = 6;
      e.scope_id_ = v6.sin6_scope_id;
      std::memcpy(e.addr_.data(), &v6.sin6_addr, 16);
    }
  }
  return e;
}

socklen_t Endpoint::ToSockaddr(int socket_family, sockaddr_storage* out) const {
  *out = sockaddr_storage{};
  if (family_ == 4 && socket_family == AF_INET) {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port_);
    std::memcpy(&v4.sin_addr, addr_.data(), 4);
    std::memcpy(out, &v4, sizeof(v4));
    return sizeof(v4);
  }
  if (family_ != 0 && socket_family == AF_INET6) {
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port_);
    auto* bytes = reinterpret_cast<uint8_t*>(&v6.sin6_addr);
    if (family_ == 4) {
      std::memcpy(bytes, kV4MappedPrefix.data(), kV4MappedPrefix.size());
      std::memcpy(bytes + 12, addr_.data(), 4);
    } else {
      std::memcpy(bytes, addr_.data(), 16);
      v6.sin6_scope_id = scope_id_;
    }
    std::memcpy(out, &v6, sizeof(v6));
    return sizeof(v6);
  }
  return 0;
}

std::array<uint8_t, 16> Endpoint::V6MappedAddress() const {
  std::array<uint8_t, 16> out{};
  if (family_ == 4) {
    std::memcpy(out.data(), kV4MappedPrefix.data(), kV4MappedPrefix.size());
    std::memcpy(out.data() + 12, addr_.data(), 4);
  } else if (family_ == 6) {
    out = addr_;
  }
  return out;
}

std::string Endpoint::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family_ == 4) {
    inet_ntop(AF_INET, addr_.data(), buf, sizeof(buf));
    return absl::StrCat(buf, ":", port_);
  }
  if (family_ == 6) {
    inet_ntop(AF_INET6, addr_.data(), buf, sizeof(buf));
    return absl::StrCat("[", buf, "]:", port_);
  }
  return "invalid";
}

bool Endpoint::IsLoopback() const {
  if (family_ == 4) return addr_[0] == 127;
  if (family_ != 6) return false;
  if (std::equal(kV4MappedPrefix.begin(), kV4MappedPrefix.end(), addr_.begin())) {
    return addr_[12] == 127;
  }
  static constexpr std::array<uint8_t, 16> kV6Loopback = {0, 0, 0, 0, 0, 0, 0, 0,
                                                          0, 0, 0, 0, 0, 0, 0, 1};
  return addr_ == kV6Loopback;
}

bool OnThisHost(const Endpoint& e) {
  if (!e.valid()) return false;
  if (e.IsLoopback()) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  const std::array<uint8_t, 16> want = e.V6MappedAddress();
  bool found = false;
  for (const ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    const socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    sockaddr_storage ss{};
    std::memcpy(&ss, i->ifa_addr, len);
    const Endpoint mine = Endpoint::FromSockaddr(ss, len);
    found = mine.valid() && mine.V6MappedAddress() == want;
  }
  freeifaddrs(list);
  return found;
}

}  // namespace inca::net
