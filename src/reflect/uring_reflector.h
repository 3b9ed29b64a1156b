// An io_uring UDP reflector: the measurement issue 16 asks for ("io_uring
// measured on this path, adopted only where it wins"). It does what
// udp-forwarder does without --forward targets (every datagram back to its
// sender), with liburing instead of recvmmsg/sendmmsg: `depth` slots, each
// a recvmsg that becomes a sendmsg of the same buffer and then a recvmsg
// again, submitted and reaped in batches (one io_uring_enter per batch of
// completions). No GSO or GRO: io_uring moves one datagram per request.
//
// Built only with liburing (INCA_HAVE_LIBURING); `udp-forwarder --io uring`
// runs it. switchd-bench --uring measures it against the recvmmsg/sendmmsg
// and GSO/GRO forwarders in one run (docs/performance-log.md, "io_uring").
//
// Threading as UdpForwarder: Run() on one thread; Stop() (async-signal-
// safe) and counters() from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "net/udp.h"
#include "reflect/udp_forwarder.h"

namespace inca::reflect {

// True when this build has io_uring (liburing).
bool UringAvailable();

class UringReflector {
 public:
  // `config.batch_size` slots (requests in flight); `config.forward` must be
  // empty (reflect only). Unimplemented without liburing; Unavailable when
  // the socket or the ring cannot be set up.
  static absl::StatusOr<std::unique_ptr<UringReflector>> Create(const UdpForwarderConfig& config);
  ~UringReflector();

  absl::Status Run();
  void Stop() noexcept { stop_.store(true); }
  UdpForwarderCounters counters() const;
  const net::UdpSocket& socket() const { return socket_; }

 private:
  struct Ring;
  UringReflector(net::UdpSocket socket, std::unique_ptr<Ring> ring);

  net::UdpSocket socket_;
  std::unique_ptr<Ring> ring_;
  UdpForwarderCounters live_;
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  UdpForwarderCounters snapshot_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inca::reflect
