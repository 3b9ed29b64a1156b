#include "client/switch_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <numeric>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace inca::client {

namespace {

using Clock = std::chrono::steady_clock;
using wire::CaisOp;

constexpr size_t kBatch = 32;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

void SetBuffer(int fd, int opt_force, int opt, int bytes) {
  // Root may exceed net.core.{r,w}mem_max; others get what the kernel allows.
  if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof(bytes)) != 0) {
    setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
  }
}

}  // namespace

absl::StatusOr<sockaddr_in> ParseIpv4Endpoint(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "' must be HOST:PORT, e.g. 127.0.0.1:9410"));
  }
  std::string host = address.substr(0, colon);
  if (host == "localhost" || host.empty()) host = "127.0.0.1";
  uint32_t port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "': port must be 1..65535"));
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "': '", host, "' is not an IPv4 address"));
  }
  return sa;
}

SwitchTransport::SwitchTransport(const CommunicatorOptions& o) : options_(o) {}

SwitchTransport::~SwitchTransport() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::unique_ptr<SwitchTransport>> SwitchTransport::Create(
    const CommunicatorOptions& o) {
  auto sw = ParseIpv4Endpoint(o.switch_address);
  if (!sw.ok()) return sw.status();
  auto local = ParseIpv4Endpoint(o.bind_ip + ":1");
  if (!local.ok()) return local.status();
  std::unique_ptr<SwitchTransport> t(new SwitchTransport(o));
  t->switch_addr_ = *sw;
  t->fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (t->fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in bind_addr = *local;
  bind_addr.sin_port = 0;
  if (bind(t->fd_, reinterpret_cast<sockaddr*>(&bind_addr), sizeof(bind_addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("bind ", o.bind_ip, ": ", std::strerror(errno)));
  }
  SetBuffer(t->fd_, SO_RCVBUFFORCE, SO_RCVBUF, 16 << 20);
  SetBuffer(t->fd_, SO_SNDBUFFORCE, SO_SNDBUF, 4 << 20);
  t->recv_buf_.resize(kBatch * (wire::kCaisHeaderBytes + o.chunk_size + 64));
  t->early_limit_ = 2 * size_t{o.max_pending_chunks} * static_cast<size_t>(o.world_size);
  TransportConfig& c = t->core_config_;
  c.group_id = o.group_id;
  c.world_size = o.world_size;
  c.chunk_size = o.chunk_size;
  c.max_window = o.max_pending_chunks;
  c.min_window = std::min<uint32_t>(2, o.max_pending_chunks);
  c.initial_window = std::min<uint32_t>(16, o.max_pending_chunks);
  c.rto_min_ns = int64_t{o.retransmit_timeout_ms} * 1'000'000;
  c.rto_max_ns = int64_t{o.max_retransmit_timeout_ms} * 1'000'000;
  c.give_up_ns = int64_t{o.switch_timeout_ms} * 1'000'000;
  c.competitive = o.competitive;
  c.trace_capacity = o.window_trace_samples;
  c.pacing_gain = o.pacing_gain;
  t->path_ = std::make_unique<PathState>(c);
  std::random_device rd;
  t->nonce_ = rd();
  return t;
}

bool SwitchTransport::Join(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  wire::MgmtMessage join;
  join.type = wire::MgmtType::kJoin;
  join.group_id = options_.group_id;
  join.rank = static_cast<uint16_t>(options_.rank);
  join.world_size = static_cast<uint16_t>(options_.world_size);
  join.port =
      options_.switch_port < 0 ? wire::kAnyPort : static_cast<uint16_t>(options_.switch_port);
  join.nonce = ++nonce_;
  std::vector<uint8_t> bytes;
  wire::SerializeMgmt(join, &bytes);
  auto next_send = Clock::now();
  while (Clock::now() < deadline) {
    if (Clock::now() >= next_send) {
      sendto(fd_, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&switch_addr_),
             sizeof(switch_addr_));
      next_send = Clock::now() + std::chrono::milliseconds(20);
    }
    pollfd p{fd_, POLLIN, 0};
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::min(next_send, deadline) - Clock::now());
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(0, wait.count()))) <= 0) continue;
    for (;;) {
      const ssize_t n = recv(fd_, recv_buf_.data(), recv_buf_.size(), 0);
      if (n <= 0) break;
      wire::MgmtMessage reply;
      if (!wire::ParseMgmt({recv_buf_.data(), static_cast<size_t>(n)}, &reply)) continue;
      if (reply.type != wire::MgmtType::kJoinReply || reply.nonce != join.nonce) continue;
      if (reply.status == wire::MgmtStatus::kRefused) {
        last_refusal_ = reply.reason;
        ready_ = false;
        return false;
      }
      if (reply.status != wire::MgmtStatus::kOk) continue;  // pending
      if (reply.rank_ports.size() != static_cast<size_t>(options_.world_size)) continue;
      rank_ports_ = reply.rank_ports;
      seq_base_ = reply.seq_base;
      // Port index i (ascending port order, the switch's input order) and
      // the rank there.
      const int n_ranks = options_.world_size;
      std::vector<int>& at = layout_.rank_at_index;
      at.resize(static_cast<size_t>(n_ranks));
      std::iota(at.begin(), at.end(), 0);
      std::sort(at.begin(), at.end(), [&](int a, int b) {
        return rank_ports_[static_cast<size_t>(a)] < rank_ports_[static_cast<size_t>(b)];
      });
      layout_.index_of_rank.resize(static_cast<size_t>(n_ranks));
      for (int i = 0; i < n_ranks; ++i) {
        layout_.index_of_rank[static_cast<size_t>(at[static_cast<size_t>(i)])] = i;
      }
      layout_.my_index = layout_.index_of_rank[static_cast<size_t>(options_.rank)];
      ready_ = true;
      return true;
    }
  }
  ready_ = false;
  return false;
}

