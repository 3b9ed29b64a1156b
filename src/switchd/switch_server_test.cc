// SwitchServer over real loopback UDP: the server runs Run() on a thread;
// test sockets are hosts. Waits are poll() deadlines, never fixed sleeps.
#include <cstring>
#include <future>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "switchd/switch_server_test_util.h"

namespace inca::switchd {
namespace {

using namespace ::inca::switchd::server_test;  // NOLINT(build/namespaces)

TEST_F(SwitchServerTest, ThreeHostsJoinAndAllReduce) {
  Start();
  Host a, b, c;
  std::vector<Host*> hosts = {&a, &b, &c};
  std::vector<MgmtMessage> ok = JoinAll(hosts, 0);
  ASSERT_EQ(ok.size(), 3u);
  std::set<uint16_t> distinct;
  for (const MgmtMessage& m : ok) {
    EXPECT_EQ(m.type, MgmtType::kJoinReply);
    EXPECT_EQ(m.rank_ports, ok[0].rank_ports);
    EXPECT_EQ(m.seq_base, ok[0].seq_base);
    ASSERT_EQ(m.rank_ports.size(), 3u);
    EXPECT_EQ(m.port, m.rank_ports[m.rank]);
    distinct.insert(m.port);
  }
  EXPECT_EQ(distinct.size(), 3u);

  const uint32_t seq = ok[0].seq_base;
  ReduceAndCheck(hosts, 0, 5, seq, {{1, 2, 3, 4}, {10, 20, 30, 40}, {100, 200, 300, 400}});
  ReduceAndCheck(hosts, 0, 5, seq + 1, {{0.5f}, {0.25f}, {-1}});

  ASSERT_TRUE(WaitFor(*server_, [](const counters::SwitchCounters& k) {
    return k.cais.completed_chunks == 2 && k.datagrams_tx == 6;
  }));
  counters::SwitchCounters k = server_->counters();
  EXPECT_EQ(k.groups_formed, 1u);
  EXPECT_EQ(k.ports_bound, 3u);
  EXPECT_EQ(k.reducer.rx_packets, 6u);
  EXPECT_EQ(k.send_errors, 0u);
  EXPECT_EQ(k.datagrams_rx, SentBy(hosts));
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
  ASSERT_TRUE(running_->Join().ok());
}

// Issue 18: 3,000 result requests of 20 bytes drew 3,000 results (450x
// the bytes). A port's resends are bounded by its credit (the default
// resend_credit_max of 1,024, topped up by 2 per result sent to it); the
// rest are dropped as resend_limit and counted.
TEST_F(SwitchServerTest, ResultRequestsCannotAmplifyPastThePortsCredit) {
  SwitchdConfig c = TestConfig();
  c.cais.result_hold_ns = 600'000 * dp::kNsPerMs;  // retained for the whole test
  Start(c);
  Host a, b;
  std::vector<Host*> hosts = {&a, &b};
  const std::vector<MgmtMessage> ok = JoinAll(hosts, 0);
  ASSERT_EQ(ok.size(), 2u);
  const uint32_t seq = ok[0].seq_base;
  const std::vector<float> kib(256, 1.0f);
  ReduceAndCheck(hosts, 0, 5, seq, {kib, kib});
  CaisHeader req;
  req.op = CaisOp::kAllReduce;
  req.layer_id = 5;
  req.seq_num = seq;
  req.flags = wire::cais_flags::kRetransmit;
  const std::vector<uint8_t> request = CaisPacket(req, {});
  ASSERT_EQ(request.size(), 20u);
  constexpr uint64_t kRequests = 3000;
  // In steps of 100, each taken in before the next (the switch's socket
  // buffer may be capped by the kernel), so every request is counted.
  for (uint64_t sent = 0; sent < kRequests;) {
    for (int i = 0; i < 100; ++i, ++sent) a.Send(port(), request);
    ASSERT_TRUE(WaitFor(*server_, [&](const counters::SwitchCounters& k) {
      return k.reducer.rx_packets == 2 + sent;
    })) << server_->counters().ToJson();
  }
  const counters::SwitchCounters k = server_->counters();
  const uint64_t credit = c.cais.resend_credit_max;
  EXPECT_EQ(k.cais.results_resent, credit);
  EXPECT_EQ(k.reducer.drops_by_reason[static_cast<size_t>(dp::DropReason::kResendLimit)],
            kRequests - credit);
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
  ASSERT_TRUE(running_->Join().ok());
}

TEST_F(SwitchServerTest, UnknownSenderIsDroppedAndCounted) {
  Start();
  Host a, stranger;
  ASSERT_EQ(JoinAll({&a}, 1).size(), 1u);
  stranger.Send(port(), F32Packet(1, 0, 0, {1, 2}));
  ASSERT_TRUE(WaitFor(*server_, [&](const counters::SwitchCounters& k) {
    return k.datagrams_rx == SentBy({&a, &stranger});
  }));
  counters::SwitchCounters k = server_->counters();
  EXPECT_EQ(k.unknown_sender, 1u);
  EXPECT_EQ(k.reducer.rx_packets, 0u);
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
  EXPECT_FALSE(stranger.Recv(Clock::now() + milliseconds(50)).has_value());
}

TEST_F(SwitchServerTest, PingAndLeaveOverUdp) {
  Start();
  Host a, b;
  auto ok = JoinAll({&a, &b}, 3);
  ASSERT_EQ(ok.size(), 2u);
  MgmtMessage ping;
  ping.type = MgmtType::kPing;
  ping.group_id = 3;
  ping.rank = 1;
  auto pong = Request(b, port(), ping);
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->type, MgmtType::kPong);
  EXPECT_EQ(pong->status, MgmtStatus::kOk);
  MgmtMessage leave = ping;
  leave.type = MgmtType::kLeave;
  auto left = Request(b, port(), leave);
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->status, MgmtStatus::kOk);
  ping.rank = 0;
  EXPECT_EQ(Request(a, port(), ping)->status, MgmtStatus::kUnknown);  // group dissolved
  // Its data is now from an unknown sender.
  a.Send(port(), F32Packet(3, 0, 0, {1}));
  ASSERT_TRUE(
      WaitFor(*server_, [](const counters::SwitchCounters& k) { return k.unknown_sender == 1; }));
  EXPECT_EQ(server_->counters().groups_formed, 0u);
  EXPECT_EQ(server_->counters().ports_bound, 0u);
}

