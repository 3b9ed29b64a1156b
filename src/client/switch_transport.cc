#include "client/switch_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
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

uint64_t ChunkCount(const SwitchOp& op, uint32_t chunk_size, int world_size) {
  const size_t per = chunk_size / wire::ElementBytes(op.type);
  const uint64_t chunks = (op.count + per - 1) / per;
  return op.op == CaisOp::kAllGather || op.op == CaisOp::kReduceScatter
             ? chunks * static_cast<uint64_t>(world_size)
             : chunks;
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
  std::random_device rd;
  t->nonce_ = rd();
  return t;
}

int64_t SwitchTransport::RtoNs() const {
  const int64_t floor_ns = int64_t{options_.retransmit_timeout_ms} * 1'000'000;
  const int64_t cap_ns = int64_t{options_.max_retransmit_timeout_ms} * 1'000'000;
  if (srtt_ns_ == 0) return floor_ns;
  const auto est = static_cast<int64_t>(srtt_ns_ + 4 * rttvar_ns_);
  return std::clamp(est, floor_ns, cap_ns);
}

void SwitchTransport::SampleRtt(int64_t rtt_ns) {
  const auto r = static_cast<double>(rtt_ns);
  if (srtt_ns_ == 0) {
    srtt_ns_ = r;
    rttvar_ns_ = r / 2;
  } else {
    rttvar_ns_ = 0.75 * rttvar_ns_ + 0.25 * std::abs(srtt_ns_ - r);
    srtt_ns_ = 0.875 * srtt_ns_ + 0.125 * r;
  }
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
      const int n_ranks = options_.world_size;
      rank_at_index_.resize(static_cast<size_t>(n_ranks));
      std::iota(rank_at_index_.begin(), rank_at_index_.end(), 0);
      std::sort(rank_at_index_.begin(), rank_at_index_.end(), [&](int a, int b) {
        return rank_ports_[static_cast<size_t>(a)] < rank_ports_[static_cast<size_t>(b)];
      });
      index_of_rank_.resize(static_cast<size_t>(n_ranks));
      for (int i = 0; i < n_ranks; ++i) {
        index_of_rank_[static_cast<size_t>(rank_at_index_[static_cast<size_t>(i)])] = i;
      }
      ready_ = true;
      return true;
    }
  }
  ready_ = false;
  return false;
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

// One operation's state. Chunk c's bytes: see Locate().
struct SwitchTransport::Engine {
  SwitchTransport& t;
  const SwitchOp& op;
  SwitchPhaseResult& r;
  size_t esize;
  size_t per;                     // elements per chunk
  uint64_t cpb;                   // chunks per block (AllGather, ReduceScatter) or in total
  int my_index;                   // this rank's position in port order
  int root_index;                 // Broadcast
  std::vector<int64_t> deadline;  // own chunks in flight: retransmit time
  std::vector<int64_t> rto;
  std::vector<int64_t> first_sent;  // for RTT samples; -1 once retransmitted
  std::deque<uint32_t> inflight;    // own chunks sent, in send order (done ones pruned lazily)
  uint32_t outstanding = 0;         // own chunks sent and not yet done: the window
  bool handed_back = false;         // a fallback notice arrived: leave the switch
  uint32_t next_own = 0;
  uint64_t remaining;
  int64_t last_progress;
  int64_t request_at;
  int64_t request_rto;
  uint32_t request_cursor = 0;
  // AllGather: highest chunk received from each owner's block. Owners send
  // in ascending order, so a missing chunk below it was most likely lost.
  std::vector<int64_t> highest;
  // Send batch: header storage + iovecs.
  std::vector<std::array<uint8_t, wire::kCaisHeaderBytes>> hdrs;
  std::vector<iovec> iov;
  std::vector<mmsghdr> msgs;
  size_t batched = 0;

