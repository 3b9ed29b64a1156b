#include "inca/ns3/olaf_apps.h"

#include <utility>

#include "ns3/inca_links.h"
#include "ns3/inet-socket-address.h"
#include "ns3/packet.h"
#include "ns3/simulator.h"

namespace inca {

namespace n3 = ::ns3;

using ns3_links::ToPacket;

NS_OBJECT_ENSURE_REGISTERED(OlafWorkerApp);
NS_OBJECT_ENSURE_REGISTERED(OlafPsApp);

n3::TypeId OlafWorkerApp::GetTypeId() {
  static n3::TypeId tid = n3::TypeId("inca::OlafWorkerApp")
                              .SetParent<n3::Application>()
                              .SetGroupName("inca")
                              .AddConstructor<OlafWorkerApp>();
  return tid;
}

OlafWorkerApp::OlafWorkerApp() = default;
OlafWorkerApp::~OlafWorkerApp() = default;

absl::Status OlafWorkerApp::Configure(const sim::WorkerNodeConfig& config, const n3::Address& ps) {
  auto loop = sim::WorkerLoop::Create(config, this);
  if (!loop.ok()) return loop.status();
  loop_ = *std::move(loop);
  ps_ = ps;
  return absl::OkStatus();
}

void OlafWorkerApp::StartApplication() {
  if (!loop_) return;
  OpenSocket(0, &ps_);
  loop_->Start();
}

void OlafWorkerApp::OnDatagram(std::span<const uint8_t> datagram, const n3::Address&) {
  loop_->OnDatagram(datagram);
}

sim::TimeNs OlafWorkerApp::Now() {
  return n3::Simulator::Now().GetNanoSeconds();
}

void OlafWorkerApp::At(sim::TimeNs at, std::function<void()> fn) {
  n3::Simulator::Schedule(n3::NanoSeconds(at) - n3::Simulator::Now(), [this, fn = std::move(fn)] {
    if (running()) fn();
  });
}

void OlafWorkerApp::SendUp(std::vector<uint8_t> datagram) {
  if (running()) socket()->Send(ToPacket(datagram));
}

n3::TypeId OlafPsApp::GetTypeId() {
  static n3::TypeId tid = n3::TypeId("inca::OlafPsApp")
                              .SetParent<n3::Application>()
                              .SetGroupName("inca")
                              .AddConstructor<OlafPsApp>();
  return tid;
}

OlafPsApp::OlafPsApp() = default;
OlafPsApp::~OlafPsApp() = default;

absl::Status OlafPsApp::Configure(olaf::PsOptions options, uint16_t port) {
  if (!options.apply) options.apply = [](const olaf::AppliedUpdate&) {};
  auto core = olaf::PsCore::Create(std::move(options));
  if (!core.ok()) return core.status();
  core_ = *std::move(core);
  port_ = port;
  return absl::OkStatus();
}

void OlafPsApp::StartApplication() {
  if (core_) OpenSocket(port_, nullptr);
}

void OlafPsApp::OnDatagram(std::span<const uint8_t> datagram, const n3::Address& from) {
  olaf::PsResult r = core_->OnDatagram(datagram, n3::Simulator::Now().GetNanoSeconds());
  if (!r.ack.empty()) socket()->SendTo(ToPacket(r.ack), 0, from);
  for (const auto& m : r.models) {
    for (const n3::Address& to : model_receivers_) socket()->SendTo(ToPacket(m), 0, to);
  }
}

}  // namespace inca
