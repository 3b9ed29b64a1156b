// sim-cbr-star: inca-sim's engine on the workload of its ns-3 comparison
// (docs/sim.md, "Against ns-3"): `sources` hosts send UDP datagrams of
// `payload` bytes at a constant rate through one switch to one sink over a
// bottleneck with a drop-tail queue. tools/sim-cbr-star/ns3_cbr_star.cc is
// the same on ns-3; scripts/bench-sim-vs-ns3.sh runs both and compares.
// Prints one JSON line: offered, delivered and dropped packets, events and
// wall time.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "inca/sim/simulator.h"
#include "util/cli_flags.h"

namespace {

using inca::sim::LinkConfig;
using inca::sim::Node;
using inca::sim::Packet;
using inca::sim::TimeNs;

// Sends `count` datagrams, one every `period` from `start` (ns-3's
// UdpClient with MaxPackets and Interval).
class CbrSource final : public Node {
 public:
  CbrSource(int i, uint32_t payload, TimeNs start, TimeNs period, uint64_t count)
      : Node("source" + std::to_string(i)),
        payload_(payload),
        start_(start),
        period_(period),
        count_(count) {}
  void Start() override {
    sim().Schedule(start_, [this] { Tick(); });
  }
  void Receive(inca::dp::PortId, Packet) override {}
  uint64_t sent() const { return sent_; }

 private:
  void Tick() {
    Send(0, Packet(16), payload_ - 16);  // the payload charged on the wire, not carried
    ++sent_;
    if (sent_ < count_) sim().Schedule(sim().now() + period_, [this] { Tick(); });
  }
  uint32_t payload_;
  TimeNs start_, period_;
  uint64_t count_;
  uint64_t sent_ = 0;
};

// Forwards everything to its port `out` (an IP router with one route).
class Switch final : public Node {
 public:
  Switch() : Node("switch") {}
  void Receive(inca::dp::PortId, Packet p) override { Send(out_, std::move(p), payload_ - 16); }
  inca::dp::PortId out_ = 0;
  uint32_t payload_ = 0;
};

class Sink final : public Node {
 public:
  Sink() : Node("sink") {}
  void Receive(inca::dp::PortId, Packet) override { ++received_; }
  uint64_t received_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sim-cbr-star: the ns-3 comparison's workload on inca-sim's engine"};
  int sources = 9;
  double rate_gbps = 6, source_link_gbps = 100, bottleneck_gbps = 40, duration_s = 10, delay_us = 1;
  uint32_t payload = 9000, queue = 8, framing = 30;
  app.add_option("--sources", sources, "senders")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--rate-gbps", rate_gbps, "each sender's rate, UDP payload bits")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1000.0));
  app.add_option("--source-link-gbps", source_link_gbps, "each sender's link")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 10000.0));
  app.add_option("--bottleneck-gbps", bottleneck_gbps, "the switch -> sink link")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 10000.0));
  app.add_option("--payload", payload, "UDP payload bytes")
      ->capture_default_str()
      ->check(CLI::Range(16, 65000));
  app.add_option("--queue", queue, "packets that may wait at the bottleneck (drop-tail)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--framing", framing,
                 "bytes on the wire per datagram beyond its payload (ns-3's point-to-point "
                 "link: UDP 8 + IPv4 20 + PPP 2)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("--delay-us", delay_us, "every link's propagation delay")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--duration-s", duration_s, "simulated time")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1000.0));
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "sim-cbr-star"); rc >= 0)
    return rc;

  namespace sim = inca::sim;
  sim::Simulator s;
  sim::Network net(&s);
  auto* sw = net.Add(std::make_unique<Switch>());
  auto* sink = net.Add(std::make_unique<Sink>());
  LinkConfig lc;
  lc.delay_ns = static_cast<TimeNs>(std::llround(delay_us * 1e3));
  lc.mtu_bytes = payload;
  lc.overhead_bytes = framing;
  lc.queue_packets = UINT32_MAX;
  // The queue counts the packet on the transmitter too: `queue` waiting
  // is queue + 1 here, as ns-3's device queue holds only those waiting.
  LinkConfig bottleneck = lc;
  bottleneck.rate_bps = bottleneck_gbps * 1e9;
  bottleneck.queue_packets = queue + 1;
  sw->out_ = net.Connect(sw, sink, bottleneck).first;
  sw->payload_ = payload;
  const auto period = static_cast<TimeNs>(std::llround(payload * 8e9 / (rate_gbps * 1e9)));
  const auto stop = static_cast<TimeNs>(std::llround(duration_s * 1e9));
  const auto count =
      static_cast<uint64_t>(std::llround(duration_s * 1e9 / static_cast<double>(period)));
  std::vector<CbrSource*> src;
  lc.rate_bps = source_link_gbps * 1e9;
  for (int i = 0; i < sources; ++i) {
    // Evenly staggered starts, as the ns-3 program's.
    auto* n = net.Add(std::make_unique<CbrSource>(i, payload, period * i / sources, period, count));
    net.Connect(n, sw, lc);
    src.push_back(n);
  }
  const auto t0 = std::chrono::steady_clock::now();
  net.Start();
  s.RunUntil(stop + TimeNs{1'000'000'000});  // a second to drain
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t offered = 0;
  for (const auto* n : src) offered += n->sent();
  const sim::LinkCounters& b = *net.link(sw, sw->out_);  // the port Connect gave it
  std::printf(
      "{\"simulator\":\"inca-sim\",\"offered\":%lu,\"delivered\":%lu,\"dropped\":%lu,"
      "\"events\":%lu,\"wall_s\":%.3f}\n",
      static_cast<unsigned long>(offered), static_cast<unsigned long>(sink->received_),
      static_cast<unsigned long>(b.dropped_queue), static_cast<unsigned long>(s.events_run()),
      wall);
  return 0;
}
