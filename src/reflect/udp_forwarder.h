// udp-forwarder: the plain UDP forwarding baseline for benchmarks. It does
// what inca-switchd's I/O path does (recvmmsg, sendmmsg, same batch size and
// socket buffers) without the reducer, so benchmarks can report the switch
// against it.
//
// Every datagram received is sent to every --forward target, or, with no
// targets, reflected back to its sender. Threading as SwitchServer: Run()
// on one thread; Stop() (async-signal-safe) and counters() from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "net/endpoint.h"
#include "net/udp.h"

namespace inca::reflect {

struct UdpForwarderConfig {
  std::string listen = "127.0.0.1:9420";  // HOST:PORT; port 0 = ephemeral
  std::vector<std::string> forward;       // HOST:PORT targets; empty = reflect
  uint32_t batch_size = 64;               // 1..1024
  size_t socket_buffer_bytes = size_t{8} << 20;
  net::IoMode io = net::IoMode::kGso;  // --io: gso (GSO/GRO where the kernel has them) or mmsg
};

struct UdpForwarderCounters {
  uint64_t datagrams_rx = 0;
  uint64_t datagrams_tx = 0;
  uint64_t send_errors = 0;
  uint64_t messages_rx = 0;  // fewer than datagrams_rx with GRO
  uint64_t messages_tx = 0;  // fewer than datagrams_tx with GSO
  uint64_t dropped = 0;      // frames not for the reflector (AF_XDP, xsk_reflector.h)
  std::string ToJson() const;
};

class UdpForwarder {
 public:
  // InvalidArgument for bad endpoints or batch size; Unavailable if the
  // socket cannot be bound.
  static absl::StatusOr<std::unique_ptr<UdpForwarder>> Create(const UdpForwarderConfig& config);

  // Forwards until Stop(). OK after Stop(); an error if the socket fails.
  absl::Status Run();
  void Stop() noexcept;
  UdpForwarderCounters counters() const;

  uint16_t local_port() const { return socket_.local.port(); }
  size_t rcvbuf_bytes() const { return socket_.rcvbuf_bytes; }
  size_t sndbuf_bytes() const { return socket_.sndbuf_bytes; }
  const net::UdpSocket& socket() const { return socket_; }

 private:
  UdpForwarder(const UdpForwarderConfig& config, net::UdpSocket socket, net::Wakeup wakeup,
               std::vector<net::Endpoint> targets);
  void Flush();

  net::UdpSocket socket_;
  net::Wakeup wakeup_;
  std::vector<net::Endpoint> targets_;
  net::RecvBatch rx_;
  net::SendBatch tx_;
  UdpForwarderCounters live_;
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  UdpForwarderCounters snapshot_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inca::reflect