TEST_F(SwitchServerTest, StaticPortsAndRules) {
  Host a, b;
  SwitchdConfig c = TestConfig();
  c.ports = {{4, a.endpoint()}, {9, b.endpoint()}};
  c.rules = {cais::Rule{cais::RuleKey{7, std::nullopt, std::nullopt}, cais::PortMask{4, 9},
                        cais::PortMask{4, 9}, CaisOp::kAllReduce}};
  Start(c);
  EXPECT_EQ(server_->counters().ports_bound, 2u);
  ReduceAndCheck({&a, &b}, 7, 1, 99, {{1, 1}, {2, 3}});
  auto refused = Request(a, port(), JoinMsg(7, 0, 2));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, MgmtStatus::kRefused);
  EXPECT_EQ(refused->reason, wire::MgmtReason::kGroupConflict);
  // A static endpoint JOINing another group keeps its port.
  auto joined = Request(b, port(), JoinMsg(8, 0, 1));
  ASSERT_TRUE(joined.has_value());
  EXPECT_EQ(joined->status, MgmtStatus::kOk);
  EXPECT_EQ(joined->port, 9);
}

TEST_F(SwitchServerTest, AccessorsBeforeRun) {
  auto s = SwitchServer::Create(TestConfig());
  ASSERT_TRUE(s.ok()) << s.status();
  SwitchServer& server = **s;
  EXPECT_NE(server.local_port(), 0);
  EXPECT_GT(server.rcvbuf_bytes(), 0u);
  EXPECT_GT(server.sndbuf_bytes(), 0u);
  auto ep = net::Endpoint::Parse("127.0.0.1:1");
  ASSERT_TRUE(server.AddStaticPort(2, *ep).ok());
  EXPECT_EQ(server.AddStaticPort(2, *ep).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(server
                  .AddStaticRule(cais::Rule{cais::RuleKey{1, std::nullopt, 3}, cais::PortMask{2},
                                            cais::PortMask{2}, std::nullopt})
                  .ok());
  EXPECT_TRUE(server.groups().is_static_group(1));
  // A rule for one layer overrides, and leaves the group free for JOIN.
  ASSERT_TRUE(server
                  .AddStaticRule(cais::Rule{cais::RuleKey{4, 2, std::nullopt}, cais::PortMask{2},
                                            cais::PortMask{2}, std::nullopt})
                  .ok());
  EXPECT_FALSE(server.groups().is_static_group(4));
  EXPECT_EQ(server.ports().Lookup(*ep), 2);
  EXPECT_EQ(server.reducer().rules().size(), 2u);
  // Stop() before Run(): Run returns at once.
  server.Stop();
  EXPECT_TRUE(server.Run().ok());
}

TEST_F(SwitchServerTest, CreateRejectsBadConfig) {
  SwitchdConfig c = TestConfig();
  c.cais.max_payload_bytes = 3;
  EXPECT_EQ(SwitchServer::Create(c).status().code(), absl::StatusCode::kInvalidArgument);
  c = TestConfig();
  c.listen = "127.0.0.1:1";  // privileged or in use: bind may fail; either way no crash
  (void)SwitchServer::Create(c);
  c = TestConfig();
  c.listen = "no-such-host.invalid:5";
  EXPECT_FALSE(SwitchServer::Create(c).ok());
  // Two servers on one port.
  Start();
  c = TestConfig();
  c.listen = "127.0.0.1:" + std::to_string(port());
  EXPECT_EQ(SwitchServer::Create(c).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SwitchServerTest, Ipv6AndDualStack) {
  SwitchdConfig c = TestConfig();
  c.listen = "[::1]:0";
  // The machines this project targets have IPv6 loopback; a failure here is real.
  ASSERT_TRUE(SwitchServer::Create(c).ok()) << "no IPv6 loopback ([::1])";
  Start(c);
  Host a(/*v6=*/true), b(/*v6=*/true);
  ASSERT_EQ(JoinAll({&a, &b}, 0).size(), 2u);
  ReduceAndCheck({&a, &b}, 0, 1, 1, {{1, 2}, {3, 4}});
  ASSERT_TRUE(running_->Join().ok());

  // A wildcard IPv6 socket serves IPv4 hosts too (as ::ffff:127.0.0.1).
  c.listen = "[::]:0";
  Start(c);
  Host v4, v6(/*v6=*/true);
  auto ok = JoinAll({&v4, &v6}, 1);
  ASSERT_EQ(ok.size(), 2u);
  ReduceAndCheck({&v4, &v6}, 1, 2, ok[0].seq_base, {{0.5f}, {0.25f}});
  EXPECT_EQ(server_->counters().unknown_sender, 0u);
}

// A rank's window of chunks leaves in one GSO message, reaches the switch's
// GRO socket as one, and the results come back segmented to the rank: the
// switch counts datagrams as before and messages apart. --io mmsg is one
// message per datagram on the same traffic.
class SwitchIoTest : public SwitchServerTest, public ::testing::WithParamInterface<net::IoMode> {};

TEST_P(SwitchIoTest, AWindowOfChunksCrossesAsFewMessagesWithGso) {
  const net::IoMode io = GetParam();
  SwitchdConfig c = TestConfig();
  c.io = std::string(net::ToString(io));
  Start(c);
  EXPECT_EQ(server_->counters().io_gso, io == net::IoMode::kGso);
  EXPECT_EQ(server_->counters().io_gro, io == net::IoMode::kGso);
  auto local = net::Endpoint::Parse("127.0.0.1:0");
  auto sock = net::BindUdp(*local, net::UdpOptions{.buffer_bytes = 4 << 20, .io = io});
  ASSERT_TRUE(sock.ok()) << sock.status();
  sockaddr_storage to;
  const socklen_t to_len = server_->local_endpoint().ToSockaddr(sock->family, &to);
  net::RecvBatch rx = net::RecvBatch::For(*sock, 16, 2048);
  auto receive = [&](size_t want, const std::function<void(std::span<const uint8_t>)>& each) {
    size_t got = 0;
    const auto deadline = Clock::now() + kDeadline;
    while (got < want && Clock::now() < deadline) {
      pollfd p{sock->fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 10) <= 0) continue;
      const int n = rx.Receive(sock->fd.get());
      for (int i = 0; i < n; ++i) each(rx.data(static_cast<size_t>(i)));
      got += static_cast<size_t>(std::max(n, 0));
    }
    return got;
  };
  // A one-rank group.
  std::vector<uint8_t> join;
  MgmtMessage j = JoinMsg(7, 0, 1);
  j.nonce = 4242;
  wire::SerializeMgmt(j, &join);
  ASSERT_EQ(::sendto(sock->fd.get(), join.data(), join.size(), 0,
                     reinterpret_cast<const sockaddr*>(&to), to_len),
            static_cast<ssize_t>(join.size()));
  uint32_t seq_base = 0;
  ASSERT_EQ(receive(1,
                    [&](std::span<const uint8_t> d) {
                      MgmtMessage m;
                      ASSERT_TRUE(wire::ParseMgmt(d, &m));
                      EXPECT_EQ(m.status, MgmtStatus::kOk);
                      seq_base = m.seq_base;
                    }),
            1u);
  constexpr uint32_t kChunks = 24;
  net::SendBatch tx = net::SendBatch::For(*sock, kChunks, 2048);
  for (uint32_t k = 0; k < kChunks; ++k) {
    std::vector<float> v(256, static_cast<float>(k));
    ASSERT_TRUE(tx.Add(to, to_len, F32Packet(7, 1, seq_base + k, v)));
  }
  const net::SendBatch::Result sent = tx.Flush(sock->fd.get());
  EXPECT_EQ(sent.sent, kChunks);
  EXPECT_EQ(sent.messages, io == net::IoMode::kGso ? 1u : kChunks);
  std::set<uint32_t> results;
  EXPECT_EQ(receive(kChunks,
                    [&](std::span<const uint8_t> d) {
                      wire::CaisPacketView v;
                      ASSERT_EQ(wire::ParseCais(d, &v), wire::CaisParseError::kOk);
                      ASSERT_TRUE(v.header.has_flag(wire::cais_flags::kResult));
                      const uint32_t k = v.header.seq_num - seq_base;
                      float first;
                      std::memcpy(&first, v.payload.data(), 4);
                      EXPECT_EQ(first, static_cast<float>(k));
                      results.insert(k);
                    }),
            kChunks);
  EXPECT_EQ(results.size(), kChunks);
  ASSERT_TRUE(WaitFor(*server_, [&](const counters::SwitchCounters& k) {
    return k.datagrams_tx == kChunks && k.cais.completed_chunks == kChunks;
  }));
  const counters::SwitchCounters k = server_->counters();
  EXPECT_EQ(k.datagrams_rx, kChunks + 1);  // and the JOIN
  if (io == net::IoMode::kGso) {
    EXPECT_LT(k.messages_rx, k.datagrams_rx) << k.ToJson();
    EXPECT_LT(k.messages_tx, k.datagrams_tx) << k.ToJson();
  } else {
    EXPECT_EQ(k.messages_rx, k.datagrams_rx);
    EXPECT_EQ(k.messages_tx, k.datagrams_tx);
  }
  EXPECT_EQ(k.gso_fallbacks, 0u);
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
}

INSTANTIATE_TEST_SUITE_P(Io, SwitchIoTest, ::testing::Values(net::IoMode::kMmsg, net::IoMode::kGso),
                         [](const ::testing::TestParamInfo<net::IoMode>& p) {
                           return std::string(net::ToString(p.param));
                         });

TEST_F(SwitchServerTest, StopFromAnotherThreadReturnsPromptly) {
  auto s = SwitchServer::Create(TestConfig());
  ASSERT_TRUE(s.ok());
  SwitchServer* server = s->get();
  std::promise<absl::Status> done;
  std::future<absl::Status> result = done.get_future();
  std::thread runner([&] { done.set_value(server->Run()); });
  Host h;
  Barrier(h, server->local_port());  // Run() is serving
  const auto t0 = Clock::now();
  std::thread stopper([&] { server->Stop(); });
  ASSERT_EQ(result.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  EXPECT_LT(Clock::now() - t0, milliseconds(500));
  EXPECT_TRUE(result.get().ok());
  stopper.join();
  runner.join();
  server->Stop();  // idempotent
}

TEST_F(SwitchServerTest, CountersJson) {
  counters::SwitchCounters k;
  k.datagrams_rx = 3;
  k.mgmt_rx = 3;
  k.reducer.drops_by_reason[static_cast<size_t>(dp::DropReason::kNoRule)] = 0;
  const std::string j = k.ToJson();
  EXPECT_THAT(j, ::testing::HasSubstr("\"datagrams_rx\":3"));
  EXPECT_THAT(j, ::testing::HasSubstr("\"conserved\":true"));
  EXPECT_EQ(j.find('\n'), std::string::npos);
  EXPECT_EQ(j.front(), '{');
  EXPECT_EQ(j.back(), '}');
  k.unknown_sender = 1;
  EXPECT_FALSE(k.Conserved());
}

}  // namespace
}  // namespace inca::switchd
