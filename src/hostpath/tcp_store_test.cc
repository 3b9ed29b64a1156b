#include "hostpath/tcp_store.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gtest/gtest.h"

namespace inca::hostpath {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kConnectTimeout{5000};
// Long enough never to expire in a passing test; tests that expect an
// unblock assert on the status code, not on elapsed time.
constexpr milliseconds kLongTimeout{20000};

std::unique_ptr<TcpStoreServer> StartServer() {
  auto server = TcpStoreServer::Start("127.0.0.1:0");
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

std::string Addr(const TcpStoreServer& server) {
  return absl::StrCat("127.0.0.1:", server.port());
}

// The kernel's count of this network namespace's refused TCP connects
// (AttemptFails in /proc/net/snmp); 0 if it cannot be read.
uint64_t RefusedConnects() {
  std::ifstream snmp("/proc/net/snmp");
  std::string names, values;
  while (std::getline(snmp, names) && std::getline(snmp, values)) {
    if (names.rfind("Tcp:", 0) != 0) continue;
    std::istringstream n(names), v(values);
    std::string name, value;
    while (n >> name && v >> value) {
      if (name == "AttemptFails") return std::stoull(value);
    }
  }
  return 0;
}

// Until the server holds `n` requests open (they have blocked), bounded.
bool Holding(const TcpStoreServer& server, size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + kConnectTimeout;
  while (server.waiting() != n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

std::shared_ptr<TcpStore> Client(const TcpStoreServer& server) {
  auto store = TcpStore::Connect(Addr(server), kConnectTimeout);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *store : nullptr;
}

// --- raw-socket helpers speaking the wire protocol (see tcp_store.cc) ---

void PutU32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string Request(uint8_t op, const std::string& key, const std::string& payload) {
  std::string f;
  PutU32(f, static_cast<uint32_t>(5 + key.size() + payload.size()));
  f.push_back(static_cast<char>(op));
  PutU32(f, static_cast<uint32_t>(key.size()));
  f += key;
  f += payload;
  return f;
}

int RawConnect(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&sin), sizeof(sin)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendRaw(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads exactly `len` bytes; false on EOF/error/5 s without data (a safety
// net so a broken server fails the test instead of hanging it).
bool RecvRaw(int fd, char* out, size_t len) {
  size_t off = 0;
  while (off < len) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) return false;
    const ssize_t n = recv(fd, out + off, len - off, 0);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// True once the server has closed `fd` (reads until EOF, discarding data).
bool ServerClosed(int fd) {
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) return false;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

// Reads one reply frame; returns its status code byte, or -1.
int ReadReplyCode(int fd, std::string* payload = nullptr) {
  char header[4];
  if (!RecvRaw(fd, header, 4)) return -1;
  uint32_t len = 0;
  for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(header[i]);
  if (len < 1) return -1;
  std::string body(len, '\0');
  if (!RecvRaw(fd, body.data(), len)) return -1;
  if (payload != nullptr) *payload = body.substr(1);
  return static_cast<uint8_t>(body[0]);
}

TEST(TcpStoreTest, ASelfConnectedSocketIsRecognised) {
  // What a client retrying a local port nobody listens on can end up with
  // (seen in CI: the server then could not bind its port): bound to a port
  // and connected to that same address, Linux's simultaneous open connects
  // the socket to itself.
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ASSERT_EQ(connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
  EXPECT_TRUE(IsSelfConnected(s));
  close(s);
  // A real client of a real server is not.
  auto server = TcpStoreServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  const int c = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(static_cast<uint16_t>((*server)->port()));
  ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  EXPECT_FALSE(IsSelfConnected(c));
  EXPECT_FALSE(IsSelfConnected(-1));
  close(c);
}

TEST(TcpStoreTest, SetGetRoundTrip) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  EXPECT_NE(server->port(), 0);
  auto a = Client(*server);
  auto b = Client(*server);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);

  ASSERT_TRUE(a->Set("k", "v1").ok());
  auto v = b->Get("k", kLongTimeout);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v1");

  // Overwrite, binary data with NULs, empty value, empty key.
  const std::string binary("a\0b\xff\x00z", 6);
  ASSERT_TRUE(a->Set("k", binary).ok());
  EXPECT_EQ(*b->Get("k", kLongTimeout), binary);
  ASSERT_TRUE(a->Set("empty", "").ok());
  EXPECT_EQ(*b->Get("empty", kLongTimeout), "");
  ASSERT_TRUE(a->Set("", "no key").ok());
  EXPECT_EQ(*b->Get("", kLongTimeout), "no key");
}

TEST(TcpStoreTest, GlooInterface) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto a = Client(*server);
  ASSERT_NE(a, nullptr);
  gloo::rendezvous::Store& store = *a;
  const std::vector<char> data = {'x', '\0', 'y'};
  store.set("g1", data);
  store.set("g2", {});
  store.wait({"g1", "g2"});
  store.wait({"g1", "g2"}, milliseconds(1000));
  EXPECT_EQ(store.get("g1"), data);
  EXPECT_TRUE(store.get("g2").empty());
}

TEST(TcpStoreTest, GetBlocksUntilLaterSetFromAnotherClient) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto waiter = Client(*server);
  auto setter = Client(*server);
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(setter, nullptr);

  absl::StatusOr<std::string> got = absl::UnknownError("not run");
  std::vector<char> gloo_got;
  std::thread t([&] { got = waiter->Get("late", kLongTimeout); });
  auto waiter2 = Client(*server);
  ASSERT_NE(waiter2, nullptr);
  std::thread t2([&] { gloo_got = waiter2->get("late"); });  // Gloo's blocking get
  EXPECT_TRUE(Holding(*server, 2));                          // both have blocked
  ASSERT_TRUE(setter->Set("late", "value").ok());
  t.join();
  t2.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "value");
  EXPECT_EQ(std::string(gloo_got.begin(), gloo_got.end()), "value");
}

TEST(TcpStoreTest, WaitBlocksUntilAdd) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto waiter = Client(*server);
  auto adder = Client(*server);
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(adder, nullptr);
  bool threw = false;
  std::thread t([&] {
    try {
      waiter->wait({"counter"}, kLongTimeout);
    } catch (const std::exception&) {
      threw = true;
    }
  });
  EXPECT_TRUE(Holding(*server, 1));  // the WAIT has blocked
  auto n = adder->Add("counter", 3);
  t.join();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 3);
  EXPECT_FALSE(threw);
  EXPECT_EQ(*waiter->Get("counter", kLongTimeout), "3");
}

