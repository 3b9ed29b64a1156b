#include "net/udp.h"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"

namespace inca::net {

namespace {

// Per receive slot: a timestamp and a GRO segment size.
constexpr size_t kRecvControlBytes = CMSG_SPACE(sizeof(timespec)) + CMSG_SPACE(sizeof(int));
// Per send message: one UDP_SEGMENT.
constexpr size_t kSendControlBytes = CMSG_SPACE(sizeof(uint16_t));

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

absl::StatusOr<IoMode> ParseIoMode(std::string_view text) {
  if (text == "mmsg") return IoMode::kMmsg;
  if (text == "gso") return IoMode::kGso;
  return absl::InvalidArgumentError(absl::StrCat("--io must be mmsg or gso, not '",
                                                 absl::string_view(text.data(), text.size()), "'"));
}

std::string_view ToString(IoMode mode) {
  return mode == IoMode::kGso ? "gso" : "mmsg";
}

std::string Offloads::ToString() const {
  return absl::StrCat("gso=", gso ? 1 : 0, " gro=", gro ? 1 : 0);
}

namespace {

Offloads Probe(int family) {
  Offloads found;
  Fd probe(::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return found;
  int v = 0;
  socklen_t len = sizeof(v);
  // Reading UDP_SEGMENT leaves the socket's default segment size alone.
  found.gso = ::getsockopt(probe.get(), SOL_UDP, UDP_SEGMENT, &v, &len) == 0;
  const int on = 1;
  found.gro = ::setsockopt(probe.get(), SOL_UDP, UDP_GRO, &on, sizeof(on)) == 0;
  return found;
}

}  // namespace

Offloads DetectOffloads(int family) {
  // Function-local statics, not std::call_once: call_once's thread-locals
  // in libstdc++ would mark the Python module STATIC_TLS, and it then fails
  // to load after torch ("cannot allocate memory in static TLS block").
  static const Offloads v4 = Probe(AF_INET);
  static const Offloads v6 = Probe(AF_INET6);
  return family == AF_INET6 ? v6 : v4;
}

std::string UdpSocket::Describe() const {
  const std::string_view mode = ToString(io);
  return absl::StrCat("io=", absl::string_view(mode.data(), mode.size()), " gso=", gso ? 1 : 0,
                      " gro=", gro ? 1 : 0, " rcvbuf_bytes=", rcvbuf_bytes,
                      " sndbuf_bytes=", sndbuf_bytes);
}

absl::StatusOr<UdpSocket> BindUdp(const Endpoint& listen, const UdpOptions& options) {
  UdpSocket s;
  s.family = listen.is_v6() ? AF_INET6 : AF_INET;
  s.io = options.io;
  s.requested_buffer_bytes = options.buffer_bytes;
  s.fd = Fd(
      ::socket(s.family, SOCK_DGRAM | SOCK_CLOEXEC | (options.nonblocking ? SOCK_NONBLOCK : 0), 0));
  if (!s.fd.valid()) return ErrnoStatus("socket", errno);
  const int fd = s.fd.get();
  if (s.family == AF_INET6) {
    const int off = 0;  // dual stack: IPv4 peers appear as ::ffff:a.b.c.d
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
  }
  const size_t send_bytes =
      options.send_buffer_bytes > 0 ? options.send_buffer_bytes : options.buffer_bytes;
  if (options.buffer_bytes > 0) SetBufferSize(fd, SO_RCVBUFFORCE, SO_RCVBUF, options.buffer_bytes);
  if (send_bytes > 0) SetBufferSize(fd, SO_SNDBUFFORCE, SO_SNDBUF, send_bytes);
  const int on = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));  // best effort
  if (options.io == IoMode::kGso) {
    const Offloads offloads = DetectOffloads(s.family);
    s.gso = offloads.gso;
    s.gro = offloads.gro && ::setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof(on)) == 0;
  }
  s.rcvbuf_bytes = GetBufferSize(fd, SO_RCVBUF);
  s.sndbuf_bytes = GetBufferSize(fd, SO_SNDBUF);
  sockaddr_storage addr;
  const socklen_t len = listen.ToSockaddr(s.family, &addr);
  if (len == 0) return absl::InvalidArgumentError(absl::StrCat("cannot bind ", listen.ToString()));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    return ErrnoStatus(absl::StrCat("bind ", listen.ToString()), errno);
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    return ErrnoStatus("getsockname", errno);
  }
  s.local = Endpoint::FromSockaddr(bound, bound_len);
  return s;
}

