// Fuzzes the whole CAIS pipeline: the input is a sequence of records
//   [port u8][time step u8][len u16 little-endian][len bytes of datagram]
// fed to one CaisReducer with small limits (so slot exhaustion, SRAM limits,
// eviction and timeouts are reached quickly). Half of the datagrams are
// given a valid header shape so the fuzzer reaches the slot logic, not just
// the parser. Group 0 is a leaf of a tree (its rule's uplink is port 4), so
// repaired packets on port 4 are the parent's answers (results, notices,
// PENDING). After every packet: conservation and memory bounds hold.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "inca/cais/reducer.h"
#include "util/byte_order.h"
#include "util/fuzz_records.h"

namespace {

using inca::fuzz::Check;

struct NullSink final : inca::dp::PacketSink {
  void Emit(inca::dp::PortId, std::span<const uint8_t> p) override {
    if (p.size() < inca::wire::kCaisHeaderBytes) std::abort();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inca;
  cais::CaisConfig cfg;
  cfg.max_payload_bytes = 64;
  cfg.sram_bytes = 8 * cfg.cell_bytes();
  cfg.max_pending_chunks = 4;
  cfg.timeout_ns = 40;
  cfg.result_hold_ns = 20;
  cfg.tombstone_capacity = 8;
  cfg.deterministic = size > 0 && (data[0] & 1) != 0;
  auto created = cais::CaisReducer::Create(cfg);
  Check(created.ok());
  cais::CaisReducer& sw = **created;
  using Op = wire::CaisOp;
  cais::Rule leaf{{0, std::nullopt, std::nullopt}, {0, 1, 2}, {0, 1, 2}, Op::kAllReduce};
  leaf.uplink = 4;
  Check(sw.rules().Add(leaf).ok());
  Check(sw.rules()
            .Add({{1, std::nullopt, std::nullopt}, {0, 1}, {0, 1, 3}, Op::kReduceScatter})
            .ok());
  Check(sw.rules().Add({{2, 1, std::nullopt}, {1, 2}, {1, 2}, Op::kAllGather}).ok());
  Check(sw.rules().Add({{2, std::nullopt, 0}, {3}, {0, 1, 2, 3}, Op::kBroadcast}).ok());
  cais::Rule pin{{2, 2, std::nullopt}, {}, {}, std::nullopt};  // layer 2 of group 2: host path
  pin.host_path = true;
  Check(sw.rules().Add(pin).ok());

  NullSink sink;
  dp::TimeNs now = 0;
  std::vector<uint8_t> pkt;
  fuzz::Records records(data, size);
  for (fuzz::Record r; records.Next(&r);) {
    const auto port = static_cast<dp::PortId>(r.a % 5);  // 4: group 0's uplink only
    now += r.b;
    pkt.assign(r.bytes.begin(), r.bytes.end());
    if ((r.b & 0x80) != 0 && pkt.size() >= wire::kCaisHeaderBytes) {
      // Repair the header so the packet parses: keep the fuzzer's ids.
      pkt[0] %= 4;
      pkt[0 + 1] %= 3;
      pkt[4] = 0;
      pkt[5] %= 3;
      pkt[6] = 0;
      pkt[7] = 3;
      size_t pl = pkt.size() - wire::kCaisHeaderBytes;
      pl -= pl % 4;
      pkt.resize(wire::kCaisHeaderBytes + pl);
      util::StoreBe32(&pkt[12], static_cast<uint32_t>(pl));
      pkt[16] = wire::kCaisVersion;
      namespace flags = wire::cais_flags;
      const uint8_t asked = pkt[17];
      pkt[17] &= flags::kRetransmit;
      pkt[18] = static_cast<uint8_t>(((pkt[18] >> 4) % 4) << 4 | (pkt[18] % 4));
      if (port == 4 && (asked & 0x40) != 0) {  // a parent's answer
        pkt[17] =
            flags::kResult | (asked & (flags::kFallback | flags::kDeclined | flags::kPending));
        if (pl == 0 && (pkt[17] & (flags::kFallback | flags::kPending)) == 0) {
          pkt[17] |= flags::kPending;
        }
      }
      if (pl == 0 && (pkt[17] & (flags::kResult | flags::kRetransmit)) == 0) {
        pkt[17] |= flags::kFallback;
      }
    }
    sw.Process(pkt, port, now, sink);
    const cais::SramUsage u = sw.sram();
    Check(sw.counters().Conserved());
    Check(u.pending_chunks <= cfg.max_pending_chunks);
    Check(u.cells_pending + u.cells_retained <= u.cells_total);
    Check(static_cast<double>(u.cells_pending * u.cell_bytes) <=
          cfg.sram_usage_limit * static_cast<double>(cfg.sram_bytes));
    Check(u.tombstones <= cfg.tombstone_capacity);
    Check(sw.totals().sram_cells == u.cells_pending + u.cells_retained);
    uint64_t per_group = 0;
    for (int g = 0; g < 256; ++g) per_group += sw.group(static_cast<uint8_t>(g)).sram_cells;
    Check(per_group == sw.totals().sram_cells);
  }
  // Everything pending eventually times out and everything retained expires.
  now += cfg.timeout_ns + cfg.result_hold_ns;
  sw.Advance(now, sink);
  Check(sw.sram().pending_chunks == 0);
  Check(sw.sram().retained_chunks == 0);
  Check(sw.sram().cells_pending == 0 && sw.sram().cells_retained == 0);
  Check(sw.counters().Conserved());
  Check(sw.totals().sram_cells == 0);
  return 0;
}
