// inca's one UDP layer (docs/design/net.md): a bound socket, batched
// receive and send with the kernel's UDP segmentation offloads, and an
// eventfd wake-up that is safe to trigger from a signal handler. Used by
// inca-switchd (CAIS and OLAF), udp-forwarder, the CAIS client, the OLAF
// worker and PS endpoints and switchd-bench.
//
// Two I/O paths, chosen per socket with IoMode:
//   kMmsg  one datagram per message: recvmmsg/sendmmsg batches.
//   kGso   the same calls, but consecutive datagrams to one destination of
//          one size are sent as one message with UDP_SEGMENT (GSO: the
//          kernel builds one large packet and splits it as late as it can,
//          on loopback and veth only at the receiving socket), and the
//          socket sets UDP_GRO, so one received message may hold several
//          datagrams of one sender, which RecvBatch splits again.
// Either way the caller sees datagrams, in order, with their sources: what
// crosses the wire is identical. kGso falls back to kMmsg per socket when
// the kernel lacks an offload (DetectOffloads(), reported by the callers
// at start) or refuses a segmented message (SendBatch::Result).
//
// Linux only. None of these classes are thread-safe except Wakeup::Notify().
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "net/endpoint.h"

namespace inca::net {

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

enum class IoMode : uint8_t { kMmsg, kGso };
// "mmsg" or "gso"; InvalidArgument naming both otherwise.
absl::StatusOr<IoMode> ParseIoMode(std::string_view text);
std::string_view ToString(IoMode mode);

// The most datagrams the kernel puts in one segmented message
// (UDP_MAX_SEGMENTS), and the most bytes one UDP message can carry.
inline constexpr size_t kMaxSegments = 64;
inline constexpr size_t kMaxMessageBytes = 65507;
// A receive slot that holds any UDP message, coalesced or not.
inline constexpr size_t kAnyMessageBytes = 65536;

// What the running kernel accepts on a UDP socket of `family` (AF_INET or
// AF_INET6), probed once per family on a throwaway socket.
struct Offloads {
  bool gso = false;              // UDP_SEGMENT (Linux 4.18)
  bool gro = false;              // UDP_GRO (Linux 5.0)
  std::string ToString() const;  // "gso=1 gro=1"
};
Offloads DetectOffloads(int family);

struct UdpOptions {
  // SO_RCVBUF and SO_SNDBUF asked for (SO_*BUFFORCE first, which needs
  // CAP_NET_ADMIN; the kernel caps the rest at net.core.[rw]mem_max);
  // 0 leaves the defaults.
  size_t buffer_bytes = 0;
  size_t send_buffer_bytes = 0;  // SO_SNDBUF when it should differ; 0 = buffer_bytes
  IoMode io = IoMode::kMmsg;
  bool nonblocking = false;  // SOCK_NONBLOCK (sends fail with EAGAIN instead of waiting)
};

struct UdpSocket {
  Fd fd;
  int family = 0;           // AF_INET or AF_INET6
  Endpoint local;           // the bound address, with the port the kernel chose for port 0
  size_t rcvbuf_bytes = 0;  // as granted (getsockopt; Linux reports twice the usable bytes)
  size_t sndbuf_bytes = 0;
  size_t requested_buffer_bytes = 0;
  IoMode io = IoMode::kMmsg;  // what was asked for
  bool gso = false;           // sends may be segmented (asked for, and the kernel has it)
  bool gro = false;           // UDP_GRO is set: receive slots must be kAnyMessageBytes

