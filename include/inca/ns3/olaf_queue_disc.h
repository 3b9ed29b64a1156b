// inca's OLAF switch program (inca/olaf/olaf_switch.h: the queue, merging,
// AoM-aware dequeue and paced egress that inca-switchd and inca-sim run) as
// an ns-3 queue disc. Install it on a router's device toward the PS
// (docs/ns3.md):
//
//   TrafficControlHelper tch;
//   tch.SetRootQueueDisc("inca::OlafQueueDisc", "Policy", StringValue("olaf"),
//                        "Depth", UintegerValue(8));
//   tch.Install(device_toward_ps);
//
// Every IPv4/UDP datagram that reaches the disc is handed to the program as
// arriving on port 1; what the program sends on its PS port leaves through
// the device, paced at the device's DataRate (or the Rate attribute) with
// FramingBytes per datagram beyond the UDP payload (UDP 8 + IPv4 20 + PPP 2
// on a point-to-point link), so the device's own queue never holds more
// than the datagram on the wire. Other traffic (not IPv4/UDP) goes straight
// through, unpaced.
//
// ns-3's queue-disc statistics and traces see what the program decides:
//  - an update the program queues is enqueued (in the internal queue
//    "held"), and dequeued when the program sends it, carrying the
//    program's bytes (a merged update's averaged payload and merged_count)
//    under its first update's UDP and IP headers;
//  - an update merged into a queued one is dropped before enqueue with
//    kMergedReason: ns-3 has no word for it, so received = enqueued +
//    dropped stays true;
//  - an update the program refuses is dropped before enqueue, and a queued
//    one it evicts is dropped after dequeue, each with the program's drop
//    reason (inca/dataplane/drop_reason.h: "queue_full", "stale_evicted",
//    ...).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inca/olaf/olaf_switch.h"
#include "ns3/data-rate.h"
#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/queue-disc.h"

namespace inca {

class OlafQueueDisc final : public ::ns3::QueueDisc {
 public:
  static ::ns3::TypeId GetTypeId();
  OlafQueueDisc();
  ~OlafQueueDisc() override;

  // The ns-3 drop reason of an update merged into a queued one.
  static constexpr const char* kMergedReason = "merged";

  // A whole program configuration instead of the attributes (an
  // egress_rate_bps of 0 takes the device's DataRate). Before the
  // simulation starts.
  void SetProgramConfig(const olaf::OlafSwitchConfig& config) { explicit_config_ = config; }
  // The program once the disc is initialized (the simulation has started);
  // nullptr before, or if its configuration was refused.
  const olaf::OlafSwitch* program() const { return program_.get(); }
  // Datagrams the program emitted toward a port other than its PS port (a
  // disc sees only the PS-bound direction, so none are expected).
  uint64_t misrouted() const { return misrouted_; }

 private:
  class Held;
  class Sink;
  // What the program released toward the PS, in order: an update by its
  // key (worker, update, fragment) with the program's bytes, or an item
  // that went through unchanged.
  struct Release {
    ::ns3::Ptr<::ns3::QueueDiscItem> item;  // set: send as it is
    std::vector<uint8_t> bytes;             // else: this update's bytes
  };

  bool DoEnqueue(::ns3::Ptr<::ns3::QueueDiscItem> item) override;
  ::ns3::Ptr<::ns3::QueueDiscItem> DoDequeue() override;
  bool CheckConfig() override;
  void InitializeParams() override;
  void DoDispose() override;
  olaf::OlafSwitchConfig Config() const;
  dp::TimeNs Now() const;
  void ArmWake();
  void OnEvicted(const olaf::UpdateHeader& h, dp::DropReason reason);
  ::ns3::Ptr<::ns3::QueueDiscItem> Rebuild(::ns3::Ptr<::ns3::QueueDiscItem> original,
                                           const std::vector<uint8_t>& bytes);

  // Attributes.
  std::string policy_ = "olaf";
  uint32_t depth_ = 8;
  ::ns3::Time delta_t_;
  ::ns3::Time tau_;
  uint32_t max_payload_bytes_ = 8952;
  uint32_t framing_bytes_ = 30;
  uint32_t max_clusters_ = 64;
  uint32_t max_workers_ = 1024;
  ::ns3::DataRate rate_;
  std::optional<olaf::OlafSwitchConfig> explicit_config_;

  std::unique_ptr<olaf::OlafSwitch> program_;
  std::unique_ptr<Sink> sink_;
  ::ns3::Ptr<Held> held_;
  std::deque<Release> released_;
  ::ns3::Ptr<::ns3::QueueDiscItem> current_;  // the item being processed
  std::vector<uint8_t> scratch_;
  ::ns3::EventId wake_;
  dp::TimeNs wake_at_ = olaf::OlafSwitch::kIdle;
  uint64_t misrouted_ = 0;
};

}  // namespace inca
