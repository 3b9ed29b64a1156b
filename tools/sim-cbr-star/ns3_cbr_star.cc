// The ns-3 side of the comparison (scripts/bench-sim-vs-ns3.sh; docs/sim.md,
// "Against ns-3"): the workload of main.cc on ns-3's point-to-point links,
// IPv4 and UDP. Built by that script against Debian's libns3-dev (ns-3.37),
// not by CMake. Each sender is a UdpClient on its own link to a router; the
// router's link to the sink has a drop-tail device queue of `queue`
// packets and no queue discipline in front of it (traffic control is
// uninstalled), so that queue is the only one, as in inca-sim.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

using namespace ns3;

int main(int argc, char** argv) {
  uint32_t sources = 9, payload = 9000, queue = 8;
  double rate_gbps = 6, source_link_gbps = 100, bottleneck_gbps = 40, duration_s = 10, delay_us = 1;
  CommandLine cmd;
  cmd.AddValue("sources", "senders", sources);
  cmd.AddValue("rate-gbps", "each sender's rate, UDP payload bits", rate_gbps);
  cmd.AddValue("source-link-gbps", "each sender's link", source_link_gbps);
  cmd.AddValue("bottleneck-gbps", "the router -> sink link", bottleneck_gbps);
  cmd.AddValue("payload", "UDP payload bytes", payload);
  cmd.AddValue("queue", "packets that may wait at the bottleneck", queue);
  cmd.AddValue("delay-us", "every link's propagation delay", delay_us);
  cmd.AddValue("duration-s", "simulated time", duration_s);
  cmd.Parse(argc, argv);

  NodeContainer senders, router, sink;
  senders.Create(sources);
  router.Create(1);
  sink.Create(1);
  InternetStackHelper stack;
  stack.Install(senders);
  stack.Install(router);
  stack.Install(sink);

  PointToPointHelper edge;
  edge.SetDeviceAttribute("DataRate", DataRateValue(DataRate(source_link_gbps * 1e9)));
  edge.SetDeviceAttribute("Mtu", UintegerValue(payload + 28));
  edge.SetChannelAttribute("Delay", TimeValue(NanoSeconds(delay_us * 1e3)));
  edge.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("100000p"));
  PointToPointHelper bottleneck = edge;
  bottleneck.SetDeviceAttribute("DataRate", DataRateValue(DataRate(bottleneck_gbps * 1e9)));
  bottleneck.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue(std::to_string(queue) + "p"));

  Ipv4AddressHelper addr;
  TrafficControlHelper tch;
  NetDeviceContainer out = bottleneck.Install(router.Get(0), sink.Get(0));
  addr.SetBase("198.18.255.0", "255.255.255.0");
  Ipv4InterfaceContainer sink_if = addr.Assign(out);
  tch.Uninstall(out);
  for (uint32_t i = 0; i < sources; ++i) {
    NetDeviceContainer d = edge.Install(senders.Get(i), router.Get(0));
    addr.SetBase(Ipv4Address((198u << 24) | (18u << 16) | (i << 8)), "255.255.255.0");
    addr.Assign(d);
    tch.Uninstall(d);
  }
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();
  const uint16_t port = 9;
  UdpServerHelper server(port);
  ApplicationContainer srv = server.Install(sink.Get(0));
  srv.Start(Seconds(0));
  // As sim-cbr-star rounds them: the period to the ns, the count to the run.
  const auto period_ns = static_cast<int64_t>(std::llround(payload * 8e9 / (rate_gbps * 1e9)));
  const auto per_source =
      static_cast<uint64_t>(std::llround(duration_s * 1e9 / static_cast<double>(period_ns)));
  for (uint32_t i = 0; i < sources; ++i) {
    UdpClientHelper client(sink_if.GetAddress(1), port);
    client.SetAttribute("MaxPackets", UintegerValue(per_source));
    client.SetAttribute("Interval", TimeValue(NanoSeconds(period_ns)));
    client.SetAttribute("PacketSize", UintegerValue(payload));
    ApplicationContainer c = client.Install(senders.Get(i));
    // Evenly staggered starts, as sim-cbr-star's.
    c.Start(NanoSeconds(period_ns * i / sources));
  }
  Simulator::Stop(Seconds(duration_s + 1));
  const auto t0 = std::chrono::steady_clock::now();
  Simulator::Run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t events = Simulator::GetEventCount();
  const uint64_t delivered = DynamicCast<UdpServer>(srv.Get(0))->GetReceived();
  // Every packet not delivered was dropped at the bottleneck: the run
  // drains for a second after the last send, and nothing else can drop.
  // (Without a queue discipline, a full device queue stops the traffic
  // control layer, which discards with no trace; the device's own Drop and
  // MacTxDrop traces stay silent.)
  const uint64_t offered = per_source * sources;
  std::printf(
      "{\"simulator\":\"ns-3.37\",\"offered\":%lu,\"delivered\":%lu,\"dropped\":%lu,"
      "\"events\":%lu,\"wall_s\":%.3f}\n",
      static_cast<unsigned long>(offered), static_cast<unsigned long>(delivered),
      static_cast<unsigned long>(offered - delivered), static_cast<unsigned long>(events), wall);
  Simulator::Destroy();
  return 0;
}
