// The CAIS switch and rank as ns-3 applications over ns-3's UDP sockets
// (docs/ns3.md). The switch runs inca-switchd's CaisDispatcher over the
// CaisReducer (JOIN, the port table, the group, aggregation, resends), an
// L4 endpoint at its address as inca-switchd is; the rank runs inca-sim's
// CaisRankLoop (the client's SessionCore and OpCore: JOIN, windows, resends,
// pieces). Only ns-3 moves the datagrams.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "inca/cais/reducer.h"
#include "inca/ns3/udp_app.h"
#include "ns3/address.h"
#include "ns3/event-id.h"

namespace inca {

namespace sim {
class CaisRankLoop;
}  // namespace sim
namespace switchd {
class CaisDispatcher;
}  // namespace switchd
namespace membership {
class PortTable;
}  // namespace membership

class CaisSwitchApp final : public UdpApp {
 public:
  static ::ns3::TypeId GetTypeId();
  CaisSwitchApp();
  ~CaisSwitchApp() override;
  // Before the application starts: the reducer's configuration, the UDP
  // port it listens on, and the first group's sequence base. The reducer's
  // error for a configuration it refuses.
  absl::Status Configure(const cais::CaisConfig& config, uint16_t port, uint32_t seq_start);
  // nullptr before Configure.
  const cais::CaisReducer* reducer() const { return reducer_.get(); }
  const switchd::CaisDispatcher* dispatcher() const { return dispatcher_.get(); }

 private:
  class Output;
  void StartApplication() override;
  void StopApplication() override;
  void OnDatagram(std::span<const uint8_t> datagram, const ::ns3::Address& from) override;
  void Tick();  // leases, every lease tick

  std::unique_ptr<cais::CaisReducer> reducer_;
  std::unique_ptr<membership::PortTable> ports_;
  std::unique_ptr<switchd::CaisDispatcher> dispatcher_;
  std::unique_ptr<Output> output_;
  uint16_t port_ = 0;
  ::ns3::EventId tick_;
};

class CaisRankApp final : public UdpApp {
 public:
  // When a rank has joined, and when its all-reduce has ended (complete or
  // not: CaisRankApp::complete()).
  using Event = std::function<void(int rank)>;

  static ::ns3::TypeId GetTypeId();
  CaisRankApp();
  ~CaisRankApp() override;
  // Before the application starts: rank `rank` of `world` JOINs job `job`
  // at the switch (`sw`, its UDP address) when it starts, and hears `joined`.
  void Configure(int rank, int world, uint32_t chunk_size, const ::ns3::Address& sw, uint64_t job,
                 Event joined, Event done);
  // Once joined: all-reduces `data` (f32 sums, in place; the caller keeps
  // it until `done`) in chunks of chunk_size bytes.
  void Begin(std::vector<float>* data);
  // After `done`: every chunk's result arrived, and the chunks resent.
  bool complete() const;
  uint64_t resent() const;

 private:
  class Host;
  void StartApplication() override;
  void OnDatagram(std::span<const uint8_t> datagram, const ::ns3::Address& from) override;

  std::unique_ptr<Host> host_;
  std::unique_ptr<sim::CaisRankLoop> loop_;
  ::ns3::Address switch_;
  Event joined_, done_;
};

}  // namespace inca
