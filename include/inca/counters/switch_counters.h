// inca-switchd's counters, both programs'. Public and in their own folder
// (library inca::counters) because three layers read them: the switch
// servers fill them, the control API carries them as typed sub-messages and
// the monitor renders them from the control API, never from the servers.
// Each struct's figures are declared once, in the table beside it (the
// Counter<T> rows of inca/util/counters.h).
#pragma once

#include <cstdint>
#include <string>

#include "inca/cais/reducer.h"
#include "inca/dataplane/program.h"
#include "inca/olaf/olaf_switch.h"
#include "inca/util/counters.h"

namespace inca::counters {

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
    {1, "datagrams_rx", "inca_switch_datagrams_received_total", counters::Kind::kCounter, 1,
     "Datagrams read from the switch's UDP socket.", &HostCounters::datagrams_rx},
    {2, "rx_truncated", "inca_switch_rx_truncated_total", counters::Kind::kCounter, 1,
     "Datagrams longer than the receive slot (still handled).", &HostCounters::rx_truncated},
    {3, "messages_rx", "inca_switch_messages_received_total", counters::Kind::kCounter, 1,
     "Socket messages the received datagrams came in (fewer than datagrams with UDP GRO).",
     &HostCounters::messages_rx},
    {4, "ingress_delay_ns_total", "inca_switch_queue_delay_seconds_total", counters::Kind::kCounter,
     1e-9,
     "Sum of the datagrams' in-switch queueing delays (kernel receive timestamp to the "
     "pipeline).",
     &HostCounters::ingress_delay_ns_total},
    {5, "ingress_delay_samples", "inca_switch_queue_delay_samples_total", counters::Kind::kCounter,
     1, "Datagrams whose in-switch queueing delay was measured.",
     &HostCounters::ingress_delay_samples},
    {6, "egress_unmapped", "inca_switch_egress_unmapped_total", counters::Kind::kCounter, 1,
     "Program output to a port with no endpoint.", &HostCounters::egress_unmapped},
    {7, "datagrams_tx", "inca_switch_datagrams_sent_total", counters::Kind::kCounter, 1,
     "Program output handed to the kernel.", &HostCounters::datagrams_tx},
    {8, "send_errors", "inca_switch_send_errors_total", counters::Kind::kCounter, 1,
     "Program output the kernel refused.", &HostCounters::send_errors},
    {9, "messages_tx", "inca_switch_messages_sent_total", counters::Kind::kCounter, 1,
     "Socket messages the sent datagrams left in (fewer than datagrams with UDP GSO).",
     &HostCounters::messages_tx},
    {10, "gso_fallbacks", "inca_switch_gso_fallbacks_total", counters::Kind::kCounter, 1,
     "Segmented sends the kernel refused (resent one datagram per message; GSO then off).",
     &HostCounters::gso_fallbacks},
    {11, "ports_bound", "inca_switch_ports_bound", counters::Kind::kGauge, 1,
     "Switch ports bound to an endpoint.", &HostCounters::ports_bound},
};

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
  uint64_t groups_expired = 0;          // forming groups dropped after a lease of silence
  uint64_t leases_expired = 0;          // formed groups dissolved: a member silent for a lease
  uint64_t groups_replaced = 0;         // dead groups taken over by a re-run (another job)
  uint64_t groups_destroyed = 0;        // JOIN-formed groups destroyed by an operator
  uint64_t ports_reclaimed = 0;         // ports taken back from forming groups (JOIN floods)
  uint64_t lease_ms = 0;                // the lease period
  uint64_t timing_shapes = 0;           // group shapes whose offload timings are kept
  uint64_t timings_inherited = 0;       // groups formed with an earlier group's timings
  uint64_t mgmt_reports_forwarded = 0;  // a tree's REPORTs passed up to the parent switch
  // The reduction core.
  dp::ProgramCounters reducer;
  cais::GroupCounters cais;  // switch-wide totals
  cais::SramUsage sram;

  // The three equations in the file comment.
  bool Conserved() const;
  // Adds another shard's figures (inca-switchd --threads): every counter,
  // the groups, ports and slot memory they hold; lease_ms and the I/O flags
  // are the same on every shard and kept. Conserved() holds for the sum
  // when it holds for each part.
  void Add(const SwitchCounters& shard);
  // One JSON object on one line (non-zero drop reasons only).
  std::string ToJson() const;
  // key=value pairs for log lines.
  std::string ToLogString() const;
};