// ---- RecvBatch ----

RecvBatch::RecvBatch(size_t count, size_t slot_bytes)
    : count_(std::max<size_t>(count, 1)),
      slot_bytes_(slot_bytes),
      buf_(count_ * slot_bytes),
      addrs_(count_),
      iov_(count_),
      msgs_(count_),
      control_(count_ * kRecvControlBytes),
      rx_ns_(count_) {
  dgrams_.reserve(count_ * 8);
  for (size_t i = 0; i < count_; ++i) {
    iov_[i].iov_base = buf_.data() + i * slot_bytes;
    iov_[i].iov_len = slot_bytes;
  }
}

RecvBatch RecvBatch::For(const UdpSocket& socket, size_t count, size_t max_datagram_bytes) {
  return RecvBatch(count, socket.gro ? kAnyMessageBytes : max_datagram_bytes);
}

RecvBatch::~RecvBatch() = default;
RecvBatch::RecvBatch(RecvBatch&&) noexcept = default;
RecvBatch& RecvBatch::operator=(RecvBatch&&) noexcept = default;

void RecvBatch::Wire() {
  for (size_t i = 0; i < count_; ++i) {
    msgs_[i] = mmsghdr{};
    msgs_[i].msg_hdr.msg_name = &addrs_[i];
    msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
    msgs_[i].msg_hdr.msg_iov = &iov_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
    msgs_[i].msg_hdr.msg_control = control_.data() + i * kRecvControlBytes;
    msgs_[i].msg_hdr.msg_controllen = kRecvControlBytes;
  }
}

int RecvBatch::Receive(int fd) {
  Wire();
  messages_ = 0;
  dgrams_.clear();
  int n;
  do {
    n = ::recvmmsg(fd, msgs_.data(), static_cast<unsigned>(count_), MSG_DONTWAIT, nullptr);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -errno;
  messages_ = static_cast<size_t>(n);
  for (size_t m = 0; m < messages_; ++m) {
    msghdr& h = msgs_[m].msg_hdr;
    const size_t len = std::min<size_t>(msgs_[m].msg_len, slot_bytes_);
    size_t segment = 0;
    rx_ns_[m] = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts;
        std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
        rx_ns_[m] = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
      } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        int g = 0;
        std::memcpy(&g, CMSG_DATA(c), sizeof(g));
        if (g > 0) segment = static_cast<size_t>(g);
      }
    }
    if (segment == 0 || segment >= len) {
      dgrams_.push_back({static_cast<uint32_t>(m), 0, static_cast<uint32_t>(len)});
      continue;
    }
    for (size_t off = 0; off < len; off += segment) {
      dgrams_.push_back({static_cast<uint32_t>(m), static_cast<uint32_t>(off),
                         static_cast<uint32_t>(std::min(segment, len - off))});
    }
  }
  return static_cast<int>(dgrams_.size());
}

std::span<const uint8_t> RecvBatch::data(size_t i) const {
  const Datagram& d = dgrams_[i];
  return {buf_.data() + d.message * slot_bytes_ + d.offset, d.length};
}

const sockaddr_storage& RecvBatch::source(size_t i) const {
  return addrs_[dgrams_[i].message];
}

socklen_t RecvBatch::source_len(size_t i) const {
  return msgs_[dgrams_[i].message].msg_hdr.msg_namelen;
}

int64_t RecvBatch::rx_realtime_ns(size_t i) const {
  return rx_ns_[dgrams_[i].message];
}

bool RecvBatch::truncated(size_t i) const {
  return (msgs_[dgrams_[i].message].msg_hdr.msg_flags & MSG_TRUNC) != 0;
}

size_t ReceiveFor(const UdpSocket& socket, RecvBatch& batch, int timeout_ms, size_t max,
                  absl::FunctionRef<void(const RecvBatch&, size_t)> handle) {
  pollfd p{socket.fd.get(), POLLIN, 0};
  if (::poll(&p, 1, std::max(0, timeout_ms)) <= 0) return 0;
  size_t handed = 0;
  while (handed < max) {
    const int n = batch.Receive(socket.fd.get());
    if (n <= 0) break;  // drained (or an error such as ECONNREFUSED: try later)
    for (int i = 0; i < n; ++i) handle(batch, static_cast<size_t>(i));
    handed += static_cast<size_t>(n);
    if (!batch.filled()) break;
  }
  return handed;
}

