// inca-switchd running the OLAF program (seed 000, OLAF paper arXiv
// 2507.05876): binds the pure OlafSwitch to one UDP socket as a middlebox on
// the path from DRL workers to their parameter server (PS). What it does with
// a datagram is OlafDispatcher's (olaf_dispatcher.h, a pure core); this class
// keeps the socket, the loop, the counters' snapshot and the control tasks.
//
// Per received datagram (recvmmsg batches), in order:
//   from the PS endpoint         -> OlafSwitch::Process(bytes, ps_port = 0)
//   from any other endpoint      -> its port (bound on first sight: the port
//                                   table gives it the lowest free port and
//                                   the program learns its 5-tuple); no free
//                                   port -> dropped (ports_exhausted), unless
//                                   the operator mapped its UDP source port
//                                   in the cluster table: then the peer
//                                   silent longest gives way (peers_evicted)
// A peer's port is a lease, renewed by each of its datagrams: one silent for
// lease_ms (--lease-ms, the switch's one lease setting) loses its port and
// the workers the program learned on it (peers_expired); its next datagram
// binds it again.
// Every packet the program emits goes to its egress port's endpoint
// (ProgramHost: sendmmsg, GSO when the kernel has it). The program paces its
// PS-facing output itself at egress_rate_bps; the host's loop sleeps
// (ppoll, nanosecond timeout) until the earlier of the next datagram and
// OlafSwitch::NextWakeNs(), so queues build and drain in real time.
//
// Conservation (OlafServerCounters::Conserved()):
//   datagrams_rx == ports_exhausted + program.rx_packets
//   program.tx_packets == egress_unmapped + datagrams_tx + send_errors
//   and the program's own ProgramCounters::Conserved().
//
// Threading: Run() owns the program and the port table. Stop(), counters()
// and Execute() may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "inca/counters/switch_counters.h"
#include "inca/olaf/olaf_switch.h"
#include "membership/port_table.h"
#include "net/clock.h"
#include "net/endpoint.h"
#include "net/udp.h"
#include "switchd/olaf_dispatcher.h"
#include "switchd/program_host.h"
#include "switchd/task_queue.h"

namespace inca::switchd {

struct OlafServerConfig {
  std::string listen = "127.0.0.1:9420";
  std::string ps;  // the parameter server, "HOST:PORT" (required)
  olaf::OlafSwitchConfig program;
  // Static cluster table entries: UDP source port -> cluster id.
  std::vector<std::pair<uint16_t, uint16_t>> clusters;
  size_t socket_buffer_bytes = size_t{8} << 20;
  std::string io = "gso";  // "gso" or "mmsg" (net::IoMode), as for the CAIS switch
  uint32_t batch_size = 64;
  uint32_t lease_ms = 10'000;  // [kMinLeaseMs, kMaxLeaseMs] of group_manager.h
  absl::Status Validate() const;
};

class OlafServer final : private ProgramHost::Hooks {
 public:
  // InvalidArgument for bad configuration, Unavailable when the socket
  // cannot be bound.
  // `clock` (which must outlive the server) stamps and ages updates.
  static absl::StatusOr<std::unique_ptr<OlafServer>> Create(
      const OlafServerConfig& config, const net::TimeSource& clock = net::SystemClock());
  ~OlafServer();
  OlafServer(const OlafServer&) = delete;
  OlafServer& operator=(const OlafServer&) = delete;

  // Serves until Stop(). FailedPrecondition if already running.
  absl::Status Run();
  void Stop() noexcept;  // async-signal-safe, idempotent
  counters::OlafServerCounters counters() const;

  uint16_t local_port() const { return host_->socket().local.port(); }
  const net::Endpoint& local_endpoint() const { return host_->socket().local; }
  const OlafServerConfig& config() const { return config_; }

  struct Control {
    olaf::OlafSwitch& program;
    membership::PortTable& ports;
    dp::TimeNs now;
  };
  // Runs `fn` on the switch thread between batches and waits (before Run()
  // or after it returns: on the calling thread). Thread-safe; not from `fn`.
  void Execute(const std::function<void(Control&)>& fn);

  // The clock the server drives the program with (SystemClock() unless
  // injected: steady_clock nanoseconds, which workers on the same host
  // stamp gen_time with).
  dp::TimeNs Now() const { return clock_->NowNs(); }

 private:
  OlafServer(const OlafServerConfig& config, std::unique_ptr<olaf::OlafSwitch> program,
             std::unique_ptr<ProgramHost> host, net::Endpoint ps, const net::TimeSource* clock);
  // ProgramHost::Hooks.
  void OnDatagram(const ProgramHost::Datagram& d, dp::TimeNs now) override;
  void OnTick(dp::TimeNs now) override;
  dp::TimeNs NextWakeNs() const override;

  void Publish(dp::TimeNs now);
  void RunTasks();
  Control MakeControl() { return Control{*program_, host_->ports(), Now()}; }

  OlafServerConfig config_;
  const net::TimeSource* clock_;
  std::unique_ptr<olaf::OlafSwitch> program_;
  std::unique_ptr<ProgramHost> host_;
  net::Endpoint ps_;
  OlafDispatcher dispatcher_;
  counters::OlafServerCounters live_;
  mutable absl::Mutex snapshot_mu_;
  counters::OlafServerCounters snapshot_ ABSL_GUARDED_BY(snapshot_mu_);
  TaskQueue<Control> tasks_;
};

}  // namespace inca::switchd
