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
// loss). A node may sit on a host whose CPU pays for each packet it sends
// and receives (HostCost); other nodes send and receive for free.
//
// Not thread-safe; one simulation per thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "inca/dataplane/program.h"

namespace inca::sim {

using dp::TimeNs;

// The events one inca-sim run may take by default (every scenario's
// `max_events`): room for fabric runs of hundreds of millions of events,
// a bound for a scenario that asks for unbounded work (docs/sim.md).
inline constexpr uint64_t kDefaultMaxEvents = 2'000'000'000;

// The one-line error of a run that reached its budget.
std::string EventBudgetMessage(uint64_t max_events);

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
  // At most this many events in all (RunUntil stops there, leaving the
  // rest queued, and budget_spent() turns true): a scenario whose work grew
  // without bound stops with an error instead of filling the machine.
  void set_event_budget(uint64_t events) { budget_ = events; }
  bool budget_spent() const { return events_run_ >= budget_; }

 private:
  struct Entry {
    TimeNs at;
    uint64_t seq;
    uint32_t slot;
  };
  static bool Later(const Entry& a, const Entry& b) {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
  // heap_ is a 4-ary min-heap by (at, seq): half a binary heap's levels,
  // each a cache line's worth of children (the engine's hottest loop).
  void Push(const Entry& e);
  Entry Pop();
  TimeNs now_ = 0;
  uint64_t seq_ = 0;
  uint64_t events_run_ = 0;
  uint64_t budget_ = UINT64_MAX;
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

// A host's CPU (docs/sim.md, "Host model"): every packet a node of the host
// sends occupies one of its cores for packet_ns + payload bytes × byte_ps /
// 1000 ns before it reaches the link's transmit queue; every packet delivered
// to it occupies one for the same before the node's Receive(). Cores serve
// packets in the order they ask, each on the core free first, and release
// them in that order (a packet never overtakes an earlier one of its host).
// Payload bytes include those a timing-mode packet stands for
// (extra_wire_bytes). A zero cost adds neither time nor events.
struct HostCost {
  TimeNs packet_ns = 0;  // per packet
  double byte_ps = 0;    // per payload byte, in picoseconds
  int cores = 1;
};

// Counted when a packet asks the CPU; busy_ns is the work asked for, summed
// in picoseconds and rounded to the nearest ns.
struct HostCounters {
  uint64_t sent = 0, received = 0;
  TimeNs busy_ns = 0;
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
    host_of_.push_back(-1);
    return raw;
  }
  // A full-duplex link: one direction per way, each with `config`. Returns
  // the port numbers it got on a and on b.
  std::pair<dp::PortId, dp::PortId> Connect(Node* a, Node* b, const LinkConfig& config);
  // Calls Start() on every node, in the order they were added.
  void Start();
  // The counters of the direction leaving `node` on `port`; nullptr for a
  // node of another network or a port the node does not have.
  const LinkCounters* link(const Node* node, dp::PortId port) const;
  // Puts `node` on host CPU number `host` (>= 0); nodes on one host share
  // its cores, and the cost given last for a host applies to all of them.
  // InvalidArgument for a node of another network, host < 0, cores < 1 or
  // a negative cost (and nothing changes).
  absl::Status SetHost(Node* node, int host, const HostCost& cost);
  // nullptr for a host no SetHost named.
  const HostCounters* host(int host) const;
  // Packets a node sent out of a port it does not have: dropped, counted.
  uint64_t unrouted() const { return unrouted_; }

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
  struct Host {
    HostCost cost;
    std::vector<int64_t> core_free_ps;  // when each core is next idle
    int64_t last_release_ps = 0;        // the latest packet's release, for in-order release
    int64_t busy_ps = 0;
    uint64_t pending = 0;  // packets whose release is scheduled but has not run
    HostCounters counters;
  };
  // Occupies `host`'s CPU with a packet of `payload` bytes asking now.
  // Returns false if the packet may go on at once (no work and nothing of
  // the host pending, so a zero cost adds no event), else true with the ns
  // at which to release it (the caller schedules that, counted in pending).
  bool Occupy(Host& host, size_t payload, TimeNs* release);
  // The link half of Send: the transmit queue, transmitter, loss, delivery.
  void Enqueue(uint32_t from, dp::PortId port, Packet packet, uint32_t extra_wire_bytes);
  // The arrival half: Receive(), after the receiving host's CPU if any.
  void Deliver(uint32_t to, dp::PortId port, Packet packet, uint32_t extra_wire_bytes);
  // `extra_wire_bytes`: bytes the packet stands for beyond its own (a
  // payload a timing-mode run elides), charged on the wire as if sent.
  void Send(uint32_t from, dp::PortId port, Packet packet, uint32_t extra_wire_bytes);
  Simulator* sim_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::vector<uint32_t>> ports_;  // node -> port -> direction index
  std::vector<Direction> dirs_;
  std::vector<int> host_of_;          // node -> index in hosts_, -1: none
  std::vector<Host> hosts_;           // in the order SetHost first named them
  std::map<int, size_t> host_index_;  // host number -> index in hosts_
  std::mt19937_64 rng_;
  uint64_t unrouted_ = 0;
};

}  // namespace inca::sim
