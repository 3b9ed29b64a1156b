#include "reflect/uring_reflector.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

#ifdef INCA_HAVE_LIBURING
#include <liburing.h>
#endif

namespace inca::reflect {

#ifdef INCA_HAVE_LIBURING

namespace {
constexpr size_t kSlotBytes = 65536;  // any UDP datagram

// user_data: slot index * 2 + (0 receive, 1 send).
uint64_t Tag(size_t slot, bool send) {
  return slot * 2 + (send ? 1 : 0);
}
}  // namespace

// One request's buffer, address and message header, reused for its receive
// and the send that reflects it.
struct Slot {
  std::vector<uint8_t> buf = std::vector<uint8_t>(kSlotBytes);
  sockaddr_storage peer{};
  iovec iov{};
  msghdr msg{};
};

struct UringReflector::Ring {
  io_uring ring{};
  bool ready = false;
  std::vector<Slot> slots;
  ~Ring() {
    if (ready) io_uring_queue_exit(&ring);
  }
  io_uring_sqe* Sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) {  // full: hand what is queued to the kernel first
      io_uring_submit(&ring);
      sqe = io_uring_get_sqe(&ring);
    }
    return sqe;
  }
  void Receive(int fd, size_t i) {
    Slot& s = slots[i];
    s.iov = {s.buf.data(), s.buf.size()};
    s.msg = {};
    s.msg.msg_name = &s.peer;
    s.msg.msg_namelen = sizeof(s.peer);
    s.msg.msg_iov = &s.iov;
    s.msg.msg_iovlen = 1;
    io_uring_sqe* sqe = Sqe();
    io_uring_prep_recvmsg(sqe, fd, &s.msg, 0);
    io_uring_sqe_set_data64(sqe, Tag(i, false));
  }
  void Send(int fd, size_t i, size_t bytes) {
    Slot& s = slots[i];
    s.iov.iov_len = bytes;
    s.msg.msg_namelen = s.peer.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    io_uring_sqe* sqe = Sqe();
    io_uring_prep_sendmsg(sqe, fd, &s.msg, 0);
    io_uring_sqe_set_data64(sqe, Tag(i, true));
  }
};

bool UringAvailable() {
  return true;
}

absl::StatusOr<std::unique_ptr<UringReflector>> UringReflector::Create(
    const UdpForwarderConfig& config) {
  if (!config.forward.empty()) {
    return absl::InvalidArgumentError("--io uring reflects only; drop --forward");
  }
  if (config.batch_size < 1 || config.batch_size > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size ", config.batch_size, " out of range [1, 1024]"));
  }
  auto listen = net::Endpoint::Resolve(config.listen);
  if (!listen.ok()) return listen.status();
  auto socket = net::BindUdp(*listen, net::UdpOptions{.buffer_bytes = config.socket_buffer_bytes,
                                                      .io = net::IoMode::kMmsg});
  if (!socket.ok()) return socket.status();
  auto ring = std::make_unique<Ring>();
  // A receive or a send per slot, and room for both while one turns over.
  const int err = io_uring_queue_init(2 * config.batch_size, &ring->ring, 0);
  if (err < 0) {
    return absl::UnavailableError(absl::StrCat("io_uring_queue_init: ", std::strerror(-err)));
  }
  ring->ready = true;
  ring->slots.resize(config.batch_size);
  return std::unique_ptr<UringReflector>(new UringReflector(std::move(*socket), std::move(ring)));
}

absl::Status UringReflector::Run() {
  const int fd = socket_.fd.get();
  for (size_t i = 0; i < ring_->slots.size(); ++i) ring_->Receive(fd, i);
  __kernel_timespec wait{0, 100'000'000};  // notice Stop() within 100 ms
  while (!stop_.load()) {
    io_uring_cqe* cqe = nullptr;
    const int r = io_uring_submit_and_wait_timeout(&ring_->ring, &cqe, 1, &wait, nullptr);
    if (r < 0 && r != -ETIME && r != -EINTR) {
      return absl::InternalError(absl::StrCat("io_uring_submit_and_wait: ", std::strerror(-r)));
    }
    unsigned head = 0, seen = 0;
    io_uring_for_each_cqe(&ring_->ring, head, cqe) {
      ++seen;
      const uint64_t tag = io_uring_cqe_get_data64(cqe);
      const size_t slot = tag / 2;
      if ((tag & 1) == 0) {
        if (cqe->res >= 0) {
          ++live_.datagrams_rx;
          ++live_.messages_rx;
          ring_->Send(fd, slot, static_cast<size_t>(cqe->res));
        } else {
          ring_->Receive(fd, slot);
        }
      } else {
        if (cqe->res >= 0) {
          ++live_.datagrams_tx;
          ++live_.messages_tx;
        } else {
          ++live_.send_errors;
        }
        ring_->Receive(fd, slot);
      }
    }
    io_uring_cq_advance(&ring_->ring, seen);
    absl::MutexLock lock(&mu_);
    snapshot_ = live_;
  }
  absl::MutexLock lock(&mu_);
  snapshot_ = live_;
  return absl::OkStatus();
}

#else  // !INCA_HAVE_LIBURING

struct UringReflector::Ring {};

bool UringAvailable() {
  return false;
}

absl::StatusOr<std::unique_ptr<UringReflector>> UringReflector::Create(
    const UdpForwarderConfig& /*config*/) {
  return absl::UnimplementedError("this build has no io_uring (install liburing-dev, rebuild)");
}

absl::Status UringReflector::Run() {
  return absl::UnimplementedError("no io_uring");
}

#endif  // INCA_HAVE_LIBURING

UringReflector::UringReflector(net::UdpSocket socket, std::unique_ptr<Ring> ring)
    : socket_(std::move(socket)), ring_(std::move(ring)) {}

UringReflector::~UringReflector() = default;

UdpForwarderCounters UringReflector::counters() const {
  absl::MutexLock lock(&mu_);
  return snapshot_;
}

}  // namespace inca::reflect
