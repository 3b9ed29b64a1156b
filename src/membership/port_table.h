// The switch's port table: which UDP endpoint sits behind which switch port
// (0 .. dp::kMaxPorts-1). The CAIS reducer speaks in ports; inca-switchd
// maps a datagram's source endpoint to its ingress port, and an egress port
// back to the endpoint to send to.
//
// Entries are static (from configuration; never removed) or dynamic (bound
// when a host JOINs a group, released when it is no longer in any group).
// An endpoint holds at most one port and a port at most one endpoint.
// Bounded: at most kMaxPorts entries. Not thread-safe (the switch's I/O
// thread owns it).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/dataplane/program.h"
#include "net/endpoint.h"

namespace inca::membership {

class PortTable {
 public:
  static constexpr size_t kCapacity = dp::kMaxPorts;
  // Bind(): no preferred port.
  static constexpr uint16_t kAnyPort = 0xFFFF;

  // `max_bound`: at most this many entries at once (<= kCapacity; tests and
  // fuzzers use small tables so that ports run out).
  explicit PortTable(size_t max_bound = kCapacity) : max_bound_(std::min(max_bound, kCapacity)) {}

  // A static entry. InvalidArgument (port >= kCapacity, invalid endpoint),
  // AlreadyExists (the port or the endpoint is already bound).
  absl::Status AddStatic(dp::PortId port, const net::Endpoint& endpoint);

  // Gives `endpoint` a port: the one it already holds (static or dynamic),
  // else `requested` if that is free, else the lowest free port.
  // InvalidArgument (invalid endpoint; requested >= kCapacity and not
  // kAnyPort), ResourceExhausted (every port bound).
  absl::StatusOr<dp::PortId> Bind(const net::Endpoint& endpoint, uint16_t requested = kAnyPort);

  // Frees a dynamic entry. Returns false, changing nothing, for static or
  // unbound ports.
  bool Release(dp::PortId port);
  // Frees any entry, static included (an operator's release). False for an
  // unbound port.
  bool Remove(dp::PortId port);

  // The port of `endpoint`. O(1); the data-path lookup.
  std::optional<dp::PortId> Lookup(const net::Endpoint& endpoint) const {
    auto it = by_endpoint_.find(endpoint);
    if (it == by_endpoint_.end()) return std::nullopt;
    return it->second;
  }
  // The endpoint behind `port`, or nullptr if unbound (or port out of range).
  const net::Endpoint* endpoint(dp::PortId port) const {
    return port < kCapacity && entries_[port].bound ? &entries_[port].endpoint : nullptr;
  }
  bool is_static(dp::PortId port) const { return port < kCapacity && entries_[port].is_static; }
  size_t size() const { return by_endpoint_.size(); }
  size_t max_bound() const { return max_bound_; }
  bool full() const { return size() >= max_bound_; }

 private:
  struct Entry {
    net::Endpoint endpoint;
    bool bound = false;
    bool is_static = false;
  };
  void Set(dp::PortId port, const net::Endpoint& endpoint, bool is_static);

  size_t max_bound_;
  std::array<Entry, kCapacity> entries_{};
  absl::flat_hash_map<net::Endpoint, dp::PortId> by_endpoint_;
};

}  // namespace inca::membership
