// OlafPsEndpoint: the PS core (inca/olaf/ps.h) on a UDP socket (Linux, IPv4
// or IPv6); replies go to each datagram's source (the switch, or the worker
// without one). Its clock is CLOCK_MONOTONIC; the core it drives has none.
// Not thread-safe. docs/design/olaf-transport.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "inca/olaf/ps.h"

namespace inca::olaf {

struct OlafPsEndpointOptions {
  std::string bind = "127.0.0.1:0";  // "a.b.c.d:port" or "[v6]:port"; port 0 = any
  PsOptions ps;
  size_t socket_buffer_bytes = size_t{16} << 20;  // SO_RCVBUF/SO_SNDBUF asked for
  size_t max_peers = 1024;  // (address, cluster) pairs remembered for BroadcastModel
};

struct PsEndpointCounters {
  uint64_t datagrams_rx = 0;
  uint64_t truncated = 0;  // longer than the receive buffer: dropped
  uint64_t datagrams_tx = 0;
  uint64_t send_errors = 0;
  uint64_t peers_not_learned = 0;  // max_peers reached
};

class OlafPsEndpoint {
 public:
  static absl::StatusOr<std::unique_ptr<OlafPsEndpoint>> Create(OlafPsEndpointOptions options);
  ~OlafPsEndpoint();
  OlafPsEndpoint(const OlafPsEndpoint&) = delete;
  OlafPsEndpoint& operator=(const OlafPsEndpoint&) = delete;

  // Waits up to `timeout` for datagrams, then handles every waiting one
  // (at most 4096): applies updates, replies with ACKs (and MODELs per the
  // policy) to each datagram's source. Returns the datagrams handled.
  size_t Poll(std::chrono::milliseconds timeout);
  // Sends `params` as a MODEL to every peer that sent updates of `cluster`
  // (kAllClusters: every peer). FailedPrecondition when there is none.
  absl::Status BroadcastModel(std::span<const float> params, uint16_t cluster);

  std::string local_address() const;  // "a.b.c.d:port" or "[v6]:port"
  uint16_t local_port() const;
  const PsCore& core() const { return *core_; }
  const PsCounters& stats() const { return core_->counters(); }
  const PsEndpointCounters& io() const { return io_; }
  static dp::TimeNs Now();  // CLOCK_MONOTONIC (steady_clock) ns, as inca-switchd

 private:
  struct Impl;
  OlafPsEndpoint() = default;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<PsCore> core_;
  PsEndpointCounters io_;
};

}  // namespace inca::olaf
