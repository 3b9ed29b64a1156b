#include "inca/sim/simulator.h"

#include <algorithm>
#include <cmath>

namespace inca::sim {

void Simulator::Schedule(TimeNs at, Callback fn) {
  if (at < now_) at = now_;  // never into the past
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = std::move(fn);
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.push_back(std::move(fn));
  }
  Push({at, seq_++, slot});
}

void Simulator::Push(const Entry& e) {
  size_t i = heap_.size();
  heap_.push_back(e);
  while (i > 0) {
    const size_t parent = (i - 1) / 4;
    if (!Later(heap_[parent], e)) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
}

Simulator::Entry Simulator::Pop() {
  const Entry top = heap_.front();
  const Entry last = heap_.back();
  heap_.pop_back();
  const size_t n = heap_.size();
  if (n == 0) return top;
  size_t i = 0;
  for (;;) {
    const size_t first = 4 * i + 1;
    if (first >= n) break;
    size_t best = first;
    for (size_t c = first + 1; c < std::min(first + 4, n); ++c) {
      if (Later(heap_[best], heap_[c])) best = c;
    }
    if (!Later(last, heap_[best])) break;
    heap_[i] = heap_[best];
    i = best;
  }
  heap_[i] = last;
  return top;
}

uint64_t Simulator::RunUntil(TimeNs until) {
  uint64_t n = 0;
  while (!heap_.empty() && heap_.front().at <= until && events_run_ + n < budget_) {
    const Entry e = Pop();
    now_ = e.at;
    Callback fn = std::move(slots_[e.slot]);
    free_slots_.push_back(e.slot);
    fn();
    ++n;
  }
  events_run_ += n;
  if (budget_spent()) return n;  // the clock stays at the last event run
  if (until > now_ && heap_.empty()) now_ = until;
  if (!heap_.empty() && until > now_) now_ = until;
  return n;
}

std::string EventBudgetMessage(uint64_t max_events) {
  return "the run reached its budget of " + std::to_string(max_events) +
         " events (max_events) and stopped; raise it with --set max_events=N if the run "
         "is meant to be that large, else shorten it (duration_s, clusters, period_ms)";
}

void Node::Send(dp::PortId port, Packet packet, uint32_t extra_wire_bytes) {
  net_->Send(id_, port, std::move(packet), extra_wire_bytes);
}

Simulator& Node::sim() {
  return net_->sim();
}

std::pair<dp::PortId, dp::PortId> Network::Connect(Node* a, Node* b, const LinkConfig& config) {
  const auto pa = static_cast<dp::PortId>(ports_[a->id_].size());
  const auto pb = static_cast<dp::PortId>(ports_[b->id_].size());
  dirs_.push_back({config, b->id_, pb, 0, {}, {}});
  ports_[a->id_].push_back(static_cast<uint32_t>(dirs_.size() - 1));
  dirs_.push_back({config, a->id_, pa, 0, {}, {}});
  ports_[b->id_].push_back(static_cast<uint32_t>(dirs_.size() - 1));
  return {pa, pb};
}

void Network::Start() {
  for (auto& n : nodes_) n->Start();
}

const LinkCounters* Network::link(const Node* node, dp::PortId port) const {
  if (node == nullptr || node->net_ != this || node->id_ >= ports_.size()) return nullptr;
  const std::vector<uint32_t>& ports = ports_[node->id_];
  return port < ports.size() ? &dirs_[ports[port]].counters : nullptr;
}

absl::Status Network::SetHost(Node* node, int host, const HostCost& cost) {
  if (node == nullptr || node->net_ != this || node->id_ >= nodes_.size() ||
      nodes_[node->id_].get() != node) {
    return absl::InvalidArgumentError("Network::SetHost: not a node of this network");
  }
  if (host < 0) return absl::InvalidArgumentError("Network::SetHost: host < 0");
  if (cost.cores < 1) return absl::InvalidArgumentError("Network::SetHost: cores < 1");
  // `!(x >= 0)` also rejects NaN.
  if (cost.packet_ns < 0 || !(cost.byte_ps >= 0) || std::isinf(cost.byte_ps)) {
    return absl::InvalidArgumentError("Network::SetHost: negative or infinite cost");
  }
  auto [it, added] = host_index_.try_emplace(host, hosts_.size());
  if (added) hosts_.emplace_back();
  Host& h = hosts_[it->second];
  h.cost = cost;
  // Cores already busy keep their work; new ones start idle.
  h.core_free_ps.resize(static_cast<size_t>(cost.cores), 0);
  host_of_[node->id_] = static_cast<int>(it->second);
  return absl::OkStatus();
}

const HostCounters* Network::host(int host) const {
  const auto it = host_index_.find(host);
  return it == host_index_.end() ? nullptr : &hosts_[it->second].counters;
}

bool Network::Occupy(Host& h, size_t payload, TimeNs* release) {
  const int64_t now_ps = sim_->now() * 1000;
  // Picoseconds, as the link's transmitter: a per-byte cost below a ns
  // must not round up on every packet.
  const int64_t cost_ps =
      h.cost.packet_ns * 1000 +
      static_cast<int64_t>(std::llround(static_cast<double>(payload) * h.cost.byte_ps));
  h.busy_ps += cost_ps;
  h.counters.busy_ns = (h.busy_ps + 500) / 1000;
  // FIFO: the core idle first (the lowest on a tie) takes the packet.
  auto core = std::min_element(h.core_free_ps.begin(), h.core_free_ps.end());
  *core = std::max(now_ps, *core) + cost_ps;
  // Cores work in parallel but release in order, so that one node's
  // packets keep the order it sent them in.
  h.last_release_ps = std::max(h.last_release_ps, *core);
  if (h.pending == 0 && h.last_release_ps <= now_ps) return false;
  *release = (h.last_release_ps + 999) / 1000;
  ++h.pending;
  return true;
}

void Network::Send(uint32_t from, dp::PortId port, Packet packet, uint32_t extra_wire_bytes) {
  if (port >= ports_[from].size()) {  // a port the node does not have
    ++unrouted_;
    return;
  }
  const int hi = host_of_[from];
  if (hi >= 0) {
    Host& h = hosts_[static_cast<size_t>(hi)];
    ++h.counters.sent;
    TimeNs at;
    if (Occupy(h, packet.size() + extra_wire_bytes, &at)) {
      sim_->Schedule(at, [this, hi, from, port, extra_wire_bytes, p = std::move(packet)]() mutable {
        --hosts_[static_cast<size_t>(hi)].pending;
        Enqueue(from, port, std::move(p), extra_wire_bytes);
      });
      return;
    }
  }
  Enqueue(from, port, std::move(packet), extra_wire_bytes);
}

void Network::Deliver(uint32_t to, dp::PortId port, Packet packet, uint32_t extra_wire_bytes) {
  const int hi = host_of_[to];
  if (hi >= 0) {
    Host& h = hosts_[static_cast<size_t>(hi)];
    ++h.counters.received;
    TimeNs at;
    if (Occupy(h, packet.size() + extra_wire_bytes, &at)) {
      sim_->Schedule(at, [this, hi, to, port, p = std::move(packet)]() mutable {
        --hosts_[static_cast<size_t>(hi)].pending;
        nodes_[to]->Receive(port, std::move(p));
      });
      return;
    }
  }
  nodes_[to]->Receive(port, std::move(packet));
}

void Network::Enqueue(uint32_t from, dp::PortId port, Packet packet, uint32_t extra_wire_bytes) {
  const uint32_t di = ports_[from][port];
  Direction& d = dirs_[di];
  ++d.counters.sent;
  const size_t wire = packet.size() + extra_wire_bytes + d.config.overhead_bytes;
  if (wire > d.config.mtu_bytes + d.config.overhead_bytes) {
    ++d.counters.dropped_mtu;
    return;
  }
  const TimeNs now = sim_->now();
  TimeNs done = now;
  if (d.config.rate_bps > 0) {
    // The queue holds what waits for the transmitter or is on it; a packet
    // that has left is on the wire and no longer counts.
    while (!d.tx_done.empty() && d.tx_done.front() <= now) d.tx_done.pop_front();
    if (d.tx_done.size() >= d.config.queue_packets) {
      ++d.counters.dropped_queue;
      return;
    }
    // The transmitter keeps picoseconds, so that rounding a packet's time
    // to the nanosecond does not add up over many small packets (a 342-byte
    // frame at 100 Gbit/s is 27.36 ns); a packet leaves at the next whole ns.
    const int64_t start_ps = std::max(now * 1000, d.free_at_ps);
    const auto tx_ps =
        static_cast<int64_t>(std::llround(static_cast<double>(wire) * 8e12 / d.config.rate_bps));
    d.free_at_ps = start_ps + tx_ps;
    done = (d.free_at_ps + 999) / 1000;
    d.tx_done.push_back(done);
  }
  d.counters.bytes += packet.size() + extra_wire_bytes;
  if (d.config.loss > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < d.config.loss) {
    ++d.counters.dropped_loss;  // it took the transmitter, then the wire lost it
    return;
  }
  const uint32_t to = d.to_node;
  const dp::PortId to_port = d.to_port;
  sim_->Schedule(done + d.config.delay_ns,
                 [this, di, to, to_port, extra_wire_bytes, p = std::move(packet)]() mutable {
                   ++dirs_[di].counters.delivered;
                   Deliver(to, to_port, std::move(p), extra_wire_bytes);
                 });
}

}  // namespace inca::sim
