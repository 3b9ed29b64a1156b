// The program host: what every inca-switchd program shares (issue 12's "one
// program host"). It owns one UDP socket (net::UdpSocket, GSO/GRO when the
// kernel has them), the port table that maps switch ports to endpoints, the
// poll loop, batched receive and send, ingress-delay accounting and the
// stop/wake-up eventfd. What differs between programs is a hook:
//
//   Hooks::OnDatagram   one received datagram: CAIS hands management to the
//                       group manager and data to the reducer; OLAF binds a
//                       new peer to a port first.
//   Hooks::OnTick       once per loop iteration, after the batch: timers,
//                       leases, control tasks, snapshots.
//   Hooks::NextWakeNs   when OnTick must run again without traffic (a paced
//                       egress's next departure); the host wakes at least
//                       once a millisecond regardless.
//
// Packets a program emits go through sink(): its egress port's endpoint in
// the port table, or egress_unmapped; then batched for sendmmsg (datagrams_tx,
// or send_errors when the kernel refuses one). Queued packets leave when the
// batch fills, after each receive batch and after each tick.
//
// Conservation the host guarantees, for the adapters' equations:
//   every datagram read is counted once in datagrams_rx and handed once to
//   OnDatagram; every Send() is counted once in egress_unmapped,
//   datagrams_tx or send_errors.
//
// Threading: Run() owns everything on the calling thread. Stop() and Wake()
// may be called from any thread (Stop() also from a signal handler).
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/counters/switch_counters.h"
#include "inca/dataplane/program.h"
#include "inca/util/counters.h"
#include "membership/port_table.h"
#include "net/clock.h"
#include "net/endpoint.h"
#include "net/udp.h"

namespace inca::switchd {

struct ProgramHostOptions {
  net::Endpoint listen;
  size_t socket_buffer_bytes = size_t{8} << 20;
  net::IoMode io = net::IoMode::kGso;
  uint32_t batch_size = 64;
  // The largest packet the program emits (a send slot's size).
  size_t max_packet_bytes = net::kAnyMessageBytes;
};

class ProgramHost final : private dp::PacketSink {
 public:
  // One received datagram. `data` is valid only during OnDatagram.
  struct Datagram {
    std::span<const uint8_t> data;
    net::Endpoint source;
    const sockaddr_storage& from;  // the raw source address, for replies
    socklen_t from_len;
  };
  static constexpr dp::TimeNs kNoWake = std::numeric_limits<dp::TimeNs>::max();

  class Hooks {
   public:
    virtual ~Hooks() = default;
    virtual void OnDatagram(const Datagram& d, dp::TimeNs now) = 0;
    virtual void OnTick(dp::TimeNs now) = 0;
    virtual dp::TimeNs NextWakeNs() const { return kNoWake; }
  };

  // Binds the socket. `clock` (which must outlive the host) stamps every
  // batch. Unavailable when the socket cannot be bound.
  static absl::StatusOr<std::unique_ptr<ProgramHost>> Create(const ProgramHostOptions& options,
                                                             const net::TimeSource& clock);
  ~ProgramHost();
  ProgramHost(const ProgramHost&) = delete;
  ProgramHost& operator=(const ProgramHost&) = delete;

  // Serves until Stop(): OK then, or an error if polling fails. Returns at
  // once if Stop() came first.
  absl::Status Run(Hooks& hooks);
  // Asks Run() to return (within about a millisecond). Async-signal-safe.
  void Stop() noexcept;
  // Interrupts the loop's wait so that OnTick runs soon. Any thread.
  void Wake() const noexcept { wakeup_.Notify(); }

  // Egress through the port table (see the file comment).
  dp::PacketSink& sink() { return *this; }
  void Send(dp::PortId port, std::span<const uint8_t> packet) { SendGather(port, packet, {}, 0); }
  // `head` then `payload` as one packet; a payload with the same nonzero
  // `share` as the last one copied is sent from that copy
  // (net::SendBatch::AddShared).
  void SendGather(dp::PortId port, std::span<const uint8_t> head, std::span<const uint8_t> payload,
                  uint64_t share);
  // Sends everything queued.
  void Flush();
  // One datagram to `to` at once, outside the batch (management replies).
  // False, errno kept, when the kernel refuses it.
  bool SendNow(const sockaddr_storage& to, socklen_t to_len, std::span<const uint8_t> packet);

  // The host's figures (ports_bound is left to the adapter). On the Run()
  // thread, or before Run() starts: adapters copy them when they publish.
  const counters::HostCounters& counters() const { return live_; }

  membership::PortTable& ports() { return ports_; }
  const membership::PortTable& ports() const { return ports_; }
  const net::UdpSocket& socket() const { return socket_; }
  dp::TimeNs Now() const { return clock_->NowNs(); }

 private:
  void Emit(dp::PortId egress, std::span<const uint8_t> packet) override { Send(egress, packet); }
  void EmitGather(dp::PortId egress, std::span<const uint8_t> head,
                  std::span<const uint8_t> payload, uint64_t share) override {
    SendGather(egress, head, payload, share);
  }

  ProgramHost(const ProgramHostOptions& options, net::UdpSocket socket, net::Wakeup wakeup,
              const net::TimeSource* clock);
  void AccountIngressDelay(size_t received);

  const net::TimeSource* clock_;
  counters::HostCounters live_;
  net::UdpSocket socket_;
  net::Wakeup wakeup_;
  membership::PortTable ports_;
  net::RecvBatch rx_;
  net::SendBatch tx_;
  std::atomic<bool> stop_{false};
};

}  // namespace inca::switchd
