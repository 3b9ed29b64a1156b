// inca-switchd's OLAF server over loopback UDP with an injected clock:
// peers' ports are leases (issue 18), the table holds 1,024 peers, and a
// peer the operator mapped in the cluster table is never refused for a full
// table.
#include "switchd/olaf_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "inca/wire/olaf.h"

namespace inca::switchd {
namespace {

constexpr dp::TimeNs kMs = dp::kNsPerMs;

class OlafServerTest : public ::testing::Test {
 protected:
  void Start(uint32_t lease_ms) {
    OlafServerConfig c;
    c.listen = "127.0.0.1:0";
    c.ps = "127.0.0.1:9";  // discard: nothing listens, the test never needs the PS
    c.program.egress_rate_bps = 0;
    c.program.max_workers = 2048;
    c.lease_ms = lease_ms;
    auto s = OlafServer::Create(c, clock_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    thread_ = std::thread([this] { (void)server_->Run(); });
  }
  void TearDown() override {
    if (!server_) return;
    server_->Stop();
    thread_.join();
    EXPECT_TRUE(server_->counters().Conserved()) << server_->counters().ToJson();
    for (const auto& [port, fd] : peers_) close(fd);
  }
  // A peer: a socket on a port the kernel picked, kept open for the test so
  // that no other process (tests run in parallel) can be given the same
  // port. Fixed ports here once collided with the switch's own ephemeral one.
  uint16_t NewPeer() {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    sockaddr_in me{};
    me.sin_family = AF_INET;
    me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof(me)), 0) << std::strerror(errno);
    socklen_t len = sizeof(me);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len), 0);
    const uint16_t port = ntohs(me.sin_port);
    peers_[port] = fd;
    return port;
  }
  // One UPDATE from the peer on `port`.
  void Send(uint16_t port) {
    const auto it = peers_.find(port);
    ASSERT_NE(it, peers_.end()) << port;
    olaf::UpdateHeader h;
    h.cluster_id = 1;
    h.gen_time_ns = clock_.NowNs();
    const std::vector<uint8_t> pkt = olaf::BuildUpdate(h, std::vector<uint8_t>(16, 0));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(server_->local_port());
    ASSERT_EQ(
        sendto(it->second, pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
        static_cast<ssize_t>(pkt.size()));
  }
  // Bounded wait (10 s) for the switch thread to reach a state.
  template <typename F>
  bool Eventually(F done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done(server_->counters())) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
  size_t Workers() {
    size_t n = 0;
    server_->Execute([&](OlafServer::Control& c) { n = c.program.worker_count(); });
    return n;
  }

  net::SharedManualClock clock_{1'000'000'000};
  std::unique_ptr<OlafServer> server_;
  std::thread thread_;
  std::map<uint16_t, int> peers_;  // source port -> socket
};

TEST_F(OlafServerTest, ASilentPeerLosesItsPortAndWorkersAfterALease) {
  Start(/*lease_ms=*/200);
  const uint16_t a = NewPeer();
  const uint16_t b = NewPeer();
  Send(a);
  ASSERT_TRUE(Eventually([](const auto& c) { return c.datagrams_rx == 1; }));
  EXPECT_EQ(server_->counters().ports_bound, 2u);  // the PS and the peer
  EXPECT_EQ(server_->counters().lease_ms, 200u);
  EXPECT_EQ(Workers(), 1u);
  // Traffic renews: 150 ms, a datagram, 150 ms more and another peer's
  // datagram (which makes the switch look at the time): still bound.
  clock_.Advance(150 * kMs);
  Send(a);
  ASSERT_TRUE(Eventually([](const auto& c) { return c.datagrams_rx == 2; }));
  clock_.Advance(150 * kMs);
  Send(b);
  ASSERT_TRUE(Eventually([](const auto& c) { return c.datagrams_rx == 3; }));
  EXPECT_EQ(server_->counters().peers_expired, 0u);
  EXPECT_EQ(server_->counters().ports_bound, 3u);
  // 60 ms later the first peer has been silent 210 ms, the second 60 ms.
  clock_.Advance(60 * kMs);
  ASSERT_TRUE(Eventually([](const auto& c) { return c.peers_expired == 1; }));
  EXPECT_EQ(server_->counters().ports_bound, 2u);
  EXPECT_EQ(Workers(), 1u);  // the first peer's worker is forgotten with its port
  clock_.Advance(200 * kMs);
  ASSERT_TRUE(Eventually([](const auto& c) { return c.peers_expired == 2; }));
  EXPECT_EQ(server_->counters().ports_bound, 1u);  // the PS's static port stays
  EXPECT_EQ(Workers(), 0u);
  // A peer that comes back is bound again by its next datagram.
  Send(a);
  ASSERT_TRUE(Eventually([](const auto& c) { return c.ports_bound == 2; }));
  EXPECT_EQ(Workers(), 1u);
}

TEST_F(OlafServerTest, AThousandPeersThenOperatorMappedOnesStillGetAPort) {
  Start(/*lease_ms=*/10'000);
  // 1,023 peers and the PS: every port. Each peer's socket stays open, so the
  // test needs about 2,100 descriptors (the switch binds one per peer too).
  rlimit nofile{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &nofile), 0);
  if (nofile.rlim_cur < 4096 && nofile.rlim_max > nofile.rlim_cur) {
    nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 4096);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &nofile), 0);
  }
  for (uint16_t p = 0; p < 1023; ++p) {
    Send(NewPeer());
    if (p % 64 == 63) {  // keep the switch's receive buffer shallow
      ASSERT_TRUE(Eventually([p](const auto& c) { return c.datagrams_rx == p + 1u; }));
    }
  }
  ASSERT_TRUE(Eventually([](const auto& c) { return c.datagrams_rx == 1023; }));
  EXPECT_EQ(server_->counters().ports_bound, 1024u);
  EXPECT_EQ(Workers(), 1023u);
  const uint16_t late = NewPeer();
  Send(late);  // unmapped: refused
  ASSERT_TRUE(Eventually([](const auto& c) { return c.datagrams_rx == 1024; }));
  EXPECT_EQ(server_->counters().ports_exhausted, 1u);
  // The operator maps the late peer's source port: it now takes the place of the
  // longest-silent unmapped peer.
  server_->Execute(
      [late](OlafServer::Control& c) { ASSERT_TRUE(c.program.cluster_table().Set(late, 5).ok()); });
  Send(late);
  ASSERT_TRUE(Eventually([](const auto& c) { return c.datagrams_rx == 1025; }));
  const counters::OlafServerCounters c = server_->counters();
  EXPECT_EQ(c.ports_exhausted, 1u);
  EXPECT_EQ(c.peers_evicted, 1u);
  EXPECT_EQ(c.ports_bound, 1024u);
  EXPECT_EQ(c.olaf.updates_rx, 1024u);  // the refused one never reached the program
  EXPECT_EQ(Workers(), 1023u);          // one forgotten, one learned
}

}  // namespace
}  // namespace inca::switchd
