#include "inca/olaf/worker_endpoint.h"
#include "net/clock.h"
#include "net/udp.h"
#include "olaf/endpoint_socket.h"

namespace inca::olaf {

struct OlafWorkerEndpoint::Impl : EndpointSocket {
  sockaddr_storage peer{};
  socklen_t peer_len = 0;
};

OlafWorkerEndpoint::~OlafWorkerEndpoint() = default;

dp::TimeNs OlafWorkerEndpoint::Now() {
  return net::SystemClock().NowNs();
}

absl::StatusOr<std::unique_ptr<OlafWorkerEndpoint>> OlafWorkerEndpoint::Create(
    OlafWorkerEndpointOptions options) {
  auto peer = net::Endpoint::Resolve(options.peer);
  if (!peer.ok()) return peer.status();
  if (peer->port() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer '", options.peer, "': port must be 1..65535"));
  }
  auto core = WorkerCore::Create(options.worker);
  if (!core.ok()) return core.status();
  auto sock = EndpointSocket::Open(options.bind, options.socket_buffer_bytes);
  if (!sock.ok()) return sock.status();
  sockaddr_storage to{};
  const socklen_t to_len = peer->ToSockaddr(sock->socket.family, &to);
  if (to_len == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer ", peer->ToString(), " cannot be reached from ", options.bind));
  }
  std::unique_ptr<OlafWorkerEndpoint> e(new OlafWorkerEndpoint());
  e->impl_ = std::make_unique<Impl>(Impl{*std::move(sock), to, to_len});
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
  Impl& im = *impl_;
  auto flush = [&] {
    const net::SendBatch::Result r = im.tx.Flush(im.socket.fd.get());
    o.datagrams += r.sent;
    o.send_errors += r.failed + r.would_block;
  };
  for (const auto& d : w->datagrams) {
    if (im.tx.full()) flush();
    if (!im.tx.AddGather(im.peer, im.peer_len, {}, d)) ++o.send_errors;
  }
  flush();
  io_.send_errors += o.send_errors;
  return o;
}

size_t OlafWorkerEndpoint::Poll(std::chrono::milliseconds timeout) {
  return impl_->Receive(timeout, &io_, [&](const net::RecvBatch& b, size_t i) {
    core_->OnDatagram(b.data(i), Now());
  });
}

std::string OlafWorkerEndpoint::local_address() const {
  return impl_->socket.local.ToString();
}

uint16_t OlafWorkerEndpoint::local_port() const {
  return impl_->socket.local.port();
}

}  // namespace inca::olaf
