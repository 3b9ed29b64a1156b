#include "switchd/program_host.h"

#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"

namespace inca::switchd {

absl::StatusOr<std::unique_ptr<ProgramHost>> ProgramHost::Create(const ProgramHostOptions& options,
                                                                 const net::TimeSource& clock) {
  auto socket =
      net::BindUdp(options.listen,
                   net::UdpOptions{.buffer_bytes = options.socket_buffer_bytes, .io = options.io});
  if (!socket.ok()) return socket.status();
  auto wakeup = net::Wakeup::Create();
  if (!wakeup.ok()) return wakeup.status();
  return std::unique_ptr<ProgramHost>(
      new ProgramHost(options, std::move(*socket), std::move(*wakeup), &clock));
}

ProgramHost::ProgramHost(const ProgramHostOptions& options, net::UdpSocket socket,
                         net::Wakeup wakeup, const net::TimeSource* clock)
    : clock_(clock),
      socket_(std::move(socket)),
      wakeup_(std::move(wakeup)),
      // Receive slots hold any UDP datagram, so nothing is silently cut short.
      rx_(options.batch_size, net::kAnyMessageBytes),
      tx_(net::SendBatch::For(socket_, options.batch_size, options.max_packet_bytes)) {
  live_.io_gso = socket_.gso;
  live_.io_gro = socket_.gro;
}

ProgramHost::~ProgramHost() = default;

void ProgramHost::Stop() noexcept {
  stop_.store(true);
  wakeup_.Notify();
}

void ProgramHost::SendGather(dp::PortId port, std::span<const uint8_t> head,
                             std::span<const uint8_t> payload, uint64_t share) {
  const net::Endpoint* to = ports_.endpoint(port);
  if (to == nullptr) {
    ++live_.egress_unmapped;
    return;
  }
  if (tx_.full()) Flush();
  if (!tx_.AddShared(*to, head, payload, share))
    ++live_.send_errors;  // too large, or not reachable
}

void ProgramHost::Flush() {
  if (tx_.empty()) return;
  const net::SendBatch::Result r = tx_.Flush(socket_.fd.get());
  live_.datagrams_tx += r.sent;
  live_.messages_tx += r.messages;
  live_.send_errors += r.failed + r.would_block;
  if (r.gso_disabled) {
    ++live_.gso_fallbacks;
    live_.io_gso = false;
    spdlog::warn(
        "event=gso_disabled error=\"{}\" hint=\"segmented sends refused; sending one "
        "datagram per message from now on\"",
        std::strerror(r.last_errno));
  }
  if (r.failed > 0) {
    spdlog::debug("event=send_error count={} error=\"{}\"", r.failed, std::strerror(r.last_errno));
  }
}

bool ProgramHost::SendNow(const sockaddr_storage& to, socklen_t to_len,
                          std::span<const uint8_t> packet) {
  ssize_t n;
  do {
    n = ::sendto(socket_.fd.get(), packet.data(), packet.size(), 0,
                 reinterpret_cast<const sockaddr*>(&to), to_len);
  } while (n < 0 && errno == EINTR);
  return n >= 0;
}

void ProgramHost::AccountIngressDelay(size_t n) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const int64_t wall = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  for (size_t i = 0; i < n; ++i) {
    const int64_t rx = rx_.rx_realtime_ns(i);
    if (rx == 0 || rx > wall) continue;  // no timestamp, or the clock stepped
    live_.ingress_delay_ns_total += static_cast<uint64_t>(wall - rx);
    ++live_.ingress_delay_samples;
  }
}

absl::Status ProgramHost::Run(Hooks& hooks) {
  absl::Status status;
  pollfd fds[2] = {{socket_.fd.get(), POLLIN, 0}, {wakeup_.fd(), POLLIN, 0}};
  bool busy = false;  // the last receive filled the batch: more is probably waiting
  while (!stop_.load()) {
    bool readable = busy;
    if (!busy) {
      // Sleep until the next datagram, the program's next wake-up or at
      // most 1 ms (control tasks and Stop() are woken by the eventfd).
      const dp::TimeNs wake = hooks.NextWakeNs();
      dp::TimeNs wait = dp::kNsPerMs;
      if (wake != kNoWake) wait = std::clamp<dp::TimeNs>(wake - Now(), 0, wait);
      const timespec ts{0, static_cast<long>(wait)};
      const int r = ::ppoll(fds, 2, &ts, nullptr);
      if (r < 0 && errno != EINTR) {
        status = absl::InternalError(absl::StrCat("ppoll: ", std::strerror(errno)));
        break;
      }
      if (r > 0 && (fds[1].revents & POLLIN) != 0) wakeup_.Drain();
      readable = r > 0 && (fds[0].revents & (POLLIN | POLLERR)) != 0;
    }
    busy = false;
    if (readable) {
      const int n = rx_.Receive(socket_.fd.get());
      if (n < 0) {
        spdlog::debug("event=recv_error error=\"{}\"", std::strerror(-n));
      } else if (n > 0) {
        const dp::TimeNs now = Now();
        AccountIngressDelay(static_cast<size_t>(n));
        live_.messages_rx += rx_.messages();
        for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
          ++live_.datagrams_rx;
          if (rx_.truncated(i)) ++live_.rx_truncated;
          const Datagram d{rx_.data(i),
                           net::Endpoint::FromSockaddr(rx_.source(i), rx_.source_len(i)),
                           rx_.source(i), rx_.source_len(i)};
          hooks.OnDatagram(d, now);
        }
        Flush();
        busy = rx_.filled();
      }
    }
    hooks.OnTick(Now());
    Flush();
  }
  Flush();
  return status;
}

}  // namespace inca::switchd
