// The OLAF worker and parameter server as ns-3 applications over ns-3's UDP
// sockets: the worker runs inca-sim's WorkerLoop (inca/sim/olaf_nodes.h:
// rollout timing, the gradient, the WorkerCore that builds and gates each
// update), the PS runs PsCore (inca/olaf/ps.h), as inca's UDP endpoints and
// inca-sim do. docs/ns3.md.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "inca/ns3/udp_app.h"
#include "inca/olaf/ps.h"
#include "inca/sim/olaf_nodes.h"
#include "ns3/address.h"

namespace inca {

class OlafWorkerApp final : public UdpApp, private sim::WorkerHost {
 public:
  static ::ns3::TypeId GetTypeId();
  OlafWorkerApp();
  ~OlafWorkerApp() override;
  // Before the application starts: the worker (its times on the ns-3 clock)
  // and where its updates go. The worker core's error (InvalidArgument) for
  // a configuration it refuses.
  absl::Status Configure(const sim::WorkerNodeConfig& config, const ::ns3::Address& ps);
  // nullptr before Configure.
  const sim::WorkerLoop* loop() const { return loop_.get(); }

 private:
  void StartApplication() override;
  void OnDatagram(std::span<const uint8_t> datagram, const ::ns3::Address& from) override;
  sim::TimeNs Now() override;
  void At(sim::TimeNs at, std::function<void()> fn) override;
  void SendUp(std::vector<uint8_t> datagram) override;

  std::unique_ptr<sim::WorkerLoop> loop_;
  ::ns3::Address ps_;
};

class OlafPsApp final : public UdpApp {
 public:
  static ::ns3::TypeId GetTypeId();
  OlafPsApp();
  ~OlafPsApp() override;
  // Before the application starts. The PS core's error for options it
  // refuses (a missing apply function is filled with one that does nothing).
  absl::Status Configure(olaf::PsOptions options, uint16_t port);
  // MODELs go to every address added here, one unicast copy each (ns-3's
  // stand-in for the cluster's multicast group of the paper's 2.3); ACKs go
  // back to the sender of the update they acknowledge.
  void AddModelReceiver(const ::ns3::Address& worker) { model_receivers_.push_back(worker); }
  // nullptr before Configure.
  const olaf::PsCore* core() const { return core_.get(); }
  olaf::PsCore* mutable_core() { return core_.get(); }

 private:
  void StartApplication() override;
  void OnDatagram(std::span<const uint8_t> datagram, const ::ns3::Address& from) override;

  std::unique_ptr<olaf::PsCore> core_;
  uint16_t port_ = 0;
  std::vector<::ns3::Address> model_receivers_;
};

}  // namespace inca
