// The one UDP socket of an OLAF endpoint (OlafWorkerEndpoint, OlafPsEndpoint)
// with its receive and send batches: opened, and read with the counting both
// endpoints report, once.
#pragma once

#include <chrono>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "net/udp.h"

namespace inca::olaf {

struct EndpointSocket {
  static constexpr size_t kBatch = 64;
  static constexpr size_t kMaxPoll = 4096;  // datagrams one Poll hands over at most

  net::UdpSocket socket;
  net::RecvBatch rx;
  net::SendBatch tx;

  // Bound to `bind` ("HOST:PORT"), GSO where the kernel has it.
  static absl::StatusOr<EndpointSocket> Open(const std::string& bind, size_t buffer_bytes) {
    auto at = net::Endpoint::Parse(bind);
    if (!at.ok()) return at.status();
    auto sock =
        net::BindUdp(*at, net::UdpOptions{.buffer_bytes = buffer_bytes, .io = net::IoMode::kGso});
    if (!sock.ok()) return sock.status();
    net::RecvBatch rx = net::RecvBatch::For(*sock, kBatch, net::kAnyMessageBytes);
    net::SendBatch tx = net::SendBatch::For(*sock, kBatch, 0);
    return EndpointSocket{*std::move(sock), std::move(rx), std::move(tx)};
  }

  // Datagrams for up to `timeout`: each counted in io->datagrams_rx, a
  // truncated one in io->truncated and dropped, the others handed to
  // handle(batch, i). Returns the datagrams received.
  template <typename Io>
  size_t Receive(std::chrono::milliseconds timeout, Io* io,
                 absl::FunctionRef<void(const net::RecvBatch&, size_t)> handle) {
    return net::ReceiveFor(socket, rx, static_cast<int>(timeout.count()), kMaxPoll,
                           [&](const net::RecvBatch& b, size_t i) {
                             ++io->datagrams_rx;
                             if (b.truncated(i)) {
                               ++io->truncated;
                               return;
                             }
                             handle(b, i);
                           });
  }
};

}  // namespace inca::olaf
