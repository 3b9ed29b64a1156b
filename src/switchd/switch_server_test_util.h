// The helpers and fixture of the SwitchServer tests: hosts on loopback UDP,
// management requests, CAIS packets and a running switch.
#pragma once

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

namespace inca::switchd::server_test {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using wire::CaisHeader;
using wire::CaisOp;
using wire::MgmtMessage;
using wire::MgmtStatus;
using wire::MgmtType;

inline constexpr auto kDeadline = milliseconds(5000);

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

inline uint64_t SentBy(const std::vector<Host*>& hosts) {
  uint64_t n = 0;
  for (const Host* h : hosts) n += h->sent();
  return n;
}

// Sends `m` and waits for the reply with the same nonce, resending every
// 500 ms (loopback can drop under load). Skips CAIS traffic.
inline std::optional<MgmtMessage> Request(const Host& h, uint16_t switch_port, MgmtMessage m) {
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

inline MgmtMessage JoinMsg(uint8_t group, uint16_t rank, uint16_t world) {
  MgmtMessage m;
  m.type = MgmtType::kJoin;
  m.group_id = group;
  m.rank = rank;
  m.world_size = world;
  return m;
}

// A PING round trip: every datagram `h` sent before it has been handled.
inline void Barrier(const Host& h, uint16_t switch_port) {
  MgmtMessage m;
  m.type = MgmtType::kPing;
  m.group_id = 250;  // nobody's group: PONG unknown
  ASSERT_TRUE(Request(h, switch_port, m).has_value());
}

inline std::vector<uint8_t> CaisPacket(const CaisHeader& h, std::span<const uint8_t> payload) {
  return wire::SerializeCais(h, payload);
}

inline std::vector<uint8_t> F32Packet(uint8_t group, uint16_t layer, uint32_t seq,
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

inline SwitchdConfig TestConfig() {
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
inline bool WaitFor(const SwitchServer& s,
                    const std::function<bool(const counters::SwitchCounters&)>& pred) {
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

}  // namespace inca::switchd::server_test
