#include <algorithm>

#include "absl/strings/str_cat.h"
#include "inca/olaf/ps_endpoint.h"
#include "inca/olaf/worker_id.h"
#include "net/clock.h"
#include "net/udp.h"
#include "olaf/endpoint_socket.h"

namespace inca::olaf {

struct OlafPsEndpoint::Impl : EndpointSocket {
  size_t max_peers = 0;
  // (address, cluster) pairs that sent updates, in first-seen order.
  struct Peer {
    net::Endpoint addr;
    uint16_t cluster_id = 0;
  };
  std::vector<Peer> peers;

  // Queues `d` to `to`; sends the batch when it is full.
  void Send(const net::Endpoint& to, std::span<const uint8_t> d, PsEndpointCounters* io) {
    if (tx.full()) Flush(io);
    sockaddr_storage addr;
    const socklen_t len = to.ToSockaddr(socket.family, &addr);
    if (len == 0 || !tx.AddGather(addr, len, {}, d)) ++io->send_errors;
  }
  void Flush(PsEndpointCounters* io) {
    if (tx.empty()) return;
    const net::SendBatch::Result r = tx.Flush(socket.fd.get());
    io->datagrams_tx += r.sent;
    io->send_errors += r.failed + r.would_block;
  }
};

OlafPsEndpoint::~OlafPsEndpoint() = default;

dp::TimeNs OlafPsEndpoint::Now() {
  return net::SystemClock().NowNs();
}

absl::StatusOr<std::unique_ptr<OlafPsEndpoint>> OlafPsEndpoint::Create(
    OlafPsEndpointOptions options) {
  auto core = PsCore::Create(std::move(options.ps));
  if (!core.ok()) return core.status();
  auto sock = EndpointSocket::Open(options.bind, options.socket_buffer_bytes);
  if (!sock.ok()) return sock.status();
  std::unique_ptr<OlafPsEndpoint> e(new OlafPsEndpoint());
  e->impl_ = std::make_unique<Impl>(Impl{*std::move(sock), options.max_peers, {}});
  e->impl_->peers.reserve(std::min<size_t>(options.max_peers, 1024));
  e->core_ = *std::move(core);
  return e;
}

size_t OlafPsEndpoint::Poll(std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  const net::Endpoint& local = im.socket.local;
  // Replies refer to the PS core's buffers only until the next datagram:
  // each one's are sent before it is handled.
  const size_t n = im.Receive(timeout, &io_, [&](const net::RecvBatch& b, size_t i) {
    const net::Endpoint from = net::Endpoint::FromSockaddr(b.source(i), b.source_len(i));
    // Without a switch nobody stamped worker_id: stamp it as the first
    // switch would (the 5-tuple hash of the worker's flow).
    FlowKey flow;
    flow.src_ip = from.V6MappedAddress();
    flow.dst_ip = local.V6MappedAddress();
    flow.src_port = from.port();
    flow.dst_port = local.port();
    PsResult res = core_->OnDatagram(b.data(i), Now(), WorkerIdOf(flow));
    if (res.ack.empty()) return;  // not an UPDATE
    auto known = std::find_if(im.peers.begin(), im.peers.end(), [&](const Impl::Peer& p) {
      return p.cluster_id == res.cluster_id && p.addr == from;
    });
    if (known == im.peers.end()) {
      if (im.peers.size() < im.max_peers) {
        im.peers.push_back({from, res.cluster_id});
      } else {
        ++io_.peers_not_learned;
      }
    }
    im.Send(from, res.ack, &io_);
    for (const auto& m : res.models) im.Send(from, m, &io_);
    im.Flush(&io_);
  });
  core_->Advance(Now());
  return n;
}

absl::Status OlafPsEndpoint::BroadcastModel(std::span<const float> params, uint16_t cluster) {
  Impl& im = *impl_;
  std::vector<net::Endpoint> targets;
  for (const Impl::Peer& p : im.peers) {
    if (cluster != kAllClusters && p.cluster_id != cluster) continue;
    if (std::find(targets.begin(), targets.end(), p.addr) == targets.end()) {
      targets.push_back(p.addr);
    }
  }
  if (targets.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ps: no peer has sent updates of cluster ", cluster));
  }
  auto models = core_->BuildModel(params, cluster, Now());
  if (!models.ok()) return models.status();
  for (const net::Endpoint& t : targets) {
    for (const auto& d : *models) im.Send(t, d, &io_);
  }
  im.Flush(&io_);
  return absl::OkStatus();
}

std::string OlafPsEndpoint::local_address() const {
  return impl_->socket.local.ToString();
}

uint16_t OlafPsEndpoint::local_port() const {
  return impl_->socket.local.port();
}

}  // namespace inca::olaf
