// inca-switchd's server: hosts the pure CAIS dispatcher (cais_dispatcher.h:
// management to the GroupManager, data through the port table to the
// CaisReducer, loss injection) on one UDP socket through the program host
// (program_host.h: socket, port table, poll loop, batches).
//
// Every packet the dispatcher emits goes to its egress port's endpoint:
// none bound -> egress_unmapped; else queued for sendmmsg (datagrams_tx, or
// send_errors when the kernel refuses it); a management reply goes to its
// request's source at once (mgmt_tx, or mgmt_send_errors). Queued packets are sent when the batch
// fills and at the end of each receive batch. The reducer's Advance() runs on every host tick, at
// least once a millisecond, so chunk timeouts fire without traffic.
//
// Conservation (SwitchCounters::Conserved()):
//   datagrams_rx == mgmt_rx + unknown_sender + injected_ingress_loss + reducer.rx_packets
//   reducer.tx_packets == egress_unmapped + injected_egress_loss + datagrams_tx + send_errors
//   and the reducer's own ProgramCounters::Conserved().
//
// Threading: Run() owns the reducer, port table and groups on the calling
// thread. Stop() and counters() may be called from any thread (Stop() also
// from a signal handler). The "before Run" accessors are not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "inca/cais/reducer.h"
#include "inca/counters/switch_counters.h"
#include "membership/group_manager.h"
#include "membership/port_table.h"
#include "net/clock.h"
#include "net/endpoint.h"
#include "net/udp.h"
#include "switchd/cais_dispatcher.h"
#include "switchd/config.h"
#include "switchd/control_target.h"
#include "switchd/program_host.h"
#include "switchd/task_queue.h"

namespace inca::switchd {

class SwitchServer final : public ControlTarget, private ProgramHost::Hooks {
 public:
  // Validates `config`, creates the reducer, binds the socket, installs the
  // static ports and rules. InvalidArgument for bad configuration,
  // Unavailable when the socket cannot be bound.
  // `clock` (which must outlive the server) stamps packets and drives
  // timeouts.
  static absl::StatusOr<std::unique_ptr<SwitchServer>> Create(
      const SwitchdConfig& config, const net::TimeSource& clock = net::SystemClock());
  ~SwitchServer();
  SwitchServer(const SwitchServer&) = delete;
  SwitchServer& operator=(const SwitchServer&) = delete;

  // Serves until Stop(). Returns OK after Stop(), an error if the socket
  // fails, FailedPrecondition if already running. Returns at once if Stop()
  // came first. Call from one thread at a time.
  absl::Status Run();

  // Asks Run() to return (within about a millisecond). Async-signal-safe;
  // any thread; idempotent.
  void Stop() noexcept;

  // A copy of the counters, refreshed once per loop iteration and at exit.
  // Thread-safe.
  counters::SwitchCounters counters() const override;

  uint16_t local_port() const { return host_->socket().local.port(); }
  const net::Endpoint& local_endpoint() const { return host_->socket().local; }
  size_t rcvbuf_bytes() const { return host_->socket().rcvbuf_bytes; }
  size_t sndbuf_bytes() const { return host_->socket().sndbuf_bytes; }

  // Before Run() (or after it returns) only: not thread-safe.
  absl::Status AddStaticPort(dp::PortId port, const net::Endpoint& endpoint);
  absl::Status AddStaticRule(const cais::Rule& rule);
  // This server is data-plane shard `index` of `count` (switchd/shards.h):
  // its JOIN_REPLYs tell hosts so.
  void SetShard(uint8_t index, uint8_t count) { dispatcher_->groups().set_shard(index, count); }
  // Runs `fn` on the switch thread between packet batches and waits for it
  // (before Run() starts or after it returns: on the calling thread). The
  // only safe way to change rules, ports, groups or limits while Run() is
  // active. Thread-safe; must not be called from inside `fn`.
  void Execute(const std::function<void(Control&)>& fn) override;
  std::string endpoint() const override { return local_endpoint().ToString(); }

  const membership::GroupManager& groups() const { return dispatcher_->groups(); }
  const membership::PortTable& ports() const { return host_->ports(); }
  const cais::CaisReducer& reducer() const { return *reducer_; }

 private:
  class Output;

  SwitchServer(const SwitchdConfig& config, std::unique_ptr<cais::CaisReducer> reducer,
               std::unique_ptr<ProgramHost> host, uint32_t seq_start, const net::TimeSource* clock);

  // ProgramHost::Hooks.
  void OnDatagram(const ProgramHost::Datagram& d, dp::TimeNs now) override;
  void OnTick(dp::TimeNs now) override;

  void Publish();
  Control MakeControl() {
    return Control{*reducer_, host_->ports(), dispatcher_->groups(), config_, Now()};
  }
  dp::TimeNs Now() const { return clock_->NowNs(); }

  SwitchdConfig config_;
  const net::TimeSource* clock_;
  std::unique_ptr<cais::CaisReducer> reducer_;
  std::unique_ptr<ProgramHost> host_;
  std::unique_ptr<CaisDispatcher> dispatcher_;
  std::unique_ptr<Output> output_;
  dp::TimeNs next_stats_ = 0;
  counters::SwitchCounters live_;  // owned by the Run() thread

  void RunTasks();
  TaskQueue<Control> tasks_;

  mutable absl::Mutex snapshot_mu_;
  counters::SwitchCounters snapshot_ ABSL_GUARDED_BY(snapshot_mu_);
};

}  // namespace inca::switchd
