#include "inca/ns3/udp_app.h"

#include "ns3/inet-socket-address.h"
#include "ns3/packet.h"
#include "ns3/udp-socket-factory.h"

namespace inca {

namespace n3 = ::ns3;

NS_OBJECT_ENSURE_REGISTERED(UdpApp);

n3::TypeId UdpApp::GetTypeId() {
  static n3::TypeId tid =
      n3::TypeId("inca::UdpApp").SetParent<n3::Application>().SetGroupName("inca");
  return tid;
}

void UdpApp::OpenSocket(uint16_t port, const n3::Address* peer) {
  socket_ = n3::Socket::CreateSocket(GetNode(), n3::UdpSocketFactory::GetTypeId());
  if (port != 0) {
    socket_->Bind(n3::InetSocketAddress(n3::Ipv4Address::GetAny(), port));
  } else {
    socket_->Bind();
  }
  if (peer != nullptr) socket_->Connect(*peer);
  socket_->SetRecvCallback(n3::MakeCallback(&UdpApp::OnReceive, this));
  running_ = true;
}

void UdpApp::StopApplication() {
  running_ = false;
  if (socket_) {
    socket_->SetRecvCallback(n3::MakeNullCallback<void, n3::Ptr<n3::Socket>>());
    socket_->Close();
  }
}

void UdpApp::DoDispose() {
  running_ = false;
  socket_ = nullptr;
  Application::DoDispose();
}

void UdpApp::OnReceive(n3::Ptr<n3::Socket> socket) {
  n3::Address from;
  while (n3::Ptr<n3::Packet> p = socket->RecvFrom(from)) {
    rx_.resize(p->GetSize());
    p->CopyData(rx_.data(), p->GetSize());
    OnDatagram(rx_, from);
  }
}

}  // namespace inca
