// OlafWorkerEndpoint: the worker core (inca/olaf/worker.h) on a UDP socket
// (Linux, IPv4 or IPv6), talking to an OLAF switch or directly to the PS.
// Its clock is CLOCK_MONOTONIC; the core it drives has none. Not
// thread-safe. docs/design/olaf-transport.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "inca/olaf/worker.h"

namespace inca::olaf {

struct OlafWorkerEndpointOptions {
  // Local "a.b.c.d:port" or "[v6]:port". Port 0 = any; a fixed port when the switch's
  // cluster table maps this worker's source port to its cluster.
  std::string bind = "127.0.0.1:0";
  std::string peer;  // the OLAF switch, or the PS when there is none
  WorkerOptions worker;
  size_t socket_buffer_bytes = size_t{4} << 20;
};

struct WorkerSendOutcome {
  bool sent = false;
  double probability = 1;
  uint32_t update_id = 0;
  size_t datagrams = 0;    // handed to the kernel
  size_t send_errors = 0;  // refused by the kernel
};

struct WorkerEndpointCounters {
  uint64_t datagrams_rx = 0;
  uint64_t truncated = 0;  // longer than the receive buffer: dropped
  uint64_t send_errors = 0;
};

class OlafWorkerEndpoint {
 public:
  static absl::StatusOr<std::unique_ptr<OlafWorkerEndpoint>> Create(
      OlafWorkerEndpointOptions options);
  ~OlafWorkerEndpoint();
  OlafWorkerEndpoint(const OlafWorkerEndpoint&) = delete;
  OlafWorkerEndpoint& operator=(const OlafWorkerEndpoint&) = delete;

  // Generates an update at Now() and, if send control agrees, sends its
  // fragments to the peer (blocking for socket buffer space).
  absl::StatusOr<WorkerSendOutcome> Send(std::span<const float> grad, uint32_t model_version);
  // Waits up to `timeout` for datagrams, then handles every waiting one (at
  // most 4096). Returns the datagrams handled.
  size_t Poll(std::chrono::milliseconds timeout);

  const AssembledModel* latest_model() const { return core_->latest_model(); }
  const WorkerCounters& stats() const { return core_->counters(); }
  const WorkerEndpointCounters& io() const { return io_; }
  const WorkerCore& core() const { return *core_; }
  std::string local_address() const;  // "a.b.c.d:port" or "[v6]:port"
  uint16_t local_port() const;
  static dp::TimeNs Now();  // CLOCK_MONOTONIC (steady_clock) ns, as inca-switchd

 private:
  struct Impl;
  OlafWorkerEndpoint() = default;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<WorkerCore> core_;
  WorkerEndpointCounters io_;
};

}  // namespace inca::olaf
