// What a CAIS switch does with one datagram, as a pure core: no sockets,
// clock or threads inside (time comes with each call, output goes through
// the caller's Output). inca-switchd's SwitchServer hosts it over UDP,
// inca-sim's CaisSwitchNode over simulated links; both used to carry this
// logic themselves (issue 47).
//
// Per datagram, in order:
//   management (byte 0 = 0xCA)  -> leases expired, then the GroupManager;
//                                  its reply to the source (mgmt_rx;
//                                  malformed: mgmt_malformed, no reply);
//                                  a REPORT it kept for a group that goes
//                                  up a tree also to the uplink's port
//                                  (reports_forwarded): the root decides
//                                  offload for the whole tree; a
//                                  JOIN_REPLY or PONG to a member carries
//                                  the group's WindowAdvice
//   source endpoint has no port -> dropped (unknown_sender)
//   ingress loss injection      -> dropped (injected_ingress_loss)
//   otherwise                   -> the port's leases renewed, then
//                                  CaisReducer::Process(bytes, port, now)
// Every packet the reducer emits goes to Output::ToPort unless egress loss
// injection drops it (injected_egress_loss; only for a port bound to an
// endpoint, as the host cannot send to an unbound one either).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "inca/cais/reducer.h"
#include "inca/counters/switch_counters.h"
#include "membership/group_manager.h"
#include "membership/port_table.h"
#include "net/endpoint.h"

namespace inca::switchd {

struct DispatcherCounters {
  uint64_t mgmt_rx = 0;
  uint64_t mgmt_malformed = 0;
  uint64_t unknown_sender = 0;
  uint64_t injected_ingress_loss = 0;
  uint64_t injected_egress_loss = 0;
  uint64_t reports_forwarded = 0;
};

struct DispatcherOptions {
  uint32_t seq_start = 0;  // the first group's sequence base (GroupManager)
  dp::TimeNs lease = membership::kDefaultLeaseNs;
  // Loss injection (tests, the testbed), each datagram independently.
  double ingress_loss = 0;
  double egress_loss = 0;
  uint64_t loss_seed = 1;
  // The group manager's events (nullptr: kept nowhere); must outlive it.
  EventLog* log = nullptr;
};

// The window a member of `group_id` is advised (JOIN_REPLY, PONG:
// wire::MgmtMessage::window_chunks): the reducer's FairWindow over every
// group present here, formed (a rule names it) or forming (its ranks are
// JOINing), each chunk one cell (one per member port with deterministic
// reduction), and at most the tree's cap (GroupState::tree_window). So
// groups whose members all keep to their advice never overrun this
// switch's slots, whatever order they formed in; a group that formed
// before others learns its smaller share from its next PONG. 0 (no advice)
// when the switch is set not to advise (CaisConfig::advise_window).
uint16_t WindowAdvice(const cais::CaisReducer& reducer, const membership::GroupManager& groups,
                      uint8_t group_id);

class CaisDispatcher {
 public:
  // Where the dispatcher's output goes.
  class Output {
   public:
    virtual ~Output() = default;
    // A packet for switch port `port`: `head` then `payload` (the reducer's
    // EmitGather, `share` its payload's use count; empty payload for a
    // packet that is all head).
    virtual void ToPort(dp::PortId port, std::span<const uint8_t> head,
                        std::span<const uint8_t> payload, uint64_t share) = 0;
    // The reply to the management datagram being handled, for its source.
    virtual void Reply(std::span<const uint8_t> mgmt) = 0;
    // A data datagram about to enter the reducer on `port` (a trace).
    virtual void Ingress(dp::PortId /*port*/, std::span<const uint8_t> /*data*/) {}
  };

  // `reducer` and `ports` must outlive the dispatcher; it owns the groups.
  CaisDispatcher(cais::CaisReducer* reducer, membership::PortTable* ports,
                 const DispatcherOptions& options);
  ~CaisDispatcher();
  CaisDispatcher(const CaisDispatcher&) = delete;
  CaisDispatcher& operator=(const CaisDispatcher&) = delete;

  // One datagram from `source` at `now`.
  void OnDatagram(std::span<const uint8_t> data, const net::Endpoint& source, dp::TimeNs now,
                  Output& out);
  // The reducer's timeouts at `now` (inca-sim: before each packet).
  void Advance(dp::TimeNs now, Output& out);
  // Advance, and leases that ran out (inca-switchd: every loop iteration).
  void OnTick(dp::TimeNs now, Output& out);

  const DispatcherCounters& counters() const { return counters_; }
  membership::GroupManager& groups() { return groups_; }
  const membership::GroupManager& groups() const { return groups_; }
  cais::CaisReducer& reducer() { return *reducer_; }
  const cais::CaisReducer& reducer() const { return *reducer_; }
  membership::PortTable& ports() { return *ports_; }

 private:
  class Sink;
  void Management(std::span<const uint8_t> data, const net::Endpoint& source, dp::TimeNs now,
                  Output& out);
  bool Lose(double p);

  cais::CaisReducer* reducer_;
  membership::PortTable* ports_;
  DispatcherOptions options_;
  membership::GroupManager groups_;
  std::unique_ptr<Sink> sink_;
  std::mt19937_64 loss_rng_;
  std::vector<uint8_t> mgmt_buf_;
  DispatcherCounters counters_;
};

// The counters `d`, its reducer and its groups keep, into `out` (the
// host's own, its socket's and loop's, are the host's to fill): what
// inca-switchd publishes and inca-sim's switch reports alike.
void FillDispatcherCounters(const CaisDispatcher& d, counters::SwitchCounters* out);

}  // namespace inca::switchd
