#include "linkdelay/gso_split.h"

#include <cstring>

#include "util/byte_order.h"

namespace inca::linkdelay {

namespace {

constexpr uint8_t kGsoUdpL4 = 5;  // VIRTIO_NET_HDR_GSO_UDP_L4
constexpr uint8_t kGsoEcn = 0x80;
constexpr size_t kEthBytes = 14;
constexpr size_t kUdpBytes = 8;

using util::LoadBe16;
using util::LoadLe16;
using util::StoreBe16;
using util::StoreLe16;

// One's-complement sum arithmetic on 16-bit words (RFC 1624).
uint16_t Fold(uint32_t s) {
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<uint16_t>(s);
}
uint16_t Ipv4HeaderChecksum(const uint8_t* ip, size_t len) {
  uint32_t s = 0;
  for (size_t i = 0; i < len; i += 2) {
    if (i != 10) s += LoadBe16(ip + i);  // the checksum field itself counts as 0
  }
  return static_cast<uint16_t>(~Fold(s));
}

}  // namespace

size_t SplitUdpGso(absl::Span<const uint8_t> frame, absl::FunctionRef<uint8_t*(size_t)> emit) {
  const uint8_t* f = frame.data();
  if (frame.size() < kVirtioNetHdrBytes + kEthBytes + 20 + kUdpBytes) return 0;
  const uint8_t gso_type = f[1] & static_cast<uint8_t>(~kGsoEcn);
  const size_t gso_size = LoadLe16(f + 4);
  if (gso_type != kGsoUdpL4 || gso_size == 0) return 0;
  const uint8_t* eth = f + kVirtioNetHdrBytes;
  const uint16_t ethertype = LoadBe16(eth + 12);
  const uint8_t* ip = eth + kEthBytes;
  const size_t after_eth = frame.size() - kVirtioNetHdrBytes - kEthBytes;
  size_t ip_len;
  bool v4;
  if (ethertype == 0x0800) {
    v4 = true;
    ip_len = size_t{ip[0] & 0x0Fu} * 4;
    if ((ip[0] >> 4) != 4 || ip_len < 20 || ip[9] != 17) return 0;
  } else if (ethertype == 0x86DD) {
    v4 = false;
    ip_len = 40;
    if ((ip[0] >> 4) != 6 || ip[6] != 17 || after_eth < ip_len + kUdpBytes) return 0;
  } else {
    return 0;
  }
  if (after_eth < ip_len + kUdpBytes) return 0;
  const size_t headers = kVirtioNetHdrBytes + kEthBytes + ip_len + kUdpBytes;
  const size_t payload = frame.size() - headers;
  if (payload <= gso_size) return 0;
  const uint8_t* udp = ip + ip_len;
  const uint16_t old_udp_len = LoadBe16(udp + 4);
  const uint16_t old_check = LoadBe16(udp + 6);
  const uint16_t ip_id = v4 ? LoadBe16(ip + 4) : 0;
  size_t count = 0;
  for (size_t off = 0; off < payload; off += gso_size, ++count) {
    const size_t seg = std::min(gso_size, payload - off);
    const size_t len = headers + seg;
    uint8_t* out = emit(len);
    std::memcpy(out, f, headers);
    std::memcpy(out + headers, f + headers + off, seg);
    out[1] = 0;                                                               // gso_type: none
    StoreLe16(out + 2, static_cast<uint16_t>(headers - kVirtioNetHdrBytes));  // hdr_len
    StoreLe16(out + 4, 0);                                                    // gso_size
    uint8_t* oip = out + kVirtioNetHdrBytes + kEthBytes;
    uint8_t* oudp = oip + ip_len;
    const auto udp_len = static_cast<uint16_t>(kUdpBytes + seg);
    if (v4) {
      StoreBe16(oip + 2, static_cast<uint16_t>(ip_len + udp_len));
      StoreBe16(oip + 4, static_cast<uint16_t>(ip_id + count));
      StoreBe16(oip + 10, Ipv4HeaderChecksum(oip, ip_len));
    } else {
      StoreBe16(oip + 4, udp_len);
    }
    StoreBe16(oudp + 4, udp_len);
    // The UDP length appears in the pseudo-header sum and in the header:
    // swap the old for the new in the (not yet complemented) partial sum.
    const uint32_t s = uint32_t{old_check} + static_cast<uint16_t>(~old_udp_len) + udp_len;
    StoreBe16(oudp + 6, Fold(s));
  }
  return count;
}

}  // namespace inca::linkdelay
