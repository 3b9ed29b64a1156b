// The simulator's client against the real one: three real Communicators
// (the client library as applications use it) all-reduce through a running
// SwitchServer, each behind a loopback UDP relay that records every datagram
// it exchanges with the switch; three simulated ranks (CaisRankNode, with
// the transport settings the Communicator derives from its options) run the
// same all-reduce, of the same inputs and with the same sequence number, on
// a simulated switch with the same reducer settings. Per rank, the CAIS
// datagrams the real and the simulated client send are the same, bit for
// bit and in the same order; so are the results the two switches send back
// (but for the one field that measures time, a RESULT's `block`: how long
// the contribution waited in the switch), and the reduced tensors.
//
// Timing: with no loss and timers far longer than the run, what a client
// sends does not depend on time, but for one thing no option turns off:
// the tail probe (TransportConfig::probe_timeout_rtts, after two smoothed
// round trips without progress), which a rank descheduled for a moment on a
// busy machine can set off in its peers. A probe is a result request (a
// header, RETRANSMIT, no payload) and is answered with PENDING or the result
// again. These are checked for what they must be and set aside; everything
// else must match exactly (and in a run without probes, everything does).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/transport_options.h"
#include "hostpath/tcp_store.h"
#include "inca/client/communicator.h"
#include "inca/sim/simulator.h"
#include "inca/wire/mgmt.h"
#include "sim/cais_nodes.h"
#include "sim/golden_trace.h"
#include "switchd/switch_server_test_util.h"