void SwitchTransport::Report(uint64_t bytes, std::chrono::nanoseconds took, wire::ReportPath path) {
  if (bytes == 0) return;
  const auto now = std::chrono::steady_clock::now();
  auto& last = last_report_[static_cast<size_t>(path)][static_cast<size_t>(wire::SizeClass(bytes))];
  if (now - last < std::chrono::milliseconds(5)) return;
  last = now;
  wire::MgmtMessage m;
  m.type = wire::MgmtType::kReport;
  m.group_id = options_.group_id;
  m.rank = static_cast<uint16_t>(options_.rank);
  m.world_size = static_cast<uint16_t>(options_.world_size);
  m.report_bytes = bytes;
  const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
  m.report_duration_us = static_cast<uint32_t>(std::clamp<int64_t>(us, 1, UINT32_MAX));
  m.report_path = path;
  std::vector<uint8_t> datagram;
  wire::SerializeMgmt(m, &datagram);
  sendto(fd_, datagram.data(), datagram.size(), 0, reinterpret_cast<const sockaddr*>(&switch_addr_),
         sizeof(switch_addr_));
}

void SwitchTransport::Leave() {
  wire::MgmtMessage leave;
  leave.type = wire::MgmtType::kLeave;
  leave.group_id = options_.group_id;
  leave.rank = static_cast<uint16_t>(options_.rank);
  leave.world_size = static_cast<uint16_t>(options_.world_size);
  leave.nonce = ++nonce_;
  std::vector<uint8_t> bytes;
  wire::SerializeMgmt(leave, &bytes);
  sendto(fd_, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&switch_addr_),
         sizeof(switch_addr_));
  ready_ = false;
}

namespace {

// Batches the core's datagrams into sendmmsg calls.
class BatchSender final : public DatagramSink {
 public:
  BatchSender(int fd, const sockaddr_in* to) : fd_(fd), to_(to) {}
  ~BatchSender() override { Flush(); }