  // The kernel granted less buffer than asked for (callers warn).
  bool buffer_capped() const {
    return requested_buffer_bytes > 0 && rcvbuf_bytes < requested_buffer_bytes;
  }
  // "io=gso gso=1 gro=1 rcvbuf_bytes=... sndbuf_bytes=..." for log lines.
  std::string Describe() const;
};

// A UDP socket bound to `listen`. An IPv6 wildcard socket also accepts IPv4.
// Kernel receive timestamps (SO_TIMESTAMPNS) are requested. Unavailable
// (errno text) on failure.
absl::StatusOr<UdpSocket> BindUdp(const Endpoint& listen, const UdpOptions& options);
inline absl::StatusOr<UdpSocket> BindUdp(const Endpoint& listen, size_t buffer_bytes) {
  return BindUdp(listen, UdpOptions{.buffer_bytes = buffer_bytes});
}

// `count` receive messages of `slot_bytes` each, allocated once. Receive()
// hands back datagrams: a coalesced (GRO) message is split at its segment
// size, so data(i) is always one datagram as its sender wrote it.
class RecvBatch {
 public:
  RecvBatch(size_t count, size_t slot_bytes);
  // Slots of `max_datagram_bytes`, or kAnyMessageBytes when `socket` has GRO.
  static RecvBatch For(const UdpSocket& socket, size_t count, size_t max_datagram_bytes);
  ~RecvBatch();
  RecvBatch(RecvBatch&&) noexcept;
  RecvBatch& operator=(RecvBatch&&) noexcept;
  RecvBatch(const RecvBatch&) = delete;
  RecvBatch& operator=(const RecvBatch&) = delete;

  // One non-blocking recvmmsg. Returns the number of datagrams received (0
  // when none are waiting), or -errno on failure. Messages longer than
  // slot_bytes are truncated (truncated() says so).
  int Receive(int fd);

  std::span<const uint8_t> data(size_t i) const;
  const sockaddr_storage& source(size_t i) const;
  socklen_t source_len(size_t i) const;
  bool truncated(size_t i) const;
  // When the kernel received datagram i (CLOCK_REALTIME ns, SO_TIMESTAMPNS);
  // 0 when the socket delivered no timestamp.
  int64_t rx_realtime_ns(size_t i) const;
  // Messages the last Receive() read (fewer than datagrams with GRO).
  size_t messages() const { return messages_; }
  // True when the last Receive() filled every message slot: more is
  // probably waiting.
  bool filled() const { return messages_ == count_; }
  size_t capacity() const { return count_; }

 private:
  struct Datagram {
    uint32_t message;
    uint32_t offset;
    uint32_t length;
  };
  void Wire();

  size_t count_;
  size_t slot_bytes_;
  size_t messages_ = 0;
  std::vector<uint8_t> buf_;
  std::vector<sockaddr_storage> addrs_;
  std::vector<iovec> iov_;
  std::vector<mmsghdr> msgs_;
  std::vector<uint8_t> control_;  // per slot: SCM_TIMESTAMPNS and UDP_GRO
  std::vector<int64_t> rx_ns_;    // per message
  std::vector<Datagram> dgrams_;
};

// Waits up to `timeout_ms` (0: not at all) for `socket` to be readable, then
// receives batches until none is waiting or `max` datagrams were handed over
// (every datagram of the last batch is handed over), calling
// handle(batch, i) for each. Returns the datagrams handed over.
size_t ReceiveFor(const UdpSocket& socket, RecvBatch& batch, int timeout_ms, size_t max,
                  absl::FunctionRef<void(const RecvBatch&, size_t)> handle);

// Up to `count` outgoing datagrams, sent with sendmmsg. Add() copies a
// datagram of at most `slot_bytes`; AddGather() copies a short head and
// refers to a payload that must stay valid until Flush() (an empty head
// sends the payload alone). With `gso`,
// datagrams to one destination of one size (the last may be shorter) share
// a message with UDP_SEGMENT, even when datagrams to other destinations
// come between them (a switch multicasting each result to every rank): the
// order to each destination is kept, the interleaving across destinations
// is not.
class SendBatch {
 public:
  SendBatch(size_t count, size_t slot_bytes, int socket_family, bool gso = false);
  // For `socket`: its family, and GSO when the socket has it.
  static SendBatch For(const UdpSocket& socket, size_t count, size_t slot_bytes);
  ~SendBatch();
  SendBatch(SendBatch&&) noexcept;
  SendBatch& operator=(SendBatch&&) noexcept;
  SendBatch(const SendBatch&) = delete;
  SendBatch& operator=(const SendBatch&) = delete;

