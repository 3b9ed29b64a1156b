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
#include <memory>
#include <random>
#include <span>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace inca::client {

namespace {

using Clock = std::chrono::steady_clock;
using wire::CaisOp;

// Datagrams per send batch and messages per receive batch.
constexpr size_t kBatch = 64;
constexpr size_t kRecvBatch = 32;

int64_t NowNs() {
  return net::SystemClock().NowNs();
}

bool IsWildcardOrLoopbackV4(const std::string& ip) {
  return ip == "127.0.0.1" || ip == "0.0.0.0" || ip == "localhost";
}

}  // namespace

absl::StatusOr<SwitchAddresses> ResolveSwitchAddresses(const std::string& switch_address,
                                                       const std::string& bind_ip) {
  std::string sw_text = switch_address;
  if (absl::StartsWith(sw_text, "localhost:")) sw_text = "127.0.0.1" + sw_text.substr(9);
  auto sw = net::Endpoint::Resolve(sw_text);
  if (!sw.ok()) return sw.status();
  if (sw->port() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("switch address '", switch_address, "': port must be 1..65535"));
  }
  std::string ip = bind_ip.empty() || bind_ip == "localhost" ? "127.0.0.1" : bind_ip;
  if (sw->is_v6() && IsWildcardOrLoopbackV4(ip)) ip = "::";  // the default bind, an IPv6 switch
  const bool v6_text = ip.find(':') != std::string::npos;
  if (v6_text && ip.front() != '[') ip = absl::StrCat("[", ip, "]");
  auto local = net::Endpoint::Parse(absl::StrCat(ip, ":0"));
  if (!local.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bind_ip '", bind_ip, "' is not a numeric IPv4 or IPv6 address"));
  }
  if (sw->is_v6() && !local->is_v6()) {
    return absl::InvalidArgumentError(absl::StrCat("bind_ip '", bind_ip,
                                                   "' is IPv4 but the switch ", sw->ToString(),
                                                   " is IPv6: set an IPv6 bind_ip (INCA_BIND_IP)"));
  }
  return SwitchAddresses{*sw, *local};
}

SwitchTransport::SwitchTransport(const SwitchTransportOptions& o, net::UdpSocket socket,
                                 net::Endpoint switch_ep)
    : options_(o),
      socket_(std::move(socket)),
      switch_ep_(switch_ep),
      rx_(net::RecvBatch::For(socket_, kRecvBatch,
                              wire::kCaisHeaderBytes + o.core.chunk_size + 64)),
      tx_(net::SendBatch::For(socket_, kBatch, wire::kCaisHeaderBytes)) {
  switch_addr_len_ = switch_ep.ToSockaddr(socket_.family, &switch_addr_);
}

SwitchTransport::~SwitchTransport() = default;

absl::StatusOr<std::unique_ptr<SwitchTransport>> SwitchTransport::Create(
    const SwitchTransportOptions& o) {
  auto addrs = ResolveSwitchAddresses(o.switch_address, o.bind_ip);
  if (!addrs.ok()) return addrs.status();
  auto io = net::ParseIoMode(o.io);
  if (!io.ok()) return io.status();
  // Receive room for a burst of results from every rank's share; a send
  // buffer of a few windows (the queue beyond it belongs to the link).
  auto socket = net::BindUdp(
      addrs->local,
      net::UdpOptions{
          .buffer_bytes = 16 << 20, .send_buffer_bytes = 4 << 20, .io = *io, .nonblocking = true});
  if (!socket.ok()) {
    return absl::Status(socket.status().code(), absl::StrCat("switch socket (bind_ip ", o.bind_ip,
                                                             "): ", socket.status().message()));
  }
  std::unique_ptr<SwitchTransport> t(
      new SwitchTransport(o, std::move(*socket), addrs->switch_endpoint));
  if (t->switch_addr_len_ == 0) {
    return absl::InvalidArgumentError(absl::StrCat("switch ", addrs->switch_endpoint.ToString(),
                                                   " cannot be reached from ",
                                                   addrs->local.ToString()));
  }
  t->early_limit_ = 2 * size_t{o.core.max_window} * static_cast<size_t>(o.core.world_size);
  t->core_config_ = o.core;
  t->core_config_.switch_on_host = net::OnThisHost(addrs->switch_endpoint);
  t->path_ = std::make_unique<PathState>(t->core_config_);
  std::random_device rd;
  t->nonce_ = rd();
  return t;
}

