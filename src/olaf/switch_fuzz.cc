// Fuzzes the whole OLAF switch: the input is a sequence of records
//   [port u8][time step u8][len u16 little-endian][len bytes of datagram]
// fed to one OlafSwitch with small limits (depth 4, 3 clusters, 4 workers,
// 1 byte/ns egress) so caps, merges, displacement, eviction and table limits
// are reached quickly. Port 0 is the PS; ports 1..3 have bound flows, 4 not.
// Records whose step has the high bit set get a repaired OLAF header so the
// fuzzer reaches the queue, not just the parser. After every packet:
// conservation and memory bounds hold, and whatever the switch emits that
// carries the OLAF magic is a valid OLAF packet.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "inca/olaf/olaf_switch.h"
#include "util/byte_order.h"
#include "util/fuzz_records.h"

namespace {

using inca::fuzz::Check;
using inca::util::StoreBe32;

struct CheckingSink final : inca::dp::PacketSink {
  void Emit(inca::dp::PortId port, std::span<const uint8_t> p) override {
    using namespace inca::olaf;
    Check(port < inca::dp::kMaxPorts);
    if (HasOlafMagic(p)) Check(ParseOlaf(p, nullptr) == OlafParseError::kOk);
  }
};

// Makes `pkt` a well-formed OLAF datagram, keeping the fuzzer's field values.
void Repair(std::vector<uint8_t>& pkt) {
  using namespace inca::olaf;
  if (pkt.size() < 4) pkt.resize(4);
  pkt[0] = kOlafMagic0;
  pkt[1] = kOlafMagic1;
  pkt[2] = kOlafVersion;
  pkt[3] = static_cast<uint8_t>(1 + pkt[3] % 3);
  const auto type = static_cast<OlafType>(pkt[3]);
  const size_t header = type == OlafType::kUpdate ? kOlafUpdateHeaderBytes
                        : type == OlafType::kAck  ? kOlafAckBytes
                                                  : kOlafModelHeaderBytes;
  if (pkt.size() < header + (type == OlafType::kAck ? 0 : 4)) pkt.resize(header + 4);
  pkt[4] = 0;
  if (type == OlafType::kAck) {
    pkt.resize(kOlafAckBytes);
    return;
  }
  size_t pl = pkt.size() - header;
  pl -= pl % 4;
  pkt.resize(header + pl);
  const size_t frag = type == OlafType::kUpdate ? 32 : 12;  // frag_index, frag_count
  pkt[frag + 2] = 0;
  pkt[frag + 3] = static_cast<uint8_t>(1 + pkt[frag + 3] % 3);
  pkt[frag] = 0;
  pkt[frag + 1] = static_cast<uint8_t>(pkt[frag + 1] % pkt[frag + 3]);
  if (type == OlafType::kUpdate) {
    pkt[6] = 0;
    pkt[7] %= 5;  // clusters 0..4 (max_clusters 3)
    if (pkt[24] == 0 && pkt[25] == 0 && pkt[26] == 0 && pkt[27] == 0) pkt[27] = 1;
    pkt[8] = pkt[9] = pkt[10] = 0;  // worker ids 0..255 (0 = unstamped)
    StoreBe32(&pkt[36], static_cast<uint32_t>(pl));
  } else {
    StoreBe32(&pkt[24], static_cast<uint32_t>(pl));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inca;
  olaf::OlafSwitchConfig cfg;
  cfg.policy = size > 0 && (data[0] & 1) != 0 ? olaf::QueuePolicy::kFifo : olaf::QueuePolicy::kOlaf;
  cfg.depth = 4;
  cfg.max_payload_bytes = 64;
  cfg.delta_t_ns = 300;
  cfg.tau_ns = 50;
  cfg.egress_rate_bps = 8'000'000'000;
  cfg.egress_overhead_bytes = 0;
  cfg.ps_port = 0;
  cfg.max_workers = 4;
  cfg.max_clusters = 3;
  cfg.cluster_table_capacity = 2;
  auto created = olaf::OlafSwitch::Create(cfg);
  Check(created.ok());
  olaf::OlafSwitch& sw = **created;
  for (uint8_t p = 1; p <= 3; ++p) {
    Check(sw.BindPort(p, olaf::FlowKey::V4(0x0A000000u + p, 0x0A000064u, uint16_t{5000} + p, 9500))
              .ok());
  }
  Check(sw.cluster_table().Set(5001, 0).ok());
  Check(sw.cluster_table().Set(5002, 1).ok());
  Check(!sw.cluster_table().Set(5003, 2).ok());  // capacity 2

  CheckingSink sink;
  dp::TimeNs now = 0;
  std::vector<uint8_t> pkt;
  fuzz::Records records(data, size);
  for (fuzz::Record r; records.Next(&r);) {
    const auto port = static_cast<dp::PortId>(r.a % 5);
    now += r.b & 0x7F;
    pkt.assign(r.bytes.begin(), r.bytes.end());
    if ((r.b & 0x80) != 0) Repair(pkt);
    if ((r.a & 0x80) != 0) sw.Advance(now, sink);
    sw.Process(pkt, port, now, sink);
    Check(sw.counters().Conserved());
    Check(sw.totals().dropped == sw.counters().dropped);
    const olaf::UpdateQueue& q = sw.queue();
    Check(q.totals().Conserved());
    Check(q.occupancy() <= cfg.depth);
    Check(sw.worker_count() <= cfg.max_workers);
    Check(q.Clusters().size() <= cfg.max_clusters);
    uint64_t occ = 0;
    for (uint16_t c : q.Clusters()) {
      Check(q.cluster(c)->Conserved());
      occ += q.cluster(c)->occupancy;
    }
    Check(occ == q.occupancy());
    Check(q.empty() == (sw.NextWakeNs() == olaf::OlafSwitch::kIdle));
    Check(q.empty() || sw.NextWakeNs() > now);
  }
  // Whatever is queued eventually leaves (sent or evicted).
  now += 1'000'000;
  sw.Advance(now, sink);
  Check(sw.queue().empty());
  Check(sw.NextWakeNs() == olaf::OlafSwitch::kIdle);
  Check(sw.counters().Conserved());
  Check(sw.queue().totals().Conserved());
  return 0;
}