namespace inca::sim {
namespace {

using Datagram = std::vector<uint8_t>;

constexpr int kRanks = 3;
constexpr uint32_t kChunkBytes = 1024;  // TestConfig's largest payload
// 40 chunks of 256 f32, the last 10 elements short.
constexpr size_t kCount = 40 * (kChunkBytes / 4) - 10;
constexpr uint32_t kChunks = 40;

// One rank's link to the switch: the rank takes the relay's front socket for
// the switch; what arrives there goes on to the switch from the back socket,
// and what the switch sends the back socket goes on to the rank. Both
// directions are recorded in order (one socket each, so the order is the
// order of sending).
class Relay {
 public:
  explicit Relay(uint16_t switch_port) {
    front_ = Bind();
    back_ = Bind();
    switch_.sin_family = AF_INET;
    switch_.sin_port = htons(switch_port);
    switch_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    thread_ = std::thread([this] { Loop(); });
  }
  ~Relay() {
    Stop();
    ::close(front_);
    ::close(back_);
  }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  uint16_t port() const { return PortOf(front_); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // After Stop(): every datagram the rank sent, and every one sent to it.
  const std::vector<Datagram>& up() const { return up_; }
  const std::vector<Datagram>& down() const { return down_; }
  uint64_t send_errors() const { return send_errors_; }

 private:
  static int Bind() {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    const int big = 4 << 20;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    return fd;
  }
  static uint16_t PortOf(int fd) {
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    return ntohs(a.sin_port);
  }

  // Until stopped: everything readable on either socket, forwarded. The
  // 20 ms poll bounds how long Stop waits; it orders nothing.
  void Loop() {
    std::vector<uint8_t> buf(65536);
    while (!stop_) {
      pollfd p[2] = {{front_, POLLIN, 0}, {back_, POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      for (;;) {  // from the rank
        sockaddr_in from{};
        socklen_t len = sizeof(from);
        const ssize_t n = ::recvfrom(front_, buf.data(), buf.size(), MSG_DONTWAIT,
                                     reinterpret_cast<sockaddr*>(&from), &len);
        if (n < 0) break;
        rank_ = from;
        have_rank_ = true;
        up_.emplace_back(buf.begin(), buf.begin() + n);
        Forward(back_, buf.data(), static_cast<size_t>(n), switch_);
      }
      for (;;) {  // from the switch
        const ssize_t n = ::recv(back_, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n < 0) break;
        down_.emplace_back(buf.begin(), buf.begin() + n);
        if (have_rank_) Forward(front_, buf.data(), static_cast<size_t>(n), rank_);
      }
    }
  }
  void Forward(int fd, const uint8_t* d, size_t n, const sockaddr_in& to) {
    if (::sendto(fd, d, n, 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) !=
        static_cast<ssize_t>(n)) {
      ++send_errors_;
    }
  }

  int front_ = -1, back_ = -1;
  sockaddr_in switch_{}, rank_{};
  bool have_rank_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<Datagram> up_, down_;
  uint64_t send_errors_ = 0;
};

// Per rank: the CAIS datagrams it sent to the switch and got from it, in
// order, and its tensor after the all-reduce.
struct Exchange {
  std::vector<std::vector<Datagram>> sent, received;
  std::vector<std::vector<float>> results;
};

std::vector<Datagram> CaisOnly(const std::vector<Datagram>& all) {
  std::vector<Datagram> out;
  for (const Datagram& d : all) {
    if (!wire::IsMgmtDatagram(d)) out.push_back(d);
  }
  return out;
}

// The same all-reduce on simulated ranks and a simulated switch: every
// rank's datagrams as the switch takes and emits them (with no loss, what
// the rank sent and what it got).
Exchange Simulate(const cais::CaisConfig& cc, const client::TransportConfig& tc, uint32_t seq,
                  const std::vector<std::vector<float>>& inputs) {
  Simulator s;
  Network net(&s, /*seed=*/3);
  auto* sw = net.Add(*CaisSwitchNode::Create("switch", cc, kRanks));
  Exchange e;
  e.sent.resize(kRanks);
  e.received.resize(kRanks);
  sw->set_trace([&e](bool ingress, dp::PortId port, std::span<const uint8_t> p) {
    auto& to = ingress ? e.sent : e.received;
    if (port < to.size()) to[port].emplace_back(p.begin(), p.end());
  });
  e.results = inputs;
  int done = 0;
  std::vector<CaisRankNode*> nodes;
  LinkConfig lc;
  lc.rate_bps = 10e9;
  lc.delay_ns = 2000;
  for (int r = 0; r < kRanks; ++r) {
    nodes.push_back(net.Add(std::make_unique<CaisRankNode>("rank" + std::to_string(r), r, tc,
                                                           [&done](int) { ++done; })));
    net.Connect(nodes.back(), sw, lc);
  }
  net.Start();
  for (int r = 0; r < kRanks; ++r) {
    nodes[static_cast<size_t>(r)]->Begin(seq, &e.results[static_cast<size_t>(r)]);
  }
  s.RunUntil(TimeNs{10'000'000'000});
  EXPECT_EQ(done, kRanks);
  for (const CaisRankNode* n : nodes) {
    EXPECT_TRUE(n->result().complete);
    EXPECT_EQ(n->result().retransmitted + n->result().requests, 0u);
  }
  return e;
}

bool Parse(const Datagram& d, wire::CaisHeader* h) {
  wire::CaisPacketView v;
  if (wire::ParseCais(d, &v) != wire::CaisParseError::kOk) return false;
  *h = v.header;
  return true;
}

// A result request: a header with RETRANSMIT and no payload.
bool IsRequest(const Datagram& d) {
  wire::CaisHeader h;
  return Parse(d, &h) && h.has_flag(wire::cais_flags::kRetransmit) && h.payload_len == 0 &&
         d.size() == wire::kCaisHeaderBytes;
}

// A copy with a RESULT's switch wait (byte 19) cleared.
Datagram WithoutWait(Datagram d) {
  wire::CaisHeader h;
  if (Parse(d, &h) && h.has_flag(wire::cais_flags::kResult)) d[19] = 0;
  return d;
}

std::string Hex(const Datagram& d) {
  std::string s;
  for (size_t i = 0; i < std::min<size_t>(d.size(), wire::kCaisHeaderBytes + 8); ++i) {
    absl::StrAppend(&s, i == wire::kCaisHeaderBytes ? "| " : "",
                    absl::Hex(static_cast<unsigned>(d[i]), absl::kZeroPad2), " ");
  }
  return absl::StrCat(s, "(", d.size(), " bytes)");
}

// The first difference between what a real rank sent and what the simulated
// one sent ("" if none). Result requests of the real rank (tail probes) are
// set aside, each checked to be the request for a chunk the simulated rank
// sent; `requests` counts them.
std::string CompareSent(const std::vector<Datagram>& real, const std::vector<Datagram>& sim,
                        size_t* requests) {
  std::map<uint16_t, const Datagram*> sim_chunk;
  for (const Datagram& d : sim) {
    wire::CaisHeader h;
    if (!Parse(d, &h)) return "the simulated rank sent a malformed datagram";
    sim_chunk.emplace(h.chunk_id, &d);
  }
  *requests = 0;
  size_t i = 0;
  for (const Datagram& d : real) {
    if (IsRequest(d)) {
      ++*requests;
      wire::CaisHeader h;
      Parse(d, &h);
      auto it = sim_chunk.find(h.chunk_id);
      if (it == sim_chunk.end()) return absl::StrCat("a request for chunk ", h.chunk_id);
      // The request the core would send for that chunk: its header,
      // RETRANSMIT, no payload.
      wire::CaisHeader want;
      Parse(*it->second, &want);
      want.flags = wire::cais_flags::kRetransmit;
      want.payload_len = 0;
      Datagram w(wire::kCaisHeaderBytes);
      wire::SerializeCaisHeader(want, w);
      if (d != w) return absl::StrCat("request ", Hex(d), " is not ", Hex(w));
      continue;
    }
    if (i >= sim.size()) return absl::StrCat("the real rank sent more: ", Hex(d));
    if (d != sim[i]) {
      return absl::StrCat("datagram ", i, ": real ", Hex(d), ", simulated ", Hex(sim[i]));
    }
    ++i;
  }
  if (i != sim.size()) return absl::StrCat("the real rank sent ", i, " of ", sim.size());
  return "";
}

// The same for what the switches sent a rank, but for the switch wait.
// Answers to result requests (PENDING, or a result sent again) are set
// aside when the rank asked (`requests` > 0), a result sent again checked
// to be the first one.
std::string CompareReceived(const std::vector<Datagram>& real, const std::vector<Datagram>& sim,
                            size_t requests) {
  std::map<uint16_t, Datagram> first;
  size_t i = 0;
  for (const Datagram& raw : real) {
    const Datagram d = WithoutWait(raw);
    wire::CaisHeader h;
    if (!Parse(d, &h)) return absl::StrCat("a malformed datagram from the switch: ", Hex(d));
    if (requests > 0 && h.has_flag(wire::cais_flags::kPending)) continue;
    if (requests > 0 && first.count(h.chunk_id) != 0) {
      if (first[h.chunk_id] != d) return absl::StrCat("chunk ", h.chunk_id, " again, changed");
      continue;
    }
    first.emplace(h.chunk_id, d);
    if (i >= sim.size()) return absl::StrCat("the real switch sent more: ", Hex(d));
    const Datagram want = WithoutWait(sim[i]);
    if (d != want) {
      return absl::StrCat("datagram ", i, ": real ", Hex(d), ", simulated ", Hex(want));
    }
    ++i;
  }
  if (i != sim.size()) return absl::StrCat("the real switch sent ", i, " of ", sim.size());
  return "";
}

class SimVsClient : public switchd::server_test::SwitchServerTest,
                    public ::testing::WithParamInterface<const char*> {};

TEST_P(SimVsClient, TheRealAndTheSimulatedClientSendTheSameDatagrams) {
  switchd::SwitchdConfig config = switchd::server_test::TestConfig();
  // Timers far longer than the run: neither switch's clock decides
  // anything (a late rank's chunk is not handed back).
  config.cais.timeout_ns = 60'000 * dp::kNsPerMs;
  config.cais.result_hold_ns = 60'000 * dp::kNsPerMs;
  // Sums in port order (= rank order, see switch_port), whatever the order
  // the contributions arrive in, so that the results' bits are the inputs'.
  config.cais.deterministic = true;
  ASSERT_EQ(config.cais.max_payload_bytes, kChunkBytes);
  Start(config);
  auto store = hostpath::TcpStoreServer::Start("127.0.0.1:0");
  ASSERT_TRUE(store.ok()) << store.status();

  std::vector<std::unique_ptr<Relay>> relays;
  std::vector<CommunicatorOptions> options;
  for (int r = 0; r < kRanks; ++r) {
    relays.push_back(std::make_unique<Relay>(port()));
    CommunicatorOptions o;
    o.rank = r;
    o.world_size = kRanks;
    o.group_id = 0;  // the simulated switch's group
    o.switch_address = absl::StrCat("127.0.0.1:", relays.back()->port());
    o.store_address = absl::StrCat("127.0.0.1:", (*store)->port());
    o.serve_store = false;
    o.switch_port = r;  // port r is rank r, as in the simulation
    o.io = GetParam();
    o.chunk_size = kChunkBytes;
    o.max_pending_chunks = 8;
    o.job = 0x5157;  // given, so that creation needs no host round to agree on one
    // No retransmission timer within the run (the tail probe, see above, has
    // no option), and no operation leaves the switch for the host path.
    o.retransmit_timeout_ms = 10'000;
    o.max_retransmit_timeout_ms = 10'000;
    o.switch_timeout_ms = 20'000;
    o.host_timeout_ms = 30'000;
    o.join_timeout_ms = 10'000;
    o.require_switch = true;
    options.push_back(o);
  }

  // Inputs whose sum depends on the order of the additions.
  std::vector<std::vector<float>> inputs(kRanks, std::vector<float>(kCount));
  for (int r = 0; r < kRanks; ++r) {
    std::mt19937 g(static_cast<uint32_t>(1000 + r));
    std::uniform_real_distribution<float> u(-1e3f, 1e3f);
    for (float& x : inputs[static_cast<size_t>(r)]) x = u(g) * (r == 1 ? 1e-3f : 1.0f);
  }

  Exchange real;
  real.results = inputs;
  std::vector<absl::Status> status(kRanks);
  std::vector<CommunicatorStats> stats(kRanks);
  {
    std::vector<std::thread> ranks;
    for (size_t r = 0; r < kRanks; ++r) {
      ranks.emplace_back([&, r] {
        auto c = Communicator::Create(options[r]);
        if (!c.ok()) {
          status[r] = c.status();
          return;
        }
        status[r] = (*c)->AllReduce(real.results[r].data(), kCount, DType::kF32, ReduceOp::kSum);
        stats[r] = (*c)->stats();
      });  // the communicator leaves the group here (collectively)
    }
    for (auto& t : ranks) t.join();
  }
  for (auto& relay : relays) relay->Stop();
  for (int r = 0; r < kRanks; ++r) {
    const auto ur = static_cast<size_t>(r);
    ASSERT_TRUE(status[ur].ok()) << "rank " << r << ": " << status[ur];
    EXPECT_EQ(relays[ur]->send_errors(), 0u);
    EXPECT_EQ(stats[ur].ops_switch, 1u);
    EXPECT_EQ(stats[ur].ops_host, 0u);
    EXPECT_EQ(stats[ur].chunks_sent, kChunks);
    EXPECT_EQ(stats[ur].chunks_retransmitted, 0u);
    EXPECT_EQ(stats[ur].fallback_notices, 0u);
    real.sent.push_back(CaisOnly(relays[ur]->up()));
    real.received.push_back(CaisOnly(relays[ur]->down()));
  }

  // The group's first sequence number, from the switch's JOIN replies; the
  // communicator's first operation is the one after it.
  std::optional<uint32_t> seq_base;
  for (const auto& relay : relays) {
    for (const Datagram& d : relay->down()) {
      wire::MgmtMessage m;
      if (!wire::ParseMgmt(d, &m) || m.type != wire::MgmtType::kJoinReply ||
          m.status != wire::MgmtStatus::kOk) {
        continue;
      }
      if (!seq_base) seq_base = m.seq_base;
      EXPECT_EQ(m.seq_base, *seq_base);
    }
  }
  ASSERT_TRUE(seq_base.has_value()) << "no JOIN reply";
  const uint32_t seq = *seq_base + 1;

  const client::TransportConfig tc = client::TransportConfigFrom(options[0]);
  const Exchange sim = Simulate(config.cais, tc, seq, inputs);
  {
    // The simulated ranks' datagrams at a fixed sequence number (the real
    // switch's epoch is random) are what they were when recorded.
    const Exchange fixed = Simulate(config.cais, tc, 1'000'001, inputs);
    TraceDigest digest;
    for (size_t r = 0; r < fixed.sent.size(); ++r) {
      for (const Datagram& d : fixed.sent[r]) digest.Add(r, d);
      for (const Datagram& d : fixed.received[r]) digest.Add(0x10000u + r, d);
    }
    ExpectGolden("sim_vs_client", digest.Hex());
  }
  size_t probes = 0;
  for (int r = 0; r < kRanks; ++r) {
    const auto ur = static_cast<size_t>(r);
    ASSERT_EQ(sim.sent[ur].size(), kChunks);
    size_t requests = 0;
    EXPECT_EQ(CompareSent(real.sent[ur], sim.sent[ur], &requests), "") << "rank " << r;
    EXPECT_EQ(requests, stats[ur].result_requests) << "rank " << r;
    probes += requests;
    EXPECT_EQ(CompareReceived(real.received[ur], sim.received[ur], requests), "") << "rank " << r;
    // The reduced tensors, bit for bit: the real and the simulated, and
    // the rank-order sum.
    ASSERT_EQ(real.results[ur].size(), kCount);
    EXPECT_EQ(std::memcmp(real.results[ur].data(), sim.results[ur].data(), kCount * 4), 0)
        << "rank " << r;
    size_t wrong = 0;
    for (size_t i = 0; i < kCount; ++i) {
      const float want = inputs[0][i] + inputs[1][i] + inputs[2][i];
      wrong += std::memcmp(&want, &real.results[ur][i], 4) != 0;
    }
    EXPECT_EQ(wrong, 0u) << "rank " << r;
  }
  if (probes > 0) {
    std::printf("[   NOTE   ] the real ranks sent %zu tail-probe requests (timing), set aside\n",
                probes);
  }

  // The comparison sees a simulated rank that differs in any of these.
  auto differs = [&](const Exchange& other) {
    bool any = false;
    for (size_t r = 0; r < kRanks; ++r) {
      size_t requests = 0;
      any = any || CompareSent(real.sent[r], other.sent[r], &requests) != "" ||
            CompareReceived(real.received[r], other.received[r], requests) != "";
    }
    return any;
  };
  {
    client::TransportConfig small = tc;
    small.chunk_size = kChunkBytes / 2;
    EXPECT_TRUE(differs(Simulate(config.cais, small, seq, inputs))) << "chunk size";
  }
  EXPECT_TRUE(differs(Simulate(config.cais, tc, seq + 1, inputs))) << "sequence number";
  {
    std::vector<std::vector<float>> other = inputs;
    other[2][kCount - 1] = std::nextafter(other[2][kCount - 1], 1e9f);
    EXPECT_TRUE(differs(Simulate(config.cais, tc, seq, other))) << "payload";
  }
  {
    // No hook sets a simulated rank's flags: one datagram of its trace, changed.
    Exchange flagged = sim;
    Datagram& d = flagged.sent[1][7];
    wire::CaisHeader h;
    ASSERT_TRUE(Parse(d, &h));
    h.flags |= wire::cais_flags::kRetransmit;
    wire::SerializeCaisHeader(h, d);
    EXPECT_TRUE(differs(flagged)) << "flags";
  }
}

// The client's two socket I/O paths: UDP GSO batches (the default) and one
// datagram per message.
INSTANTIATE_TEST_SUITE_P(Io, SimVsClient, ::testing::Values("gso", "mmsg"));

}  // namespace
}  // namespace inca::sim