TEST(TcpStoreTest, GetTimesOutWithStatusAndClientRecovers) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto a = Client(*server);
  ASSERT_NE(a, nullptr);
  auto v = a->Get("missing", milliseconds(100));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded) << v.status();

  // The abandoned GET must not answer a later request: once "missing"
  // appears, the same client still gets the right replies.
  auto b = Client(*server);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->Set("missing", "now here").ok());
  ASSERT_TRUE(a->Set("other", "o").ok());
  EXPECT_EQ(*a->Get("other", kLongTimeout), "o");
  EXPECT_EQ(*a->Get("missing", kLongTimeout), "now here");

  // Gloo's form throws gloo::IoException.
  EXPECT_THROW(a->wait({"never"}, milliseconds(50)), gloo::IoException);
  EXPECT_EQ(*a->Get("other", kLongTimeout), "o");
}

TEST(TcpStoreTest, AddCounterFromManyThreads) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  constexpr int kThreads = 8;
  constexpr int kAddsPerThread = 100;
  auto shared = Client(*server);  // half the threads share one client
  ASSERT_NE(shared, nullptr);
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::shared_ptr<TcpStore> own = t % 2 == 0 ? shared : Client(*server);
      ASSERT_NE(own, nullptr);
      for (int i = 0; i < kAddsPerThread; ++i) {
        auto r = own->Add("n", 1);
        ASSERT_TRUE(r.ok()) << r.status();
        seen[static_cast<size_t>(t)].push_back(*r);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<int64_t> all;
  for (const auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kAddsPerThread));
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], static_cast<int64_t>(i + 1));
  EXPECT_EQ(*shared->Add("n", -800), 0);
  EXPECT_EQ(*shared->Add("n", 0), 0);
}

TEST(TcpStoreTest, AddErrors) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto a = Client(*server);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->Set("text", "hello").ok());
  EXPECT_EQ(a->Add("text", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*a->Get("text", kLongTimeout), "hello");  // unchanged
  ASSERT_TRUE(a->Add("big", INT64_MAX).ok());
  EXPECT_EQ(a->Add("big", 1).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*a->Add("big", -1), INT64_MAX - 1);
  ASSERT_TRUE(a->Set("num", "41").ok());
  EXPECT_EQ(*a->Add("num", 1), 42);
}