wire::MgmtMessage SwitchTransport::Mgmt(wire::MgmtType type) {
  wire::MgmtMessage m;
  m.type = type;
  m.group_id = options_.core.group_id;
  m.rank = static_cast<uint16_t>(options_.rank);
  m.world_size = static_cast<uint16_t>(options_.core.world_size);
  m.nonce = ++nonce_;
  return m;
}

void SwitchTransport::SendMgmt(const wire::MgmtMessage& m) {
  std::vector<uint8_t> bytes;
  wire::SerializeMgmt(m, &bytes);
  (void)::sendto(socket_.fd.get(), bytes.data(), bytes.size(), 0,
                 reinterpret_cast<const sockaddr*>(&switch_addr_), switch_addr_len_);
  last_sent_ = Clock::now();
}

std::chrono::milliseconds SwitchTransport::KeepAlive() {
  constexpr std::chrono::milliseconds kIdle{60'000};  // nothing to keep alive
  if (!ready_ || lease_ms_ == 0) return kIdle;
  const std::chrono::milliseconds every{std::max<uint32_t>(lease_ms_ / 4, 1)};
  // What arrived while idle: PONGs, and results of the next operation from
  // faster ranks (kept for it, as Run does).
  for (int round = 0; round < 64; ++round) {
    const int n = rx_.Receive(socket_.fd.get());
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      const std::span<const uint8_t> d = rx_.data(static_cast<size_t>(i));
      wire::MgmtMessage m;
      if (wire::ParseMgmt(d, &m)) {
        if (m.type != wire::MgmtType::kPong) continue;
        if (m.status == wire::MgmtStatus::kUnknown) {
          ready_ = false;  // dissolved (lease, operator, restart): rejoin before the next op
        } else if (m.lease_ms != 0) {
          lease_ms_ = m.lease_ms;
        }
        continue;
      }
      if (wire::IsMgmtDatagram(d)) continue;
      if (early_.size() >= early_limit_) early_.pop_front();
      early_.emplace_back(d.begin(), d.end());
    }
    if (!rx_.filled()) break;
  }
  if (!ready_) return kIdle;
  const auto since = Clock::now() - last_sent_;
  if (since >= every) {
    SendMgmt(Mgmt(wire::MgmtType::kPing));
    return every;
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(every - since) +
         std::chrono::milliseconds(1);
}

bool SwitchTransport::Join(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  wire::MgmtMessage join = Mgmt(wire::MgmtType::kJoin);
  join.port =
      options_.switch_port < 0 ? wire::kAnyPort : static_cast<uint16_t>(options_.switch_port);
  join.job = options_.job;
  auto next_send = Clock::now();
  while (Clock::now() < deadline) {
    if (Clock::now() >= next_send) {
      SendMgmt(join);
      next_send = Clock::now() + std::chrono::milliseconds(20);
    }
    pollfd p{socket_.fd.get(), POLLIN, 0};
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::min(next_send, deadline) - Clock::now());
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(0, wait.count()))) <= 0) continue;
    const int n = rx_.Receive(socket_.fd.get());
    for (int i = 0; i < n; ++i) {
      wire::MgmtMessage reply;
      if (!wire::ParseMgmt(rx_.data(static_cast<size_t>(i)), &reply)) continue;
      if (reply.type != wire::MgmtType::kJoinReply || reply.nonce != join.nonce) continue;
      if (reply.status == wire::MgmtStatus::kRefused) {
        last_refusal_ = reply.reason;
        // Both may give way: a dead group after half a lease; another
        // rank of this group creating it for a source at its limit.
        if (reply.reason == wire::MgmtReason::kGroupBusy ||
            reply.reason == wire::MgmtReason::kSourceLimit) {
          continue;
        }
        ready_ = false;
        return false;
      }
      if (reply.lease_ms != 0) lease_ms_ = reply.lease_ms;
      if (reply.status != wire::MgmtStatus::kOk) continue;  // pending
      if (reply.rank_ports.size() != static_cast<size_t>(options_.core.world_size)) continue;
      rank_ports_ = reply.rank_ports;
      seq_base_ = reply.seq_base;
      shards_ = reply.shards;
      shard_ = reply.shard;
      layout_ = LayoutFromPorts(rank_ports_, options_.rank);
      last_refusal_ = wire::MgmtReason::kNone;
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
  wire::MgmtMessage m = Mgmt(wire::MgmtType::kReport);
  m.report_bytes = bytes;
  const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
  m.report_duration_us = static_cast<uint32_t>(std::clamp<int64_t>(us, 1, UINT32_MAX));
  m.report_path = path;
  SendMgmt(m);
}

