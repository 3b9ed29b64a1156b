// SwitchServer over real loopback UDP: the server runs Run() on a thread;
// test sockets are hosts. Waits are poll() deadlines, never fixed sleeps.
#include "switchd/switch_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inca/wire/cais.h"
#include "inca/wire/mgmt.h"
#include "switchd/udp_forwarder.h"

namespace inca::switchd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using wire::CaisHeader;
using wire::CaisOp;
using wire::MgmtMessage;
using wire::MgmtStatus;
using wire::MgmtType;

constexpr auto kDeadline = milliseconds(5000);

// A host: a UDP socket on loopback (127.0.0.1, or ::1) with an ephemeral
// port; it sends to the switch on loopback in its own family.
class Host {
 public:
  explicit Host(bool v6 = false)
      : family_(v6 ? AF_INET6 : AF_INET),
        loopback_(v6 ? "[::1]" : "127.0.0.1"),
        fd_(::socket(family_, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    EXPECT_GE(fd_, 0);
    sockaddr_storage a;
    const socklen_t len = Loopback(0).ToSockaddr(family_, &a);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), len), 0);
    socklen_t got = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &got);
    port_ = net::Endpoint::FromSockaddr(a, got).port();
    const int big = 4 << 20;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
  }
  ~Host() { ::close(fd_); }
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  uint16_t port() const { return port_; }
  std::string endpoint() const { return loopback_ + ":" + std::to_string(port_); }

  void Send(uint16_t to_port, std::span<const uint8_t> data) const {
    sockaddr_storage a;
    const socklen_t len = Loopback(to_port).ToSockaddr(family_, &a);
    const ssize_t n =
        ::sendto(fd_, data.data(), data.size(), 0, reinterpret_cast<sockaddr*>(&a), len);
    EXPECT_EQ(n, static_cast<ssize_t>(data.size()));
    ++sent_;
  }
  // Datagrams sent so far.
  uint64_t sent() const { return sent_; }

  // The next datagram, waiting until `deadline` at most.
  std::optional<std::vector<uint8_t>> Recv(Clock::time_point deadline) const {
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0))) <= 0) return std::nullopt;
      std::vector<uint8_t> buf(65536);
      const ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0) continue;
      buf.resize(static_cast<size_t>(n));
      return buf;
    }
  }

  // Discards everything already queued.
  void Drain() const {
    uint8_t buf[65536];
    while (::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT) >= 0) {
    }
  }

 private:
  net::Endpoint Loopback(uint16_t port) const {
    auto e = net::Endpoint::Parse(loopback_ + ":" + std::to_string(port));
    EXPECT_TRUE(e.ok());
    return e.value_or(net::Endpoint{});
  }

  int family_;
  std::string loopback_;
  int fd_;
  uint16_t port_ = 0;
  mutable uint64_t sent_ = 0;
};

uint64_t SentBy(const std::vector<Host*>& hosts) {
  uint64_t n = 0;
  for (const Host* h : hosts) n += h->sent();
  return n;
}

// Sends `m` and waits for the reply with the same nonce, resending every
// 500 ms (loopback can drop under load). Skips CAIS traffic.
std::optional<MgmtMessage> Request(const Host& h, uint16_t switch_port, MgmtMessage m) {
  static uint32_t nonce = 1;
  m.nonce = nonce++;
  std::vector<uint8_t> bytes;
  wire::SerializeMgmt(m, &bytes);
  const auto deadline = Clock::now() + kDeadline;
  while (Clock::now() < deadline) {
    h.Send(switch_port, bytes);
    const auto resend = std::min(deadline, Clock::now() + milliseconds(500));
    while (auto d = h.Recv(resend)) {
      MgmtMessage reply;
      if (wire::ParseMgmt(*d, &reply) && reply.nonce == m.nonce) return reply;
    }
  }
  return std::nullopt;
}

MgmtMessage JoinMsg(uint8_t group, uint16_t rank, uint16_t world) {
  MgmtMessage m;
  m.type = MgmtType::kJoin;
  m.group_id = group;
  m.rank = rank;
  m.world_size = world;
  return m;
}

// A PING round trip: every datagram `h` sent before it has been handled.
void Barrier(const Host& h, uint16_t switch_port) {
  MgmtMessage m;
  m.type = MgmtType::kPing;
  m.group_id = 250;  // nobody's group: PONG unknown
  ASSERT_TRUE(Request(h, switch_port, m).has_value());
}

