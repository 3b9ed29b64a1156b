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
#include "inca/dataplane/program.h"
#include "inca/util/counters.h"
#include "net/clock.h"
#include "net/endpoint.h"
#include "net/udp.h"
#include "switchd/port_table.h"

namespace inca::switchd {

// The host's own counters: the base of SwitchCounters and
// OlafServerCounters, so that both servers report the same I/O figures
// under the same names.
struct HostCounters {
  // Ingress.
  uint64_t datagrams_rx = 0;  // datagrams read from the socket
  uint64_t rx_truncated = 0;  // datagrams longer than the receive slot (still handled)
  uint64_t messages_rx = 0;   // recvmmsg messages those datagrams came in (fewer with GRO)
  // Ingress queueing: kernel receive timestamp to the start of processing.
  uint64_t ingress_delay_ns_total = 0;
  uint64_t ingress_delay_samples = 0;
  // Egress.
  uint64_t egress_unmapped = 0;  // program output to a port with no endpoint
  uint64_t datagrams_tx = 0;     // program output handed to the kernel
  uint64_t send_errors = 0;      // program output the kernel refused
  uint64_t messages_tx = 0;      // sendmmsg messages datagrams_tx left in (fewer with GSO)
  uint64_t gso_fallbacks = 0;    // segmented sends refused and resent one by one
  // Gauges.
  bool io_gso = false;       // the socket segments sends (UDP_SEGMENT)
  bool io_gro = false;       // the socket coalesces receives (UDP_GRO)
  uint64_t ports_bound = 0;  // set by the adapter when it publishes

  // `"datagrams_rx":N,...,"ports_bound":N`: every field, for a JSON object.
  std::string JsonFields() const;
};

// HostCounters' figures, declared once (util/counters.h): the JSON above,
// /metrics for both programs and docs/monitoring.md come from this table
// (io_gso and io_gro, flags, are written by hand).
inline constexpr counters::Counter<HostCounters> kHostCounters[] = {
    {"datagrams_rx", "inca_switch_datagrams_received_total", counters::Kind::kCounter, 1,
     "Datagrams read from the switch's UDP socket.", &HostCounters::datagrams_rx},
    {"rx_truncated", "inca_switch_rx_truncated_total", counters::Kind::kCounter, 1,
     "Datagrams longer than the receive slot (still handled).", &HostCounters::rx_truncated},
    {"messages_rx", "inca_switch_messages_received_total", counters::Kind::kCounter, 1,
     "Socket messages the received datagrams came in (fewer than datagrams with UDP GRO).",
     &HostCounters::messages_rx},
    {"ingress_delay_ns_total", "inca_switch_queue_delay_seconds_total", counters::Kind::kCounter,
     1e-9,
     "Sum of the datagrams' in-switch queueing delays (kernel receive timestamp to the "
     "pipeline).",
     &HostCounters::ingress_delay_ns_total},
    {"ingress_delay_samples", "inca_switch_queue_delay_samples_total", counters::Kind::kCounter, 1,
     "Datagrams whose in-switch queueing delay was measured.",
     &HostCounters::ingress_delay_samples},
    {"egress_unmapped", "inca_switch_egress_unmapped_total", counters::Kind::kCounter, 1,
     "Program output to a port with no endpoint.", &HostCounters::egress_unmapped},
    {"datagrams_tx", "inca_switch_datagrams_sent_total", counters::Kind::kCounter, 1,
     "Program output handed to the kernel.", &HostCounters::datagrams_tx},
    {"send_errors", "inca_switch_send_errors_total", counters::Kind::kCounter, 1,
     "Program output the kernel refused.", &HostCounters::send_errors},
    {"messages_tx", "inca_switch_messages_sent_total", counters::Kind::kCounter, 1,
     "Socket messages the sent datagrams left in (fewer than datagrams with UDP GSO).",
     &HostCounters::messages_tx},
    {"gso_fallbacks", "inca_switch_gso_fallbacks_total", counters::Kind::kCounter, 1,
     "Segmented sends the kernel refused (resent one datagram per message; GSO then off).",
     &HostCounters::gso_fallbacks},
    {"ports_bound", "inca_switch_ports_bound", counters::Kind::kGauge, 1,
     "Switch ports bound to an endpoint.", &HostCounters::ports_bound},
};

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
  void Send(dp::PortId port, std::span<const uint8_t> packet);
  // Sends everything queued.
  void Flush();
  // One datagram to `to` at once, outside the batch (management replies).
  // False, errno kept, when the kernel refuses it.
  bool SendNow(const sockaddr_storage& to, socklen_t to_len, std::span<const uint8_t> packet);

  // The host's figures (ports_bound is left to the adapter). On the Run()
  // thread, or before Run() starts: adapters copy them when they publish.
  const HostCounters& counters() const { return live_; }

  PortTable& ports() { return ports_; }
  const PortTable& ports() const { return ports_; }
  const net::UdpSocket& socket() const { return socket_; }
  dp::TimeNs Now() const { return clock_->NowNs(); }

 private:
  void Emit(dp::PortId egress, std::span<const uint8_t> packet) override { Send(egress, packet); }
  ProgramHost(const ProgramHostOptions& options, net::UdpSocket socket, net::Wakeup wakeup,
              const net::TimeSource* clock);
  void AccountIngressDelay(size_t received);

  const net::TimeSource* clock_;
  HostCounters live_;
  net::UdpSocket socket_;
  net::Wakeup wakeup_;
  PortTable ports_;
  net::RecvBatch rx_;
  net::SendBatch tx_;
  std::atomic<bool> stop_{false};
};

}  // namespace inca::switchd