void SwitchTransport::Leave() {
  SendMgmt(Mgmt(wire::MgmtType::kLeave));
  ready_ = false;
}

namespace {

// Hands the core's datagrams to a send batch: the header copied, the
// payload referenced (it lives in the operation's buffers until Flush).
class BatchSender final : public DatagramSink {
 public:
  BatchSender(net::SendBatch* batch, int fd, const sockaddr_storage* to, socklen_t to_len)
      : batch_(batch), fd_(fd), to_(to), to_len_(to_len) {}
  ~BatchSender() override { Flush(); }

  void Send(const wire::CaisHeader& h, std::span<const uint8_t> payload) override {
    std::array<uint8_t, wire::kCaisHeaderBytes> head;
    wire::SerializeCaisHeader(h, head);
    if (batch_->full()) Flush();
    (void)batch_->AddGather(*to_, to_len_, head, payload);
  }

  // A datagram the kernel does not take (buffer full, an error) is treated
  // as lost: the core retransmits it.
  void Flush() {
    if (!batch_->empty()) (void)batch_->Flush(fd_);
  }

 private:
  net::SendBatch* batch_;
  int fd_;
  const sockaddr_storage* to_;
  socklen_t to_len_;
};

}  // namespace

SwitchPhaseResult SwitchTransport::Run(const SwitchOp& op) {
  SwitchTransport* self = this;
  return RunAll(std::span<SwitchTransport* const>(&self, 1), std::span<const SwitchOp>(&op, 1))[0];
}

