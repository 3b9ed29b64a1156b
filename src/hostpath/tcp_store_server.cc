// TcpStoreServer: see tcp_store.h; the wire protocol is in tcp_store_wire.h.
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
#include <atomic>
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
#include "hostpath/tcp_store_wire.h"

namespace inca::hostpath {

using namespace store_wire;  // NOLINT(build/namespaces): the protocol this file implements

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
  std::atomic<size_t> waiting{0};  // written by the server thread, read by any

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
    size_t held = 0;
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->dead) {
        close(it->fd);
        it = conns.erase(it);
      } else {
        held += it->waiting ? 1 : 0;
        ++it;
      }
    }
    waiting.store(held);
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

size_t TcpStoreServer::waiting() const {
  return impl_->waiting.load();
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
}  // namespace inca::hostpath
