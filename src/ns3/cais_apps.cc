#include "inca/ns3/cais_apps.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <utility>

#include "membership/port_table.h"
#include "ns3/inca_links.h"
#include "ns3/inet-socket-address.h"
#include "ns3/packet.h"
#include "ns3/simulator.h"
#include "sim/cais_nodes.h"
#include "switchd/cais_dispatcher.h"

namespace inca {

namespace n3 = ::ns3;

namespace {

// How often the switch looks at its leases (inca-switchd: every loop).
constexpr int64_t kTickMs = 100;

net::Endpoint ToEndpoint(const n3::Address& a) {
  const n3::InetSocketAddress in = n3::InetSocketAddress::ConvertFrom(a);
  sockaddr_storage ss{};
  auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
  sin->sin_family = AF_INET;
  sin->sin_port = htons(in.GetPort());
  sin->sin_addr.s_addr = htonl(in.GetIpv4().Get());
  return net::Endpoint::FromSockaddr(ss, sizeof(sockaddr_in));
}

std::optional<n3::InetSocketAddress> ToAddress(const net::Endpoint& e) {
  sockaddr_storage ss{};
  if (e.ToSockaddr(AF_INET, &ss) != sizeof(sockaddr_in)) return std::nullopt;
  const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
  return n3::InetSocketAddress(n3::Ipv4Address(ntohl(sin->sin_addr.s_addr)), ntohs(sin->sin_port));
}

using ns3_links::ToPacket;

}  // namespace

// ----------------------------------------------------------------- switch

// The dispatcher's output onto the switch's socket: a port's packets to the
// endpoint that holds it, a management reply to its sender.
class CaisSwitchApp::Output final : public switchd::CaisDispatcher::Output {
 public:
  explicit Output(CaisSwitchApp* app) : app_(app) {}
  void ToPort(dp::PortId port, std::span<const uint8_t> head, std::span<const uint8_t> payload,
              uint64_t /*share*/) override {
    const net::Endpoint* e = app_->ports_->endpoint(port);
    const std::optional<n3::InetSocketAddress> to = e ? ToAddress(*e) : std::nullopt;
    if (!to) return;  // the port's endpoint left (the reducer counts its output)
    buf_.assign(head.begin(), head.end());
    buf_.insert(buf_.end(), payload.begin(), payload.end());
    app_->socket()->SendTo(ToPacket(buf_), 0, *to);
  }
  void Reply(std::span<const uint8_t> mgmt) override {
    app_->socket()->SendTo(ToPacket(mgmt), 0, from);
  }
  n3::Address from;

 private:
  CaisSwitchApp* app_;
  std::vector<uint8_t> buf_;
};

NS_OBJECT_ENSURE_REGISTERED(CaisSwitchApp);
NS_OBJECT_ENSURE_REGISTERED(CaisRankApp);

n3::TypeId CaisSwitchApp::GetTypeId() {
  static n3::TypeId tid = n3::TypeId("inca::CaisSwitchApp")
                              .SetParent<n3::Application>()
                              .SetGroupName("inca")
                              .AddConstructor<CaisSwitchApp>();
  return tid;
}

CaisSwitchApp::CaisSwitchApp() = default;
CaisSwitchApp::~CaisSwitchApp() = default;

absl::Status CaisSwitchApp::Configure(const cais::CaisConfig& config, uint16_t port,
                                      uint32_t seq_start) {
  auto r = cais::CaisReducer::Create(config);
  if (!r.ok()) return r.status();
  reducer_ = *std::move(r);
  ports_ = std::make_unique<membership::PortTable>();
  dispatcher_ = std::make_unique<switchd::CaisDispatcher>(
      reducer_.get(), ports_.get(), switchd::DispatcherOptions{.seq_start = seq_start});
  output_ = std::make_unique<Output>(this);
  port_ = port;
  return absl::OkStatus();
}

void CaisSwitchApp::StartApplication() {
  if (!dispatcher_) return;
  OpenSocket(port_, nullptr);
  tick_ = n3::Simulator::Schedule(n3::MilliSeconds(kTickMs), [this] { Tick(); });
}

void CaisSwitchApp::StopApplication() {
  tick_.Cancel();
  UdpApp::StopApplication();
}

void CaisSwitchApp::Tick() {
  dispatcher_->OnTick(n3::Simulator::Now().GetNanoSeconds(), *output_);
  tick_ = n3::Simulator::Schedule(n3::MilliSeconds(kTickMs), [this] { Tick(); });
}

void CaisSwitchApp::OnDatagram(std::span<const uint8_t> datagram, const n3::Address& from) {
  const dp::TimeNs now = n3::Simulator::Now().GetNanoSeconds();
  // Chunk timeouts are driven by the datagrams that arrive, as in inca-sim.
  dispatcher_->Advance(now, *output_);
  output_->from = from;
  dispatcher_->OnDatagram(datagram, ToEndpoint(from), now, *output_);
}

// ------------------------------------------------------------------- rank

class CaisRankApp::Host final : public sim::RankHost {
 public:
  explicit Host(CaisRankApp* app) : app_(app) {}
  sim::TimeNs Now() override { return n3::Simulator::Now().GetNanoSeconds(); }
  void At(sim::TimeNs at, std::function<void()> fn) override {
    n3::Simulator::Schedule(n3::NanoSeconds(at) - n3::Simulator::Now(),
                            [app = app_, fn = std::move(fn)] {
                              if (app->running()) fn();
                            });
  }
  void SendDatagram(sim::Packet datagram, uint32_t /*extra: byte-exact only*/) override {
    if (app_->running()) app_->socket()->Send(ToPacket(datagram));
  }

 private:
  CaisRankApp* app_;
};

n3::TypeId CaisRankApp::GetTypeId() {
  static n3::TypeId tid = n3::TypeId("inca::CaisRankApp")
                              .SetParent<n3::Application>()
                              .SetGroupName("inca")
                              .AddConstructor<CaisRankApp>();
  return tid;
}

CaisRankApp::CaisRankApp() : host_(std::make_unique<Host>(this)) {}
CaisRankApp::~CaisRankApp() = default;

void CaisRankApp::Configure(int rank, int world, uint32_t chunk_size, const n3::Address& sw,
                            uint64_t job, Event joined, Event done) {
  client::TransportConfig tc;
  tc.world_size = world;
  tc.chunk_size = chunk_size;
  tc.min_window = 2;  // as the Communicator's SwitchTransport and inca-sim set it
  joined_ = std::move(joined);
  done_ = std::move(done);
  switch_ = sw;
  loop_ = std::make_unique<sim::CaisRankLoop>(host_.get(), rank, tc, [this](int r) {
    if (done_) done_(r);
  });
  loop_->JoinFirst(job, [this](int r) {
    if (joined_) joined_(r);
  });
}

void CaisRankApp::Begin(std::vector<float>* data) {
  if (loop_ && running()) loop_->Begin(loop_->next_seq(), data);
}

bool CaisRankApp::complete() const {
  return loop_ && loop_->result().complete;
}

uint64_t CaisRankApp::resent() const {
  return loop_ ? loop_->result().retransmitted : 0;
}

void CaisRankApp::StartApplication() {
  if (!loop_) return;
  OpenSocket(0, &switch_);
  loop_->Start();
}

void CaisRankApp::OnDatagram(std::span<const uint8_t> datagram, const n3::Address&) {
  loop_->OnDatagram(datagram);
}

}  // namespace inca