TEST(TcpStoreTest, OversizedKeyOrValueRefused) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto a = Client(*server);
  ASSERT_NE(a, nullptr);
  const std::string max_key(4096, 'k');
  const std::string long_key(4097, 'k');
  EXPECT_EQ(a->Set(long_key, "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a->Get(long_key, kLongTimeout).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a->Add(long_key, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THROW(a->set(long_key, {'v'}), gloo::IoException);

  const size_t kMaxValue = 64u << 20;
  std::string big(kMaxValue + 1, 'v');
  EXPECT_EQ(a->Set("big", big).code(), absl::StatusCode::kInvalidArgument);
  big.pop_back();  // exactly at the limit: accepted
  big[12345] = 'x';
  ASSERT_TRUE(a->Set(max_key, big).ok());
  auto v = a->Get(max_key, kLongTimeout);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(*v == big);

  // A raw frame claiming a body over the largest legal request closes
  // that connection without the server reading (or buffering) it.
  const int fd = RawConnect(server->port());
  ASSERT_GE(fd, 0);
  std::string frame;
  PutU32(frame, static_cast<uint32_t>(5 + 4096 + kMaxValue + 1));
  frame.push_back(1);
  PutU32(frame, 1);
  frame += "k";
  ASSERT_TRUE(SendRaw(fd, frame));
  EXPECT_TRUE(ServerClosed(fd));
  close(fd);
  ASSERT_TRUE(a->Set("after", "ok").ok());
  EXPECT_EQ(*a->Get("after", kLongTimeout), "ok");
}

TEST(TcpStoreTest, MalformedRequestClosesOnlyThatConnection) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto good = Client(*server);
  auto waiter = Client(*server);
  ASSERT_NE(good, nullptr);
  ASSERT_NE(waiter, nullptr);
  ASSERT_TRUE(good->Set("before", "1").ok());

  // A legitimate client blocked in GET across all the bad connections.
  absl::StatusOr<std::string> waited = absl::UnknownError("not run");
  std::thread t([&] { waited = waiter->Get("gate", kLongTimeout); });

  std::string bad_key_len;  // key_len beyond the body
  PutU32(bad_key_len, 5 + 2);
  bad_key_len.push_back(1);
  PutU32(bad_key_len, 100);
  bad_key_len += "ab";
  std::string huge_key_len;  // key_len over 4 KiB
  PutU32(huge_key_len, 5);
  huge_key_len.push_back(2);
  PutU32(huge_key_len, 5000);
  std::string too_short;  // body shorter than op + key_len
  PutU32(too_short, 2);
  too_short += "xx";
  const std::vector<std::string> bad = {
      Request(0x7f, "k", ""),      // unknown op
      Request(0, "k", ""),         // op 0
      Request(3, "k", "1234567"),  // ADD payload not 8 bytes
      Request(2, "k", "junk"),     // GET with a payload
      Request(4, "k", "junk"),     // WAIT with a payload
      bad_key_len,
      huge_key_len,
      too_short,
      std::string("\xff\xff\xff\xff garbage garbage", 20),
      // A valid SET followed by garbage: the SET is served, then closed.
      Request(1, "via-raw", "raw") + Request(9, "", ""),
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    const int fd = RawConnect(server->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendRaw(fd, bad[i]));
    EXPECT_TRUE(ServerClosed(fd));
    close(fd);
  }
  // A client that sends half a frame and hangs up, and one that leaves a
  // GET pending and hangs up, leave no trace.
  {
    const int fd = RawConnect(server->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendRaw(fd, Request(1, "half", "value").substr(0, 7)));
    close(fd);
    const int fd2 = RawConnect(server->port());
    ASSERT_GE(fd2, 0);
    ASSERT_TRUE(SendRaw(fd2, Request(2, "gate", "")));
    close(fd2);
  }

  EXPECT_EQ(*good->Get("before", kLongTimeout), "1");
  EXPECT_EQ(*good->Get("via-raw", kLongTimeout), "raw");
  EXPECT_EQ(good->Get("half", milliseconds(20)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(good->Set("gate", "open").ok());
  t.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(*waited, "open");
}

TEST(TcpStoreTest, PipelinedRequestsAndKeyLimit) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  constexpr size_t kMaxKeys = 100'000;
  const int fd = RawConnect(server->port());
  ASSERT_GE(fd, 0);
  // Pipeline kMaxKeys + 1 SETs of distinct keys; read replies concurrently.
  std::thread sender([&] {
    std::string batch;
    for (size_t i = 0; i <= kMaxKeys; ++i) {
      batch += Request(1, absl::StrCat("key", i), "v");
      if (batch.size() > (1 << 16) || i == kMaxKeys) {
        ASSERT_TRUE(SendRaw(fd, batch));
        batch.clear();
      }
    }
  });
  size_t ok = 0;
  int last = -1;
  std::string message;
  for (size_t i = 0; i <= kMaxKeys; ++i) {
    last = ReadReplyCode(fd, &message);
    if (last != 0) break;
    ++ok;
  }
  sender.join();
  close(fd);
  EXPECT_EQ(ok, kMaxKeys);
  EXPECT_EQ(last, static_cast<int>(absl::StatusCode::kResourceExhausted)) << message;

  auto a = Client(*server);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->Set("new", "v").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a->Add("new", 1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(a->Set("key7", "overwrite is fine").ok());
  EXPECT_EQ(*a->Get("key7", kLongTimeout), "overwrite is fine");
  EXPECT_EQ(*a->Get("key99999", kLongTimeout), "v");
}

TEST(TcpStoreTest, ServerDestructionUnblocksWaitingClients) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 3;
  std::vector<std::shared_ptr<TcpStore>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(Client(*server));
    ASSERT_NE(clients.back(), nullptr);
  }
  std::vector<absl::Status> results(kClients, absl::UnknownError("not run"));
  std::atomic<bool> gloo_threw{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      if (i == 0) {
        try {
          clients[0]->wait({"never"}, kLongTimeout);
        } catch (const gloo::IoException&) {
          gloo_threw = true;
        }
        results[0] = absl::OkStatus();
      } else {
        results[static_cast<size_t>(i)] =
            clients[static_cast<size_t>(i)]->Get("never", kLongTimeout).status();
      }
    });
  }
  EXPECT_TRUE(Holding(*server, kClients));  // all have blocked
  server.reset();
  for (auto& t : threads) t.join();
  EXPECT_TRUE(gloo_threw);
  for (int i = 1; i < kClients; ++i) {
    EXPECT_EQ(results[static_cast<size_t>(i)].code(), absl::StatusCode::kUnavailable)
        << results[static_cast<size_t>(i)];
  }
  // With no server, calls fail (after their own deadline) instead of hanging.
  EXPECT_FALSE(clients[1]->Get("never", milliseconds(50)).ok());
}

