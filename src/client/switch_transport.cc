#include "client/switch_transport.h"
#include "client/op_route.h"

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

using wire::CaisOp;

// Datagrams per send batch and messages per receive batch.
constexpr size_t kBatch = 64;
constexpr size_t kRecvBatch = 32;

int64_t NowNs(const SwitchTransportOptions& o) {
  return (o.time != nullptr ? o.time : &net::SystemClock())->NowNs();
}

std::chrono::milliseconds Left(int64_t deadline, int64_t now) {
  return std::chrono::milliseconds(std::max<int64_t>(0, (deadline - now) / 1'000'000));
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

// The session's management datagrams, straight to the switch's socket.
class SwitchTransport::MgmtOut final : public MgmtSink {
 public:
  explicit MgmtOut(SwitchTransport* t) : t_(t) {}
  void Send(std::span<const uint8_t> d) override {
    (void)::sendto(t_->socket_.fd.get(), d.data(), d.size(), 0,
                   reinterpret_cast<const sockaddr*>(&t_->switch_addr_), t_->switch_addr_len_);
  }

 private:
  SwitchTransport* t_;
};

SwitchTransport::SwitchTransport(const SwitchTransportOptions& o, const SessionConfig& session,
                                 net::UdpSocket socket, net::Endpoint switch_ep)
    : time_(o.time != nullptr ? o.time : &net::SystemClock()),
      socket_(std::move(socket)),
      switch_ep_(switch_ep),
      session_(session),
      mgmt_out_(std::make_unique<MgmtOut>(this)),
      // Data, and JOIN_REPLYs of up to world_size rank ports.
      rx_(net::RecvBatch::For(
          socket_, kRecvBatch,
          std::max<size_t>(
              wire::kCaisHeaderBytes + o.core.chunk_size + 64,
              wire::kMgmtHeaderBytes + 2 * static_cast<size_t>(session.transport.world_size)))),
      tx_(net::SendBatch::For(socket_, kBatch, wire::kCaisHeaderBytes)),
      path_(std::make_unique<PathState>(session.transport)) {
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
  SessionConfig session;
  session.transport = o.core;
  session.transport.switch_on_host = net::OnThisHost(addrs->switch_endpoint);
  session.rank = o.rank;
  session.job = o.job;
  session.port = o.switch_port;
  std::random_device rd;
  session.first_nonce = rd();
  std::unique_ptr<SwitchTransport> t(
      new SwitchTransport(o, session, std::move(*socket), addrs->switch_endpoint));
  if (t->switch_addr_len_ == 0) {
    return absl::InvalidArgumentError(absl::StrCat("switch ", addrs->switch_endpoint.ToString(),
                                                   " cannot be reached from ",
                                                   addrs->local.ToString()));
  }
  return t;
}

void SwitchTransport::Drain(OpCore* op) {
  for (int round = 0; round < 64; ++round) {
    const int n = rx_.Receive(socket_.fd.get());
    if (n <= 0) break;
    const int64_t now = Now();
    for (int i = 0; i < n; ++i) session_.OnDatagram(rx_.data(static_cast<size_t>(i)), now, op);
    if (!rx_.filled()) break;
  }
}

std::chrono::milliseconds SwitchTransport::KeepAlive() {
  Drain(nullptr);  // PONGs, and results of the next operation from faster ranks
  const int64_t now = Now();
  const int64_t next = session_.KeepAlive(now, *mgmt_out_);
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::nanoseconds(next - now));
}

bool SwitchTransport::Join(std::chrono::milliseconds timeout) {
  const int64_t deadline = Now() + std::chrono::nanoseconds(timeout).count();
  int64_t next = session_.StartJoin(Now(), *mgmt_out_);
  while (Now() < deadline) {
    pollfd p{socket_.fd.get(), POLLIN, 0};
    const int64_t wait_ns = std::max<int64_t>(0, std::min(next, deadline) - Now());
    if (poll(&p, 1, static_cast<int>(wait_ns / 1'000'000)) > 0) Drain(nullptr);
    if (session_.state() == SessionCore::State::kFormed) return true;
    if (session_.state() == SessionCore::State::kRefused) return false;
    next = session_.JoinTick(Now(), *mgmt_out_);
  }
  session_.JoinTimedOut();
  return false;
}

void SwitchTransport::Report(uint64_t bytes, std::chrono::nanoseconds took, wire::ReportPath path) {
  session_.Report(bytes, took.count(), path, Now(), *mgmt_out_);
}

void SwitchTransport::Leave() {
  session_.Leave(Now(), *mgmt_out_);
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
    cores.push_back(t->session_.StartOp(ops[i], t->path_.get(), &r[i], t->Now()));
    senders.push_back(std::make_unique<BatchSender>(&t->tx_, t->socket_.fd.get(), &t->switch_addr_,
                                                    t->switch_addr_len_));
  }
  auto all_finished = [&] {
    return std::all_of(cores.begin(), cores.end(), [](const auto& c) { return c->Finished(); });
  };
  std::vector<pollfd> polls;
  std::vector<size_t> polled;
  while (!all_finished()) {
    int64_t now = transports[0]->Now();
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
        now = t->Now();
        for (int d = 0; d < n; ++d)
          t->session_.OnDatagram(t->rx_.data(static_cast<size_t>(d)), now, &core);
        if (!t->rx_.filled()) break;
        // Keep the window full while draining a burst of results.
        core.Pump(now, *senders[i]);
        senders[i]->Flush();
      }
    }
  }
  for (SwitchTransport* t : transports) t->session_.NoteSent(t->Now());  // data renews the lease
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
  const int64_t deadline = NowNs(options_) + std::chrono::nanoseconds(timeout).count();
  bool all = true;
  for (auto& m : members_) all = m->Join(Left(deadline, NowNs(options_))) && all;
  // A list names its switches itself; one address may name a sharded one.
  if (one_address_ && members_[0]->ready() &&
      std::max<size_t>(1, members_[0]->shards()) != members_.size()) {
    return JoinShards(deadline);
  }
  return all;
}

bool SwitchSet::JoinShards(int64_t deadline) {
  // First join, or the switch came back with another --threads: rebuild
  // around the shard that answered, the others at their ports.
  const std::optional<std::vector<uint16_t>> ports = ShardPorts(
      members_[0]->switch_endpoint().port(), members_[0]->shard(), members_[0]->shards());
  if (!ports) return false;
  const size_t n = ports->size();
  std::unique_ptr<SwitchTransport> known = std::move(members_[0]);
  const size_t index = known->shard();
  std::vector<std::unique_ptr<SwitchTransport>> shards(n);
  for (size_t i = 0; i < n; ++i) {
    if (i == index) continue;
    SwitchTransportOptions one = options_;
    one.switch_address = known->switch_endpoint().WithPort((*ports)[i]).ToString();
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
    all = members_[i]->Join(Left(deadline, NowNs(options_))) && all;
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
    members_[0]->Report(OffloadEstimate(op, chunk_size(), world_size()), took, path);
    return;
  }
  const std::vector<Stripe> stripes = StripeOp(op, chunk_size(), members_.size());
  for (size_t i = 0; i < stripes.size(); ++i) {
    members_[i]->Report(OffloadEstimate(stripes[i].op, chunk_size(), world_size()), took, path);
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
  std::vector<Stripe> stripes = StripeOp(op, chunk_size(), members_.size());
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
  return MergeStripes(op, chunk_size(), world_size(), stripes, results);
}

}  // namespace inca::client
