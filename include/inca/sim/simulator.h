// inca-sim's discrete-event engine and network model.
//
// Simulator: a clock and an event queue. Events run in (time, insertion
// sequence) order — never pointer or hash order — so a run is a pure
// function of its scenario and seeds (ns-3's Scheduler::EventKey).
//
// Network: nodes joined by point-to-point links. A link has a rate (0 =
// infinite: no serialisation), a propagation delay, an MTU and a bounded
// transmit queue; a packet occupies the link for (bytes + overhead)·8/rate
// after the previous one, then arrives delay_ns later. Every packet handed
// to a link is delivered, or dropped with a counted reason (mtu, queue,
// loss).
//
// Not thread-safe; one simulation per thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "inca/dataplane/program.h"

namespace inca::sim {

using dp::TimeNs;

class Simulator {
 public:
  using Callback = std::function<void()>;

  TimeNs now() const { return now_; }
  // Runs `fn` at `at` (>= now()); events at equal times run in the order
  // they were scheduled.
  void Schedule(TimeNs at, Callback fn);
  void ScheduleIn(TimeNs delay, Callback fn) { Schedule(now_ + delay, std::move(fn)); }
  // Runs events until the queue is empty or the next one is after `until`;
  // the clock then reads `until` (or the last event's time if earlier and
  // the queue ran dry). Returns the events run.
  uint64_t RunUntil(TimeNs until);
  uint64_t events_run() const { return events_run_; }
  size_t pending() const { return heap_.size(); }

 private:
  struct Entry {
    TimeNs at;
    uint64_t seq;
    uint32_t slot;
  };
  static bool Later(const Entry& a, const Entry& b) {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
  TimeNs now_ = 0;
  uint64_t seq_ = 0;
  uint64_t events_run_ = 0;
  std::vector<Entry> heap_;
  std::vector<Callback> slots_;
  std::vector<uint32_t> free_slots_;
};

using Packet = std::vector<uint8_t>;

class Network;

// A node receives packets on its ports (the links attached to it, numbered
// in the order they were connected).
class Node {
 public:
  virtual ~Node() = default;
  virtual void Receive(dp::PortId port, Packet packet) = 0;
  // Called once before the run starts.
  virtual void Start() {}
  const std::string& name() const { return name_; }

 protected:
  explicit Node(std::string name) : name_(std::move(name)) {}
  // Sends on this node's `port`; see Network::Send.
  void Send(dp::PortId port, Packet packet, uint32_t extra_wire_bytes = 0);
  Simulator& sim();
  Network* net_ = nullptr;

 private:
  friend class Network;
  std::string name_;
  uint32_t id_ = 0;
};

struct LinkConfig {
  double rate_bps = 0;            // 0: infinite
  TimeNs delay_ns = 0;            // propagation
  uint32_t mtu_bytes = 9000;      // largest packet (UDP payload + overhead)
  uint32_t overhead_bytes = 66;   // Ethernet+IPv4+UDP framing added on the wire
  uint32_t queue_packets = 1024;  // transmit queue bound (waiting or being sent)
  double loss = 0;                // each packet lost on the wire with this probability
};

struct LinkCounters {
  uint64_t sent = 0, delivered = 0, bytes = 0;
  uint64_t dropped_mtu = 0, dropped_queue = 0, dropped_loss = 0;
};

class Network {
 public:
  // `seed` seeds the links' loss draws (LinkConfig::loss).
  explicit Network(Simulator* sim, uint64_t seed = 1) : sim_(sim), rng_(seed) {}
  Simulator& sim() { return *sim_; }

  // Takes ownership; returns the node.
  template <typename T>
  T* Add(std::unique_ptr<T> node) {
    T* raw = node.get();
    raw->net_ = this;
    raw->id_ = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back(std::move(node));
    ports_.emplace_back();
    return raw;
  }
  // A full-duplex link: one direction per way, each with `config`. Returns
  // the port numbers it got on a and on b.
  std::pair<dp::PortId, dp::PortId> Connect(Node* a, Node* b, const LinkConfig& config);
  // Calls Start() on every node, in the order they were added.
  void Start();
  // The counters of the direction leaving `node` on `port`.
  const LinkCounters& link(const Node* node, dp::PortId port) const;

 private:
  friend class Node;
  struct Direction {
    LinkConfig config;
    uint32_t to_node = 0;
    dp::PortId to_port = 0;
    int64_t free_at_ps = 0;      // when the transmitter is next idle, in picoseconds
    std::deque<TimeNs> tx_done;  // when each queued packet leaves the transmitter
    LinkCounters counters;
  };
  // `extra_wire_bytes`: bytes the packet stands for beyond its own (a
  // payload a timing-mode run elides), charged on the wire as if sent.
  void Send(uint32_t from, dp::PortId port, Packet packet, uint32_t extra_wire_bytes);
  Simulator* sim_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::vector<uint32_t>> ports_;  // node -> port -> direction index
  std::vector<Direction> dirs_;
  std::mt19937_64 rng_;
};

}  // namespace inca::sim
