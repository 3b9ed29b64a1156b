#include <algorithm>

#include "absl/strings/str_cat.h"
#include "inca/olaf/olaf_switch.h"
#include "inca/olaf/ps.h"
#include "olafnet/udp.h"

namespace inca::olaf {

struct OlafPsEndpoint::Impl {
  net::UdpSocket socket;
  size_t max_peers = 0;
  // (address, cluster) pairs that sent updates, in first-seen order.
  struct Peer {
    sockaddr_in addr{};
    uint16_t cluster_id = 0;
  };
  std::vector<Peer> peers;
};

OlafPsEndpoint::~OlafPsEndpoint() = default;

dp::TimeNs OlafPsEndpoint::Now() {
  return net::MonotonicNs();
}

absl::StatusOr<std::unique_ptr<OlafPsEndpoint>> OlafPsEndpoint::Create(
    OlafPsEndpointOptions options) {
  auto core = PsCore::Create(std::move(options.ps));
  if (!core.ok()) return core.status();
  auto sock = net::UdpSocket::Bind(options.bind, options.socket_buffer_bytes);
  if (!sock.ok()) return sock.status();
  std::unique_ptr<OlafPsEndpoint> e(new OlafPsEndpoint());
  e->impl_ = std::make_unique<Impl>(Impl{*std::move(sock), options.max_peers, {}});
  e->impl_->peers.reserve(std::min<size_t>(options.max_peers, 1024));
  e->core_ = *std::move(core);
  return e;
}

size_t OlafPsEndpoint::Poll(std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  const sockaddr_in& local = im.socket.local();
  const size_t n = im.socket.Receive(timeout, 4096, [&](const net::UdpSocket::Received& r) {
    ++io_.datagrams_rx;
    if (r.truncated) {
      ++io_.truncated;
      return;
    }
    // Without a switch nobody stamped worker_id: stamp it as the first
    // switch would (the 5-tuple hash of the worker's flow).
    const uint32_t flow_worker = WorkerIdOf(FlowKey::V4(
        net::HostIp(r.from), net::HostIp(local), net::HostPort(r.from), net::HostPort(local)));
    PsResult res = core_->OnDatagram(r.data, Now(), flow_worker);
    if (res.ack.empty()) return;  // not an UPDATE
    auto known = std::find_if(im.peers.begin(), im.peers.end(), [&](const Impl::Peer& p) {
      return p.cluster_id == res.cluster_id && net::SameAddress(p.addr, r.from);
    });
    if (known == im.peers.end()) {
      if (im.peers.size() < im.max_peers) {
        im.peers.push_back({r.from, res.cluster_id});
      } else {
        ++io_.peers_not_learned;
      }
    }
    const sockaddr_in to = r.from;
    auto send = [&](std::span<const uint8_t> d) {
      if (im.socket.SendTo(to, d)) {
        ++io_.datagrams_tx;
      } else {
        ++io_.send_errors;
      }
    };
    send(res.ack);
    for (const auto& m : res.models) send(m);
  });
  core_->Advance(Now());
  return n;
}

absl::Status OlafPsEndpoint::BroadcastModel(std::span<const float> params, uint16_t cluster) {
  Impl& im = *impl_;
  std::vector<sockaddr_in> targets;
  for (const Impl::Peer& p : im.peers) {
    if (cluster != kAllClusters && p.cluster_id != cluster) continue;
    const bool dup = std::any_of(targets.begin(), targets.end(),
                                 [&](const sockaddr_in& t) { return net::SameAddress(t, p.addr); });
    if (!dup) targets.push_back(p.addr);
  }
  if (targets.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ps: no peer has sent updates of cluster ", cluster));
  }
  auto models = core_->BuildModel(params, cluster, Now());
  if (!models.ok()) return models.status();
  for (const sockaddr_in& t : targets) {
    for (const auto& d : *models) {
      if (im.socket.SendTo(t, d)) {
        ++io_.datagrams_tx;
      } else {
        ++io_.send_errors;
      }
    }
  }
  return absl::OkStatus();
}

std::string OlafPsEndpoint::local_address() const {
  return net::ToString(impl_->socket.local());
}

uint16_t OlafPsEndpoint::local_port() const {
  return net::HostPort(impl_->socket.local());
}

}  // namespace inca::olaf