std::vector<uint8_t> CaisPacket(const CaisHeader& h, std::span<const uint8_t> payload) {
  std::vector<uint8_t> d(wire::kCaisHeaderBytes + payload.size());
  wire::SerializeCaisHeader(h, d);
  if (!payload.empty())
    std::memcpy(d.data() + wire::kCaisHeaderBytes, payload.data(), payload.size());
  return d;
}

std::vector<uint8_t> F32Packet(uint8_t group, uint16_t layer, uint32_t seq,
                               const std::vector<float>& values) {
  CaisHeader h;
  h.op = CaisOp::kAllReduce;
  h.group_id = group;
  h.layer_id = layer;
  h.seq_num = seq;
  h.payload_len = static_cast<uint32_t>(values.size() * 4);
  std::vector<uint8_t> payload(values.size() * 4);
  std::memcpy(payload.data(), values.data(), payload.size());
  return CaisPacket(h, payload);
}

// Waits for the RESULT of (group, layer, seq, chunk 0); other traffic skipped.
std::optional<std::vector<float>> AwaitResult(const Host& h, uint8_t group, uint16_t layer,
                                              uint32_t seq) {
  const auto deadline = Clock::now() + kDeadline;
  while (auto d = h.Recv(deadline)) {
    wire::CaisPacketView v;
    if (wire::ParseCais(*d, &v) != wire::CaisParseError::kOk) continue;
    const CaisHeader& r = v.header;
    if (r.group_id != group || r.layer_id != layer || r.seq_num != seq) continue;
    if (!r.has_flag(wire::cais_flags::kResult) || r.has_flag(wire::cais_flags::kFallback)) continue;
    std::vector<float> out(v.payload.size() / 4);
    std::memcpy(out.data(), v.payload.data(), out.size() * 4);
    return out;
  }
  return std::nullopt;
}

SwitchdConfig TestConfig() {
  SwitchdConfig c;
  c.listen = "127.0.0.1:0";
  c.cais.sram_bytes = 1 << 20;
  c.cais.max_payload_bytes = 1024;
  c.cais.max_pending_chunks = 32;
  c.cais.timeout_ns = 20 * dp::kNsPerMs;
  c.cais.result_hold_ns = 20 * dp::kNsPerMs;
  c.cais.tombstone_capacity = 256;
  return c;
}

// Runs a server on its own thread for the life of the object.
class Running {
 public:
  explicit Running(SwitchServer* s) : server_(s) {
    thread_ = std::thread([this] { status_ = server_->Run(); });
  }
  ~Running() { (void)Join(); }
  absl::Status Join() {
    server_->Stop();
    if (thread_.joinable()) thread_.join();
    return status_;
  }

 private:
  SwitchServer* server_;
  std::thread thread_;
  absl::Status status_;
};

// Polls the counter snapshot until `pred` holds or the deadline passes.
bool WaitFor(const SwitchServer& s, const std::function<bool(const SwitchCounters&)>& pred) {
  const auto deadline = Clock::now() + kDeadline;
  while (Clock::now() < deadline) {
    if (pred(s.counters())) return true;
    ::poll(nullptr, 0, 1);
  }
  return pred(s.counters());
}

class SwitchServerTest : public ::testing::Test {
 protected:
  void SetUp() override { spdlog::set_level(spdlog::level::err); }

  void Start(const SwitchdConfig& c = TestConfig()) {
    running_.reset();  // stops and joins any earlier server first
    auto s = SwitchServer::Create(c);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    running_ = std::make_unique<Running>(server_.get());
  }
  uint16_t port() const { return server_->local_port(); }

  // JOINs every host into `group` (rank = index); returns the final OK replies.
  std::vector<MgmtMessage> JoinAll(const std::vector<Host*>& hosts, uint8_t group) {
    const auto world = static_cast<uint16_t>(hosts.size());
    for (uint16_t r = 0; r < world; ++r) {
      auto reply = Request(*hosts[r], port(), JoinMsg(group, r, world));
      EXPECT_TRUE(reply.has_value());
      if (!reply) return {};
      EXPECT_EQ(reply->status, r + 1 < world ? MgmtStatus::kPending : MgmtStatus::kOk);
    }
    std::vector<MgmtMessage> ok;
    for (uint16_t r = 0; r < world; ++r) {
      auto reply = Request(*hosts[r], port(), JoinMsg(group, r, world));
      EXPECT_TRUE(reply.has_value());
      if (!reply) return {};
      EXPECT_EQ(reply->status, MgmtStatus::kOk);
      ok.push_back(*reply);
    }
    return ok;
  }

