#include "inca/olaf/worker.h"
#include "olafnet/udp.h"

namespace inca::olaf {

struct OlafWorkerEndpoint::Impl {
  net::UdpSocket socket;
  sockaddr_in peer{};
};

OlafWorkerEndpoint::~OlafWorkerEndpoint() = default;

dp::TimeNs OlafWorkerEndpoint::Now() {
  return net::MonotonicNs();
}

absl::StatusOr<std::unique_ptr<OlafWorkerEndpoint>> OlafWorkerEndpoint::Create(
    OlafWorkerEndpointOptions options) {
  auto peer = net::ParseV4(options.peer, /*allow_port0=*/false);
  if (!peer.ok()) return peer.status();
  auto core = WorkerCore::Create(options.worker);
  if (!core.ok()) return core.status();
  auto sock = net::UdpSocket::Bind(options.bind, options.socket_buffer_bytes);
  if (!sock.ok()) return sock.status();
  std::unique_ptr<OlafWorkerEndpoint> e(new OlafWorkerEndpoint());
  e->impl_ = std::make_unique<Impl>(Impl{*std::move(sock), *peer});
  e->core_ = *std::move(core);
  return e;
}

absl::StatusOr<WorkerSendOutcome> OlafWorkerEndpoint::Send(std::span<const float> grad,
                                                           uint32_t model_version) {
  auto w = core_->Generate(grad, model_version, Now());
  if (!w.ok()) return w.status();
  WorkerSendOutcome o;
  o.sent = w->sent;
  o.probability = w->probability;
  o.update_id = w->update_id;
  for (const auto& d : w->datagrams) {
    if (impl_->socket.SendTo(impl_->peer, d)) {
      ++o.datagrams;
    } else {
      ++o.send_errors;
      ++io_.send_errors;
    }
  }
  return o;
}

size_t OlafWorkerEndpoint::Poll(std::chrono::milliseconds timeout) {
  return impl_->socket.Receive(timeout, 4096, [&](const net::UdpSocket::Received& r) {
    ++io_.datagrams_rx;
    if (r.truncated) {
      ++io_.truncated;
      return;
    }
    core_->OnDatagram(r.data, Now());
  });
}

std::string OlafWorkerEndpoint::local_address() const {
  return net::ToString(impl_->socket.local());
}

uint16_t OlafWorkerEndpoint::local_port() const {
  return net::HostPort(impl_->socket.local());
}

}  // namespace inca::olaf