TEST(TcpStoreTest, ConnectRetriesUntilServerStarts) {
  // Find a free port, then free it again.
  uint16_t port = 0;
  {
    auto probe = StartServer();
    ASSERT_NE(probe, nullptr);
    port = probe->port();
  }
  const std::string address = absl::StrCat("127.0.0.1:", port);
  absl::StatusOr<std::shared_ptr<TcpStore>> client = absl::UnknownError("not run");
  const uint64_t refused_before = RefusedConnects();
  std::thread t([&] { client = TcpStore::Connect(address, kLongTimeout); });
  // Start the server once a connect has been refused (bounded): the client
  // is then in its retry loop. A test beside this one can also be refused
  // meanwhile; then the server may start before this client's first try,
  // which the test also passes.
  const auto deadline = std::chrono::steady_clock::now() + kConnectTimeout;
  while (RefusedConnects() == refused_before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_GT(RefusedConnects(), refused_before) << "the client never tried";
  auto server = TcpStoreServer::Start(address);
  ASSERT_TRUE(server.ok()) << server.status();
  t.join();
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("k", "v").ok());
  EXPECT_EQ(*(*client)->Get("k", kLongTimeout), "v");
}

TEST(TcpStoreTest, ConnectFailsAfterTimeoutAndBadAddresses) {
  uint16_t port = 0;
  {
    auto probe = StartServer();
    ASSERT_NE(probe, nullptr);
    port = probe->port();
  }
  auto c = TcpStore::Connect(absl::StrCat("127.0.0.1:", port), milliseconds(100));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
  EXPECT_EQ(TcpStore::Connect("no-port", milliseconds(10)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TcpStore::Connect("127.0.0.1:99999", milliseconds(10)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TcpStoreServer::Start("127.0.0.1:x").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Binding the same port twice fails with a Status.
  auto s1 = TcpStoreServer::Start("127.0.0.1:0");
  ASSERT_TRUE(s1.ok());
  auto s2 = TcpStoreServer::Start(absl::StrCat("127.0.0.1:", (*s1)->port()));
  EXPECT_FALSE(s2.ok());
}

}  // namespace
}  // namespace inca::hostpath