  // Each host contributes `inputs[i]` to (group, layer, seq); every host must
  // get the element-wise sum.
  void ReduceAndCheck(const std::vector<Host*>& hosts, uint8_t group, uint16_t layer, uint32_t seq,
                      const std::vector<std::vector<float>>& inputs) {
    std::vector<float> want(inputs[0].size(), 0.0f);
    for (size_t i = 0; i < hosts.size(); ++i) {
      hosts[i]->Send(port(), F32Packet(group, layer, seq, inputs[i]));
      for (size_t e = 0; e < want.size(); ++e) want[e] += inputs[i][e];
    }
    for (Host* h : hosts) {
      auto got = AwaitResult(*h, group, layer, seq);
      ASSERT_TRUE(got.has_value()) << "no result at port " << h->port();
      EXPECT_EQ(*got, want);
    }
  }

  std::unique_ptr<SwitchServer> server_;
  std::unique_ptr<Running> running_;
};

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

  ASSERT_TRUE(WaitFor(*server_, [](const SwitchCounters& k) {
    return k.cais.completed_chunks == 2 && k.datagrams_tx == 6;
  }));
  SwitchCounters k = server_->counters();
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
    ASSERT_TRUE(WaitFor(*server_, [&](const SwitchCounters& k) {
      return k.reducer.rx_packets == 2 + sent;
    })) << server_->counters().ToJson();
  }
  const SwitchCounters k = server_->counters();
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
  ASSERT_TRUE(WaitFor(*server_, [&](const SwitchCounters& k) {
    return k.datagrams_rx == SentBy({&a, &stranger});
  }));
  SwitchCounters k = server_->counters();
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
  ASSERT_TRUE(WaitFor(*server_, [](const SwitchCounters& k) { return k.unknown_sender == 1; }));
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