  Engine(SwitchTransport& tt, const SwitchOp& o, SwitchPhaseResult& rr)
      : t(tt),
        op(o),
        r(rr),
        esize(wire::ElementBytes(o.type)),
        per(tt.options_.chunk_size / wire::ElementBytes(o.type)),
        cpb((o.count + per - 1) / per),
        my_index(tt.index_of_rank_[static_cast<size_t>(tt.options_.rank)]),
        root_index(o.op == CaisOp::kBroadcast ? tt.index_of_rank_[static_cast<size_t>(o.root)] : 0),
        hdrs(kBatch),
        iov(2 * kBatch),
        msgs(kBatch) {
    r.total_chunks =
        static_cast<uint32_t>(ChunkCount(op, t.options_.chunk_size, t.options_.world_size));
    r.have.assign(r.total_chunks, 0);
    deadline.assign(r.total_chunks, 0);
    rto.assign(r.total_chunks, t.RtoNs());
    first_sent.assign(r.total_chunks, -1);
    remaining = r.total_chunks;
    last_progress = NowNs();
    request_rto = t.RtoNs();
    request_at = last_progress + request_rto;
    if (op.op == CaisOp::kAllGather) {
      highest.resize(static_cast<size_t>(t.options_.world_size));
      for (size_t b = 0; b < highest.size(); ++b) highest[b] = static_cast<int64_t>(b * cpb) - 1;
    }
  }

  // Worth asking the switch for chunk c (not owned here, still missing)?
  // Gaps below a later chunk of the same owner at once; the next window of
  // chunks above it only after two quiet spells (a lost tail).
  bool WorthRequesting(uint32_t c, bool tail_ok) const {
    if (op.op != CaisOp::kAllGather) return tail_ok;
    const int64_t h = highest[c / cpb];
    return static_cast<int64_t>(c) < h ||
           (tail_ok && static_cast<int64_t>(c) <= h + t.options_.max_pending_chunks);
  }

  bool Blocked() const { return op.op == CaisOp::kAllGather || op.op == CaisOp::kReduceScatter; }
  // Chunks this rank contributes.
  bool Own(uint32_t c) const {
    switch (op.op) {
      case CaisOp::kAllGather: return static_cast<int>(c / cpb) == my_index;
      case CaisOp::kBroadcast: return my_index == root_index;
      default: return true;
    }
  }
  // Chunks whose result comes to this rank (the others of a ReduceScatter
  // come back as ACKs).
  bool Receives(uint32_t c) const {
    return op.op != CaisOp::kReduceScatter || static_cast<int>(c / cpb) == my_index;
  }
  // Payload bytes of chunk c.
  size_t Length(uint32_t c) const {
    const uint64_t j = Blocked() ? c % cpb : c;
    return std::min<size_t>(per, op.count - j * per) * esize;
  }
  // Where chunk c's result goes in this rank's output (only if Receives(c)).
  uint8_t* Locate(uint32_t c) const {
    if (op.op == CaisOp::kAllGather) {
      const uint64_t block = c / cpb, j = c % cpb;
      const int rank = t.rank_at_index_[block];
      return op.out + static_cast<size_t>(rank) * op.block_stride_bytes + j * per * esize;
    }
    if (op.op == CaisOp::kReduceScatter) return op.out + (c % cpb) * per * esize;
    return op.data + size_t{c} * per * esize;
  }
  // The bytes this rank contributes for an own chunk. ReduceScatter: block
  // b of the switch's port order belongs to the rank at that port.
  const uint8_t* Source(uint32_t c) const {
    if (op.op == CaisOp::kAllGather) return op.in + (c % cpb) * per * esize;
    if (op.op == CaisOp::kReduceScatter) {
      const int rank = t.rank_at_index_[c / cpb];
      return op.in + static_cast<size_t>(rank) * op.block_stride_bytes + (c % cpb) * per * esize;
    }
    return op.data + size_t{c} * per * esize;
  }

