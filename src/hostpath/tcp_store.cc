// TcpStoreServer / TcpStore: see tcp_store.h.
//
// Wire protocol (version 1). Every message in either direction is a frame:
//
//   frame := u32 body_len | body[body_len]          (integers little-endian)
//
// Request bodies (client -> server):
//
//   request := u8 op | u32 key_len | key[key_len] | payload
//     op 1 SET   payload = the value (the rest of the body, may be empty)
//     op 2 GET   payload empty; the reply is sent once the key exists
//     op 3 ADD   payload = i64 delta; the key's value is a decimal int64
//                string ("" / absent counts as 0), replaced by the sum
//     op 4 WAIT  payload empty; an empty reply is sent once the key exists
//
// Reply bodies (server -> client), one per request, in request order:
//
//   reply := u8 code | payload
//     code 0 (OK): GET -> the value; ADD -> i64 new value; SET/WAIT -> empty
//     code != 0:   an absl::StatusCode (ResourceExhausted: too many keys;
//                  InvalidArgument: ADD on a non-integer value; OutOfRange:
//                  ADD overflow); payload = a message
//
// A request that does not parse (body_len < 5 or over the largest legal
// request, key_len over 4 KiB or past the body, unknown op, ADD payload not
// 8 bytes, GET/WAIT with a payload) is malformed: the server closes that
// connection and nothing else. Requests may be pipelined; they are served in
// order, so a GET/WAIT on a missing key holds the ones behind it. Waiting is
// done server-side: the pending GET/WAIT of a connection is re-checked
// whenever a SET or ADD changes the store. The server never times a request
// out; the client bounds each call with poll() and, when it gives up, drops
// the connection (its pending reply would otherwise answer the next request)
// and reconnects on the next call.
//
// Bounds: keys <= 4 KiB, values <= 64 MiB, <= 100,000 keys, <= 1,024
// connections (more are accepted and closed at once). Per connection the
// server buffers at most one largest request of input and one reply of
// output; it stops reading from a connection that is waiting or has an
// unsent reply once that much input is buffered.

#include "hostpath/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <list>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"

namespace inca::hostpath {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxKeyBytes = 4 * 1024;
constexpr size_t kMaxValueBytes = 64 * 1024 * 1024;
constexpr size_t kMaxKeys = 100'000;
constexpr size_t kMaxConnections = 1'024;

enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4 };

constexpr size_t kFrameHeaderBytes = 4;
constexpr size_t kRequestHeaderBytes = 1 + 4;  // op, key_len
constexpr size_t kMaxRequestBody = kRequestHeaderBytes + kMaxKeyBytes + kMaxValueBytes;
// The longest reply: a GET of a largest value (error messages are short).
constexpr size_t kMaxReplyBody = 1 + kMaxValueBytes;
constexpr size_t kReadChunk = 256 * 1024;

void PutU32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutI64(std::string& s, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
int64_t GetI64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return static_cast<int64_t>(v);
}

std::string ErrnoText(int err) {
  return std::strerror(err);
}

// Splits "host:port" / "[v6]:port". An empty host means "any" (server) or
// loopback (client, via getaddrinfo's default).
absl::Status SplitAddress(const std::string& address, std::string* host, std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp store: address '", address, "' is not host:port"));
  }
  std::string h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &p) || p < 0 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("tcp store: bad port in '", address, "'"));
  }
  *host = std::move(h);
  *port = std::to_string(p);
  return absl::OkStatus();
}

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

absl::StatusOr<AddrInfoPtr> Resolve(const std::string& host, const std::string& port,
                                    bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("tcp store: resolve '", host, "': ", gai_strerror(rc)));
  }
  return AddrInfoPtr(res);
}

void SetNoDelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

bool IsSelfConnected(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return false;
  }
  return local_len == peer_len && std::memcmp(&local, &peer, local_len) == 0;
}