// ---- SendBatch ----

SendBatch::SendBatch(size_t count, size_t slot_bytes, int socket_family, bool gso)
    : count_(std::max<size_t>(count, 1)),
      slot_bytes_(slot_bytes),
      family_(socket_family),
      gso_(gso),
      buf_(count_ * slot_bytes),
      addrs_(count_),
      addr_lens_(count_),
      dgrams_(count_),
      iov_(2 * count_),
      msgs_(count_),
      control_(count_ * kSendControlBytes) {
  messages_.reserve(count_);
}

SendBatch SendBatch::For(const UdpSocket& socket, size_t count, size_t slot_bytes) {
  return SendBatch(count, slot_bytes, socket.family, socket.gso);
}

SendBatch::~SendBatch() = default;
SendBatch::SendBatch(SendBatch&&) noexcept = default;
SendBatch& SendBatch::operator=(SendBatch&&) noexcept = default;

bool SendBatch::Add(const Endpoint& to, std::span<const uint8_t> data) {
  if (full() || data.size() > slot_bytes_) return false;
  sockaddr_storage addr;
  const socklen_t len = to.ToSockaddr(family_, &addr);
  if (len == 0) return false;
  return Queue(addr, len, data, {});
}

bool SendBatch::Add(const sockaddr_storage& to, socklen_t to_len, std::span<const uint8_t> data) {
  return Queue(to, to_len, data, {});
}

bool SendBatch::AddShared(const Endpoint& to, std::span<const uint8_t> head,
                          std::span<const uint8_t> payload, uint64_t share) {
  if (payload.empty()) return Add(to, head);  // nothing to share; the last copy stays shareable
  if (full() || head.size() + payload.size() > slot_bytes_) return false;
  sockaddr_storage addr;
  const socklen_t len = to.ToSockaddr(family_, &addr);
  if (len == 0) return false;
  if (share != 0 && share == shared_key_ && payload.size() == shared_copy_.size()) {
    return Queue(addr, len, head, shared_copy_);
  }
  uint8_t* copy = buf_.data() + n_ * slot_bytes_ + head.size();  // after the head, in its slot
  std::memcpy(copy, payload.data(), payload.size());
  if (!Queue(addr, len, head, {copy, payload.size()})) return false;
  shared_copy_ = {copy, payload.size()};
  shared_key_ = share;
  return true;
}

bool SendBatch::AddGather(const sockaddr_storage& to, socklen_t to_len,
                          std::span<const uint8_t> head, std::span<const uint8_t> payload) {
  return Queue(to, to_len, head, payload);
}

bool SendBatch::Queue(const sockaddr_storage& to, socklen_t to_len, std::span<const uint8_t> head,
                      std::span<const uint8_t> payload) {
  if (full() || head.size() > slot_bytes_ || to_len == 0 || to_len > sizeof(sockaddr_storage)) {
    return false;
  }
  const size_t bytes = head.size() + payload.size();
  if (bytes > kMaxMessageBytes) return false;
  uint8_t* slot = buf_.data() + n_ * slot_bytes_;
  if (!head.empty()) std::memcpy(slot, head.data(), head.size());
  const uint32_t i = static_cast<uint32_t>(n_);
  addrs_[i] = to;
  addr_lens_[i] = to_len;
  Datagram& d = dgrams_[i];
  d.iov[0] = {slot, head.size()};
  d.iov[1] = {const_cast<uint8_t*>(payload.data()), payload.size()};
  d.iovcnt = payload.empty() ? 1 : 2;
  if (head.empty() && !payload.empty()) {  // the payload alone
    d.iov[0] = d.iov[1];
    d.iovcnt = 1;
  } else if (payload.data() == slot + head.size()) {  // copied after the head
    d.iov[0].iov_len = bytes;
    d.iovcnt = 1;
  }
  d.bytes = static_cast<uint32_t>(bytes);
  d.next = kNone;
  ++n_;
  // Joins the newest message to the same destination when GSO can carry it
  // there: that message's segment size (or shorter, which ends the
  // message), within the kernel's segment and byte limits.
  if (gso_) {
    const size_t stop = messages_.size() > kLookback ? messages_.size() - kLookback : 0;
    for (size_t j = messages_.size(); j-- > stop;) {
      Message& m = messages_[j];
      if (addr_lens_[m.first] != to_len || std::memcmp(&addrs_[m.first], &to, to_len) != 0) {
        continue;
      }
      if (m.closed || bytes > m.segment || m.count >= kMaxSegments ||
          m.bytes + bytes > kMaxMessageBytes) {
        break;  // a new message, after this one
      }
      dgrams_[m.last].next = i;
      m.last = i;
      ++m.count;
      m.bytes += static_cast<uint32_t>(bytes);
      m.closed = bytes < m.segment;
      return true;
    }
  }
  messages_.push_back(
      Message{i, i, 1, static_cast<uint32_t>(bytes), static_cast<uint32_t>(bytes), false});
  return true;
}

