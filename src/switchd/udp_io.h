// Batched UDP I/O for inca-switchd and udp-forwarder: a bound socket,
// preallocated recvmmsg/sendmmsg batches, and an eventfd wake-up that is
// safe to trigger from a signal handler.
//
// Linux only. None of these classes are thread-safe except Wakeup::Notify().
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "switchd/endpoint.h"

namespace inca::switchd {

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct UdpSocket {
  Fd fd;
  int family = 0;           // AF_INET or AF_INET6
  Endpoint local;           // the bound address, with the port the kernel chose for port 0
  size_t rcvbuf_bytes = 0;  // as granted (getsockopt; Linux reports twice the usable bytes)
  size_t sndbuf_bytes = 0;
};

// A UDP socket bound to `listen`. Asks for `buffer_bytes` of SO_RCVBUF and
// SO_SNDBUF (SO_*BUFFORCE first, which needs CAP_NET_ADMIN; the kernel caps
// the rest at net.core.[rw]mem_max); 0 leaves the defaults. An IPv6
// wildcard socket also accepts IPv4. Kernel receive timestamps
// (SO_TIMESTAMPNS) are requested. Unavailable (errno text) on failure.
absl::StatusOr<UdpSocket> BindUdp(const Endpoint& listen, size_t buffer_bytes);

// `count` receive slots of `slot_bytes` each, allocated once.
class RecvBatch {
 public:
  RecvBatch(size_t count, size_t slot_bytes);
  ~RecvBatch();
  RecvBatch(const RecvBatch&) = delete;
  RecvBatch& operator=(const RecvBatch&) = delete;

  // One non-blocking recvmmsg. Returns the number of datagrams received (0
  // when none are waiting), or -errno on failure. Datagrams longer than
  // slot_bytes are truncated (truncated() says so).
  int Receive(int fd);

  std::span<const uint8_t> data(size_t i) const;
  const sockaddr_storage& source(size_t i) const { return addrs_[i]; }
  socklen_t source_len(size_t i) const;
  bool truncated(size_t i) const;
  // When the kernel received datagram i (CLOCK_REALTIME ns, SO_TIMESTAMPNS);
  // 0 when the socket delivered no timestamp.
  int64_t rx_realtime_ns(size_t i) const;
  size_t capacity() const { return count_; }

 private:
  size_t count_;
  size_t slot_bytes_;
  std::vector<uint8_t> buf_;
  std::vector<sockaddr_storage> addrs_;
  std::vector<iovec> iov_;
  std::vector<mmsghdr> msgs_;
  std::vector<uint8_t> control_;  // per slot: room for one SCM_TIMESTAMPNS
};

// Up to `count` outgoing datagrams of at most `slot_bytes`, copied in and
// sent with sendmmsg.
class SendBatch {
 public:
  SendBatch(size_t count, size_t slot_bytes, int socket_family);
  ~SendBatch();
  SendBatch(const SendBatch&) = delete;
  SendBatch& operator=(const SendBatch&) = delete;

  bool full() const { return n_ == count_; }
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }

  // Queues a copy of `data` to `to`. False (nothing queued) when the batch is
  // full, `data` exceeds slot_bytes, or `to` cannot be reached from a socket
  // of this family.
  bool Add(const Endpoint& to, std::span<const uint8_t> data);
  bool Add(const sockaddr_storage& to, socklen_t to_len, std::span<const uint8_t> data);

  struct Result {
    size_t sent = 0;
    size_t failed = 0;
    int last_errno = 0;  // of the last failure
  };
  // Sends everything queued (blocking socket: waits for buffer space) and
  // empties the batch. A datagram the kernel refuses is counted and skipped.
  Result Flush(int fd);

 private:
  size_t count_;
  size_t slot_bytes_;
  int family_;
  size_t n_ = 0;
  std::vector<uint8_t> buf_;
  std::vector<sockaddr_storage> addrs_;
  std::vector<iovec> iov_;
  std::vector<mmsghdr> msgs_;
};

// An eventfd to interrupt poll(). Notify() is async-signal-safe and may be
// called from any thread.
class Wakeup {
 public:
  static absl::StatusOr<Wakeup> Create();
  void Notify() const noexcept;
  void Drain() const noexcept;  // clears pending notifications
  int fd() const { return fd_.get(); }

 private:
  explicit Wakeup(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
};

}  // namespace inca::switchd