namespace {

// Milliseconds until `deadline` for poll(), rounded up, clamped to [0, INT_MAX].
int PollMillis(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

Clock::time_point DeadlineAfter(std::chrono::milliseconds timeout) {
  const auto now = Clock::now();
  if (timeout.count() < 0) return now;
  // Avoid overflow for "forever"-like timeouts.
  const auto max_left = Clock::time_point::max() - now;
  if (timeout >= max_left) return Clock::time_point::max();
  return now + timeout;
}

}  // namespace

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

struct TcpStoreServer::Impl {
  struct Conn {
    int fd = -1;
    std::string in;  // received bytes; in[in_off..] are unparsed
    size_t in_off = 0;
    std::string out;  // reply bytes; out[out_off..] are unsent
    size_t out_off = 0;
    bool waiting = false;  // a GET/WAIT on a missing key is pending
    Op wait_op = kGet;
    std::string wait_key;
    bool dead = false;
  };

  int listen_fd = -1;
  int wake_fd = -1;
  uint16_t port = 0;
  std::thread thread;

  // Owned by the server thread only.
  std::unordered_map<std::string, std::string> kv;
  uint64_t version = 0;  // bumped by every SET/ADD that changes kv
  std::list<Conn> conns;

  ~Impl() {
    for (Conn& c : conns) {
      if (c.fd >= 0) close(c.fd);
    }
    if (listen_fd >= 0) close(listen_fd);
    if (wake_fd >= 0) close(wake_fd);
  }

  void Run();
  void Accept(bool* backoff);
  void Read(Conn& c);
  void Flush(Conn& c);
  void Progress(Conn& c);
  // Handles one complete request body; false if it is malformed.
  bool Handle(Conn& c, const char* body, size_t len);
  static void Reply(Conn& c, absl::StatusCode code, std::string_view payload);
};

void TcpStoreServer::Impl::Reply(Conn& c, absl::StatusCode code, std::string_view payload) {
  // Only called with an empty output buffer (see Progress).
  c.out.clear();
  c.out_off = 0;
  c.out.reserve(kFrameHeaderBytes + 1 + payload.size());
  PutU32(c.out, static_cast<uint32_t>(1 + payload.size()));
  c.out.push_back(static_cast<char>(code));
  c.out.append(payload);
}

void TcpStoreServer::Impl::Accept(bool* backoff) {
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // EMFILE/ENFILE/ENOBUFS/ENOMEM: leave the backlog and retry later
      // rather than spin on a listening socket that stays readable.
      if (errno != EAGAIN && errno != EWOULDBLOCK) *backoff = true;
      return;
    }
    if (conns.size() >= kMaxConnections) {
      close(fd);
      continue;
    }
    SetNoDelay(fd);
    Conn& c = conns.emplace_back();
    c.fd = fd;
  }
}

void TcpStoreServer::Impl::Read(Conn& c) {
  const size_t limit = kFrameHeaderBytes + kMaxRequestBody;
  while (!c.dead && c.in.size() - c.in_off < limit) {
    const size_t want = std::min(kReadChunk, limit - (c.in.size() - c.in_off));
    const size_t old = c.in.size();
    c.in.resize(old + want);
    const ssize_t n = recv(c.fd, c.in.data() + old, want, 0);
    if (n > 0) {
      c.in.resize(old + static_cast<size_t>(n));
      if (static_cast<size_t>(n) < want) return;  // drained for now
      continue;
    }
    c.in.resize(old);
    if (n == 0) {
      c.dead = true;  // peer closed
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      c.dead = true;
    }
    return;
  }
}

void TcpStoreServer::Impl::Flush(Conn& c) {
  while (!c.dead && c.out_off < c.out.size()) {
    const ssize_t n =
        send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      c.dead = true;
    }
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out.shrink_to_fit();  // a 64 MiB reply should not stay allocated
    c.out_off = 0;
  }
}

