#include "inca/sim/cbr_star.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/olaf/fragment.h"
#include "inca/sim/olaf_nodes.h"

namespace inca::sim {

namespace {

// Sends `count` datagrams, one every `period` from `start` (ns-3's
// UdpClient with MaxPackets and Interval).
class CbrSource final : public Node {
 public:
  CbrSource(int i, uint32_t payload, TimeNs start, TimeNs period, uint64_t count)
      : Node(absl::StrCat("source", i)),
        payload_(payload),
        start_(start),
        period_(period),
        count_(count) {}
  void Start() override {
    sim().Schedule(start_, [this] { Tick(); });
  }
  void Receive(dp::PortId, Packet) override {}
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
class PlainSwitch final : public Node {
 public:
  PlainSwitch(dp::PortId out, uint32_t payload) : Node("switch"), out_(out), payload_(payload) {}
  void Receive(dp::PortId, Packet p) override { Send(out_, std::move(p), payload_ - 16); }

 private:
  dp::PortId out_;
  uint32_t payload_;
};

class Sink final : public Node {
 public:
  Sink() : Node("sink") {}
  void Receive(dp::PortId, Packet) override { ++received_; }
  uint64_t received_ = 0;
};

LinkConfig Link(const CbrStarConfig& c, double gbps, uint32_t queue) {
  LinkConfig l;
  l.rate_bps = gbps * 1e9;
  l.delay_ns = static_cast<TimeNs>(std::llround(c.delay_us * 1e3));
  l.mtu_bytes = c.payload;
  l.overhead_bytes = c.framing;
  l.queue_packets = queue;
  return l;
}

// The sources are OLAF workers, the switch inca's OLAF switch program, its
// egress paced at the bottleneck's rate (the link after it never queues).
absl::StatusOr<CbrStarResult> RunOlafStar(const CbrStarConfig& c, Simulator& s, Network& net,
                                          Sink* sink) {
  olaf::OlafSwitchConfig sc;
  sc.policy = c.sw == CbrSwitch::kFifo ? olaf::QueuePolicy::kFifo : olaf::QueuePolicy::kOlaf;
  sc.depth = c.queue;
  sc.egress_rate_bps = static_cast<uint64_t>(std::llround(c.bottleneck_gbps * 1e9));
  sc.egress_overhead_bytes = c.framing;
  sc.max_payload_bytes = c.payload - static_cast<uint32_t>(olaf::kOlafUpdateHeaderBytes);
  auto created = SwitchNode::Create("switch", sc);
  if (!created.ok()) return created.status();
  SwitchNode* sw = net.Add(*std::move(created));
  net.Connect(sw, sink, Link(c, c.bottleneck_gbps, UINT32_MAX));  // port 0: the PS's
  std::vector<WorkerNode*> workers;
  for (int i = 0; i < c.sources; ++i) {
    WorkerNodeConfig w = CbrWorker(c, i);
    auto node = WorkerNode::Create(absl::StrCat("source", i), w);
    if (!node.ok()) return node.status();
    workers.push_back(net.Add(*std::move(node)));
    net.Connect(workers.back(), sw, Link(c, c.source_link_gbps, UINT32_MAX));
  }
  net.Start();
  s.RunUntil(static_cast<TimeNs>(std::llround(c.duration_s * 1e9)) + TimeNs{1'000'000'000});
  CbrStarResult r;
  for (const WorkerNode* w : workers) r.offered += w->sent();
  const olaf::QueueCounters& q = sw->program().queue().totals();
  r.delivered = sink->received_;
  r.dropped = q.arrival_drops() + q.evictions();
  r.merged = q.merged;
  return r;
}

}  // namespace

std::string_view ToString(CbrSwitch s) {
  switch (s) {
    case CbrSwitch::kPlain: return "plain";
    case CbrSwitch::kFifo: return "fifo";
    case CbrSwitch::kOlaf: return "olaf";
  }
  return "plain";
}

absl::Status CbrStarConfig::Validate() const {
  auto bad = [](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("cbr star: ", what));
  };
  if (sources < 1 || sources > 1000) return bad("sources must be in [1, 1000]");
  if (!(rate_gbps > 0) || !(source_link_gbps > 0) || !(bottleneck_gbps > 0)) {
    return bad("rates must be positive");
  }
  if (payload < 16 || payload > 65000) return bad("payload must be in [16, 65000]");
  if (sw != CbrSwitch::kPlain && (payload < olaf::kOlafUpdateHeaderBytes + 4 ||
                                  (payload - olaf::kOlafUpdateHeaderBytes) % 4)) {
    return bad("payload must be 40 bytes of OLAF header and a multiple of 4 with a switch program");
  }
  if (sw != CbrSwitch::kPlain &&
      payload > olaf::kOlafUpdateHeaderBytes + olaf::kDefaultUpdatePayloadBytes) {
    return bad("payload must be at most 8972 with a switch program (one UPDATE datagram)");
  }
  if (sw != CbrSwitch::kPlain && queue < 1) return bad("queue must be at least 1 with a program");
  if (!(delay_us >= 0) || !(duration_s > 0)) return bad("delay_us and duration_s out of range");
  return absl::OkStatus();
}

TimeNs CbrStarConfig::period_ns() const {
  return static_cast<TimeNs>(std::llround(payload * 8e9 / (rate_gbps * 1e9)));
}

uint64_t CbrStarConfig::per_source() const {
  return static_cast<uint64_t>(std::llround(duration_s * 1e9 / static_cast<double>(period_ns())));
}

WorkerNodeConfig CbrWorker(const CbrStarConfig& c, int i) {
  WorkerNodeConfig w;
  w.cluster_id = static_cast<uint16_t>(i);
  w.worker_id = static_cast<uint32_t>(i) + 1;
  w.elements = (c.payload - olaf::kOlafUpdateHeaderBytes) / 4;
  w.period_ns = c.period_ns();
  w.phase_ns = c.period_ns() * i / c.sources;  // evenly staggered
  w.stop_ns = w.phase_ns + static_cast<TimeNs>(c.per_source()) * c.period_ns();
  w.frame_overhead_bytes = c.framing;
  w.seed = static_cast<uint64_t>(i) + 1;
  return w;
}

std::string ToJson(const CbrStarResult& r) {
  char line[320];
  std::snprintf(line, sizeof line,
                "{\"simulator\":\"%s\",\"offered\":%lu,\"delivered\":%lu,\"dropped\":%lu,"
                "\"merged\":%lu,\"events\":%lu,\"wall_s\":%.3f}",
                r.simulator.c_str(), static_cast<unsigned long>(r.offered),
                static_cast<unsigned long>(r.delivered), static_cast<unsigned long>(r.dropped),
                static_cast<unsigned long>(r.merged), static_cast<unsigned long>(r.events),
                r.wall_s);
  return line;
}

absl::StatusOr<CbrStarResult> RunCbrStar(const CbrStarConfig& c) {
  if (auto st = c.Validate(); !st.ok()) return st;
  Simulator s;
  Network net(&s);
  auto* sink = net.Add(std::make_unique<Sink>());
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<CbrStarResult> r;
  if (c.sw != CbrSwitch::kPlain) {
    r = RunOlafStar(c, s, net, sink);
  } else {
    // The queue counts the packet on the transmitter too: `queue` waiting
    // is queue + 1 here, as ns-3's device queue holds only those waiting.
    auto* sw = net.Add(std::make_unique<PlainSwitch>(0, c.payload));
    net.Connect(sw, sink, Link(c, c.bottleneck_gbps, c.queue + 1));  // its port 0
    std::vector<CbrSource*> src;
    for (int i = 0; i < c.sources; ++i) {
      auto* n = net.Add(std::make_unique<CbrSource>(i, c.payload, c.period_ns() * i / c.sources,
                                                    c.period_ns(), c.per_source()));
      net.Connect(n, sw, Link(c, c.source_link_gbps, UINT32_MAX));
      src.push_back(n);
    }
    net.Start();
    s.RunUntil(static_cast<TimeNs>(std::llround(c.duration_s * 1e9)) + TimeNs{1'000'000'000});
    CbrStarResult out;
    for (const auto* n : src) out.offered += n->sent();
    out.delivered = sink->received_;
    out.dropped = net.link(sw, 0)->dropped_queue;
    r = out;
  }
  if (!r.ok()) return r;
  r->simulator = "inca-sim";
  r->events = s.events_run();
  r->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace inca::sim
