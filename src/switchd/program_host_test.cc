// The program host serves any program through its hooks: an echo program
// here, with neither CAIS nor OLAF in it, sees every datagram once, and its
// output is sent, or counted as unmapped, through the host's port table.
#include "switchd/program_host.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "switchd/switch_server_test_util.h"

namespace inca::switchd {
namespace {

using server_test::Clock;
using server_test::Host;

// Binds each new sender to a port and sends every datagram back to it,
// except those that start with '!', which go to port 900, never bound.
class EchoHooks final : public ProgramHost::Hooks {
 public:
  explicit EchoHooks(ProgramHost* host) : host_(host) {}
  void OnDatagram(const ProgramHost::Datagram& d, dp::TimeNs /*now*/) override {
    ++datagrams;
    std::optional<dp::PortId> port = host_->ports().Lookup(d.source);
    if (!port) {
      auto bound = host_->ports().Bind(d.source);
      ASSERT_TRUE(bound.ok()) << bound.status();
      port = *bound;
    }
    const bool unmapped = !d.data.empty() && d.data[0] == '!';
    host_->sink().Emit(unmapped ? dp::PortId{900} : *port, d.data);
  }
  void OnTick(dp::TimeNs /*now*/) override { ticks.fetch_add(1); }

  ProgramHost* host_;
  size_t datagrams = 0;  // Run() thread
  std::atomic<uint64_t> ticks{0};
};

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// A host on loopback with the test's I/O path (the parameter).
class ProgramHostTest : public ::testing::TestWithParam<const char*> {
 protected:
  absl::StatusOr<std::unique_ptr<ProgramHost>> Make(
      size_t max_packet_bytes = net::kAnyMessageBytes) {
    auto io = net::ParseIoMode(GetParam());
    if (!io.ok()) return io.status();
    auto listen = net::Endpoint::Parse("127.0.0.1:0");
    if (!listen.ok()) return listen.status();
    return ProgramHost::Create(ProgramHostOptions{.listen = *listen,
                                                  .socket_buffer_bytes = 1 << 20,
                                                  .io = *io,
                                                  .max_packet_bytes = max_packet_bytes},
                               net::SystemClock());
  }
};

TEST_P(ProgramHostTest, ServesAProgramThroughItsHooksAndCountsEveryDatagram) {
  auto host = Make();
  ASSERT_TRUE(host.ok()) << host.status();
  EchoHooks hooks(host->get());
  std::thread loop([&] { EXPECT_TRUE((*host)->Run(hooks).ok()); });

  Host a;
  const uint16_t to = (*host)->socket().local.port();
  a.Send(to, Bytes("!lost"));  // to an unbound port: counted, not sent
  for (int i = 0; i < 3; ++i) a.Send(to, Bytes("hello " + std::to_string(i)));
  for (int i = 0; i < 3; ++i) {
    auto echo = a.Recv(Clock::now() + server_test::kDeadline);
    ASSERT_TRUE(echo.has_value()) << i;
    EXPECT_EQ(std::string(echo->begin(), echo->end()), "hello " + std::to_string(i));
  }
  (*host)->Stop();
  loop.join();
  EXPECT_GT(hooks.ticks.load(), 0u);  // a tick follows every receive batch

  const counters::HostCounters& c = (*host)->counters();
  EXPECT_EQ(c.datagrams_rx, 4u);
  EXPECT_EQ(hooks.datagrams, 4u);
  EXPECT_EQ(c.egress_unmapped, 1u);
  EXPECT_EQ(c.datagrams_tx, 3u);
  EXPECT_EQ(c.send_errors, 0u);
  EXPECT_EQ(c.rx_truncated, 0u);
  EXPECT_GE(c.messages_rx, 1u);
  EXPECT_LE(c.messages_rx, 4u);
  EXPECT_EQ((*host)->ports().size(), 1u);
  EXPECT_THAT(c.JsonFields(), ::testing::StartsWith("\"datagrams_rx\":4,"));
}

TEST(ProgramHostStopTest, StopBeforeRunReturnsAtOnce) {
  auto listen = net::Endpoint::Parse("127.0.0.1:0");
  ASSERT_TRUE(listen.ok());
  auto host = ProgramHost::Create(ProgramHostOptions{.listen = *listen}, net::SystemClock());
  ASSERT_TRUE(host.ok()) << host.status();
  EchoHooks hooks(host->get());
  (*host)->Stop();
  EXPECT_TRUE((*host)->Run(hooks).ok());
  EXPECT_EQ(hooks.ticks.load(), 0u);
}

TEST(ProgramHostStopTest, AnAddressInUseIsUnavailable) {
  auto listen = net::Endpoint::Parse("127.0.0.1:0");
  ASSERT_TRUE(listen.ok());
  auto first = ProgramHost::Create(ProgramHostOptions{.listen = *listen}, net::SystemClock());
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ProgramHost::Create(ProgramHostOptions{.listen = (*first)->socket().local},
                                    net::SystemClock());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

// SendGather sends the head and then the payload as one datagram at the
// next flush, copied (the caller's buffer may change after the call); a
// payload shared with the last copy is sent from it; a packet over
// max_packet_bytes is a send error.
TEST_P(ProgramHostTest, AGatheredPacketLeavesAtTheFlushAsItsHeadThenItsPayload) {
  auto host = Make(/*max_packet_bytes=*/64);
  ASSERT_TRUE(host.ok()) << host.status();
  Host a;
  auto ep = net::Endpoint::Parse(a.endpoint());
  ASSERT_TRUE(ep.ok());
  auto port = (*host)->ports().Bind(*ep);
  ASSERT_TRUE(port.ok()) << port.status();

  dp::PacketSink& sink = (*host)->sink();
  std::string head = "head:";
  std::string payload = "payload";
  sink.EmitGather(*port, Bytes(head), Bytes(payload), 1);
  head = "HEAD:";
  payload = "PAYLOAD";                                     // both were copied
  sink.EmitGather(*port, Bytes(head), Bytes(payload), 1);  // shared: the copy of "payload"
  sink.EmitGather(*port, Bytes(head), Bytes(std::string("other")), 0);
  sink.EmitGather(*port, Bytes(head), Bytes(std::string(60, 'x')), 0);  // 65 bytes: too large
  EXPECT_EQ((*host)->counters().datagrams_tx, 0u);
  (*host)->Flush();
  std::vector<std::string> got;
  for (int i = 0; i < 3; ++i) {
    auto d = a.Recv(Clock::now() + server_test::kDeadline);
    ASSERT_TRUE(d.has_value()) << i;
    got.emplace_back(d->begin(), d->end());
  }
  EXPECT_THAT(got, ::testing::ElementsAre("head:payload", "HEAD:payload", "HEAD:other"));
  EXPECT_EQ((*host)->counters().datagrams_tx, 3u);
  EXPECT_EQ((*host)->counters().send_errors, 1u);
}

INSTANTIATE_TEST_SUITE_P(Io, ProgramHostTest, ::testing::Values("mmsg", "gso"));

}  // namespace
}  // namespace inca::switchd