bool TcpStoreServer::Impl::Handle(Conn& c, const char* body, size_t len) {
  if (len < kRequestHeaderBytes) return false;
  const uint8_t op = static_cast<uint8_t>(body[0]);
  const size_t key_len = GetU32(body + 1);
  if (key_len > kMaxKeyBytes || key_len > len - kRequestHeaderBytes) return false;
  std::string key(body + kRequestHeaderBytes, key_len);
  const char* payload = body + kRequestHeaderBytes + key_len;
  const size_t payload_len = len - kRequestHeaderBytes - key_len;

  switch (op) {
    case kSet: {
      if (payload_len > kMaxValueBytes) return false;
      auto it = kv.find(key);
      if (it == kv.end()) {
        if (kv.size() >= kMaxKeys) {
          Reply(c, absl::StatusCode::kResourceExhausted,
                absl::StrCat("tcp store: key limit (", kMaxKeys, ") reached"));
          return true;
        }
        kv.emplace(std::move(key), std::string(payload, payload_len));
      } else {
        it->second.assign(payload, payload_len);
      }
      ++version;
      Reply(c, absl::StatusCode::kOk, {});
      return true;
    }
    case kAdd: {
      if (payload_len != 8) return false;
      const int64_t delta = GetI64(payload);
      auto it = kv.find(key);
      if (it == kv.end() && kv.size() >= kMaxKeys) {
        Reply(c, absl::StatusCode::kResourceExhausted,
              absl::StrCat("tcp store: key limit (", kMaxKeys, ") reached"));
        return true;
      }
      int64_t current = 0;
      if (it != kv.end() && !it->second.empty() && !absl::SimpleAtoi(it->second, &current)) {
        Reply(c, absl::StatusCode::kInvalidArgument,
              "tcp store: ADD on a value that is not a decimal int64");
        return true;
      }
      int64_t sum = 0;
      if (__builtin_add_overflow(current, delta, &sum)) {
        Reply(c, absl::StatusCode::kOutOfRange, "tcp store: ADD overflows int64");
        return true;
      }
      if (it == kv.end()) {
        kv.emplace(std::move(key), absl::StrCat(sum));
      } else {
        it->second = absl::StrCat(sum);
      }
      ++version;
      std::string reply;
      PutI64(reply, sum);
      Reply(c, absl::StatusCode::kOk, reply);
      return true;
    }
    case kGet:
    case kWait: {
      if (payload_len != 0) return false;
      c.waiting = true;
      c.wait_op = static_cast<Op>(op);
      c.wait_key = std::move(key);
      return true;  // Progress answers it now or once the key appears
    }
    default: return false;
  }
}

void TcpStoreServer::Impl::Progress(Conn& c) {
  while (!c.dead) {
    if (!c.out.empty()) {
      Flush(c);
      if (!c.out.empty()) break;  // wait for POLLOUT
      continue;
    }
    if (c.waiting) {
      auto it = kv.find(c.wait_key);
      if (it == kv.end()) break;
      c.waiting = false;
      c.wait_key.clear();
      Reply(c, absl::StatusCode::kOk, c.wait_op == kGet ? std::string_view(it->second) : "");
      continue;
    }
    const size_t avail = c.in.size() - c.in_off;
    if (avail < kFrameHeaderBytes) break;
    const size_t len = GetU32(c.in.data() + c.in_off);
    if (len < kRequestHeaderBytes || len > kMaxRequestBody) {
      c.dead = true;
      break;
    }
    if (avail < kFrameHeaderBytes + len) {
      // Make room for the whole frame once instead of growing step by step.
      c.in.reserve(c.in_off + kFrameHeaderBytes + len);
      break;
    }
    const char* body = c.in.data() + c.in_off + kFrameHeaderBytes;
    c.in_off += kFrameHeaderBytes + len;
    if (!Handle(c, body, len)) c.dead = true;
  }
  if (c.in_off > 0) {
    c.in.erase(0, c.in_off);
    c.in_off = 0;
    if (c.in.empty() && c.in.capacity() > kReadChunk) c.in.shrink_to_fit();
  }
}

