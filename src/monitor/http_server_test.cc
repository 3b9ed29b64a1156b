// MonitorServer over real loopback TCP, fetched with cpp-httplib's client.
#include "monitor/http_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "monitor/httplib_include.h"
#include "monitor/json_check.h"
#include "monitor/prometheus_text_check.h"

namespace inca::monitor {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Optional;
using ::testing::StartsWith;

// A fake source: a fixed snapshot and a call counter.
struct FakeSource {
  std::atomic<int> calls{0};
  MonitorServer::Source Fn() {
    return [this] {
      ++calls;
      MetricsSnapshot s;
      s.switch_counters.datagrams_rx = 42;
      s.switch_counters.sram.sram_bytes = 1000;
      s.switch_counters.sram.cell_bytes = 10;
      s.switch_counters.sram.cells_pending = 30;
      GroupMetrics g;
      g.group_id = 3;
      g.counters.completed_chunks = 9;
      s.groups.push_back(g);
      return s;
    };
  }
};

std::unique_ptr<MonitorServer> StartOrDie(MonitorServer::Source source,
                                          const MonitorOptions& options = {}) {
  auto server = MonitorServer::Start("127.0.0.1:0", std::move(source), options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

httplib::Client ClientFor(const MonitorServer& server) {
  httplib::Client cli(server.host(), server.port());
  cli.set_connection_timeout(std::chrono::seconds(2));
  cli.set_read_timeout(std::chrono::seconds(5));
  return cli;
}

// A server over a FakeSource on an ephemeral port, and a client for it.
class ServedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server = StartOrDie(fake.Fn());
    ASSERT_NE(server, nullptr);
    cli = std::make_unique<httplib::Client>(ClientFor(*server));
  }
  FakeSource fake;
  std::unique_ptr<MonitorServer> server;
  std::unique_ptr<httplib::Client> cli;
};

TEST_F(ServedTest, ServesMetrics) {
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->url(), "http://127.0.0.1:" + std::to_string(server->port()) + "/");
  auto res = cli->Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(res->get_header_value("Cache-Control"), "no-store");
  const PromCheckResult r = CheckPrometheusText(res->body);
  EXPECT_THAT(r.errors, IsEmpty());
  EXPECT_THAT(r.Value("inca_switch_datagrams_received_total"), Optional(42.0));
  EXPECT_THAT(r.Value("inca_cais_group_completed_chunks_total{group=\"3\"}"), Optional(9.0));
  EXPECT_THAT(r.Value("inca_sram_pending_usage_ratio"), Optional(0.3));
  EXPECT_EQ(fake.calls.load(), 1);
}