// SwitchCounters' own figures, declared once (util/counters.h): the stop
// line's JSON, /metrics and docs/monitoring.md iterate this table after
// kHostCounters. The reducer, CAIS and SRAM sections have their own.
inline constexpr counters::Counter<SwitchCounters> kSwitchCounters[] = {
    {1, "mgmt_rx", "inca_switch_mgmt_received_total", counters::Kind::kCounter, 1,
     "Management datagrams received.", &SwitchCounters::mgmt_rx},
    {2, "mgmt_malformed", "inca_switch_mgmt_malformed_total", counters::Kind::kCounter, 1,
     "Management datagrams that did not parse (ignored).", &SwitchCounters::mgmt_malformed},
    {3, "mgmt_reports", "inca_switch_mgmt_reports_total", counters::Kind::kCounter, 1,
     "Operation time REPORTs kept for the offload controller.", &SwitchCounters::mgmt_reports},
    {4, "mgmt_reports_ignored", "inca_switch_mgmt_reports_ignored_total", counters::Kind::kCounter,
     1, "REPORTs from endpoints that are not members of a formed group (ignored).",
     &SwitchCounters::mgmt_reports_ignored},
    {5, "mgmt_reports_contended", "inca_switch_mgmt_reports_contended_total",
     counters::Kind::kCounter, 1,
     "REPORTs of operations that ran while another group sent data from the same hosts (kept "
     "out of the offload controller's samples).",
     &SwitchCounters::mgmt_reports_contended},
    {6, "unknown_sender", "inca_switch_unknown_sender_total", counters::Kind::kCounter, 1,
     "CAIS datagrams dropped: source endpoint has no port.", &SwitchCounters::unknown_sender},
    {7, "injected_ingress_loss", "inca_switch_injected_ingress_loss_total",
     counters::Kind::kCounter, 1, "CAIS datagrams dropped by ingress loss injection.",
     &SwitchCounters::injected_ingress_loss},
    {8, "injected_egress_loss", "inca_switch_injected_egress_loss_total", counters::Kind::kCounter,
     1, "Reducer output dropped by egress loss injection.", &SwitchCounters::injected_egress_loss},
    {9, "mgmt_tx", "inca_switch_mgmt_sent_total", counters::Kind::kCounter, 1,
     "Management replies sent.", &SwitchCounters::mgmt_tx},
    {10, "mgmt_send_errors", "inca_switch_mgmt_send_errors_total", counters::Kind::kCounter, 1,
     "Management replies the kernel refused.", &SwitchCounters::mgmt_send_errors},
    {11, "groups_formed", "inca_switch_groups_formed", counters::Kind::kGauge, 1,
     "Reduction groups formed by JOIN.", &SwitchCounters::groups_formed},
    {12, "groups_forming", "inca_switch_groups_forming", counters::Kind::kGauge, 1,
     "Reduction groups still waiting for members.", &SwitchCounters::groups_forming},
    {13, "groups_expired", "inca_switch_groups_expired_total", counters::Kind::kCounter, 1,
     "Forming groups dropped after a lease without a JOIN or PING from any member.",
     &SwitchCounters::groups_expired},
    {14, "leases_expired", "inca_switch_leases_expired_total", counters::Kind::kCounter, 1,
     "Formed groups dissolved because a member was silent (no JOIN, PING, REPORT or data) for a "
     "lease.",
     &SwitchCounters::leases_expired},
    {15, "groups_replaced", "inca_switch_groups_replaced_total", counters::Kind::kCounter, 1,
     "Groups whose members were all silent, taken over by a JOIN of another job (a re-run after "
     "a crash).",
     &SwitchCounters::groups_replaced},
    {16, "groups_destroyed", "inca_switch_groups_destroyed_total", counters::Kind::kCounter, 1,
     "JOIN-formed groups destroyed by an operator (cais-cli groups destroy).",
     &SwitchCounters::groups_destroyed},
    {17, "ports_reclaimed", "inca_switch_ports_reclaimed_total", counters::Kind::kCounter, 1,
     "Ports taken back from groups still forming, for a JOIN that found none free (the source "
     "holding the most forming ports gives its earliest).",
     &SwitchCounters::ports_reclaimed},
    {18, "lease_ms", "inca_switch_lease_seconds", counters::Kind::kGauge, 1e-3,
     "Lease period: a group member silent for this long loses its group.",
     &SwitchCounters::lease_ms},
    {19, "timing_shapes", "inca_switch_timing_shapes", counters::Kind::kGauge, 1,
     "Group shapes (world size and member hosts) whose measured operation times are kept after "
     "their jobs, for the next job of the same shape (at most 64).",
     &SwitchCounters::timing_shapes},
    {20, "timings_inherited", "inca_switch_timings_inherited_total", counters::Kind::kCounter, 1,
     "Groups that formed with the measured operation times of an earlier job of their shape.",
     &SwitchCounters::timings_inherited},
    {21, "mgmt_reports_forwarded", "inca_switch_mgmt_reports_forwarded_total",
     counters::Kind::kCounter, 1,
     "REPORTs of a tree's ranks passed up to the parent switch, where the root decides offload "
     "for the whole tree from them.",
     &SwitchCounters::mgmt_reports_forwarded},
};

