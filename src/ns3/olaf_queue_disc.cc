#include "inca/ns3/olaf_queue_disc.h"

#include <iostream>
#include <list>
#include <string>

#include "ns3/ipv4-queue-disc-item.h"
#include "ns3/net-device-queue-interface.h"
#include "ns3/net-device.h"
#include "ns3/packet.h"
#include "ns3/queue.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/udp-header.h"
#include "ns3/uinteger.h"

namespace inca {

namespace n3 = ::ns3;

namespace {

constexpr uint8_t kUdp = 17;
constexpr size_t kUdpHeaderBytes = 8;

// An update's identity in the program's queue: an entry keeps its first
// update's worker, update and fragment through merges.
struct Key {
  uint32_t worker_id = 0;
  uint32_t update_id = 0;
  uint16_t frag_index = 0;
  friend bool operator==(const Key&, const Key&) = default;
};

Key KeyOf(const olaf::UpdateHeader& h) {
  return {h.worker_id, h.update_id, h.frag_index};
}

std::optional<Key> UpdateKey(std::span<const uint8_t> datagram) {
  olaf::OlafPacket p;
  if (olaf::ParseOlaf(datagram, &p) != olaf::OlafParseError::kOk ||
      p.type != olaf::OlafType::kUpdate) {
    return std::nullopt;
  }
  return KeyOf(p.update);
}

}  // namespace

// The updates the program holds, as ns-3 items (so that ns-3 counts them as
// queued): taken out by key when the program sends or evicts one.
class OlafQueueDisc::Held final : public n3::Queue<n3::QueueDiscItem> {
 public:
  static n3::TypeId GetTypeId() {
    static n3::TypeId tid = n3::TypeId("inca::OlafQueueDisc::Held")
                                .SetParent<n3::Queue<n3::QueueDiscItem>>()
                                .SetGroupName("inca");
    return tid;
  }
  bool Enqueue(n3::Ptr<n3::QueueDiscItem> item) override {
    return DoEnqueue(GetContainer().end(), item);
  }
  // With the key of the update it carries (none: not an update).
  bool Hold(n3::Ptr<n3::QueueDiscItem> item, std::optional<Key> key) {
    if (!Enqueue(item)) return false;
    keys_.push_back({n3::PeekPointer(item), key});
    return true;
  }
  n3::Ptr<n3::QueueDiscItem> Dequeue() override { return Take(GetContainer().begin()); }
  n3::Ptr<n3::QueueDiscItem> Remove() override {
    if (GetContainer().empty()) return nullptr;
    Forget(n3::PeekPointer(*GetContainer().begin()));
    return DoRemove(GetContainer().begin());
  }
  n3::Ptr<const n3::QueueDiscItem> Peek() const override { return DoPeek(GetContainer().begin()); }
  n3::Ptr<n3::QueueDiscItem> TakeKey(const Key& key) {
    for (const auto& [item, k] : keys_) {
      if (k == key) return TakeItem(item);
    }
    return nullptr;
  }
  n3::Ptr<n3::QueueDiscItem> TakeItem(const n3::QueueDiscItem* item) {
    for (auto it = GetContainer().begin(); it != GetContainer().end(); ++it) {
      if (n3::PeekPointer(*it) == item) return Take(it);
    }
    return nullptr;
  }

 private:
  n3::Ptr<n3::QueueDiscItem> Take(ConstIterator it) {
    if (it == GetContainer().end()) return nullptr;
    Forget(n3::PeekPointer(*it));
    return DoDequeue(it);
  }
  void Forget(const n3::QueueDiscItem* item) {
    for (auto it = keys_.begin(); it != keys_.end(); ++it) {
      if (it->first == item) {
        keys_.erase(it);
        return;
      }
    }
  }
  std::list<std::pair<const n3::QueueDiscItem*, std::optional<Key>>> keys_;
};

class OlafQueueDisc::Sink final : public dp::PacketSink {
 public:
  explicit Sink(OlafQueueDisc* disc) : disc_(disc) {}
  void Emit(dp::PortId egress, std::span<const uint8_t> packet) override {
    OlafQueueDisc& d = *disc_;
    if (egress != d.program_->config().ps_port) {
      ++d.misrouted_;
      return;
    }
    if (UpdateKey(packet)) {
      d.released_.push_back({nullptr, std::vector<uint8_t>(packet.begin(), packet.end())});
    } else if (d.current_) {  // passed through untouched: the item itself
      d.released_.push_back({d.current_, {}});
    } else {
      ++d.misrouted_;
    }
  }

