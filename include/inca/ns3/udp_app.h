// What inca's ns-3 applications share (docs/ns3.md): one UDP socket, its
// datagrams handed to the application with their sender, and a flag that
// says whether the application is running (events scheduled before it
// stopped find it false and do nothing).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ns3/address.h"
#include "ns3/application.h"
#include "ns3/socket.h"

namespace inca {

class UdpApp : public ::ns3::Application {
 public:
  static ::ns3::TypeId GetTypeId();

 protected:
  // Opens the socket on this node: bound to `port` (0: any), connected to
  // `peer` when given, and marks the application running.
  void OpenSocket(uint16_t port, const ::ns3::Address* peer);
  void StopApplication() override;
  void DoDispose() override;
  // Each datagram received, with its sender.
  virtual void OnDatagram(std::span<const uint8_t> datagram, const ::ns3::Address& from) = 0;
  bool running() const { return running_; }
  ::ns3::Ptr<::ns3::Socket> socket() const { return socket_; }

 private:
  void OnReceive(::ns3::Ptr<::ns3::Socket> socket);
  ::ns3::Ptr<::ns3::Socket> socket_;
  bool running_ = false;
  std::vector<uint8_t> rx_;
};

}  // namespace inca
