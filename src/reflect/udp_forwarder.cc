#include "reflect/udp_forwarder.h"

#include <poll.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace inca::reflect {

namespace {
constexpr size_t kSlotBytes = 65536;  // any UDP datagram
}  // namespace

std::string UdpForwarderCounters::ToJson() const {
  return absl::StrCat("{\"datagrams_rx\":", datagrams_rx, ",\"datagrams_tx\":", datagrams_tx,
                      ",\"send_errors\":", send_errors, ",\"messages_rx\":", messages_rx,
                      ",\"messages_tx\":", messages_tx, ",\"dropped\":", dropped, "}");
}

absl::StatusOr<std::unique_ptr<UdpForwarder>> UdpForwarder::Create(
    const UdpForwarderConfig& config) {
  if (config.batch_size < 1 || config.batch_size > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size ", config.batch_size, " out of range [1, 1024]"));
  }
  auto listen = net::Endpoint::Resolve(config.listen);
  if (!listen.ok()) return listen.status();
  std::vector<net::Endpoint> targets;
  for (const std::string& f : config.forward) {
    auto ep = net::Endpoint::Resolve(f);
    if (!ep.ok()) return ep.status();
    if (!listen->is_v6() && ep->is_v6()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "forward target ", f, " is IPv6 but the listen address is IPv4; listen on [::]"));
    }
    targets.push_back(*ep);
  }
  auto socket = net::BindUdp(
      *listen, net::UdpOptions{.buffer_bytes = config.socket_buffer_bytes, .io = config.io});
  if (!socket.ok()) return socket.status();
  auto wakeup = net::Wakeup::Create();
  if (!wakeup.ok()) return wakeup.status();
  return std::unique_ptr<UdpForwarder>(
      new UdpForwarder(config, std::move(*socket), std::move(*wakeup), std::move(targets)));
}

UdpForwarder::UdpForwarder(const UdpForwarderConfig& config, net::UdpSocket socket,
                           net::Wakeup wakeup, std::vector<net::Endpoint> targets)
    : socket_(std::move(socket)),
      wakeup_(std::move(wakeup)),
      targets_(std::move(targets)),
      rx_(config.batch_size, kSlotBytes),
      tx_(net::SendBatch::For(socket_, config.batch_size, kSlotBytes)) {}

void UdpForwarder::Stop() noexcept {
  stop_.store(true);
  wakeup_.Notify();
}

UdpForwarderCounters UdpForwarder::counters() const {
  absl::MutexLock lock(&mu_);
  return snapshot_;
}

void UdpForwarder::Flush() {
  const net::SendBatch::Result r = tx_.Flush(socket_.fd.get());
  live_.datagrams_tx += r.sent;
  live_.messages_tx += r.messages;
  live_.send_errors += r.failed + r.would_block;
}

absl::Status UdpForwarder::Run() {
  pollfd fds[2] = {{socket_.fd.get(), POLLIN, 0}, {wakeup_.fd(), POLLIN, 0}};
  bool busy = false;
  while (!stop_.load()) {
    bool readable = busy;
    if (!busy) {
      const int r = ::poll(fds, 2, /*timeout_ms=*/100);
      if (r < 0 && errno != EINTR)
        return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
      if (r > 0 && (fds[1].revents & POLLIN) != 0) wakeup_.Drain();
      readable = r > 0 && (fds[0].revents & (POLLIN | POLLERR)) != 0;
    }
    busy = false;
    if (!readable) continue;
    const int n = rx_.Receive(socket_.fd.get());
    if (n <= 0) continue;
    live_.messages_rx += rx_.messages();
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      ++live_.datagrams_rx;
      const auto d = rx_.data(i);
      if (targets_.empty()) {
        if (tx_.full()) Flush();
        if (!tx_.Add(rx_.source(i), rx_.source_len(i), d)) ++live_.send_errors;
        continue;
      }
      for (const net::Endpoint& t : targets_) {
        if (tx_.full()) Flush();
        if (!tx_.Add(t, d)) ++live_.send_errors;
      }
    }
    Flush();
    busy = rx_.filled();
    absl::MutexLock lock(&mu_);
    snapshot_ = live_;
  }
  absl::MutexLock lock(&mu_);
  snapshot_ = live_;
  return absl::OkStatus();
}

}  // namespace inca::reflect