std::vector<SwitchPhaseResult> SwitchTransport::RunAll(std::span<SwitchTransport* const> transports,
                                                       std::span<const SwitchOp> ops) {
  const size_t k = transports.size();
  std::vector<SwitchPhaseResult> r(k);
  std::vector<std::unique_ptr<OpCore>> cores;
  std::vector<std::unique_ptr<BatchSender>> senders;
  for (size_t i = 0; i < k; ++i) {
    SwitchTransport* t = transports[i];
    cores.push_back(
        std::make_unique<OpCore>(t->core_config_, t->layout_, ops[i], t->path_.get(), &r[i]));
    OpCore& core = *cores.back();
    core.Start(NowNs());
    // Replay what arrived for this operation before it started.
    std::deque<std::vector<uint8_t>> early;
    early.swap(t->early_);
    for (const auto& pkt : early) {
      if (core.IsEarly(pkt)) {
        t->early_.push_back(pkt);
      } else {
        core.OnDatagram(pkt, NowNs());
      }
    }
    senders.push_back(std::make_unique<BatchSender>(&t->tx_, t->socket_.fd.get(), &t->switch_addr_,
                                                    t->switch_addr_len_));
  }
  auto all_finished = [&] {
    return std::all_of(cores.begin(), cores.end(), [](const auto& c) { return c->Finished(); });
  };
  std::vector<pollfd> polls;
  std::vector<size_t> polled;
  while (!all_finished()) {
    int64_t now = NowNs();
    int64_t deadline = INT64_MAX;
    polls.clear();
    polled.clear();
    for (size_t i = 0; i < k; ++i) {
      if (cores[i]->Finished()) continue;
      cores[i]->Pump(now, *senders[i]);
      senders[i]->Flush();
      if (cores[i]->Finished()) continue;
      deadline = std::min(deadline, cores[i]->NextDeadline());
      polls.push_back(pollfd{transports[i]->socket_.fd.get(), POLLIN, 0});
      polled.push_back(i);
    }
    if (polls.empty()) break;
    // Wait for results until the cores' next deadline (at most 50 ms).
    const int64_t wait_ns = std::clamp<int64_t>(deadline - now, 0, 50'000'000);
    const timespec ts{0, static_cast<long>(wait_ns)};
    if (ppoll(polls.data(), polls.size(), &ts, nullptr) <= 0) continue;
    for (size_t p = 0; p < polls.size(); ++p) {
      if ((polls[p].revents & POLLIN) == 0) continue;
      const size_t i = polled[p];
      SwitchTransport* t = transports[i];
      OpCore& core = *cores[i];
      const int fd = t->socket_.fd.get();
      for (int round = 0; round < 64 && !core.Finished(); ++round) {
        const int n = t->rx_.Receive(fd);
        if (n <= 0) break;
        now = NowNs();
        for (int d = 0; d < n; ++d) {
          const std::span<const uint8_t> dg = t->rx_.data(static_cast<size_t>(d));
          if (core.IsEarly(dg)) {
            if (t->early_.size() >= t->early_limit_) t->early_.pop_front();
            t->early_.emplace_back(dg.begin(), dg.end());
          } else {
            core.OnDatagram(dg, now);
          }
        }
        if (!t->rx_.filled()) break;
        // Keep the window full while draining a burst of results.
        core.Pump(now, *senders[i]);
        senders[i]->Flush();
      }
    }
  }
  for (SwitchTransport* t : transports) t->last_sent_ = Clock::now();  // data renews the lease
  return r;
}

// ------------------------------------------------------------------ SwitchSet

absl::StatusOr<std::vector<std::string>> SwitchSet::Addresses(const std::string& list) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    const std::string a(absl::StripAsciiWhitespace(part));
    if (a.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("switch address list '", list, "' has an empty entry"));
    }
    if (std::find(out.begin(), out.end(), a) != out.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("switch address list '", list, "' names ", a, " twice"));
    }
    out.push_back(a);
  }
  if (out.size() > kMaxSwitches) {
    return absl::InvalidArgumentError(absl::StrCat("switch address list '", list, "' names ",
                                                   out.size(), " switches; at most ",
                                                   kMaxSwitches));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<SwitchSet>> SwitchSet::Create(const SwitchTransportOptions& o) {
  auto addresses = Addresses(o.switch_address);
  if (!addresses.ok()) return addresses.status();
  std::unique_ptr<SwitchSet> set(new SwitchSet);
  set->options_ = o;
  set->one_address_ = addresses->size() == 1;
  set->chunk_size_ = o.core.chunk_size;
  set->world_size_ = o.core.world_size;
  for (const std::string& a : *addresses) {
    SwitchTransportOptions one = o;
    one.switch_address = a;
    auto t = SwitchTransport::Create(one);
    if (!t.ok()) return t.status();
    set->members_.push_back(std::move(*t));
  }
  return set;
}

bool SwitchSet::Join(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  bool all = true;
  for (auto& m : members_) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    all = m->Join(std::max(left, std::chrono::milliseconds(0))) && all;
  }
  // A list names its switches itself; one address may name a sharded one.
  if (one_address_ && members_[0]->ready() &&
      std::max<size_t>(1, members_[0]->shards()) != members_.size()) {
    return JoinShards(deadline);
  }
  return all;
}

