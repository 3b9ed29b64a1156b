#include "inca/ns3/olaf_apps.h"

#include <utility>

#include "ns3/inet-socket-address.h"
#include "ns3/packet.h"
#include "ns3/simulator.h"
#include "ns3/udp-socket-factory.h"

namespace inca {

namespace n3 = ::ns3;

namespace {

n3::Ptr<n3::Packet> ToPacket(const std::vector<uint8_t>& bytes) {
  return n3::Create<n3::Packet>(bytes.data(), static_cast<uint32_t>(bytes.size()));
}

// Every datagram waiting on `socket`, with its sender.
template <typename Fn>
void Drain(n3::Ptr<n3::Socket> socket, std::vector<uint8_t>& buf, Fn&& fn) {
  n3::Address from;
  while (n3::Ptr<n3::Packet> p = socket->RecvFrom(from)) {
    buf.resize(p->GetSize());
    p->CopyData(buf.data(), p->GetSize());
    fn(std::span<const uint8_t>(buf), from);
  }
}

}  // namespace

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
  socket_ = n3::Socket::CreateSocket(GetNode(), n3::UdpSocketFactory::GetTypeId());
  socket_->Bind();
  socket_->Connect(ps_);
  socket_->SetRecvCallback(n3::MakeCallback(&OlafWorkerApp::OnReceive, this));
  running_ = true;
  loop_->Start();
}

void OlafWorkerApp::StopApplication() {
  running_ = false;
  if (socket_) {
    socket_->SetRecvCallback(n3::MakeNullCallback<void, n3::Ptr<n3::Socket>>());
    socket_->Close();
  }
}

void OlafWorkerApp::DoDispose() {
  running_ = false;
  socket_ = nullptr;
  Application::DoDispose();
}

void OlafWorkerApp::OnReceive(n3::Ptr<n3::Socket> socket) {
  Drain(socket, rx_,
        [this](std::span<const uint8_t> d, const n3::Address&) { loop_->OnDatagram(d); });
}

sim::TimeNs OlafWorkerApp::Now() {
  return n3::Simulator::Now().GetNanoSeconds();
}

void OlafWorkerApp::At(sim::TimeNs at, std::function<void()> fn) {
  n3::Simulator::Schedule(n3::NanoSeconds(at) - n3::Simulator::Now(), [this, fn = std::move(fn)] {
    if (running_) fn();
  });
}

void OlafWorkerApp::SendUp(std::vector<uint8_t> datagram) {
  if (running_) socket_->Send(ToPacket(datagram));
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
  if (!core_) return;
  socket_ = n3::Socket::CreateSocket(GetNode(), n3::UdpSocketFactory::GetTypeId());
  socket_->Bind(n3::InetSocketAddress(n3::Ipv4Address::GetAny(), port_));
  socket_->SetRecvCallback(n3::MakeCallback(&OlafPsApp::OnReceive, this));
}

void OlafPsApp::StopApplication() {
  if (socket_) {
    socket_->SetRecvCallback(n3::MakeNullCallback<void, n3::Ptr<n3::Socket>>());
    socket_->Close();
  }
}

void OlafPsApp::DoDispose() {
  socket_ = nullptr;
  Application::DoDispose();
}

void OlafPsApp::OnReceive(n3::Ptr<n3::Socket> socket) {
  Drain(socket, rx_, [this, &socket](std::span<const uint8_t> d, const n3::Address& from) {
    olaf::PsResult r = core_->OnDatagram(d, n3::Simulator::Now().GetNanoSeconds());
    if (!r.ack.empty()) socket->SendTo(ToPacket(r.ack), 0, from);
    for (const auto& m : r.models) {
      for (const n3::Address& to : model_receivers_) socket->SendTo(ToPacket(m), 0, to);
    }
  });
}

}  // namespace inca