  bool full() const { return n_ == count_; }
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  bool gso() const { return gso_; }

  // Queues a copy of `data` to `to`. False (nothing queued) when the batch is
  // full, `data` exceeds slot_bytes, or `to` cannot be reached from a socket
  // of this family.
  bool Add(const Endpoint& to, std::span<const uint8_t> data);
  bool Add(const sockaddr_storage& to, socklen_t to_len, std::span<const uint8_t> data);
  // Queues `head` (copied) followed by `payload` (referenced) as one datagram.
  bool AddGather(const sockaddr_storage& to, socklen_t to_len, std::span<const uint8_t> head,
                 std::span<const uint8_t> payload);

  // Queues a copy of `head` followed by `payload` as one datagram. Payloads
  // passed with the same nonzero `share` hold the same bytes: when the last
  // payload copied in this batch had this `share`, the datagram references
  // that copy instead, so one result to many ports costs one copy. 0 always
  // copies. An empty `payload` queues `head` as Add does and leaves the last
  // copy shareable. False as Add (`head` and `payload` together over
  // slot_bytes, ...).
  bool AddShared(const Endpoint& to, std::span<const uint8_t> head,
                 std::span<const uint8_t> payload, uint64_t share);

  struct Result {
    size_t sent = 0;         // datagrams handed to the kernel
    size_t failed = 0;       // datagrams the kernel refused (skipped)
    size_t would_block = 0;  // not sent: a non-blocking socket's buffer was full
    size_t messages = 0;     // messages sent (fewer than datagrams with GSO)
    int last_errno = 0;      // of the last failure
    // A segmented message was refused and resent one datagram at a time;
    // GSO is off for this batch from now on (callers log it once).
    bool gso_disabled = false;
  };
  // Sends everything queued and empties the batch. A blocking socket waits
  // for buffer space; a non-blocking one stops at the first EAGAIN and
  // counts the rest as would_block. A datagram the kernel refuses is counted
  // and skipped.
  Result Flush(int fd);

 private:
  struct Datagram {
    iovec iov[2];    // head (in buf_), payload (referenced)
    uint8_t iovcnt;  // 1 or 2
    uint32_t bytes;
    uint32_t next;  // the next datagram of its message, or kNone
  };
  struct Message {
    uint32_t first;  // datagram indices
    uint32_t last;
    uint32_t count;
    uint32_t segment;  // bytes of every datagram but the last
    uint32_t bytes;
    bool closed;  // a shorter datagram ended it
  };
  static constexpr uint32_t kNone = UINT32_MAX;
  // How many open messages a datagram may search for its destination.
  static constexpr size_t kLookback = 16;
  bool Queue(const sockaddr_storage& to, socklen_t to_len, std::span<const uint8_t> head,
             std::span<const uint8_t> payload);
  void SendOneByOne(int fd, const Message& m, Result* r);

  size_t count_;
  size_t slot_bytes_;
  int family_;
  bool gso_;
  size_t n_ = 0;
  // The last payload AddShared copied in this batch, and its `share`.
  std::span<const uint8_t> shared_copy_;
  uint64_t shared_key_ = 0;
  std::vector<uint8_t> buf_;
  std::vector<sockaddr_storage> addrs_;  // per datagram
  std::vector<socklen_t> addr_lens_;
  std::vector<Datagram> dgrams_;
  std::vector<Message> messages_;
  std::vector<iovec> iov_;  // built by Flush: each message's iovecs in order
  std::vector<mmsghdr> msgs_;
  std::vector<uint8_t> control_;  // per message: one UDP_SEGMENT
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

}  // namespace inca::net
