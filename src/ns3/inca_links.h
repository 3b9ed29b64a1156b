// What the ns-3 adapter's files share (src/ns3): point-to-point links
// addressed from the benchmarking range, a run that reads its results
// before ns-3 tears the simulation down, and bytes as an ns-3 packet.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ns3/data-rate.h"
#include "ns3/ipv4-address-helper.h"
#include "ns3/ipv4-global-routing-helper.h"
#include "ns3/packet.h"
#include "ns3/point-to-point-helper.h"
#include "ns3/simulator.h"
#include "ns3/socket.h"
#include "ns3/string.h"
#include "ns3/traffic-control-helper.h"
#include "ns3/uinteger.h"

namespace inca::ns3_links {

namespace n3 = ::ns3;

// Every link's MTU: an OLAF update of the default size is a 9,000-byte IP packet.
constexpr uint32_t kMtu = 9000;

// Point-to-point links addressed from the benchmarking range, one /30 each,
// with no queue disc (inca's is installed where a scenario puts a switch).
class Links {
 public:
  Links() { addr_.SetBase("198.18.0.0", "255.255.255.252"); }
  n3::NetDeviceContainer Connect(n3::Ptr<n3::Node> a, n3::Ptr<n3::Node> b, double gbps,
                                 double delay_us, uint32_t queue_packets, uint32_t mtu = kMtu) {
    n3::PointToPointHelper p;
    p.SetDeviceAttribute("DataRate",
                         n3::DataRateValue(n3::DataRate(static_cast<uint64_t>(gbps * 1e9))));
    p.SetDeviceAttribute("Mtu", n3::UintegerValue(mtu));
    p.SetChannelAttribute("Delay", n3::TimeValue(n3::NanoSeconds(std::llround(delay_us * 1e3))));
    p.SetQueue("ns3::DropTailQueue", "MaxSize", n3::StringValue(absl::StrCat(queue_packets, "p")));
    n3::NetDeviceContainer d = p.Install(a, b);
    last_ = addr_.Assign(d);
    addr_.NewNetwork();
    n3::TrafficControlHelper().Uninstall(d);
    return d;
  }
  // The addresses of the last link's two ends.
  n3::Ipv4Address Address(uint32_t end) const { return last_.GetAddress(end); }

 private:
  n3::Ipv4AddressHelper addr_;
  n3::Ipv4InterfaceContainer last_;
};

// Runs the built simulation to `end` and tears it down; what `collect`
// reads from it is read before the teardown.
template <typename Collect>
inline void RunAndDestroy(n3::Time end, Collect&& collect, uint64_t* events, double* wall_s) {
  n3::Ipv4GlobalRoutingHelper::PopulateRoutingTables();
  n3::Simulator::Stop(end);
  const auto t0 = std::chrono::steady_clock::now();
  n3::Simulator::Run();
  *wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *events = n3::Simulator::GetEventCount();
  collect();
  n3::Simulator::Destroy();
}

inline n3::Ptr<n3::Packet> ToPacket(std::span<const uint8_t> bytes) {
  return n3::Create<n3::Packet>(bytes.data(), static_cast<uint32_t>(bytes.size()));
}

}  // namespace inca::ns3_links