TEST_F(ServedTest, ServesStatsJson) {
  auto res = cli->Get("/stats.json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(CheckJson(res->body), "") << res->body;
  EXPECT_THAT(res->body, HasSubstr("\"pending_usage_ratio\":0.3"));
  EXPECT_THAT(res->body, HasSubstr("\"group\":3,"));
  // The regex route is exact: the '.' is not a wildcard.
  auto near = cli->Get("/statsXjson");
  ASSERT_TRUE(near);
  EXPECT_EQ(near->status, 404);
}

TEST_F(ServedTest, ServesASelfContainedDashboard) {
  auto res = cli->Get("/");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_THAT(res->get_header_value("Content-Security-Policy"), HasSubstr("default-src 'none'"));
  const std::string& html = res->body;
  EXPECT_THAT(html, StartsWith("<!DOCTYPE html>"));
  for (const char* id : {"sram-value", "throughput-value", "delay-value", "fallback-value",
                         "offload-value", "sram-chart", "offload-chart", "poll-count"}) {
    EXPECT_THAT(html, HasSubstr(std::string("id=\"") + id + "\"")) << id;
  }
  EXPECT_THAT(html, HasSubstr("fetch('stats.json'"));
  // No external resources: no absolute URLs at all, no external script/style.
  EXPECT_THAT(html, Not(HasSubstr("://")));
  EXPECT_THAT(html, Not(HasSubstr("<script src")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_EQ(fake.calls.load(), 0);  // the page itself needs no snapshot
}

TEST_F(ServedTest, HealthzAndNotFound) {
  auto ok = cli->Get("/healthz");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "ok\n");
  EXPECT_THAT(ok->get_header_value("Content-Type"), StartsWith("text/plain"));
  for (const char* path : {"/nope", "/metrics/x", "/index.html", "/healthz/"}) {
    auto res = cli->Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 404) << path;
    EXPECT_EQ(res->body, "404 Not Found\n") << path;
  }
  auto post = cli->Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_GE(post->status, 400);
  EXPECT_EQ(fake.calls.load(), 0);
}

TEST_F(ServedTest, RefusesOversizedRequests) {
  auto body = cli->Post("/metrics", std::string(64 * 1024, 'x'), "text/plain");
  if (body) {  // or the connection is cut
    EXPECT_EQ(body->status, 413);
  }
  auto uri = cli->Get("/" + std::string(16 * 1024, 'a'));
  if (uri) {
    EXPECT_EQ(uri->status, 414);
  }
  auto after = cli->Get("/healthz");  // still serving
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

TEST(MonitorServer, SourceFailureIs500) {
  auto server = StartOrDie([]() -> MetricsSnapshot { throw std::runtime_error("boom"); });
  ASSERT_NE(server, nullptr);
  auto cli = ClientFor(*server);
  auto res = cli.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  auto ok = cli.Get("/healthz");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(ServedTest, ManyConcurrentClientsOnTwoWorkers) {
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&] {
      auto own = ClientFor(*server);  // one connection per thread
      for (int i = 0; i < 15; ++i) {
        auto res = own.Get(i % 2 ? "/metrics" : "/stats.json");
        if (res && res->status == 200) ++good;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(good.load(), 90);
  EXPECT_EQ(fake.calls.load(), 90);
}

// Connects `fd` to the server on 127.0.0.1:port.
void ConnectLoopback(int fd, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
}

// Opens a TCP connection to the server and sends nothing.
int IdleConnection(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ConnectLoopback(fd, port);
  return fd;
}

TEST(MonitorServer, IdleConnectionsTimeOutAndStopStaysBounded) {
  FakeSource fake;
  MonitorOptions options;
  options.idle_timeout = std::chrono::seconds(1);
  auto server = StartOrDie(fake.Fn(), options);
  ASSERT_NE(server, nullptr);
  // Both workers held by clients that never speak...
  const int a = IdleConnection(server->port());
  const int b = IdleConnection(server->port());
  // ...are dropped after idle_timeout, so a real request still gets through.
  const auto t0 = std::chrono::steady_clock::now();
  auto cli = ClientFor(*server);
  auto res = cli.Get("/healthz");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  const int c = IdleConnection(server->port());
  const auto t1 = std::chrono::steady_clock::now();
  server->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(4));
  server->Stop();  // idempotent
  ::close(a);
  ::close(b);
  ::close(c);
}

// Issue 18: httplib queued every accepted connection without bound. With
// two workers held by silent clients, at most max_queued_connections more
// wait in the server; the rest wait in the kernel's backlog, and every one
// is served or dropped in turn, so a real request still gets through.
TEST(MonitorServer, AcceptedConnectionsWaitingForAWorkerAreBounded) {
  FakeSource fake;
  MonitorOptions options;
  options.idle_timeout = std::chrono::seconds(1);
  options.max_queued_connections = 2;
  auto server = StartOrDie(fake.Fn(), options);
  ASSERT_NE(server, nullptr);
  std::vector<int> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(IdleConnection(server->port()));
  auto cli = ClientFor(*server);
  cli.set_connection_timeout(20);
  cli.set_read_timeout(20);
  auto res = cli.Get("/healthz");  // accepted after all eight
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(server->queued_high_water(), 2u);  // never more, though six waited
  for (int fd : idle) ::close(fd);
  MonitorOptions none;
  none.max_queued_connections = 0;
  EXPECT_EQ(MonitorServer::Start("127.0.0.1:0", fake.Fn(), none).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Opens a TCP connection to the server from `source` (a loopback address).
int ConnectionFrom(const char* source, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  EXPECT_EQ(::inet_pton(AF_INET, source, &from.sin_addr), 1);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
  ConnectLoopback(fd, port);
  return fd;
}

// Whether the server has closed `fd` (EOF or a reset) within `timeout`.
bool ClosedByServer(int fd, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[256];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
  }
}

// Issue 46: 40 clients sending their request line a byte at a time held
// both workers for as long as they kept sending (read_timeout bounds only
// the gap between bytes), /healthz timed out, and the server never closed
// them. Now one address holds at most max_connections_per_client
// connections (the rest are closed at once) and a request not in by
// request_timeout has its connection closed.
TEST(MonitorServer, SlowClientsAreCutOffAndHealthzStillAnswers) {
  FakeSource fake;
  MonitorOptions options;
  options.request_timeout = std::chrono::milliseconds(1000);
  options.max_connections_per_client = 4;
  auto server = StartOrDie(fake.Fn(), options);
  ASSERT_NE(server, nullptr);
  std::vector<int> slow;
  for (int i = 0; i < 40; ++i) slow.push_back(ConnectionFrom("127.0.0.2", server->port()));
  struct Trickle {
    std::atomic<bool> done{false};
    std::thread thread;
    ~Trickle() {
      done.store(true);
      if (thread.joinable()) thread.join();
    }
  } trickle;
  trickle.thread = std::thread([&] {
    while (!trickle.done.load()) {  // the scenario: one more byte of the request line every 200 ms
      for (int fd : slow) ::send(fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto cli = ClientFor(*server);  // from 127.0.0.1
  cli.set_read_timeout(std::chrono::seconds(10));
  auto res = cli.Get("/healthz");
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  // Two workers, four slow connections admitted ahead of it, one second
  // each: about two seconds.
  EXPECT_LT(took, std::chrono::seconds(4));
  // Every slow connection is closed by the server: at once beyond the
  // per-client cap, after request_timeout within it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (size_t i = 0; i < slow.size(); ++i) {
    EXPECT_TRUE(ClosedByServer(slow[i], deadline)) << "slow connection " << i << " still open";
  }
  trickle.done.store(true);
  trickle.thread.join();
  EXPECT_GE(server->refused_over_client_limit(), 1u);
  EXPECT_EQ(server->refused_over_client_limit() + server->closed_for_request_timeout(), 40u);
  // The slow clients' address is served again once its connections are gone.
  const int again = ConnectionFrom("127.0.0.2", server->port());
  const std::string get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(again, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
  char reply[64] = {};
  EXPECT_GT(::recv(again, reply, sizeof(reply) - 1, 0), 0);
  EXPECT_THAT(std::string(reply), StartsWith("HTTP/1.1 200"));
  for (int fd : slow) ::close(fd);
  ::close(again);
  MonitorOptions bad;
  bad.max_connections_per_client = 0;
  EXPECT_EQ(MonitorServer::Start("127.0.0.1:0", fake.Fn(), bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ServedTest, StopClosesTheListener) {
  const uint16_t port = server->port();
  server->Stop();
  httplib::Client other("127.0.0.1", port);
  other.set_connection_timeout(std::chrono::seconds(1));
  EXPECT_FALSE(other.Get("/healthz"));
  server.reset();  // destructor after Stop() is fine
}

TEST(MonitorServer, RejectsBadListenAddresses) {
  FakeSource fake;
  for (const char* listen : {"", "127.0.0.1", "127.0.0.1:", ":9411", "127.0.0.1:65536",
                             "127.0.0.1:-1", "127.0.0.1:9x", "::1:9411", "[::1]9411", "[::1"}) {
    auto server = MonitorServer::Start(listen, fake.Fn());
    ASSERT_FALSE(server.ok()) << listen;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << listen;
  }
  auto no_source = MonitorServer::Start("127.0.0.1:0", nullptr);
  EXPECT_EQ(no_source.status().code(), absl::StatusCode::kInvalidArgument);
  MonitorOptions zero;
  zero.threads = 0;
  EXPECT_EQ(MonitorServer::Start("127.0.0.1:0", fake.Fn(), zero).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MonitorServer, PortInUseIsUnavailable) {
  FakeSource fake;
  auto first = StartOrDie(fake.Fn());
  ASSERT_NE(first, nullptr);
  auto second = MonitorServer::Start("127.0.0.1:" + std::to_string(first->port()), fake.Fn());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(MonitorServer, ServesOnIpv6Loopback) {
  FakeSource fake;
  auto server = MonitorServer::Start("[::1]:0", fake.Fn());
  ASSERT_TRUE(server.ok()) << "no IPv6 loopback here: " << server.status();
  EXPECT_EQ((*server)->url(), "http://[::1]:" + std::to_string((*server)->port()) + "/");
  httplib::Client cli("::1", (*server)->port());
  auto res = cli.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

}  // namespace
}  // namespace inca::monitor