// The host's figures (datagrams_rx, egress_unmapped, datagrams_tx,
// send_errors, ports_bound with the PS included, ...) and the OLAF ones.
struct OlafServerCounters : HostCounters {
  uint64_t ports_exhausted = 0;  // senders dropped: every port is bound
  uint64_t peers_expired = 0;    // ports released: the peer was silent for a lease
  uint64_t peers_evicted = 0;    // ports taken for an operator-mapped peer
  uint64_t lease_ms = 0;         // the lease period
  dp::ProgramCounters program;
  olaf::OlafCounters olaf;
  olaf::OlafQueueState queue;
  bool Conserved() const;
  std::string ToJson() const;
};

// OlafServerCounters' own figures, declared once (util/counters.h), after
// kHostCounters in the JSON, /metrics and docs/monitoring.md.
inline constexpr counters::Counter<OlafServerCounters> kOlafServerCounters[] = {
    {1, "ports_exhausted", "inca_switch_ports_exhausted_total", counters::Kind::kCounter, 1,
     "Datagrams dropped: no free port for the sender.", &OlafServerCounters::ports_exhausted},
    {2, "peers_expired", "inca_switch_peers_expired_total", counters::Kind::kCounter, 1,
     "Peer ports released after a lease (lease_ms) without a datagram.",
     &OlafServerCounters::peers_expired},
    {3, "peers_evicted", "inca_switch_peers_evicted_total", counters::Kind::kCounter, 1,
     "Peer ports taken, the longest-silent first, for an operator-mapped peer.",
     &OlafServerCounters::peers_evicted},
    {4, "lease_ms", "inca_switch_lease_seconds", counters::Kind::kGauge, 1e-3,
     "Lease period: a peer silent for this long loses its port.", &OlafServerCounters::lease_ms},
};

// `"drops":{"reason":n,...}` of the non-zero entries of a by-reason array.
std::string DropsJson(const std::array<uint64_t, dp::kDropReasonCount>& drops);

}  // namespace inca::counters