 private:
  OlafQueueDisc* disc_;
};

NS_OBJECT_ENSURE_REGISTERED(OlafQueueDisc);

n3::TypeId OlafQueueDisc::GetTypeId() {
  static n3::TypeId tid =
      n3::TypeId("inca::OlafQueueDisc")
          .SetParent<n3::QueueDisc>()
          .SetGroupName("inca")
          .AddConstructor<OlafQueueDisc>()
          .AddAttribute("Policy", "The queue policy: olaf or fifo (the paper's baseline).",
                        n3::StringValue("olaf"), n3::MakeStringAccessor(&OlafQueueDisc::policy_),
                        n3::MakeStringChecker())
          .AddAttribute("Depth", "Updates the queue holds.", n3::UintegerValue(8),
                        n3::MakeUintegerAccessor(&OlafQueueDisc::depth_),
                        n3::MakeUintegerChecker<uint32_t>())
          .AddAttribute("DeltaT", "The staleness bound: older updates are evicted (OLAF).",
                        n3::TimeValue(n3::MilliSeconds(400)),
                        n3::MakeTimeAccessor(&OlafQueueDisc::delta_t_), n3::MakeTimeChecker())
          .AddAttribute("Tau", "The merge time constant (OLAF).",
                        n3::TimeValue(n3::MilliSeconds(100)),
                        n3::MakeTimeAccessor(&OlafQueueDisc::tau_), n3::MakeTimeChecker())
          .AddAttribute("MaxPayloadBytes", "The largest update payload (a multiple of 4).",
                        n3::UintegerValue(8952),
                        n3::MakeUintegerAccessor(&OlafQueueDisc::max_payload_bytes_),
                        n3::MakeUintegerChecker<uint32_t>())
          .AddAttribute("FramingBytes",
                        "Bytes on the wire per datagram beyond its UDP payload (UDP 8 + IPv4 20 + "
                        "PPP 2 on a point-to-point link).",
                        n3::UintegerValue(30),
                        n3::MakeUintegerAccessor(&OlafQueueDisc::framing_bytes_),
                        n3::MakeUintegerChecker<uint32_t>())
          .AddAttribute("MaxClusters", "Clusters the queue keeps state for.", n3::UintegerValue(64),
                        n3::MakeUintegerAccessor(&OlafQueueDisc::max_clusters_),
                        n3::MakeUintegerChecker<uint32_t>())
          .AddAttribute("MaxWorkers", "Workers the switch learns.", n3::UintegerValue(1024),
                        n3::MakeUintegerAccessor(&OlafQueueDisc::max_workers_),
                        n3::MakeUintegerChecker<uint32_t>())
          .AddAttribute("Rate", "The egress rate; 0 takes the device's DataRate.",
                        n3::DataRateValue(n3::DataRate(0)),
                        n3::MakeDataRateAccessor(&OlafQueueDisc::rate_), n3::MakeDataRateChecker());
  return tid;
}

OlafQueueDisc::OlafQueueDisc() : sink_(std::make_unique<Sink>(this)) {}
OlafQueueDisc::~OlafQueueDisc() = default;

dp::TimeNs OlafQueueDisc::Now() const {
  return n3::Simulator::Now().GetNanoSeconds();
}

olaf::OlafSwitchConfig OlafQueueDisc::Config() const {
  olaf::OlafSwitchConfig c;
  if (explicit_config_) {
    c = *explicit_config_;
  } else {
    c.policy = olaf::ParseQueuePolicy(policy_).value_or(static_cast<olaf::QueuePolicy>(0xFF));
    c.depth = depth_;
    c.delta_t_ns = delta_t_.GetNanoSeconds();
    c.tau_ns = tau_.GetNanoSeconds();
    c.max_payload_bytes = max_payload_bytes_;
    c.egress_overhead_bytes = framing_bytes_;
    c.max_clusters = max_clusters_;
    c.max_workers = max_workers_;
    c.egress_rate_bps = rate_.GetBitRate();
  }
  c.ps_port = 0;
  if (c.egress_rate_bps == 0) {  // the device's
    n3::Ptr<n3::NetDeviceQueueInterface> q = GetNetDeviceQueueInterface();
    n3::Ptr<n3::NetDevice> dev = q ? q->GetObject<n3::NetDevice>() : nullptr;
    n3::DataRateValue v;
    if (dev && dev->GetAttributeFailSafe("DataRate", v)) c.egress_rate_bps = v.Get().GetBitRate();
  }
  return c;
}

bool OlafQueueDisc::CheckConfig() {
  if (!explicit_config_ && !olaf::ParseQueuePolicy(policy_)) {
    std::cerr << "inca::OlafQueueDisc: Policy must be olaf or fifo, not '" << policy_ << "'\n";
    return false;
  }
  auto program = olaf::OlafSwitch::Create(Config());
  if (!program.ok()) {
    std::cerr << "inca::OlafQueueDisc: " << program.status().message() << "\n";
    return false;
  }
  program_ = *std::move(program);
  program_->set_eviction_observer(
      [this](const olaf::UpdateHeader& h, dp::DropReason r) { OnEvicted(h, r); });
  if (GetNInternalQueues() == 0) {
    held_ = n3::CreateObject<Held>();
    // The program's depth, one being sent through, and passthrough items.
    held_->SetMaxSize(n3::QueueSize(n3::QueueSizeUnit::PACKETS, program_->config().depth + 64));
    AddInternalQueue(held_);
  }
  return true;
}

void OlafQueueDisc::InitializeParams() {}

void OlafQueueDisc::DoDispose() {
  wake_.Cancel();
  released_.clear();
  current_ = nullptr;
  held_ = nullptr;
  program_.reset();
  QueueDisc::DoDispose();
}

bool OlafQueueDisc::DoEnqueue(n3::Ptr<n3::QueueDiscItem> item) {
  auto ip = n3::DynamicCast<n3::Ipv4QueueDiscItem>(item);
  n3::Ptr<n3::Packet> p = item->GetPacket();
  if (!ip || ip->GetHeader().GetProtocol() != kUdp || p->GetSize() < kUdpHeaderBytes) {
    if (!held_->Hold(item, std::nullopt)) return false;  // the internal queue counted the drop
    released_.push_back({item, {}});
    return true;
  }
  scratch_.resize(p->GetSize());
  p->CopyData(scratch_.data(), p->GetSize());
  const std::span<const uint8_t> datagram(scratch_.data() + kUdpHeaderBytes,
                                          scratch_.size() - kUdpHeaderBytes);
  const std::optional<Key> key = UpdateKey(datagram);
  const uint64_t merged_before = program_->queue().totals().merged;
  current_ = item;
  const dp::Outcome o = program_->Process(datagram, /*ingress=*/1, Now(), *sink_);
  current_ = nullptr;
  ArmWake();
  if (o.verdict == dp::Verdict::kDropped) {
    DropBeforeEnqueue(item, std::string(dp::ToString(o.reason)).c_str());
    return false;
  }
  if (program_->queue().totals().merged != merged_before) {
    DropBeforeEnqueue(item, kMergedReason);
    return false;
  }
  return held_->Hold(item, key);
}

n3::Ptr<n3::QueueDiscItem> OlafQueueDisc::DoDequeue() {
  if (released_.empty() && program_) {
    program_->Advance(Now(), *sink_);
    ArmWake();
  }
  while (!released_.empty()) {
    Release r = std::move(released_.front());
    released_.pop_front();
    if (r.item) {
      if (n3::Ptr<n3::QueueDiscItem> item = held_->TakeItem(n3::PeekPointer(r.item))) return item;
      continue;
    }
    const std::optional<Key> key = UpdateKey(r.bytes);
    n3::Ptr<n3::QueueDiscItem> original = key ? held_->TakeKey(*key) : nullptr;
    if (original) return Rebuild(original, r.bytes);
    ++misrouted_;  // no item holds it (cannot happen: each queued update has one)
  }
  return nullptr;
}

// The program's bytes under the original's UDP and IP headers.
n3::Ptr<n3::QueueDiscItem> OlafQueueDisc::Rebuild(n3::Ptr<n3::QueueDiscItem> original,
                                                  const std::vector<uint8_t>& bytes) {
  auto ip = n3::DynamicCast<n3::Ipv4QueueDiscItem>(original);
  n3::UdpHeader udp;
  original->GetPacket()->PeekHeader(udp);
  n3::Ptr<n3::Packet> out =
      n3::Create<n3::Packet>(bytes.data(), static_cast<uint32_t>(bytes.size()));
  out->AddHeader(udp);
  n3::Ipv4Header h = ip->GetHeader();
  h.SetPayloadSize(static_cast<uint16_t>(out->GetSize()));
  return n3::Create<n3::Ipv4QueueDiscItem>(out, ip->GetAddress(), ip->GetProtocol(), h);
}

void OlafQueueDisc::OnEvicted(const olaf::UpdateHeader& h, dp::DropReason reason) {
  if (n3::Ptr<n3::QueueDiscItem> item = held_->TakeKey(KeyOf(h))) {
    DropAfterDequeue(item, std::string(dp::ToString(reason)).c_str());
  }
}

// Runs the disc when the program's link is next free with an update queued.
void OlafQueueDisc::ArmWake() {
  const dp::TimeNs next = program_->NextWakeNs();
  if (next == olaf::OlafSwitch::kIdle || (wake_.IsRunning() && next >= wake_at_)) return;
  wake_.Cancel();
  wake_at_ = next;
  wake_ = n3::Simulator::Schedule(n3::NanoSeconds(std::max(next, Now())) - n3::Simulator::Now(),
                                  [this] {
                                    wake_at_ = olaf::OlafSwitch::kIdle;
                                    Run();
                                  });
}

}  // namespace inca
