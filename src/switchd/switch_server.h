// inca-switchd's server: binds the pure CaisReducer to one UDP socket
// through the program host (program_host.h: socket, port table, poll loop,
// batches); this class is the CAIS hooks.
//
// Per received datagram (recvmmsg batches), in order:
//   management (byte 0 = 0xCA)   -> GroupManager; the reply goes back to the
//                                   source (mgmt_rx; malformed: mgmt_malformed,
//                                   no reply)
//   source endpoint has no port  -> dropped (unknown_sender)
//   ingress loss injection       -> dropped (injected_ingress_loss)
//   otherwise                    -> CaisReducer::Process(bytes, port, now)
// Every packet the reducer emits goes to its egress port's endpoint: none
// bound -> egress_unmapped; egress loss injection -> injected_egress_loss;
// else queued for sendmmsg (datagrams_tx, or send_errors when the kernel
// refuses it). Queued packets are sent when the batch fills and at the end
// of each receive batch. The reducer's Advance() runs on every host tick, at
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
#include <random>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "inca/cais/reducer.h"
#include "inca/switchd/counters.h"
#include "net/clock.h"
#include "net/endpoint.h"
#include "net/udp.h"
#include "switchd/config.h"
#include "switchd/group_manager.h"
#include "switchd/port_table.h"
#include "switchd/program_host.h"
#include "switchd/task_queue.h"

namespace inca::switchd {

class SwitchServer final : private ProgramHost::Hooks {
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
  SwitchCounters counters() const;

  uint16_t local_port() const { return host_->socket().local.port(); }
  const net::Endpoint& local_endpoint() const { return host_->socket().local; }
  size_t rcvbuf_bytes() const { return host_->socket().rcvbuf_bytes; }
  size_t sndbuf_bytes() const { return host_->socket().sndbuf_bytes; }

  // Before Run() (or after it returns) only: not thread-safe.
  absl::Status AddStaticPort(dp::PortId port, const net::Endpoint& endpoint);
  absl::Status AddStaticRule(const cais::Rule& rule);
  // This server is data-plane shard `index` of `count` (switchd/shards.h):
  // its JOIN_REPLYs tell hosts so.
  void SetShard(uint8_t index, uint8_t count) { groups_.set_shard(index, count); }
  // Mutable state handed to Execute() callbacks.
  struct Control {
    cais::CaisReducer& reducer;
    PortTable& ports;
    GroupManager& groups;
    SwitchdConfig& config;
    dp::TimeNs now;  // the switch's clock when the task runs
  };
  // Runs `fn` on the switch thread between packet batches and waits for it
  // (before Run() starts or after it returns: on the calling thread). The
  // only safe way to change rules, ports, groups or limits while Run() is
  // active. Thread-safe; must not be called from inside `fn`.
  void Execute(const std::function<void(Control&)>& fn);

  const GroupManager& groups() const { return groups_; }
  const PortTable& ports() const { return host_->ports(); }
  const cais::CaisReducer& reducer() const { return *reducer_; }

 private:
  class Sink;

  SwitchServer(const SwitchdConfig& config, std::unique_ptr<cais::CaisReducer> reducer,
               std::unique_ptr<ProgramHost> host, uint32_t seq_start, const net::TimeSource* clock);

  // ProgramHost::Hooks.
  void OnDatagram(const ProgramHost::Datagram& d, dp::TimeNs now) override;
  void OnTick(dp::TimeNs now) override;

  void HandleMgmt(const ProgramHost::Datagram& d, dp::TimeNs now);
  // `head` then `payload` (EmitGather's, with its `share`; empty for a
  // packet that is all head).
  void Egress(dp::PortId port, std::span<const uint8_t> head, std::span<const uint8_t> payload,
              uint64_t share);
  bool Lose(double p);
  void Publish();
  Control MakeControl() { return Control{*reducer_, host_->ports(), groups_, config_, Now()}; }
  dp::TimeNs Now() const { return clock_->NowNs(); }

  SwitchdConfig config_;
  const net::TimeSource* clock_;
  std::unique_ptr<cais::CaisReducer> reducer_;
  std::unique_ptr<ProgramHost> host_;
  GroupManager groups_;
  std::unique_ptr<Sink> sink_;
  std::vector<uint8_t> mgmt_buf_;
  std::mt19937_64 loss_rng_;
  dp::TimeNs next_stats_ = 0;
  SwitchCounters live_;  // owned by the Run() thread

  void RunTasks();
  TaskQueue<Control> tasks_;

  mutable absl::Mutex snapshot_mu_;
  SwitchCounters snapshot_ ABSL_GUARDED_BY(snapshot_mu_);
};

}  // namespace inca::switchd
