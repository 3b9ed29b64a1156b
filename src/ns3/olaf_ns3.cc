#include "inca/ns3/olaf_ns3.h"

#include <chrono>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "inca/ns3/olaf_apps.h"
#include "inca/ns3/olaf_queue_disc.h"
#include "ns3/inca_links.h"
// ns-3's own headers, not its *-module.h: core-module.h includes
// singleton.h, which C++20 compilers refuse (ns-3.37 is C++17).
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/ipv4-address-helper.h"
#include "ns3/ipv4-global-routing-helper.h"
#include "ns3/packet-sink-helper.h"
#include "ns3/packet-sink.h"
#include "ns3/point-to-point-helper.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/traffic-control-helper.h"
#include "ns3/udp-client-server-helper.h"
#include "ns3/udp-server.h"
#include "ns3/uinteger.h"

namespace inca {

namespace n3 = ::ns3;

namespace {

constexpr uint16_t kPort = 9;
using ns3_links::Links;
using ns3_links::RunAndDestroy;

n3::Ptr<OlafQueueDisc> InstallDisc(n3::Ptr<n3::NetDevice> dev, const olaf::OlafSwitchConfig& c) {
  n3::TrafficControlHelper tch;
  tch.SetRootQueueDisc("inca::OlafQueueDisc");
  n3::QueueDiscContainer q = tch.Install(n3::NetDeviceContainer(dev));
  n3::Ptr<OlafQueueDisc> disc = n3::DynamicCast<OlafQueueDisc>(q.Get(0));
  disc->SetProgramConfig(c);
  return disc;
}

n3::Ptr<OlafWorkerApp> AddWorker(n3::Ptr<n3::Node> node, const sim::WorkerNodeConfig& wc,
                                 n3::Ipv4Address ps, absl::Status* status) {
  auto app = n3::CreateObject<OlafWorkerApp>();
  if (absl::Status st = app->Configure(wc, n3::InetSocketAddress(ps, kPort)); !st.ok()) {
    *status = st;
  }
  node->AddApplication(app);
  app->SetStartTime(n3::Seconds(0));
  return app;
}

// The engines' comparison: ns-3's own drop-tail device queue, UdpClient sources.
sim::CbrStarResult RunPlainStar(const sim::CbrStarConfig& c, n3::NodeContainer& senders,
                                n3::Ptr<n3::Node> router, n3::Ptr<n3::Node> sink, Links& links) {
  links.Connect(router, sink, c.bottleneck_gbps, c.delay_us, c.queue, c.payload + 28);
  const n3::Ipv4Address to = links.Address(1);
  for (uint32_t i = 0; i < senders.GetN(); ++i) {
    links.Connect(senders.Get(i), router, c.source_link_gbps, c.delay_us, 100000, c.payload + 28);
  }
  n3::UdpServerHelper server(kPort);
  n3::ApplicationContainer srv = server.Install(sink);
  for (uint32_t i = 0; i < senders.GetN(); ++i) {
    n3::UdpClientHelper client(to, kPort);
    client.SetAttribute("MaxPackets", n3::UintegerValue(c.per_source()));
    client.SetAttribute("Interval", n3::TimeValue(n3::NanoSeconds(c.period_ns())));
    client.SetAttribute("PacketSize", n3::UintegerValue(c.payload));
    n3::ApplicationContainer a = client.Install(senders.Get(i));
    a.Start(n3::NanoSeconds(c.period_ns() * i / c.sources));  // evenly staggered
  }
  sim::CbrStarResult r;
  r.offered = c.per_source() * static_cast<uint64_t>(c.sources);
  RunAndDestroy(
      n3::Seconds(c.duration_s + 1),
      [&] {
        // Every datagram not delivered was dropped at the bottleneck: the run
        // drains for a second after the last send, and nothing else drops.
        r.delivered = n3::DynamicCast<n3::UdpServer>(srv.Get(0))->GetReceived();
        r.dropped = r.offered - r.delivered;
      },
      &r.events, &r.wall_s);
  return r;
}

absl::StatusOr<sim::CbrStarResult> RunProgramStar(const sim::CbrStarConfig& c,
                                                  n3::NodeContainer& senders,
                                                  n3::Ptr<n3::Node> router, n3::Ptr<n3::Node> sink,
                                                  Links& links) {
  n3::NetDeviceContainer out = links.Connect(router, sink, c.bottleneck_gbps, c.delay_us, 4);
  const n3::Ipv4Address to = links.Address(1);
  olaf::OlafSwitchConfig sc;
  sc.policy = c.sw == sim::CbrSwitch::kFifo ? olaf::QueuePolicy::kFifo : olaf::QueuePolicy::kOlaf;
  sc.depth = c.queue;
  sc.egress_rate_bps = 0;  // the device's
  sc.egress_overhead_bytes = c.framing;
  sc.max_payload_bytes = c.payload - static_cast<uint32_t>(olaf::kOlafUpdateHeaderBytes);
  n3::Ptr<OlafQueueDisc> disc = InstallDisc(out.Get(0), sc);
  absl::Status status;
  std::vector<n3::Ptr<OlafWorkerApp>> workers;
  for (uint32_t i = 0; i < senders.GetN(); ++i) {
    links.Connect(senders.Get(i), router, c.source_link_gbps, c.delay_us, 100000);
    workers.push_back(
        AddWorker(senders.Get(i), sim::CbrWorker(c, static_cast<int>(i)), to, &status));
  }
  if (!status.ok()) {
    n3::Simulator::Destroy();
    return status;
  }
  n3::PacketSinkHelper sink_helper("ns3::UdpSocketFactory",
                                   n3::InetSocketAddress(n3::Ipv4Address::GetAny(), kPort));
  n3::ApplicationContainer srv = sink_helper.Install(sink);
  sim::CbrStarResult r;
  RunAndDestroy(
      n3::Seconds(c.duration_s + 1),
      [&] {
        for (const auto& w : workers) r.offered += w->loop()->core().counters().sent;
        r.delivered = n3::DynamicCast<n3::PacketSink>(srv.Get(0))->GetTotalRx() / c.payload;
        const olaf::QueueCounters& q = disc->program()->queue().totals();
        r.dropped = q.arrival_drops() + q.evictions();
        r.merged = q.merged;
      },
      &r.events, &r.wall_s);
  return r;
}

olaf::OlafSwitchConfig ScenarioSwitch(const sim::OlafScenario& s) {
  olaf::OlafSwitchConfig c;
  c.policy = s.policy;
  c.depth = s.queue_depth;
  c.delta_t_ns = static_cast<dp::TimeNs>(s.delta_t_ms * 1e6);
  c.tau_ns = static_cast<dp::TimeNs>(s.tau_ms * 1e6);
  c.egress_rate_bps = 0;         // the device's
  c.egress_overhead_bytes = 30;  // UDP 8 + IPv4 20 + PPP 2
  return c;
}

absl::Status Supported(const sim::OlafScenario& s) {
  if (auto st = s.Validate(); !st.ok()) return st;
  auto refuse = [&s](const char* key) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.name, ": ", key, " is not modelled on ns-3 yet (docs/ns3.md)"));
  };
  if (s.load > 0) return refuse("load");
  if (s.models || s.closed_loop) return refuse("models");
  if (s.worker_clock == olaf::WorkerClock::kPs) return refuse("worker_clock: ps");
  if (s.switch_clock_offset_ms != 0) return refuse("switch_clock_offset_ms");
  if (!s.sweep_key.empty()) return refuse("sweep");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<sim::CbrStarResult> RunCbrStarOnNs3(const sim::CbrStarConfig& c) {
  if (auto st = c.Validate(); !st.ok()) return st;
  n3::NodeContainer senders, router, sink;
  senders.Create(static_cast<uint32_t>(c.sources));
  router.Create(1);
  sink.Create(1);
  n3::InternetStackHelper stack;
  stack.Install(senders);
  stack.Install(router);
  stack.Install(sink);
  Links links;
  absl::StatusOr<sim::CbrStarResult> r =
      c.sw == sim::CbrSwitch::kPlain
          ? RunPlainStar(c, senders, router.Get(0), sink.Get(0), links)
          : RunProgramStar(c, senders, router.Get(0), sink.Get(0), links);
  if (r.ok()) r->simulator = "ns-3.37";
  return r;
}

