// The OLAF worker identity: the UDP flow a worker's updates arrive on, and
// the Worker_ID the switch stamps from it (the OLAF paper's five-tuple
// hash). The switch program stamps it and the PS recomputes it for a peer
// it cannot trust to stamp (ps_endpoint.cc), so it sits beside the wire
// format rather than in either program.
#pragma once

#include <array>
#include <cstdint>

namespace inca::olaf {

// A UDP flow as the driver sees it. IPv4 addresses are written v4-mapped
// (::ffff:a.b.c.d, see FlowKey::V4).
struct FlowKey {
  std::array<uint8_t, 16> src_ip{};
  std::array<uint8_t, 16> dst_ip{};
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint8_t proto = 17;  // UDP

  // Host-order IPv4 addresses, e.g. 0x0A000001 for 10.0.0.1.
  static FlowKey V4(uint32_t src_ip, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port,
                    uint8_t proto = 17);
  friend bool operator==(const FlowKey&, const FlowKey&) = default;
};

// The seed's Worker_ID ("five-tuple hash"): 32-bit FNV-1a over the 37-byte
// encoding src_ip(16) dst_ip(16) src_port(2, BE) dst_port(2, BE) proto(1);
// a result of 0 becomes 1. Stable across processes, hosts and versions.
uint32_t WorkerIdOf(const FlowKey& flow);

}  // namespace inca::olaf
