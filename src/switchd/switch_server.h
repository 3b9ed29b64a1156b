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
#include "net/clock.h"
#include "net/endpoint.h"
#include "net/udp.h"
#include "switchd/config.h"
#include "switchd/group_manager.h"
#include "switchd/port_table.h"
#include "switchd/program_host.h"
#include "switchd/task_queue.h"

namespace inca::switchd {

struct SwitchCounters : HostCounters {
  // Ingress (datagrams_rx, rx_truncated, messages_rx and the ingress delay
  // are the host's).
  uint64_t mgmt_rx = 0;                 // management datagrams (all of them)
  uint64_t mgmt_malformed = 0;          // of mgmt_rx: not parseable; ignored
  uint64_t mgmt_reports = 0;            // of mgmt_rx: REPORTs kept for the offload controller
  uint64_t mgmt_reports_ignored = 0;    // of mgmt_rx: REPORTs from non-members (ignored)
  uint64_t mgmt_reports_contended = 0;  // of mgmt_rx: REPORTs of operations that shared hosts
                                        // with another group's traffic (set aside)
  uint64_t unknown_sender = 0;          // CAIS datagrams from an endpoint with no port
  uint64_t injected_ingress_loss = 0;   // CAIS datagrams dropped by loss injection
  // Egress (egress_unmapped, datagrams_tx, send_errors, messages_tx and
  // gso_fallbacks are the host's).
  uint64_t injected_egress_loss = 0;  // reducer output dropped by loss injection
  uint64_t mgmt_tx = 0;               // management replies sent
  uint64_t mgmt_send_errors = 0;      // management replies the kernel refused
  // Gauges (io_gso, io_gro and ports_bound are the host's).
  uint64_t groups_formed = 0;
  uint64_t groups_forming = 0;
  uint64_t groups_expired = 0;    // forming groups dropped after a lease of silence
  uint64_t leases_expired = 0;    // formed groups dissolved: a member silent for a lease
  uint64_t groups_replaced = 0;   // dead groups taken over by a re-run (another job)
  uint64_t groups_destroyed = 0;  // JOIN-formed groups destroyed by an operator
  uint64_t ports_reclaimed = 0;   // ports taken back from forming groups (JOIN floods)
  uint64_t lease_ms = 0;          // the lease period
  // The reduction core.
  dp::ProgramCounters reducer;
  cais::GroupCounters cais;  // switch-wide totals
  cais::SramUsage sram;

  // The three equations in the file comment.
  bool Conserved() const;
  // One JSON object on one line (non-zero drop reasons only).
  std::string ToJson() const;
  // key=value pairs for log lines.
  std::string ToLogString() const;
};

// SwitchCounters' own figures, declared once (util/counters.h): the stop
// line's JSON, /metrics and docs/monitoring.md iterate this table after
// kHostCounters. The reducer, CAIS and SRAM sections have their own.
inline constexpr counters::Counter<SwitchCounters> kSwitchCounters[] = {
    {"mgmt_rx", "inca_switch_mgmt_received_total", counters::Kind::kCounter, 1,
     "Management datagrams received.", &SwitchCounters::mgmt_rx},
    {"mgmt_malformed", "inca_switch_mgmt_malformed_total", counters::Kind::kCounter, 1,
     "Management datagrams that did not parse (ignored).", &SwitchCounters::mgmt_malformed},
    {"mgmt_reports", "inca_switch_mgmt_reports_total", counters::Kind::kCounter, 1,
     "Operation time REPORTs kept for the offload controller.", &SwitchCounters::mgmt_reports},
    {"mgmt_reports_ignored", "inca_switch_mgmt_reports_ignored_total", counters::Kind::kCounter, 1,
     "REPORTs from endpoints that are not members of a formed group (ignored).",
     &SwitchCounters::mgmt_reports_ignored},
    {"mgmt_reports_contended", "inca_switch_mgmt_reports_contended_total", counters::Kind::kCounter,
     1,
     "REPORTs of operations that ran while another group sent data from the same hosts (kept "
     "out of the offload controller's samples).",
     &SwitchCounters::mgmt_reports_contended},
    {"unknown_sender", "inca_switch_unknown_sender_total", counters::Kind::kCounter, 1,
     "CAIS datagrams dropped: source endpoint has no port.", &SwitchCounters::unknown_sender},
    {"injected_ingress_loss", "inca_switch_injected_ingress_loss_total", counters::Kind::kCounter,
     1, "CAIS datagrams dropped by ingress loss injection.",
     &SwitchCounters::injected_ingress_loss},
    {"injected_egress_loss", "inca_switch_injected_egress_loss_total", counters::Kind::kCounter, 1,
     "Reducer output dropped by egress loss injection.", &SwitchCounters::injected_egress_loss},
    {"mgmt_tx", "inca_switch_mgmt_sent_total", counters::Kind::kCounter, 1,
     "Management replies sent.", &SwitchCounters::mgmt_tx},
    {"mgmt_send_errors", "inca_switch_mgmt_send_errors_total", counters::Kind::kCounter, 1,
     "Management replies the kernel refused.", &SwitchCounters::mgmt_send_errors},
    {"groups_formed", "inca_switch_groups_formed", counters::Kind::kGauge, 1,
     "Reduction groups formed by JOIN.", &SwitchCounters::groups_formed},
    {"groups_forming", "inca_switch_groups_forming", counters::Kind::kGauge, 1,
     "Reduction groups still waiting for members.", &SwitchCounters::groups_forming},
    {"groups_expired", "inca_switch_groups_expired_total", counters::Kind::kCounter, 1,
     "Forming groups dropped after a lease without a JOIN or PING from any member.",
     &SwitchCounters::groups_expired},
    {"leases_expired", "inca_switch_leases_expired_total", counters::Kind::kCounter, 1,
     "Formed groups dissolved because a member was silent (no JOIN, PING, REPORT or data) for a "
     "lease.",
     &SwitchCounters::leases_expired},
    {"groups_replaced", "inca_switch_groups_replaced_total", counters::Kind::kCounter, 1,
     "Groups whose members were all silent, taken over by a JOIN of another job (a re-run after "
     "a crash).",
     &SwitchCounters::groups_replaced},
    {"groups_destroyed", "inca_switch_groups_destroyed_total", counters::Kind::kCounter, 1,
     "JOIN-formed groups destroyed by an operator (cais-cli groups destroy).",
     &SwitchCounters::groups_destroyed},
    {"ports_reclaimed", "inca_switch_ports_reclaimed_total", counters::Kind::kCounter, 1,
     "Ports taken back from groups still forming, for a JOIN that found none free (the source "
     "holding the most forming ports gives its earliest).",
     &SwitchCounters::ports_reclaimed},
    {"lease_ms", "inca_switch_lease_seconds", counters::Kind::kGauge, 1e-3,
     "Lease period: a group member silent for this long loses its group.",
     &SwitchCounters::lease_ms},
};

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
  void Egress(dp::PortId port, std::span<const uint8_t> packet);
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
