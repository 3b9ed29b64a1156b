// The AF_XDP reflector's frame rewrite (what every reflected frame goes
// through) and the configurations it refuses before touching the kernel.
// The reflector itself runs end to end on a testbed namespace's veth in
// python/tests/test_testbed.py (it needs root and an interface of its own).
#include "reflect/xsk_reflector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace inca::reflect {
namespace {

uint16_t Load16(const std::vector<uint8_t>& f, size_t at) {
  return static_cast<uint16_t>(f[at] << 8 | f[at + 1]);
}
void Store16(std::vector<uint8_t>& f, size_t at, uint16_t v) {
  f[at] = static_cast<uint8_t>(v >> 8);
  f[at + 1] = static_cast<uint8_t>(v);
}

// The IPv4 header checksum over `ihl` bytes at 14: 0 when it is right.
uint16_t FoldedSum(const std::vector<uint8_t>& f, size_t ihl) {
  uint32_t sum = 0;
  for (size_t k = 0; k < ihl; k += 2) sum += Load16(f, 14 + k);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// Ethernet + IPv4 (with `options` bytes of options) + UDP + payload, from
// 02:..:01 198.18.0.1:40000 to 02:..:02 198.18.0.2:9420.
std::vector<uint8_t> Frame(size_t payload = 100, size_t options = 0) {
  const size_t ihl = 20 + options;
  std::vector<uint8_t> f(14 + ihl + 8 + payload, 0);
  const uint8_t macs[12] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1};  // destination, source
  std::copy(macs, macs + 12, f.begin());
  Store16(f, 12, 0x0800);
  f[14] = static_cast<uint8_t>(0x40 | ihl / 4);
  Store16(f, 16, static_cast<uint16_t>(ihl + 8 + payload));
  f[22] = 64;
  f[23] = 17;
  const uint8_t src[4] = {198, 18, 0, 1}, dst[4] = {198, 18, 0, 2};
  std::copy(src, src + 4, f.begin() + 26);
  std::copy(dst, dst + 4, f.begin() + 30);
  Store16(f, 24, FoldedSum(f, ihl));
  const size_t udp = 14 + ihl;
  Store16(f, udp, 40000);
  Store16(f, udp + 2, 9420);
  Store16(f, udp + 4, static_cast<uint16_t>(8 + payload));
  Store16(f, udp + 6, 0xbeef);
  std::iota(f.begin() + static_cast<long>(udp + 8), f.end(), uint8_t{7});
  return f;
}

TEST(XskReflectorTest, ReflectSwapsAddressesAndPortsAndKeepsThePayload) {
  for (size_t options : {size_t{0}, size_t{4}}) {
    std::vector<uint8_t> f = Frame(100, options);
    const std::vector<uint8_t> before = f;
    ASSERT_TRUE(ReflectUdp4Frame(f, 9420)) << options;
    const size_t udp = 14 + 20 + options;
    EXPECT_TRUE(std::equal(f.begin(), f.begin() + 6, before.begin() + 6));  // dst MAC = old src
    EXPECT_TRUE(std::equal(f.begin() + 6, f.begin() + 12, before.begin()));
    EXPECT_TRUE(std::equal(f.begin() + 26, f.begin() + 30, before.begin() + 30));
    EXPECT_TRUE(std::equal(f.begin() + 30, f.begin() + 34, before.begin() + 26));
    EXPECT_EQ(Load16(f, udp), 9420);
    EXPECT_EQ(Load16(f, udp + 2), 40000);
    EXPECT_EQ(Load16(f, udp + 6), 0) << "a reflected datagram carries no checksum";
    EXPECT_EQ(FoldedSum(f, 20 + options), 0) << "the IPv4 header checksum still holds";
    EXPECT_TRUE(std::equal(f.begin() + static_cast<long>(udp + 8), f.end(),
                           before.begin() + static_cast<long>(udp + 8)));
  }
  std::vector<uint8_t> any = Frame();
  EXPECT_TRUE(ReflectUdp4Frame(any, 0)) << "port 0 reflects every port";
}

TEST(XskReflectorTest, AnythingElseIsLeftUntouched) {
  const auto refused = [](std::vector<uint8_t> f, uint16_t port, const char* why) {
    const std::vector<uint8_t> before = f;
    EXPECT_FALSE(ReflectUdp4Frame(f, port)) << why;
    EXPECT_EQ(f, before) << why;
  };
  refused(Frame(), 9421, "another port");
  std::vector<uint8_t> f = Frame();
  Store16(f, 12, 0x0806);
  refused(f, 9420, "ARP");
  f = Frame();
  Store16(f, 12, 0x86dd);
  refused(f, 9420, "IPv6");
  f = Frame();
  f[23] = 6;
  refused(f, 9420, "TCP");
  f = Frame();
  Store16(f, 20, 0x2000);
  refused(f, 9420, "a first fragment (more fragments)");
  f = Frame();
  Store16(f, 20, 0x0010);
  refused(f, 9420, "a later fragment");
  f = Frame();
  Store16(f, 16, static_cast<uint16_t>(Load16(f, 16) + 1));
  refused(f, 9420, "an IP length past the frame");
  f = Frame();
  Store16(f, 38, 50);
  refused(f, 9420, "a UDP length that disagrees with IP's");
  f = Frame();
  f[14] = 0x44;
  refused(f, 9420, "an IHL under 20 bytes");
  f = Frame();
  f.resize(40);
  refused(f, 9420, "a short frame");
  refused({}, 9420, "nothing");
}

TEST(XskReflectorTest, BadConfigsAreOneLineErrors) {
  const auto refused = [](XskConfig c, const std::string& says) {
    auto r = XskReflector::Create(c);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  };
  XskConfig c;
  c.interface = "lo";
  refused({.interface = ""}, "is not a device here");
  refused({.interface = "no-such-dev0"}, "'no-such-dev0' is not a device here");
  XskConfig bad = c;
  bad.frames = 100;
  refused(bad, "frames 100 is not a power of two");
  bad.frames = 32;
  refused(bad, "frames 32");
  bad = c;
  bad.batch = 0;
  refused(bad, "batch 0 out of range");
  bad = c;
  bad.mode = "zerocopy";
  refused(bad, "XDP mode 'zerocopy': use auto, native or skb");
}

}  // namespace
}  // namespace inca::reflect