TEST_F(SwitchServerTest, SocketFuzzKeepsServingAndCountersAddUp) {
  Start();
  Host j0, j1, j2, u0, u1;
  std::vector<Host*> joined = {&j0, &j1, &j2};
  std::vector<Host*> all = {&j0, &j1, &j2, &u0, &u1};
  auto ok = JoinAll(joined, 0);
  ASSERT_EQ(ok.size(), 3u);

  std::mt19937_64 rng(20240601);
  auto uniform = [&](uint64_t n) { return rng() % n; };
  constexpr uint16_t kFreshLayer = 4242;  // never used by the fuzz below
  constexpr int kDatagrams = 4000;
  for (int i = 0; i < kDatagrams; ++i) {
    const size_t from = uniform(all.size());
    const bool from_member = from < joined.size();
    std::vector<uint8_t> d;
    switch (uniform(4)) {
      case 0: {  // random bytes (never management from members: a valid LEAVE would end the test)
        d.resize(uniform(600));
        for (auto& byte : d) byte = static_cast<uint8_t>(rng());
        if (!d.empty() && d[0] == wire::kMgmtMagic && from_member) d[0] = 0;
        break;
      }
      case 1: {  // a valid packet cut short
        CaisHeader h;
        h.group_id = 0;
        h.layer_id = static_cast<uint16_t>(uniform(8));
        h.seq_num = static_cast<uint32_t>(rng());
        h.payload_len = 4 * static_cast<uint32_t>(1 + uniform(64));
        std::vector<uint8_t> payload(h.payload_len, 0x3f);
        d = CaisPacket(h, payload);
        d.resize(uniform(d.size()));
        break;
      }
      case 2: {  // a well-formed header with hostile values
        CaisHeader h;
        h.op = static_cast<CaisOp>(uniform(5));  // 4 is unknown
        h.group_id = uniform(4) == 0 ? static_cast<uint8_t>(rng()) : 0;
        h.layer_id = static_cast<uint16_t>(uniform(3) == 0 ? rng() % 65535 : uniform(4));
        if (h.layer_id == kFreshLayer) h.layer_id = 0;
        h.total_chunks = static_cast<uint16_t>(uniform(3) == 0 ? 65535 : 1 + uniform(4));
        h.chunk_id = static_cast<uint16_t>(uniform(2) == 0 ? h.total_chunks - 1 - uniform(2)
                                                           : uniform(70000));
        h.seq_num = uniform(2) == 0 ? 0xFFFFFFFFu - static_cast<uint32_t>(uniform(3))
                                    : static_cast<uint32_t>(rng());
        h.reduce_op = static_cast<wire::ReduceOp>(uniform(5));
        h.dtype = static_cast<wire::DType>(uniform(5));
        const uint8_t flags[] = {0,
                                 wire::cais_flags::kResult,
                                 wire::cais_flags::kFallback,
                                 wire::cais_flags::kRetransmit,
                                 0x05,
                                 0xFF};
        h.flags = flags[uniform(std::size(flags))];
        h.block = static_cast<uint8_t>(rng());
        size_t payload = uniform(3) == 0 ? 0 : 2 * uniform(700);  // up to past max_payload_bytes
        h.payload_len =
            uniform(4) == 0 ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(payload);
        std::vector<uint8_t> bytes(payload);
        for (auto& byte : bytes) byte = static_cast<uint8_t>(rng());
        d = CaisPacket(h, bytes);
        break;
      }
      default: {
        if (from_member) {  // a clean contribution for a random chunk: fills slots, times out
          CaisHeader h;
          h.op = uniform(2) == 0 ? CaisOp::kAllReduce : static_cast<CaisOp>(uniform(4));
          h.group_id = 0;
          h.layer_id = static_cast<uint16_t>(uniform(4));
          h.seq_num = static_cast<uint32_t>(uniform(50));
          h.payload_len = 16;
          h.flags = uniform(3) == 0 ? wire::cais_flags::kRetransmit : 0;
          std::vector<uint8_t> payload(16, 0x40);
          d = CaisPacket(h, payload);
        } else {  // malformed (or valid) management from non-members
          MgmtMessage m =
              JoinMsg(static_cast<uint8_t>(uniform(4)), static_cast<uint16_t>(uniform(4)),
                      static_cast<uint16_t>(uniform(5)));
          m.type = static_cast<MgmtType>(1 + uniform(6));
          wire::SerializeMgmt(m, &d);
          switch (uniform(3)) {  // never valid: non-members must stay unknown
            case 0: d.resize(uniform(d.size())); break;
            case 1: d[1] = static_cast<uint8_t>(2 + uniform(250)); break;  // version
            default: d.push_back(0); break;                                // trailing byte
          }
        }
      }
    }
    all[from]->Send(port(), d);
    if (i % 50 == 49) Barrier(*all[from], port());  // pace, so the kernel loses nothing
  }

  // Time passes (no traffic): every fuzz chunk times out, every result ages out.
  const uint64_t sent = SentBy(all);
  ASSERT_TRUE(WaitFor(*server_,
                      [&](const SwitchCounters& k) {
                        return k.datagrams_rx == sent && k.sram.pending_chunks == 0 &&
                               k.sram.retained_chunks == 0 && k.sram.cells_pending == 0 &&
                               k.sram.cells_retained == 0;
                      }))
      << server_->counters().ToJson() << " sent=" << sent;

  SwitchCounters k = server_->counters();
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
  EXPECT_GT(k.unknown_sender, 0u);
  EXPECT_GT(k.mgmt_malformed, 0u);
  EXPECT_GT(k.reducer.dropped, 0u);
  EXPECT_GT(k.reducer.aggregated, 0u);
  EXPECT_GT(k.cais.timeouts, 0u);
  EXPECT_EQ(k.groups_formed, 1u);  // group 0 survived

  // The switch still reduces a fresh chunk correctly.
  for (Host* h : all) h->Drain();
  ReduceAndCheck(joined, 0, kFreshLayer, 1, {{1, -2, 3}, {4, 5, -6}, {0.5f, 0.25f, 0.125f}});

  ASSERT_TRUE(WaitFor(*server_, [](const SwitchCounters& c) {
    return c.sram.pending_chunks == 0 && c.sram.retained_chunks == 0;
  }));
  k = server_->counters();
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
  ASSERT_TRUE(running_->Join().ok());
  // After Run returns the snapshot is final and still adds up.
  EXPECT_TRUE(server_->counters().Conserved());
}