void SendBatch::SendOneByOne(int fd, const Message& m, Result* r) {
  uint32_t left = m.count;
  for (uint32_t i = m.first; i != kNone; i = dgrams_[i].next, --left) {
    msghdr h{};
    h.msg_name = &addrs_[i];
    h.msg_namelen = addr_lens_[i];
    h.msg_iov = dgrams_[i].iov;
    h.msg_iovlen = dgrams_[i].iovcnt;
    ssize_t sent;
    do {
      sent = ::sendmsg(fd, &h, 0);
    } while (sent < 0 && errno == EINTR);
    if (sent >= 0) {
      ++r->sent;
      ++r->messages;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      r->would_block += left;
      return;
    } else {
      ++r->failed;
      r->last_errno = errno;
    }
  }
}

SendBatch::Result SendBatch::Flush(int fd) {
  Result r;
  const size_t nm = messages_.size();
  size_t cursor = 0;  // into iov_
  for (size_t j = 0; j < nm; ++j) {
    const Message& m = messages_[j];
    mmsghdr& mm = msgs_[j];
    mm = mmsghdr{};
    mm.msg_hdr.msg_name = &addrs_[m.first];
    mm.msg_hdr.msg_namelen = addr_lens_[m.first];
    mm.msg_hdr.msg_iov = &iov_[cursor];
    for (uint32_t i = m.first; i != kNone; i = dgrams_[i].next) {
      for (uint8_t k = 0; k < dgrams_[i].iovcnt; ++k) iov_[cursor++] = dgrams_[i].iov[k];
    }
    mm.msg_hdr.msg_iovlen = static_cast<size_t>(&iov_[cursor] - mm.msg_hdr.msg_iov);
    if (m.count > 1) {
      uint8_t* control = control_.data() + j * kSendControlBytes;
      std::memset(control, 0, kSendControlBytes);
      mm.msg_hdr.msg_control = control;
      mm.msg_hdr.msg_controllen = kSendControlBytes;
      cmsghdr* c = CMSG_FIRSTHDR(&mm.msg_hdr);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      const uint16_t segment = static_cast<uint16_t>(m.segment);
      std::memcpy(CMSG_DATA(c), &segment, sizeof(segment));
    }
  }
  size_t j = 0;
  while (j < nm) {
    const int sent = ::sendmmsg(fd, msgs_.data() + j, static_cast<unsigned>(nm - j), 0);
    if (sent > 0) {
      for (int k = 0; k < sent; ++k) r.sent += messages_[j + static_cast<size_t>(k)].count;
      r.messages += static_cast<size_t>(sent);
      j += static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    const int err = sent < 0 ? errno : EIO;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      for (; j < nm; ++j) r.would_block += messages_[j].count;
      break;
    }
    const Message& m = messages_[j];
    if (m.count > 1) {
      // The kernel refused the segmented message (no checksum offload on the
      // route, a segment over the path MTU, ...): send its datagrams one by
      // one, and stop segmenting.
      gso_ = false;
      r.gso_disabled = true;
      SendOneByOne(fd, m, &r);
      if (r.would_block > 0) {
        for (++j; j < nm; ++j) r.would_block += messages_[j].count;
        break;
      }
    } else {
      // The datagram was refused (e.g. EHOSTUNREACH, EMSGSIZE): skip it.
      r.last_errno = err;
      ++r.failed;
    }
    ++j;
  }
  n_ = 0;
  messages_.clear();
  shared_copy_ = {};
  shared_key_ = 0;
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

}  // namespace inca::net
