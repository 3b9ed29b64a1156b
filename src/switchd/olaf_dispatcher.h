// What an OLAF switch does with one datagram, as a pure core: no sockets,
// clock or threads inside (time comes with each call, packets leave through
// the caller's PacketSink, events through an injected EventLog). inca-switchd's
// OlafServer hosts it over UDP; its tests drive it on a manual clock. The
// CAIS counterpart is CaisDispatcher (cais_dispatcher.h).
//
// Per datagram, in order:
//   from the PS's endpoint (port 0, static)  -> OlafSwitch::Process on port 0
//   from a peer that has a port              -> its lease renewed, Process
//   from a peer without one                  -> bound to the lowest free port
//                                               (the program learns its
//                                               5-tuple), then as above; no
//                                               free port -> dropped
//                                               (ports_exhausted), unless the
//                                               operator mapped its UDP
//                                               source port in the cluster
//                                               table: then the dynamic peer
//                                               silent longest gives way
//                                               (peers_evicted)
// Expire(now): a dynamic peer silent for the lease loses its port and the
// workers the program learned on it (peers_expired); its next datagram binds
// it again. Static ports (the PS, operator-mapped endpoints) never expire.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "inca/dataplane/program.h"
#include "inca/olaf/olaf_switch.h"
#include "inca/util/event_log.h"
#include "membership/group_manager.h"
#include "membership/port_table.h"
#include "net/endpoint.h"

namespace inca::switchd {

struct OlafDispatcherCounters {
  uint64_t ports_exhausted = 0;  // datagrams dropped: no free port for the sender
  uint64_t peers_expired = 0;    // ports released after a lease of silence
  uint64_t peers_evicted = 0;    // ports taken from the longest-silent peer
};

struct OlafDispatcherOptions {
  net::Endpoint local;  // the switch's own endpoint: the learned flows' destination
  dp::TimeNs lease = membership::kDefaultLeaseNs;
  EventLog* log = nullptr;  // peer events (nullptr: kept nowhere); must outlive it
};

class OlafDispatcher {
 public:
  // `program` and `ports` must outlive the dispatcher.
  OlafDispatcher(olaf::OlafSwitch* program, membership::PortTable* ports,
                 const OlafDispatcherOptions& options);

  // One datagram from `source` at `now`.
  void OnDatagram(std::span<const uint8_t> data, const net::Endpoint& source, dp::TimeNs now,
                  dp::PacketSink& out);
  // Ports of peers silent for a lease, released (scans at most every tenth
  // of a lease).
  void Expire(dp::TimeNs now);

  const OlafDispatcherCounters& counters() const { return counters_; }
  dp::TimeNs lease() const { return options_.lease; }

 private:
  void Unbind(dp::PortId port);
  bool EvictSilentest();  // false: every dynamic peer is operator-mapped

  olaf::OlafSwitch* program_;
  membership::PortTable* ports_;
  OlafDispatcherOptions options_;
  NullEventLog no_log_;
  EventLog* log_;
  std::array<dp::TimeNs, dp::kMaxPorts> seen_{};  // last datagram per port
  dp::TimeNs next_expiry_scan_ = 0;
  OlafDispatcherCounters counters_;
};

}  // namespace inca::switchd
