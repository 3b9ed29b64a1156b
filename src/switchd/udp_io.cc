#include "switchd/udp_io.h"

#include <netinet/in.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"

namespace inca::switchd {

namespace {

constexpr size_t kControlBytes = CMSG_SPACE(sizeof(timespec));

absl::Status ErrnoStatus(absl::string_view what, int err) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(err)));
}

size_t GetBufferSize(int fd, int opt) {
  int v = 0;
  socklen_t len = sizeof(v);
  if (getsockopt(fd, SOL_SOCKET, opt, &v, &len) != 0 || v < 0) return 0;
  return static_cast<size_t>(v);
}

void SetBufferSize(int fd, int force_opt, int opt, size_t bytes) {
  const int v = static_cast<int>(std::min<size_t>(bytes, size_t{1} << 30));
  if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof(v)) == 0) return;
  (void)setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));  // best effort: capped by the kernel
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<UdpSocket> BindUdp(const Endpoint& listen, size_t buffer_bytes) {
  UdpSocket s;
  s.family = listen.is_v6() ? AF_INET6 : AF_INET;
  s.fd = Fd(::socket(s.family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.fd.valid()) return ErrnoStatus("socket", errno);
  if (s.family == AF_INET6) {
    const int off = 0;  // dual stack: IPv4 peers appear as ::ffff:a.b.c.d
    (void)setsockopt(s.fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
  }
  if (buffer_bytes > 0) {
    SetBufferSize(s.fd.get(), SO_RCVBUFFORCE, SO_RCVBUF, buffer_bytes);
    SetBufferSize(s.fd.get(), SO_SNDBUFFORCE, SO_SNDBUF, buffer_bytes);
  }
  const int on = 1;
  (void)setsockopt(s.fd.get(), SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));  // best effort
  s.rcvbuf_bytes = GetBufferSize(s.fd.get(), SO_RCVBUF);
  s.sndbuf_bytes = GetBufferSize(s.fd.get(), SO_SNDBUF);
  sockaddr_storage addr;
  const socklen_t len = listen.ToSockaddr(s.family, &addr);
  if (::bind(s.fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    return ErrnoStatus(absl::StrCat("bind ", listen.ToString()), errno);
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (::getsockname(s.fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    return ErrnoStatus("getsockname", errno);
  }
  s.local = Endpoint::FromSockaddr(bound, bound_len);
  return s;
}

RecvBatch::RecvBatch(size_t count, size_t slot_bytes)
    : count_(count),
      slot_bytes_(slot_bytes),
      buf_(count * slot_bytes),
      addrs_(count),
      iov_(count),
      msgs_(count),
      control_(count * kControlBytes) {
  for (size_t i = 0; i < count; ++i) {
    iov_[i].iov_base = buf_.data() + i * slot_bytes;
    iov_[i].iov_len = slot_bytes;
  }
}

RecvBatch::~RecvBatch() = default;

int RecvBatch::Receive(int fd) {
  for (size_t i = 0; i < count_; ++i) {
    msgs_[i] = mmsghdr{};
    msgs_[i].msg_hdr.msg_name = &addrs_[i];
    msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
    msgs_[i].msg_hdr.msg_iov = &iov_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
    msgs_[i].msg_hdr.msg_control = control_.data() + i * kControlBytes;
    msgs_[i].msg_hdr.msg_controllen = kControlBytes;
  }
  int n;
  do {
    n = ::recvmmsg(fd, msgs_.data(), static_cast<unsigned>(count_), MSG_DONTWAIT, nullptr);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -errno;
  return n;
}

std::span<const uint8_t> RecvBatch::data(size_t i) const {
  const size_t len = std::min<size_t>(msgs_[i].msg_len, slot_bytes_);
  return {buf_.data() + i * slot_bytes_, len};
}

socklen_t RecvBatch::source_len(size_t i) const {
  return msgs_[i].msg_hdr.msg_namelen;
}

int64_t RecvBatch::rx_realtime_ns(size_t i) const {
  msghdr& h = const_cast<msghdr&>(msgs_[i].msg_hdr);  // CMSG_* macros take non-const
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      timespec ts;
      std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
      return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
    }
  }
  return 0;
}

bool RecvBatch::truncated(size_t i) const {
  return (msgs_[i].msg_hdr.msg_flags & MSG_TRUNC) != 0;
}

SendBatch::SendBatch(size_t count, size_t slot_bytes, int socket_family)
    : count_(count),
      slot_bytes_(slot_bytes),
      family_(socket_family),
      buf_(count * slot_bytes),
      addrs_(count),
      iov_(count),
      msgs_(count) {}

SendBatch::~SendBatch() = default;

bool SendBatch::Add(const Endpoint& to, std::span<const uint8_t> data) {
  if (full() || data.size() > slot_bytes_) return false;
  const socklen_t len = to.ToSockaddr(family_, &addrs_[n_]);
  if (len == 0) return false;
  return Add(addrs_[n_], len, data);
}

bool SendBatch::Add(const sockaddr_storage& to, socklen_t to_len, std::span<const uint8_t> data) {
  if (full() || data.size() > slot_bytes_ || to_len > sizeof(sockaddr_storage)) return false;
  uint8_t* slot = buf_.data() + n_ * slot_bytes_;
  if (!data.empty()) std::memcpy(slot, data.data(), data.size());
  if (&to != &addrs_[n_]) addrs_[n_] = to;
  iov_[n_].iov_base = slot;
  iov_[n_].iov_len = data.size();
  msgs_[n_] = mmsghdr{};
  msgs_[n_].msg_hdr.msg_name = &addrs_[n_];
  msgs_[n_].msg_hdr.msg_namelen = to_len;
  msgs_[n_].msg_hdr.msg_iov = &iov_[n_];
  msgs_[n_].msg_hdr.msg_iovlen = 1;
  ++n_;
  return true;
}

SendBatch::Result SendBatch::Flush(int fd) {
  Result r;
  size_t i = 0;
  while (i < n_) {
    const int sent = ::sendmmsg(fd, msgs_.data() + i, static_cast<unsigned>(n_ - i), 0);
    if (sent > 0) {
      i += static_cast<size_t>(sent);
      r.sent += static_cast<size_t>(sent);
    } else if (sent < 0 && errno == EINTR) {
      continue;
    } else {
      // msgs_[i] was refused (e.g. EHOSTUNREACH, EMSGSIZE): skip it.
      r.last_errno = sent < 0 ? errno : EIO;
      ++r.failed;
      ++i;
    }
  }
  n_ = 0;
  return r;
}

absl::StatusOr<Wakeup> Wakeup::Create() {
  Fd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("eventfd", errno);
  return Wakeup(std::move(fd));
}

void Wakeup::Notify() const noexcept {
  const int saved = errno;  // may run in a signal handler
  const uint64_t one = 1;
  const ssize_t r = ::write(fd_.get(), &one, sizeof(one));
  (void)r;  // EAGAIN: the counter is already non-zero, which is all we need
  errno = saved;
}

void Wakeup::Drain() const noexcept {
  uint64_t v = 0;
  while (::read(fd_.get(), &v, sizeof(v)) > 0) {
  }
}

}  // namespace inca::switchd