absl::StatusOr<Ns3OlafResult> RunOlafScenarioOnNs3(const sim::OlafScenario& s) {
  if (auto st = Supported(s); !st.ok()) return st;
  n3::Ptr<n3::Node> ps = n3::CreateObject<n3::Node>();
  n3::Ptr<n3::Node> sw1 = n3::CreateObject<n3::Node>();
  n3::Ptr<n3::Node> sw2 = s.topology == "tree" ? n3::CreateObject<n3::Node>() : nullptr;
  n3::NodeContainer all(ps, sw1);
  if (sw2) all.Add(sw2);
  n3::InternetStackHelper stack;
  stack.Install(all);
  Links links;
  const double r1 = s.egress_gbps;
  InstallDisc(links.Connect(sw1, ps, r1, s.link_delay_us, 4096).Get(0), ScenarioSwitch(s));
  const n3::Ipv4Address ps_addr = links.Address(1);
  if (sw2) {
    InstallDisc(links.Connect(sw2, sw1, r1 / s.tree_ratio, s.link_delay_us, 4096).Get(0),
                ScenarioSwitch(s));
  }
  auto ps_app = n3::CreateObject<OlafPsApp>();
  if (auto st = ps_app->Configure(olaf::PsOptions{}, kPort); !st.ok()) return st;
  ps->AddApplication(ps_app);
  const std::vector<std::vector<sim::WorkerNodeConfig>> configs = sim::WorkerConfigs(s);
  std::vector<std::vector<n3::Ptr<OlafWorkerApp>>> workers;
  absl::Status status;
  size_t cluster = 0;
  for (const sim::ClusterGroup& g : s.clusters) {
    for (uint32_t k = 0; k < g.count; ++k, ++cluster) {
      n3::Ptr<n3::Node> edge = n3::CreateObject<n3::Node>();
      stack.Install(edge);
      links.Connect(edge, g.behind_sw2 && sw2 ? sw2 : sw1, s.worker_link_gbps, s.link_delay_us,
                    4096);
      workers.emplace_back();
      for (const sim::WorkerNodeConfig& wc : configs[cluster]) {
        n3::Ptr<n3::Node> host = n3::CreateObject<n3::Node>();
        stack.Install(host);
        links.Connect(host, edge, s.worker_link_gbps, s.link_delay_us, 4096);
        workers.back().push_back(AddWorker(host, wc, ps_addr, &status));
      }
    }
  }
  if (!status.ok()) {
    n3::Simulator::Destroy();
    return status;
  }
  n3::Simulator::Schedule(n3::Seconds(s.warmup_s), [&ps_app] {
    ps_app->mutable_core()->ResetAomWindow(n3::Simulator::Now().GetNanoSeconds());
  });
  Ns3OlafResult out;
  const auto end = static_cast<dp::TimeNs>(s.duration_s * 1e9);
  RunAndDestroy(
      n3::NanoSeconds(end),
      [&] {
        double sum = 0;
        for (size_t c = 0; c < workers.size(); ++c) {
          Ns3ClusterResult r;
          r.cluster_id = static_cast<uint16_t>(c);
          for (const auto& w : workers[c]) r.sent += w->loop()->core().counters().sent;
          if (auto cs = ps_app->core()->cluster(r.cluster_id, end)) {
            r.received = cs->updates_applied;
            r.carried = cs->worker_updates_applied;
            if (cs->aom) r.mean_aom_ms = cs->aom->average_ns / 1e6;
          } else {
            r.mean_aom_ms = static_cast<double>(end) / 1e6;  // never delivered
          }
          sum += r.mean_aom_ms;
          out.clusters.push_back(r);
        }
        out.mean_aom_ms = out.clusters.empty() ? 0 : sum / static_cast<double>(out.clusters.size());
      },
      &out.events, &out.wall_s);
  return out;
}

}  // namespace inca
