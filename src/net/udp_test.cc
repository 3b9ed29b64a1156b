#include "net/udp.h"

#include <poll.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace inca::net {
namespace {

Endpoint Ep(const char* text) {
  auto e = Endpoint::Parse(text);
  EXPECT_TRUE(e.ok()) << e.status();
  return *e;
}

UdpSocket Bind(const char* at, IoMode io) {
  auto s = BindUdp(Ep(at), UdpOptions{.buffer_bytes = 4 << 20, .io = io});
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

std::vector<uint8_t> Datagram(size_t bytes, uint8_t tag) {
  std::vector<uint8_t> d(bytes);
  for (size_t i = 0; i < bytes; ++i) d[i] = static_cast<uint8_t>(tag + i * 7);
  return d;
}

// Reads until `want` datagrams arrived (or 2 s passed): what the receiver saw.
struct Received {
  std::vector<std::vector<uint8_t>> datagrams;
  std::vector<Endpoint> sources;
  size_t messages = 0;
};
Received ReceiveAll(const UdpSocket& s, size_t want) {
  Received out;
  RecvBatch rx = RecvBatch::For(s, 8, 2048);
  for (int waits = 0; out.datagrams.size() < want && waits < 200; ++waits) {
    pollfd p{s.fd.get(), POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    const int n = rx.Receive(s.fd.get());
    EXPECT_GE(n, 0);
    out.messages += rx.messages();
    for (int i = 0; i < n; ++i) {
      auto d = rx.data(static_cast<size_t>(i));
      out.datagrams.emplace_back(d.begin(), d.end());
      out.sources.push_back(Endpoint::FromSockaddr(rx.source(static_cast<size_t>(i)),
                                                   rx.source_len(static_cast<size_t>(i))));
      EXPECT_FALSE(rx.truncated(static_cast<size_t>(i)));
      EXPECT_GT(rx.rx_realtime_ns(static_cast<size_t>(i)), 0);
    }
  }
  return out;
}

// The client loosens its delay target for a switch on this host
// (docs/design/cais-client.md, "A switch on this host").
TEST(EndpointTest, LoopbackAndThisHostsAddressesAreOnThisHost) {
  for (const char* at : {"127.0.0.1:9410", "127.3.2.1:1", "[::1]:9410", "[::ffff:127.0.0.1]:5"}) {
    EXPECT_TRUE(Ep(at).IsLoopback()) << at;
    EXPECT_TRUE(OnThisHost(Ep(at))) << at;
  }
  // The benchmarking range, which only the testbed's namespaces use.
  for (const char* at : {"198.19.255.254:9410", "[2001:2::ffff]:9410", "[::ffff:198.19.0.9]:1"}) {
    EXPECT_FALSE(Ep(at).IsLoopback()) << at;
    EXPECT_FALSE(OnThisHost(Ep(at))) << at;
  }
  EXPECT_FALSE(OnThisHost(Endpoint()));
}

TEST(IoModeTest, ParsesBothNamesAndRejectsOthersInOneLine) {
  EXPECT_EQ(*ParseIoMode("mmsg"), IoMode::kMmsg);
  EXPECT_EQ(*ParseIoMode("gso"), IoMode::kGso);
  auto bad = ParseIoMode("xdp");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--io must be mmsg or gso, not 'xdp'");
  EXPECT_EQ(ToString(IoMode::kGso), "gso");
  EXPECT_EQ(ToString(IoMode::kMmsg), "mmsg");
}

// Debian 12's kernel (6.1) has both; the GSO tests below depend on it.
TEST(OffloadsTest, TheKernelOffersUdpSegmentationAndGro) {
  const Offloads v4 = DetectOffloads(AF_INET);
  EXPECT_TRUE(v4.gso);
  EXPECT_TRUE(v4.gro);
  EXPECT_EQ(v4.ToString(), "gso=1 gro=1");
  UdpSocket gso = Bind("127.0.0.1:0", IoMode::kGso);
  EXPECT_TRUE(gso.gso);
  EXPECT_TRUE(gso.gro);
  UdpSocket mmsg = Bind("127.0.0.1:0", IoMode::kMmsg);
  EXPECT_FALSE(mmsg.gso);
  EXPECT_FALSE(mmsg.gro);
  EXPECT_NE(gso.Describe().find("io=gso gso=1 gro=1"), std::string::npos);
}

// One destination, 20 datagrams of one size and a shorter last one: with GSO
// they leave as one message and arrive at a GRO socket as one message, which
// RecvBatch splits back into the 21 datagrams, in order and byte for byte.
TEST(SendBatchTest, SegmentsOneDestinationsRunAndGroSplitsItBack) {
  UdpSocket rx = Bind("127.0.0.1:0", IoMode::kGso);
  UdpSocket tx = Bind("127.0.0.1:0", IoMode::kGso);
  SendBatch batch = SendBatch::For(tx, 32, 2048);
  ASSERT_TRUE(batch.gso());
  std::vector<std::vector<uint8_t>> sent;
  for (int i = 0; i < 20; ++i) sent.push_back(Datagram(1400, static_cast<uint8_t>(i)));
  sent.push_back(Datagram(300, 99));
  for (const auto& d : sent) ASSERT_TRUE(batch.Add(rx.local, d));
  const SendBatch::Result r = batch.Flush(tx.fd.get());
  EXPECT_EQ(r.sent, 21u);
  EXPECT_EQ(r.messages, 1u);
  EXPECT_EQ(r.failed, 0u);
  EXPECT_FALSE(r.gso_disabled);
  const Received got = ReceiveAll(rx, sent.size());
  EXPECT_EQ(got.datagrams, sent);
  EXPECT_EQ(got.messages, 1u);
  for (const Endpoint& e : got.sources) EXPECT_EQ(e, tx.local);
}

// The fallback path, forced: the same datagrams as single messages, and a
// receiver without GRO sees single datagrams even from a GSO sender.
TEST(SendBatchTest, MmsgSendsOneMessagePerDatagramAndAGsoSendReachesAPlainSocket) {
  UdpSocket plain = Bind("127.0.0.1:0", IoMode::kMmsg);
  UdpSocket mmsg = Bind("127.0.0.1:0", IoMode::kMmsg);
  UdpSocket gso = Bind("127.0.0.1:0", IoMode::kGso);
  std::vector<std::vector<uint8_t>> sent;
  for (int i = 0; i < 10; ++i) sent.push_back(Datagram(1000, static_cast<uint8_t>(i)));
  SendBatch a = SendBatch::For(mmsg, 16, 2048);
  EXPECT_FALSE(a.gso());
  for (const auto& d : sent) ASSERT_TRUE(a.Add(plain.local, d));
  const SendBatch::Result ra = a.Flush(mmsg.fd.get());
  EXPECT_EQ(ra.sent, 10u);
  EXPECT_EQ(ra.messages, 10u);
  Received got = ReceiveAll(plain, sent.size());
  EXPECT_EQ(got.datagrams, sent);
  EXPECT_EQ(got.messages, 10u);

  SendBatch b = SendBatch::For(gso, 16, 2048);
  for (const auto& d : sent) ASSERT_TRUE(b.Add(plain.local, d));
  const SendBatch::Result rb = b.Flush(gso.fd.get());
  EXPECT_EQ(rb.sent, 10u);
  EXPECT_EQ(rb.messages, 1u);
  got = ReceiveAll(plain, sent.size());
  EXPECT_EQ(got.datagrams, sent);
  EXPECT_EQ(got.messages, 10u);  // the kernel segmented it for a socket without UDP_GRO
}

// A message closes at a change of destination, at a longer datagram, after
// a shorter one, and at the kernel's byte limit; each receiver still gets
// its own datagrams in order.
TEST(SendBatchTest, RunsBreakAtDestinationSizeAndByteLimit) {
  UdpSocket r1 = Bind("127.0.0.1:0", IoMode::kGso);
  UdpSocket r2 = Bind("127.0.0.1:0", IoMode::kGso);
  UdpSocket tx = Bind("127.0.0.1:0", IoMode::kGso);
  SendBatch batch = SendBatch::For(tx, 64, 9000);
  std::vector<std::vector<uint8_t>> to1, to2;
  auto add = [&](const UdpSocket& r, std::vector<std::vector<uint8_t>>& log, size_t bytes) {
    log.push_back(Datagram(bytes, static_cast<uint8_t>(log.size())));
    ASSERT_TRUE(batch.Add(r.local, log.back()));
  };
  add(r1, to1, 500);
  add(r1, to1, 500);                               // message 1: 2 x 500
  add(r2, to2, 500);                               // message 2 (new destination)
  add(r2, to2, 800);                               // message 3 (longer)
  add(r2, to2, 200);                               // joins 3 and closes it
  add(r2, to2, 200);                               // message 4 (3 was closed)
  for (int i = 0; i < 9; ++i) add(r1, to1, 8000);  // 65507 bytes hold 8: messages 5 and 6
  const SendBatch::Result r = batch.Flush(tx.fd.get());
  EXPECT_EQ(r.sent, 15u);
  EXPECT_EQ(r.messages, 6u);
  EXPECT_EQ(ReceiveAll(r1, to1.size()).datagrams, to1);
  EXPECT_EQ(ReceiveAll(r2, to2.size()).datagrams, to2);
}

// A switch multicasts each result to every rank: A, B, A, B, ... Each
// destination still gets one message, and its datagrams in order.
TEST(SendBatchTest, InterleavedDestinationsEachGetOneMessage) {
  UdpSocket a = Bind("127.0.0.1:0", IoMode::kGso);
  UdpSocket b = Bind("127.0.0.1:0", IoMode::kGso);
  UdpSocket tx = Bind("127.0.0.1:0", IoMode::kGso);
  SendBatch batch = SendBatch::For(tx, 32, 2048);
  std::vector<std::vector<uint8_t>> to_a, to_b;
  for (uint8_t i = 0; i < 6; ++i) {
    to_a.push_back(Datagram(1024, i));
    to_b.push_back(Datagram(1024, static_cast<uint8_t>(100 + i)));
    ASSERT_TRUE(batch.Add(a.local, to_a.back()));
    ASSERT_TRUE(batch.Add(b.local, to_b.back()));
  }
  const SendBatch::Result r = batch.Flush(tx.fd.get());
  EXPECT_EQ(r.sent, 12u);
  EXPECT_EQ(r.messages, 2u);
  EXPECT_EQ(ReceiveAll(a, to_a.size()).datagrams, to_a);
  EXPECT_EQ(ReceiveAll(b, to_b.size()).datagrams, to_b);
}

TEST(SendBatchTest, AGatheredDatagramIsItsHeadThenItsPayload) {
  UdpSocket rx = Bind("127.0.0.1:0", IoMode::kGso);
  UdpSocket tx = Bind("127.0.0.1:0", IoMode::kGso);
  SendBatch batch = SendBatch::For(tx, 8, 64);
  sockaddr_storage to;
  const socklen_t len = rx.local.ToSockaddr(tx.family, &to);
  const std::vector<uint8_t> payload = Datagram(3000, 5);
  std::vector<std::vector<uint8_t>> want;
  for (uint8_t i = 0; i < 4; ++i) {
    const std::vector<uint8_t> head = Datagram(20, i);
    ASSERT_TRUE(batch.AddGather(to, len, head, payload));
    want.push_back(head);
    want.back().insert(want.back().end(), payload.begin(), payload.end());
  }
  EXPECT_FALSE(batch.AddGather(to, len, Datagram(65, 0), payload));  // head over the slot
  const SendBatch::Result r = batch.Flush(tx.fd.get());
  EXPECT_EQ(r.sent, 4u);
  EXPECT_EQ(r.messages, 1u);
  EXPECT_EQ(ReceiveAll(rx, want.size()).datagrams, want);
}

// AddShared copies a payload; one with the same nonzero `share` as the last
// copy in the batch references that copy (so it carries the payload as it
// was then); another `share`, 0, or a batch just flushed copies again.
TEST(SendBatchTest, APayloadSharedWithTheLastCopyIsSentFromIt) {
  UdpSocket rx = Bind("127.0.0.1:0", IoMode::kGso);
  UdpSocket tx = Bind("127.0.0.1:0", IoMode::kGso);
  SendBatch batch = SendBatch::For(tx, 8, 20 + 3000);
  std::vector<uint8_t> result = Datagram(3000, 5);
  const std::vector<uint8_t> other = Datagram(3000, 9);
  const std::vector<uint8_t> head = Datagram(20, 1);
  auto join = [&](const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> d = head;
    d.insert(d.end(), payload.begin(), payload.end());
    return d;
  };
  const std::vector<uint8_t> first = result;
  ASSERT_TRUE(batch.AddShared(rx.local, head, result, 7));
  result[0] ^= 0xff;
  ASSERT_TRUE(batch.AddShared(rx.local, head, result, 7));  // sends `first` again
  ASSERT_TRUE(batch.AddShared(rx.local, head, {}, 0));      // a bare head in between
  ASSERT_TRUE(batch.AddShared(rx.local, head, result, 7));  // still `first`
  ASSERT_TRUE(batch.AddShared(rx.local, head, other, 8));
  ASSERT_TRUE(batch.AddShared(rx.local, head, other, 0));
  ASSERT_TRUE(batch.AddShared(rx.local, head, result, 7));  // 7 was no longer the last copy
  EXPECT_FALSE(batch.AddShared(rx.local, Datagram(21, 0), other, 0));  // over the slot
  EXPECT_EQ(batch.Flush(tx.fd.get()).sent, 7u);
  EXPECT_EQ(ReceiveAll(rx, 7).datagrams,
            (std::vector<std::vector<uint8_t>>{join(first), join(first), head, join(first),
                                               join(other), join(other), join(result)}));

  result[0] ^= 0xff;                                        // back to `first`
  ASSERT_TRUE(batch.AddShared(rx.local, head, result, 7));  // a new batch copies afresh
  EXPECT_EQ(batch.Flush(tx.fd.get()).sent, 1u);
  EXPECT_EQ(ReceiveAll(rx, 1).datagrams, std::vector<std::vector<uint8_t>>{join(first)});
}

TEST(SendBatchTest, RefusesWhatItCannotCarry) {
  UdpSocket v4 = Bind("127.0.0.1:0", IoMode::kGso);
  SendBatch batch = SendBatch::For(v4, 2, 100);
  EXPECT_FALSE(batch.Add(Ep("[::1]:9"), Datagram(10, 0)));  // IPv6 peer, IPv4 socket
  EXPECT_FALSE(batch.Add(v4.local, Datagram(101, 0)));      // over the slot
  EXPECT_TRUE(batch.Add(v4.local, Datagram(10, 0)));
  EXPECT_TRUE(batch.Add(v4.local, Datagram(10, 0)));
  EXPECT_TRUE(batch.full());
  EXPECT_FALSE(batch.Add(v4.local, Datagram(10, 0)));
  EXPECT_EQ(batch.Flush(v4.fd.get()).sent, 2u);
  EXPECT_TRUE(batch.empty());
}

TEST(RecvBatchTest, AMessageLongerThanTheSlotIsMarkedTruncated) {
  UdpSocket rx = Bind("127.0.0.1:0", IoMode::kMmsg);
  UdpSocket tx = Bind("127.0.0.1:0", IoMode::kMmsg);
  SendBatch batch = SendBatch::For(tx, 1, 2048);
  ASSERT_TRUE(batch.Add(rx.local, Datagram(1500, 3)));
  ASSERT_EQ(batch.Flush(tx.fd.get()).sent, 1u);
  RecvBatch small(4, 1000);
  pollfd p{rx.fd.get(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1);
  ASSERT_EQ(small.Receive(rx.fd.get()), 1);
  EXPECT_TRUE(small.truncated(0));
  EXPECT_EQ(small.data(0).size(), 1000u);
  EXPECT_EQ(small.Receive(rx.fd.get()), 0);  // nothing waiting
}

// IPv6 end to end on ::1, segmented and coalesced as on IPv4.
TEST(SendBatchTest, Ipv6LoopbackCarriesSegmentedRuns) {
  UdpSocket rx = Bind("[::1]:0", IoMode::kGso);
  UdpSocket tx = Bind("[::1]:0", IoMode::kGso);
  EXPECT_EQ(rx.family, AF_INET6);
  EXPECT_TRUE(tx.gso);
  SendBatch batch = SendBatch::For(tx, 16, 2048);
  std::vector<std::vector<uint8_t>> sent;
  for (int i = 0; i < 12; ++i) sent.push_back(Datagram(1200, static_cast<uint8_t>(i)));
  for (const auto& d : sent) ASSERT_TRUE(batch.Add(rx.local, d));
  const SendBatch::Result r = batch.Flush(tx.fd.get());
  EXPECT_EQ(r.sent, 12u);
  EXPECT_EQ(r.messages, 1u);
  const Received got = ReceiveAll(rx, sent.size());
  EXPECT_EQ(got.datagrams, sent);
  for (const Endpoint& e : got.sources) EXPECT_EQ(e, tx.local);
}

}  // namespace
}  // namespace inca::net
