#include "linkdelay/gso_split.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace inca::linkdelay {
namespace {

// One's-complement sum of 16-bit big-endian words.
uint32_t Sum(const uint8_t* p, size_t len, uint32_t s = 0) {
  for (size_t i = 0; i + 1 < len; i += 2) s += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  if (len % 2) s += static_cast<uint32_t>(p[len - 1] << 8);
  return s;
}
uint16_t Fold(uint32_t s) {
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<uint16_t>(s);
}

// A UDP GSO frame as a packet socket reads it from a local sender: the
// vnet header (NEEDS_CSUM, UDP_L4, gso_size), Ethernet, IPv4 or IPv6, UDP
// with the partial (pseudo-header) checksum of the whole length.
std::vector<uint8_t> GsoFrame(bool v6, size_t gso_size, size_t payload) {
  const size_t ip_len = v6 ? 40 : 20;
  std::vector<uint8_t> f(10 + 14 + ip_len + 8 + payload, 0);
  f[0] = 1;  // VIRTIO_NET_HDR_F_NEEDS_CSUM
  f[1] = 5;  // GSO_UDP_L4
  f[4] = static_cast<uint8_t>(gso_size);
  f[5] = static_cast<uint8_t>(gso_size >> 8);
  f[6] = static_cast<uint8_t>(14 + ip_len);  // csum_start
  f[8] = 6;                                  // csum_offset
  uint8_t* eth = f.data() + 10;
  eth[12] = v6 ? 0x86 : 0x08;
  eth[13] = v6 ? 0xDD : 0x00;
  uint8_t* ip = eth + 14;
  const size_t udp_len = 8 + payload;
  uint32_t pseudo = 0;
  if (v6) {
    ip[0] = 0x60;
    ip[4] = static_cast<uint8_t>(udp_len >> 8);
    ip[5] = static_cast<uint8_t>(udp_len);
    ip[6] = 17;
    ip[7] = 64;
    ip[8 + 15] = 1;   // src ::1
    ip[24 + 15] = 1;  // dst ::1
    pseudo = Sum(ip + 8, 32) + 17 + static_cast<uint32_t>(udp_len);
  } else {
    ip[0] = 0x45;
    const size_t tot = 20 + udp_len;
    ip[2] = static_cast<uint8_t>(tot >> 8);
    ip[3] = static_cast<uint8_t>(tot);
    ip[4] = 0x12;
    ip[5] = 0x34;
    ip[8] = 64;
    ip[9] = 17;
    const uint8_t src[4] = {198, 18, 0, 10}, dst[4] = {198, 18, 0, 1};
    std::memcpy(ip + 12, src, 4);
    std::memcpy(ip + 16, dst, 4);
    pseudo = Sum(ip + 12, 8) + 17 + static_cast<uint32_t>(udp_len);
  }
  uint8_t* udp = ip + ip_len;
  udp[0] = 0x9C;  // ports 40000 -> 9410
  udp[1] = 0x40;
  udp[2] = 0x24;
  udp[3] = 0xC2;
  udp[4] = static_cast<uint8_t>(udp_len >> 8);
  udp[5] = static_cast<uint8_t>(udp_len);
  const uint16_t partial = Fold(pseudo);
  udp[6] = static_cast<uint8_t>(partial >> 8);
  udp[7] = static_cast<uint8_t>(partial);
  for (size_t i = 0; i < payload; ++i) udp[8 + i] = static_cast<uint8_t>(i * 13 + 1);
  return f;
}

std::vector<std::vector<uint8_t>> Split(const std::vector<uint8_t>& frame) {
  std::vector<std::vector<uint8_t>> out;
  const size_t n = SplitUdpGso(frame, [&](size_t len) {
    out.emplace_back(len);
    return out.back().data();
  });
  EXPECT_EQ(n, out.size());
  return out;
}

// Each IPv4 datagram: the original headers but its own lengths, an id one
// above the last, a valid IP header checksum, the UDP partial checksum of a
// datagram of its length, no GSO in the vnet header; the payload in order.
TEST(GsoSplitTest, AnIpv4FrameBecomesItsDatagrams) {
  constexpr size_t kSeg = 8972 - 8, kPayload = 6 * kSeg + 1000;  // six full, one short
  const std::vector<uint8_t> frame = GsoFrame(false, kSeg, kPayload);
  const auto segs = Split(frame);
  ASSERT_EQ(segs.size(), 7u);
  size_t off = 0;
  for (size_t k = 0; k < segs.size(); ++k) {
    const std::vector<uint8_t>& s = segs[k];
    const size_t seg = k < 6 ? kSeg : 1000;
    ASSERT_EQ(s.size(), 10 + 14 + 20 + 8 + seg);
    EXPECT_EQ(s[0], 1);  // NEEDS_CSUM kept
    EXPECT_EQ(s[1], 0);  // no GSO
    EXPECT_EQ(s[4] | s[5] << 8, 0);
    EXPECT_EQ(s[2] | s[3] << 8, 14 + 20 + 8);                      // hdr_len
    EXPECT_EQ(std::memcmp(s.data() + 6, frame.data() + 6, 4), 0);  // csum_start, csum_offset
    const uint8_t* ip = s.data() + 24;
    EXPECT_EQ(ip[2] << 8 | ip[3], static_cast<int>(20 + 8 + seg));
    EXPECT_EQ(ip[4] << 8 | ip[5], static_cast<int>(0x1234 + k));
    EXPECT_EQ(Fold(Sum(ip, 20)), 0xFFFF) << "IP header checksum of segment " << k;
    const uint8_t* udp = ip + 20;
    EXPECT_EQ(udp[4] << 8 | udp[5], static_cast<int>(8 + seg));
    const uint16_t want = Fold(Sum(ip + 12, 8) + 17 + static_cast<uint32_t>(8 + seg));
    EXPECT_EQ(udp[6] << 8 | udp[7], want) << "UDP partial checksum of segment " << k;
    EXPECT_EQ(std::memcmp(udp + 8, frame.data() + 10 + 14 + 20 + 8 + off, seg), 0);
    off += seg;
  }
  EXPECT_EQ(off, kPayload);
}

TEST(GsoSplitTest, AnIpv6FrameBecomesItsDatagrams) {
  constexpr size_t kSeg = 1000;
  const std::vector<uint8_t> frame = GsoFrame(true, kSeg, 3 * kSeg);
  const auto segs = Split(frame);
  ASSERT_EQ(segs.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const uint8_t* ip = segs[k].data() + 24;
    EXPECT_EQ(ip[4] << 8 | ip[5], static_cast<int>(8 + kSeg));
    const uint8_t* udp = ip + 40;
    EXPECT_EQ(udp[4] << 8 | udp[5], static_cast<int>(8 + kSeg));
    EXPECT_EQ(udp[6] << 8 | udp[7], Fold(Sum(ip + 8, 32) + 17 + 8 + kSeg));
  }
}

// Anything else goes on untouched: a plain datagram, a GSO frame with one
// segment's worth of payload, TCP GSO, a truncated frame, an ARP frame.
TEST(GsoSplitTest, OtherFramesAreLeftAlone) {
  auto none = [](const std::vector<uint8_t>& f) {
    return SplitUdpGso(f, [](size_t) -> uint8_t* {
      ADD_FAILURE() << "emitted";
      static uint8_t sink[65536];
      return sink;
    });
  };
  std::vector<uint8_t> plain = GsoFrame(false, 1000, 3000);
  plain[1] = 0;
  EXPECT_EQ(none(plain), 0u);
  EXPECT_EQ(none(GsoFrame(false, 1000, 1000)), 0u);
  std::vector<uint8_t> tcp = GsoFrame(false, 1000, 3000);
  tcp[1] = 1;  // GSO_TCPV4
  EXPECT_EQ(none(tcp), 0u);
  std::vector<uint8_t> not_udp = GsoFrame(false, 1000, 3000);
  not_udp[24 + 9] = 6;
  EXPECT_EQ(none(not_udp), 0u);
  std::vector<uint8_t> arp = GsoFrame(false, 1000, 3000);
  arp[10 + 12] = 0x08;
  arp[10 + 13] = 0x06;
  EXPECT_EQ(none(arp), 0u);
  EXPECT_EQ(none(std::vector<uint8_t>(40, 0)), 0u);
  std::vector<uint8_t> zero_size = GsoFrame(false, 1000, 3000);
  zero_size[4] = zero_size[5] = 0;
  EXPECT_EQ(none(zero_size), 0u);
}

}  // namespace
}  // namespace inca::linkdelay