TEST_F(SwitchServerTest, IngressLossOneDropsEveryDataDatagram) {
  SwitchdConfig c = TestConfig();
  c.ingress_loss = 1.0;
  Start(c);
  Host a;
  ASSERT_EQ(JoinAll({&a}, 2).size(), 1u);  // management is never dropped
  constexpr int kN = 200;
  for (int i = 0; i < kN; ++i) a.Send(port(), F32Packet(2, 0, static_cast<uint32_t>(i), {1}));
  ASSERT_TRUE(
      WaitFor(*server_, [&](const SwitchCounters& k) { return k.datagrams_rx == a.sent(); }));
  SwitchCounters k = server_->counters();
  EXPECT_EQ(k.injected_ingress_loss, static_cast<uint64_t>(kN));
  EXPECT_EQ(k.reducer.rx_packets, 0u);
  EXPECT_EQ(k.datagrams_tx, 0u);
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
  EXPECT_FALSE(a.Recv(Clock::now() + milliseconds(50)).has_value());
}

TEST_F(SwitchServerTest, EgressLossOneDropsEveryResult) {
  SwitchdConfig c = TestConfig();
  c.egress_loss = 1.0;
  Start(c);
  Host a;
  ASSERT_EQ(JoinAll({&a}, 2).size(), 1u);
  for (uint32_t i = 0; i < 10; ++i) a.Send(port(), F32Packet(2, 0, i, {1, 2}));
  ASSERT_TRUE(WaitFor(*server_, [](const SwitchCounters& k) {
    return k.injected_egress_loss == 10;  // world 1: every contribution completes a chunk
  })) << server_->counters().ToJson();
  SwitchCounters k = server_->counters();
  EXPECT_EQ(k.cais.completed_chunks, 10u);
  EXPECT_EQ(k.datagrams_tx, 0u);
  EXPECT_TRUE(k.Conserved()) << k.ToJson();
}

TEST_F(SwitchServerTest, PartialLossIsSeededAndCounted) {
  SwitchdConfig c = TestConfig();
  c.ingress_loss = 0.5;
  c.loss_seed = 99;
  Start(c);
  Host a;
  ASSERT_EQ(JoinAll({&a}, 2).size(), 1u);
  constexpr uint64_t kN = 400;
  for (uint32_t i = 0; i < kN; ++i) a.Send(port(), F32Packet(2, 0, i, {1}));
  ASSERT_TRUE(
      WaitFor(*server_, [&](const SwitchCounters& k) { return k.datagrams_rx == a.sent(); }));
  SwitchCounters k = server_->counters();
  EXPECT_EQ(k.injected_ingress_loss + k.reducer.rx_packets, kN);
  EXPECT_GT(k.injected_ingress_loss, kN / 4);
  EXPECT_LT(k.injected_ingress_loss, 3 * kN / 4);
  EXPECT_TRUE(k.Conserved());
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
  ASSERT_TRUE(WaitFor(*server_, [&](const SwitchCounters& k) {
    return k.datagrams_tx == kChunks && k.cais.completed_chunks == kChunks;
  }));
  const SwitchCounters k = server_->counters();
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
  SwitchCounters k;
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

TEST(SwitchdUdpForwarderTest, ReflectsAndForwards) {
  UdpForwarderConfig c;
  c.listen = "127.0.0.1:0";
  auto f = UdpForwarder::Create(c);
  ASSERT_TRUE(f.ok()) << f.status();
  std::thread t([&] { (void)(*f)->Run(); });
  Host a;
  const std::vector<uint8_t> hello = {1, 2, 3};
  a.Send((*f)->local_port(), hello);
  auto back = a.Recv(Clock::now() + kDeadline);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, hello);
  (*f)->Stop();
  t.join();
  EXPECT_EQ((*f)->counters().datagrams_rx, 1u);
  EXPECT_EQ((*f)->counters().datagrams_tx, 1u);

  Host sink1, sink2;
  c.forward = {sink1.endpoint(), sink2.endpoint()};
  auto g = UdpForwarder::Create(c);
  ASSERT_TRUE(g.ok()) << g.status();
  std::thread t2([&] { (void)(*g)->Run(); });
  a.Send((*g)->local_port(), hello);
  EXPECT_EQ(sink1.Recv(Clock::now() + kDeadline), hello);
  EXPECT_EQ(sink2.Recv(Clock::now() + kDeadline), hello);
  (*g)->Stop();
  t2.join();
  EXPECT_EQ((*g)->counters().datagrams_tx, 2u);

  c.forward = {"nowhere"};
  EXPECT_FALSE(UdpForwarder::Create(c).ok());
  c.forward = {};
  c.batch_size = 0;
  EXPECT_FALSE(UdpForwarder::Create(c).ok());
}

}  // namespace
}  // namespace inca::switchd