  void Send(const wire::CaisHeader& h, std::span<const uint8_t> payload) override {
    wire::SerializeCaisHeader(h, hdrs_[n_]);
    iovec* v = &iov_[2 * n_];
    v[0] = {hdrs_[n_].data(), wire::kCaisHeaderBytes};
    v[1] = {const_cast<uint8_t*>(payload.data()), payload.size()};
    mmsghdr& m = msgs_[n_];
    m = {};
    m.msg_hdr.msg_name = const_cast<sockaddr_in*>(to_);
    m.msg_hdr.msg_namelen = sizeof(*to_);
    m.msg_hdr.msg_iov = v;
    m.msg_hdr.msg_iovlen = payload.empty() ? 1 : 2;
    if (++n_ == kBatch) Flush();
  }

  void Flush() {
    size_t done = 0;
    while (done < n_) {
      const int k = sendmmsg(fd_, msgs_.data() + done, static_cast<unsigned>(n_ - done), 0);
      if (k <= 0) break;  // buffer full or error: treated as loss, retransmitted later
      done += static_cast<size_t>(k);
    }
    n_ = 0;
  }

 private:
  int fd_;
  const sockaddr_in* to_;
  std::array<std::array<uint8_t, wire::kCaisHeaderBytes>, kBatch> hdrs_{};
  std::array<iovec, 2 * kBatch> iov_{};
  std::array<mmsghdr, kBatch> msgs_{};
  size_t n_ = 0;
};

}  // namespace

SwitchPhaseResult SwitchTransport::Run(const SwitchOp& op) {
  SwitchPhaseResult r;
  OpCore core(core_config_, layout_, op, path_.get(), &r);
  core.Start(NowNs());
  // Replay what arrived for this operation before it started.
  std::deque<std::vector<uint8_t>> early;
  early.swap(early_);
  for (const auto& pkt : early) {
    if (core.IsEarly(pkt)) {
      early_.push_back(pkt);
    } else {
      core.OnDatagram(pkt, NowNs());
    }
  }
  BatchSender sender(fd_, &switch_addr_);
  std::array<mmsghdr, kBatch> rmsgs{};
  std::array<iovec, kBatch> riov{};
  const size_t slot = recv_buf_.size() / kBatch;
  while (!core.Finished()) {
    int64_t now = NowNs();
    core.Pump(now, sender);
    sender.Flush();
    if (core.Finished()) break;
    // Wait for results until the core's next deadline (at most 50 ms).
    const int64_t wait_ns = std::clamp<int64_t>(core.NextDeadline() - now, 0, 50'000'000);
    pollfd p{fd_, POLLIN, 0};
    const timespec ts{0, static_cast<long>(wait_ns)};
    if (ppoll(&p, 1, &ts, nullptr) <= 0) continue;
    for (int round = 0; round < 64 && !core.Finished(); ++round) {
      for (size_t i = 0; i < kBatch; ++i) {
        riov[i] = {recv_buf_.data() + i * slot, slot};
        rmsgs[i] = {};
        rmsgs[i].msg_hdr.msg_iov = &riov[i];
        rmsgs[i].msg_hdr.msg_iovlen = 1;
      }
      const int n = recvmmsg(fd_, rmsgs.data(), kBatch, MSG_DONTWAIT, nullptr);
      if (n <= 0) break;
      now = NowNs();
      for (int i = 0; i < n; ++i) {
        const std::span<const uint8_t> d(recv_buf_.data() + static_cast<size_t>(i) * slot,
                                         rmsgs[static_cast<size_t>(i)].msg_len);
        if (core.IsEarly(d)) {
          if (early_.size() >= early_limit_) early_.pop_front();
          early_.emplace_back(d.begin(), d.end());
        } else {
          core.OnDatagram(d, now);
        }
      }
      if (static_cast<size_t>(n) < kBatch) break;
      // Keep the window full while draining a burst of results.
      core.Pump(now, sender);
      sender.Flush();
    }
  }
  return r;
}

}  // namespace inca::client
