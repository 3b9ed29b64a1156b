#include "inca/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

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
  heap_.push_back({at, seq_++, slot});
  std::push_heap(heap_.begin(), heap_.end(), Later);
}

uint64_t Simulator::RunUntil(TimeNs until) {
  uint64_t n = 0;
  while (!heap_.empty() && heap_.front().at <= until) {
    std::pop_heap(heap_.begin(), heap_.end(), Later);
    const Entry e = heap_.back();
    heap_.pop_back();
    now_ = e.at;
    Callback fn = std::move(slots_[e.slot]);
    free_slots_.push_back(e.slot);
    fn();
    ++n;
  }
  if (until > now_ && heap_.empty()) now_ = until;
  if (!heap_.empty() && until > now_) now_ = until;
  events_run_ += n;
  return n;
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

const LinkCounters& Network::link(const Node* node, dp::PortId port) const {
  return dirs_.at(ports_.at(node->id_).at(port)).counters;
}

void Network::Send(uint32_t from, dp::PortId port, Packet packet, uint32_t extra_wire_bytes) {
  if (port >= ports_[from].size()) throw std::out_of_range("Node::Send: no such port");
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
                 [this, di, to, to_port, p = std::move(packet)]() mutable {
                   ++dirs_[di].counters.delivered;
                   nodes_[to]->Receive(to_port, std::move(p));
                 });
}

}  // namespace inca::sim