void TcpStoreServer::Impl::Run() {
  std::vector<pollfd> fds;
  std::vector<Conn*> polled;
  bool accept_backoff = false;
  for (;;) {
    fds.clear();
    polled.clear();
    fds.push_back({wake_fd, POLLIN, 0});
    fds.push_back({accept_backoff ? -1 : listen_fd, POLLIN, 0});
    for (Conn& c : conns) {
      short events = 0;
      // Keep reading while there is room: a waiting connection or one with
      // an unsent reply stops once a largest request is buffered.
      if (c.in.size() < kFrameHeaderBytes + kMaxRequestBody) events |= POLLIN;
      if (!c.out.empty()) events |= POLLOUT;
      fds.push_back({c.fd, events, 0});
      polled.push_back(&c);
    }
    const int rc = poll(fds.data(), fds.size(), accept_backoff ? 100 : -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return;  // cannot happen with valid arguments; stop serving
    }
    if (fds[0].revents != 0) return;  // shutdown requested
    accept_backoff = false;
    if (fds[1].revents & POLLIN) Accept(&accept_backoff);
    for (size_t i = 0; i < polled.size(); ++i) {
      const short re = fds[i + 2].revents;
      Conn& c = *polled[i];
      if (re & (POLLIN | POLLHUP | POLLERR)) Read(c);
      if (re & POLLOUT) Flush(c);
      if ((re & (POLLHUP | POLLERR)) && !(re & POLLIN)) c.dead = true;
    }
    // Serve what can be served; repeat while SET/ADD keep changing the store
    // so that connections waiting on those keys (re-)check them.
    uint64_t seen = 0;
    do {
      seen = version;
      for (Conn& c : conns) Progress(c);
    } while (seen != version);
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->dead) {
        close(it->fd);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
  }
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpStoreServer::~TcpStoreServer() {
  if (impl_ && impl_->thread.joinable()) {
    const uint64_t one = 1;
    ssize_t n = 0;
    do {
      n = write(impl_->wake_fd, &one, sizeof(one));
    } while (n < 0 && errno == EINTR);
    impl_->thread.join();
  }
  // ~Impl closes every connection, the listening socket and the eventfd.
}

uint16_t TcpStoreServer::port() const {
  return impl_->port;
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& address) {
  std::string host, port;
  if (absl::Status s = SplitAddress(address, &host, &port); !s.ok()) return s;
  absl::StatusOr<AddrInfoPtr> ai = Resolve(host, port, /*passive=*/true);
  if (!ai.ok()) return ai.status();

  auto impl = std::make_unique<Impl>();
  std::string last_error = "no address";
  for (addrinfo* a = ai->get(); a != nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = absl::StrCat("socket: ", ErrnoText(errno));
      continue;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      last_error = absl::StrCat("bind: ", ErrnoText(errno));
      close(fd);
      continue;
    }
    if (listen(fd, SOMAXCONN) != 0) {
      last_error = absl::StrCat("listen: ", ErrnoText(errno));
      close(fd);
      continue;
    }
    impl->listen_fd = fd;
    break;
  }
  if (impl->listen_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("tcp store server: cannot listen on ", address, ": ", last_error));
  }
  sockaddr_storage ss{};
  socklen_t ss_len = sizeof(ss);
  if (getsockname(impl->listen_fd, reinterpret_cast<sockaddr*>(&ss), &ss_len) != 0) {
    return absl::InternalError(absl::StrCat("tcp store server: getsockname: ", ErrnoText(errno)));
  }
  if (ss.ss_family == AF_INET) {
    sockaddr_in sin{};
    std::memcpy(&sin, &ss, sizeof(sin));
    impl->port = ntohs(sin.sin_port);
  } else {
    sockaddr_in6 sin6{};
    std::memcpy(&sin6, &ss, sizeof(sin6));
    impl->port = ntohs(sin6.sin6_port);
  }
  impl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wake_fd < 0) {
    return absl::InternalError(absl::StrCat("tcp store server: eventfd: ", ErrnoText(errno)));
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

struct TcpStore::Impl {
  std::string address;
  std::string host;
  std::string port;

  std::mutex mu;
  int fd = -1;  // guarded by mu; -1 = (re)connect on the next call

  ~Impl() {
    if (fd >= 0) close(fd);
  }

  // One connection attempt per resolved address, each bounded by deadline.
  absl::StatusOr<int> TryConnect(Clock::time_point deadline) const;
  // Retries TryConnect until it succeeds or deadline passes.
  absl::StatusOr<int> ConnectUntil(Clock::time_point deadline) const;

  // Sends one request and returns the OK reply's payload. Errors: the
  // server's status, Unavailable (connection failed or closed), or
  // DeadlineExceeded; after an I/O error or timeout the connection is
  // dropped and the next call reconnects.
  absl::StatusOr<std::string> Call(Op op, std::string_view key, std::string_view payload,
                                   Clock::time_point deadline);
  absl::Status SendAll(const std::string& data, Clock::time_point deadline);
  absl::Status RecvAll(char* data, size_t len, Clock::time_point deadline);
  void Drop() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

absl::StatusOr<int> TcpStore::Impl::TryConnect(Clock::time_point deadline) const {
  absl::StatusOr<AddrInfoPtr> ai = Resolve(host, port, /*passive=*/false);
  if (!ai.ok()) return ai.status();
  std::string last_error = "no address";
  for (addrinfo* a = ai->get(); a != nullptr; a = a->ai_next) {
    const int sock =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (sock < 0) {
      last_error = ErrnoText(errno);
      continue;
    }
    int rc = connect(sock, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{sock, POLLOUT, 0};
      do {
        rc = poll(&p, 1, PollMillis(deadline));
      } while (rc < 0 && errno == EINTR);
      if (rc == 0) {
        close(sock);
        return absl::DeadlineExceededError(
            absl::StrCat("tcp store: connect to ", address, " timed out"));
      }
      int err = 0;
      socklen_t err_len = sizeof(err);
      if (rc < 0) {
        err = errno;
      } else if (getsockopt(sock, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) {
        err = errno;
      }
      errno = err;
      rc = err == 0 ? 0 : -1;
    }
    if (rc != 0) {
      last_error = ErrnoText(errno);
      close(sock);
      continue;
    }
    if (IsSelfConnected(sock)) {  // not the server: let it have its port
      last_error = "connected to itself (nobody listening yet)";
      close(sock);
      continue;
    }
    // Back to a blocking socket; every read/write is still preceded by a
    // poll() bounded by the call's deadline and uses MSG_DONTWAIT.
    const int flags = fcntl(sock, F_GETFL);
    if (flags >= 0) (void)fcntl(sock, F_SETFL, flags & ~O_NONBLOCK);
    SetNoDelay(sock);
    return sock;
  }
  return absl::UnavailableError(absl::StrCat("tcp store: connect to ", address, ": ", last_error));
}

absl::StatusOr<int> TcpStore::Impl::ConnectUntil(Clock::time_point deadline) const {
  auto backoff = std::chrono::milliseconds(5);
  for (;;) {
    absl::StatusOr<int> sock = TryConnect(deadline);
    if (sock.ok()) return sock;
    const auto now = Clock::now();
    if (now >= deadline) {
      return absl::UnavailableError(
          absl::StrCat(sock.status().message(), " (gave up at the deadline)"));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

absl::Status TcpStore::Impl::SendAll(const std::string& data, Clock::time_point deadline) {
  size_t off = 0;
  while (off < data.size()) {
    pollfd p{fd, POLLOUT, 0};
    const int rc = poll(&p, 1, PollMillis(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("tcp store: send to ", address, " timed out"));
    }
    if (rc < 0) {
      return absl::UnavailableError(absl::StrCat("tcp store: poll: ", ErrnoText(errno)));
    }
    const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
      continue;
    } else {
      return absl::UnavailableError(
          absl::StrCat("tcp store: send to ", address, ": ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status TcpStore::Impl::RecvAll(char* data, size_t len, Clock::time_point deadline) {
  size_t off = 0;
  while (off < len) {
    pollfd p{fd, POLLIN, 0};
    const int rc = poll(&p, 1, PollMillis(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("tcp store: no reply from ", address, " before the deadline"));
    }
    if (rc < 0) {
      return absl::UnavailableError(absl::StrCat("tcp store: poll: ", ErrnoText(errno)));
    }
    const ssize_t n = recv(fd, data + off, len - off, MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n == 0) {
      return absl::UnavailableError(
          absl::StrCat("tcp store: connection to ", address, " closed by the server"));
    } else if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
      continue;
    } else {
      return absl::UnavailableError(
          absl::StrCat("tcp store: recv from ", address, ": ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TcpStore::Impl::Call(Op op, std::string_view key,
                                                 std::string_view payload,
                                                 Clock::time_point deadline) {
  std::lock_guard<std::mutex> lock(mu);
  if (fd < 0) {
    absl::StatusOr<int> c = ConnectUntil(deadline);
    if (!c.ok()) return c.status();
    fd = *c;
  }
  std::string frame;
  frame.reserve(kFrameHeaderBytes + kRequestHeaderBytes + key.size() + payload.size());
  PutU32(frame, static_cast<uint32_t>(kRequestHeaderBytes + key.size() + payload.size()));
  frame.push_back(static_cast<char>(op));
  PutU32(frame, static_cast<uint32_t>(key.size()));
  frame.append(key);
  frame.append(payload);
  if (absl::Status s = SendAll(frame, deadline); !s.ok()) {
    Drop();
    return s;
  }
  frame.clear();
  frame.shrink_to_fit();

  char header[kFrameHeaderBytes];
  if (absl::Status s = RecvAll(header, sizeof(header), deadline); !s.ok()) {
    Drop();
    return s;
  }
  const size_t len = GetU32(header);
  if (len < 1 || len > kMaxReplyBody) {
    Drop();
    return absl::InternalError(
        absl::StrCat("tcp store: malformed reply from ", address, " (length ", len, ")"));
  }
  std::string body(len, '\0');
  if (absl::Status s = RecvAll(body.data(), len, deadline); !s.ok()) {
    Drop();
    return s;
  }
  const auto code = static_cast<uint8_t>(body[0]);
  if (code != 0) {
    if (code > static_cast<uint8_t>(absl::StatusCode::kUnauthenticated)) {
      Drop();
      return absl::InternalError(
          absl::StrCat("tcp store: malformed reply from ", address, " (code ", code, ")"));
    }
    return absl::Status(static_cast<absl::StatusCode>(code), body.substr(1));
  }
  body.erase(0, 1);
  return body;
}

namespace {

absl::Status CheckKey(const std::string& key) {
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp store: key of ", key.size(), " bytes exceeds ", kMaxKeyBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckValue(size_t size) {
  if (size > kMaxValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp store: value of ", size, " bytes exceeds ", kMaxValueBytes));
  }
  return absl::OkStatus();
}

[[noreturn]] void ThrowIo(const absl::Status& s) {
  throw ::gloo::IoException(s.ToString());
}

}  // namespace

TcpStore::TcpStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpStore::~TcpStore() = default;

absl::StatusOr<std::shared_ptr<TcpStore>> TcpStore::Connect(const std::string& address,
                                                            std::chrono::milliseconds timeout) {
  auto impl = std::make_unique<Impl>();
  impl->address = address;
  if (absl::Status s = SplitAddress(address, &impl->host, &impl->port); !s.ok()) return s;
  absl::StatusOr<int> fd = impl->ConnectUntil(DeadlineAfter(timeout));
  if (!fd.ok()) return fd.status();
  impl->fd = *fd;
  return std::shared_ptr<TcpStore>(new TcpStore(std::move(impl)));
}

absl::Status TcpStore::Set(const std::string& key, const std::string& value) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (absl::Status s = CheckValue(value.size()); !s.ok()) return s;
  return impl_->Call(kSet, key, value, DeadlineAfter(kDefaultTimeout)).status();
}

absl::StatusOr<std::string> TcpStore::Get(const std::string& key,
                                          std::chrono::milliseconds timeout) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  return impl_->Call(kGet, key, {}, DeadlineAfter(timeout));
}

absl::StatusOr<int64_t> TcpStore::Add(const std::string& key, int64_t delta) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  std::string payload;
  PutI64(payload, delta);
  absl::StatusOr<std::string> r = impl_->Call(kAdd, key, payload, DeadlineAfter(kDefaultTimeout));
  if (!r.ok()) return r.status();
  if (r->size() != 8) {
    return absl::InternalError("tcp store: malformed ADD reply");
  }
  return GetI64(r->data());
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status s = CheckKey(key);
  if (s.ok()) s = CheckValue(data.size());
  if (s.ok()) {
    s = impl_
            ->Call(kSet, key, std::string_view(data.data(), data.size()),
                   DeadlineAfter(kDefaultTimeout))
            .status();
  }
  if (!s.ok()) ThrowIo(s);
}

std::vector<char> TcpStore::get(const std::string& key) {
  absl::StatusOr<std::string> v = Get(key, kDefaultTimeout);
  if (!v.ok()) ThrowIo(v.status());
  return std::vector<char>(v->begin(), v->end());
}

void TcpStore::wait(const std::vector<std::string>& keys) {
  wait(keys, kDefaultTimeout);
}

void TcpStore::wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) {
  const auto deadline = DeadlineAfter(timeout);
  for (const std::string& key : keys) {
    absl::Status s = CheckKey(key);
    if (s.ok()) s = impl_->Call(kWait, key, {}, deadline).status();
    if (!s.ok()) ThrowIo(s);
  }
}

}  // namespace inca::hostpath