bool SwitchSet::JoinShards(Clock::time_point deadline) {
  const size_t n = std::max<size_t>(1, members_[0]->shards());
  // First join, or the switch came back with another --threads: rebuild
  // around the shard that answered, the others at base port + i.
  std::unique_ptr<SwitchTransport> known = std::move(members_[0]);
  const size_t index = known->shard();
  const size_t base = known->switch_endpoint().port() - index;
  if (index >= n || base + n - 1 > 65535) {
    members_[0] = std::move(known);
    return false;
  }
  std::vector<std::unique_ptr<SwitchTransport>> shards(n);
  for (size_t i = 0; i < n; ++i) {
    if (i == index) continue;
    SwitchTransportOptions one = options_;
    one.switch_address =
        known->switch_endpoint().WithPort(static_cast<uint16_t>(base + i)).ToString();
    auto t = SwitchTransport::Create(one);
    if (!t.ok()) {
      members_.clear();
      members_.push_back(std::move(known));
      return false;
    }
    shards[i] = std::move(*t);
  }
  shards[index] = std::move(known);
  members_ = std::move(shards);
  bool all = true;
  for (size_t i = 0; i < n; ++i) {
    if (i == index) continue;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    all = members_[i]->Join(std::max(left, std::chrono::milliseconds(0))) && all;
    // Every shard must report the same count, or the set is rebuilt next time.
    all = all && members_[i]->shards() == n;
  }
  return all;
}

std::chrono::milliseconds SwitchSet::KeepAlive() {
  std::chrono::milliseconds next = std::chrono::milliseconds::max();
  for (auto& m : members_) next = std::min(next, m->KeepAlive());
  return next;
}

void SwitchSet::Report(const SwitchOp& op, std::chrono::nanoseconds took, wire::ReportPath path) {
  if (members_.size() == 1) {
    members_[0]->Report(OffloadEstimate(op, chunk_size_, world_size_), took, path);
    return;
  }
  const std::vector<Stripe> stripes = StripeOp(op, chunk_size_, members_.size());
  for (size_t i = 0; i < stripes.size(); ++i) {
    members_[i]->Report(OffloadEstimate(stripes[i].op, chunk_size_, world_size_), took, path);
  }
}

void SwitchSet::Leave() {
  for (auto& m : members_) m->Leave();
}

bool SwitchSet::ready() const {
  return std::all_of(members_.begin(), members_.end(), [](const auto& m) { return m->ready(); });
}

void SwitchSet::MarkStale() {
  for (auto& m : members_) m->MarkStale();
}

wire::MgmtReason SwitchSet::last_refusal() const {
  for (const auto& m : members_) {
    if (m->last_refusal() != wire::MgmtReason::kNone) return m->last_refusal();
  }
  return wire::MgmtReason::kNone;
}

SwitchPhaseResult SwitchSet::Run(const SwitchOp& op) {
  std::vector<Stripe> stripes = StripeOp(op, chunk_size_, members_.size());
  if (members_.size() == 1 || stripes.size() < 2) return members_[0]->Run(op);
  // Operation i of the group is seq_base + i on every switch.
  const uint32_t index = op.seq - members_[0]->seq_base();
  std::vector<SwitchTransport*> ts;
  std::vector<SwitchOp> ops;
  for (size_t i = 0; i < stripes.size(); ++i) {
    ts.push_back(members_[i].get());
    stripes[i].op.seq = members_[i]->seq_base() + index;
    ops.push_back(stripes[i].op);
  }
  const std::vector<SwitchPhaseResult> results = SwitchTransport::RunAll(ts, ops);
  return MergeStripes(op, chunk_size_, world_size_, stripes, results);
}

}  // namespace inca::client