  void Queue(uint32_t c, bool retransmit, bool request) {
    wire::CaisHeader h;
    h.op = op.op;
    h.group_id = t.options_.group_id;
    h.layer_id = op.layer_id;
    h.chunk_id = static_cast<uint16_t>(c);
    h.total_chunks = static_cast<uint16_t>(r.total_chunks);
    h.seq_num = op.seq;
    h.reduce_op = op.reduce;
    h.dtype = op.type;
    h.block = op.op == CaisOp::kBroadcast ? static_cast<uint8_t>(root_index) : uint8_t{0};
    h.flags = retransmit ? wire::cais_flags::kRetransmit : uint8_t{0};
    const size_t len = request ? 0 : Length(c);
    h.payload_len = static_cast<uint32_t>(len);
    wire::SerializeCaisHeader(h, hdrs[batched]);
    iovec* v = &iov[2 * batched];
    v[0] = {hdrs[batched].data(), wire::kCaisHeaderBytes};
    v[1] = {const_cast<uint8_t*>(request ? nullptr : Source(c)), len};
    mmsghdr& m = msgs[batched];
    m = {};
    m.msg_hdr.msg_name = &t.switch_addr_;
    m.msg_hdr.msg_namelen = sizeof(t.switch_addr_);
    m.msg_hdr.msg_iov = v;
    m.msg_hdr.msg_iovlen = len ? 2 : 1;
    if (++batched == kBatch) Flush();
  }

  void Flush() {
    size_t done = 0;
    while (done < batched) {
      const int n = sendmmsg(t.fd_, msgs.data() + done, static_cast<unsigned>(batched - done), 0);
      if (n <= 0) break;  // buffer full or error: treated as loss, retransmitted later
      done += static_cast<size_t>(n);
    }
    batched = 0;
  }

  void Complete(uint32_t c, bool fallback, int64_t now) {
    if (first_sent[c] >= 0) t.SampleRtt(now - first_sent[c]);  // Karn: never after a resend
    if (Own(c) && deadline[c] > 0) --outstanding;
    r.have[c] = fallback ? 0 : 1;
    if (fallback) r.fallback_notice = true;
    deadline[c] = -1;  // marks done
    --remaining;
    last_progress = now;
    request_rto = t.RtoNs();
    request_at = now + request_rto;
  }

  void OnDatagram(std::span<const uint8_t> d, int64_t now) {
    wire::CaisPacketView v;
    if (wire::ParseCais(d, &v) != wire::CaisParseError::kOk) return;
    const wire::CaisHeader& h = v.header;
    const uint32_t ahead = h.seq_num - op.seq;  // modulo 2^32
    if (ahead == 1 || ahead == 2) {
      if (t.early_.size() >= t.early_limit_) t.early_.pop_front();
      t.early_.emplace_back(d.begin(), d.end());
      return;
    }
    if (!h.has_flag(wire::cais_flags::kResult) || h.seq_num != op.seq ||
        h.group_id != t.options_.group_id || h.layer_id != op.layer_id || h.op != op.op ||
        h.total_chunks != r.total_chunks) {
      return;  // a late packet of an earlier operation, or not ours
    }
    const uint32_t c = h.chunk_id;
    if (deadline[c] < 0) return;  // already done
    if (h.has_flag(wire::cais_flags::kDeclined)) {
      // The offload policy sent the whole operation to the host path; no
      // chunk of it was reduced in the switch.
      r.declined = true;
      Complete(c, true, now);
      handed_back = true;
      return;
    }
    if (h.has_flag(wire::cais_flags::kFallback)) {
      // The switch gave this chunk up, so the operation needs the host path
      // anyway: stop here rather than trickle on (the chunks already done
      // are kept; recovery completes the rest).
      ++r.notices;
      Complete(c, true, now);
      handed_back = true;
      return;
    }
    if (h.has_flag(wire::cais_flags::kAck)) {
      // ReduceScatter: another rank's chunk is complete; nothing to copy.
      if (!Receives(c)) Complete(c, false, now);
      return;
    }
    if (!Receives(c) || v.payload.size() != Length(c)) return;
    std::memcpy(Locate(c), v.payload.data(), v.payload.size());
    if (!highest.empty()) {
      int64_t& top = highest[c / cpb];
      top = std::max<int64_t>(top, c);
    }
    Complete(c, false, now);
  }

