// TcpStore (the client) and IsSelfConnected: see tcp_store.h; the wire
// protocol is in tcp_store_wire.h, the server in tcp_store_server.cc.
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
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gloo/common/error.h"
#include "hostpath/tcp_store_wire.h"

namespace inca::hostpath {

using namespace store_wire;  // NOLINT(build/namespaces): the protocol this file implements

bool IsSelfConnected(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return false;
  }
  return local_len == peer_len && std::memcmp(&local, &peer, local_len) == 0;
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

struct TcpStore::Impl {
  std::string address;
  std::string host;
  std::string port;

  absl::Mutex mu;
  int fd ABSL_GUARDED_BY(mu) = -1;  // -1 = (re)connect on the next call

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
  absl::Status SendAll(const std::string& data, Clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  absl::Status RecvAll(char* data, size_t len, Clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void Drop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
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
  absl::MutexLock lock(&mu);
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
  {
    absl::MutexLock lock(&impl->mu);
    impl->fd = *fd;
  }
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