  void Run() {
    // Replay what arrived for this operation before it started.
    std::deque<std::vector<uint8_t>> early;
    early.swap(t.early_);
    const int64_t start = NowNs();
    for (const auto& pkt : early) OnDatagram(pkt, start);
    const int64_t max_rto = int64_t{t.options_.max_retransmit_timeout_ms} * 1'000'000;
    const int64_t give_up = int64_t{t.options_.switch_timeout_ms} * 1'000'000;
    std::vector<mmsghdr> rmsgs(kBatch);
    std::vector<iovec> riov(kBatch);
    const size_t slot = t.recv_buf_.size() / kBatch;
    while (remaining > 0 && !handed_back) {
      int64_t now = NowNs();
      if (now - last_progress > give_up) break;
      // Fill the window with own chunks.
      while (!inflight.empty() && deadline[inflight.front()] < 0) inflight.pop_front();
      if (inflight.size() > 4 * size_t{t.options_.max_pending_chunks}) {
        std::erase_if(inflight, [&](uint32_t c) { return deadline[c] < 0; });
      }
      while (next_own < r.total_chunks && outstanding < t.options_.max_pending_chunks) {
        const uint32_t c = next_own++;
        if (!Own(c) || deadline[c] < 0) continue;
        Queue(c, false, false);
        ++r.sent;
        rto[c] = t.RtoNs();
        first_sent[c] = now;
        deadline[c] = now + rto[c];
        inflight.push_back(c);
        ++outstanding;
      }
      // Retransmit own chunks whose timer expired (data: the switch
      // answers with the result if it already has it).
      int64_t next_event = now + give_up;
      for (uint32_t c : inflight) {
        if (deadline[c] < 0) continue;
        if (deadline[c] <= now) {
          Queue(c, true, false);
          ++r.retransmitted;
          first_sent[c] = -1;
          rto[c] = std::min(rto[c] * 2, max_rto);
          deadline[c] = now + rto[c];
        }
        next_event = std::min(next_event, deadline[c]);
      }
      // Chunks owned by others: after a quiet spell, ask for missing ones.
      const bool awaits_others = op.op != CaisOp::kAllReduce && op.op != CaisOp::kReduceScatter;
      if (awaits_others) {
        if (now >= request_at) {
          const bool tail_ok = request_rto > t.RtoNs();
          uint32_t asked = 0;
          for (uint32_t k = 0; k < r.total_chunks && asked < t.options_.max_pending_chunks; ++k) {
            const uint32_t c = (request_cursor + k) % r.total_chunks;
            if (deadline[c] < 0 || Own(c) || !WorthRequesting(c, tail_ok)) continue;
            Queue(c, true, true);
            ++r.requests;
            ++asked;
            request_cursor = c + 1;
          }
          request_rto = std::min(request_rto * 2, max_rto);
          request_at = now + request_rto;
        }
        next_event = std::min(next_event, request_at);
      }
      Flush();
      // Wait for results.
      pollfd p{t.fd_, POLLIN, 0};
      const int64_t wait_ns = std::max<int64_t>(0, next_event - now);
      const int wait_ms = static_cast<int>(std::min<int64_t>(wait_ns / 1'000'000 + 1, 50));
      if (poll(&p, 1, wait_ms) <= 0) continue;
      for (int round = 0; round < 64 && remaining > 0; ++round) {
        for (size_t i = 0; i < kBatch; ++i) {
          riov[i] = {t.recv_buf_.data() + i * slot, slot};
          rmsgs[i] = {};
          rmsgs[i].msg_hdr.msg_iov = &riov[i];
          rmsgs[i].msg_hdr.msg_iovlen = 1;
        }
        const int n = recvmmsg(t.fd_, rmsgs.data(), kBatch, MSG_DONTWAIT, nullptr);
        if (n <= 0) break;
        now = NowNs();
        for (int i = 0; i < n; ++i) {
          OnDatagram({t.recv_buf_.data() + static_cast<size_t>(i) * slot,
                      rmsgs[static_cast<size_t>(i)].msg_len},
                     now);
        }
        if (static_cast<size_t>(n) < kBatch) break;
      }
    }
    Flush();
    r.complete = remaining == 0 && !r.fallback_notice && !handed_back;
  }
};

SwitchPhaseResult SwitchTransport::Run(const SwitchOp& op) {
  SwitchPhaseResult r;
  Engine e(*this, op, r);
  if (r.total_chunks == 0) {
    r.complete = true;
    return r;
  }
  e.Run();
  return r;
}

}  // namespace inca::client
