// The switch path of the CAIS client: one UDP socket joined to one group at
// inca-switchd, driving the pure transport core (client/transport_core.h:
// congestion window, retransmission, result requests, notices) with the
// real clock and batched socket I/O (src/net: GSO sends and GRO receives
// unless options.io is "mmsg"). Internal to the client; used only by
// the communicator's progress thread (not thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/session_core.h"
#include "client/transport_core.h"
#include "inca/wire/cais.h"
#include "inca/wire/mgmt.h"
#include "net/clock.h"
#include "net/endpoint.h"
#include "net/udp.h"

namespace inca::client {

// The switch's address ("HOST:PORT", "[IPV6]:PORT" or a name) and the
// local one to bind (bind_ip, port 0) for a socket that reaches it.
struct SwitchAddresses {
  net::Endpoint switch_endpoint;
  net::Endpoint local;
};
absl::StatusOr<SwitchAddresses> ResolveSwitchAddresses(const std::string& switch_address,
                                                       const std::string& bind_ip);

// What the switch path needs of the communicator's options
// (client/transport_options.h derives it from CommunicatorOptions).
struct SwitchTransportOptions {
  // One switch ("HOST:PORT"); SwitchSet takes a comma-separated list.
  std::string switch_address;
  std::string bind_ip = "127.0.0.1";
  std::string io = "gso";  // net::ParseIoMode
  int rank = 0;
  uint64_t job = 0;      // the same on every rank (JOIN)
  int switch_port = -1;  // to ask for; -1: any
  // The core's configuration: group id, world size, chunk size, window,
  // timeouts, pacing.
  TransportConfig core;
  // The clock (nullptr: net::SystemClock()); poll() waits in real time.
  const net::TimeSource* time = nullptr;
};

class SwitchTransport {
 public:
  static absl::StatusOr<std::unique_ptr<SwitchTransport>> Create(const SwitchTransportOptions& o);
  ~SwitchTransport();

  // Sends JOIN until the group is complete (true), refused or `timeout`
  // passes (false). Idempotent; also used to detect a switch that came back.
  // group_busy (another live job holds the group) is retried until the
  // timeout: a crashed run's group gives way after half a lease of silence.
  bool Join(std::chrono::milliseconds timeout);
  // While idle: reads what arrived (PONGs; early results are kept) and
  // keeps the group's lease (SessionCore::KeepAlive). Returns how long
  // until it wants to be called again.
  std::chrono::milliseconds KeepAlive();
  // Tells the switch what one operation of `bytes` (OffloadEstimate) cost
  // on `path` (a REPORT datagram, best effort; SessionCore::Report).
  void Report(uint64_t bytes, std::chrono::nanoseconds took, wire::ReportPath path);
  // Tells the switch this rank leaves (best effort).
  void Leave();
  bool ready() const { return session_.formed(); }
  void MarkStale() { session_.MarkStale(); }
  uint32_t seq_base() const { return session_.seq_base(); }
  wire::MgmtReason last_refusal() const { return session_.last_refusal(); }
  // From the last JOIN_REPLY: the switch's data-plane shards (0 or 1: one)
  // and this switch port's index among them (wire `shards`, `shard`).
  uint8_t shards() const { return session_.shards(); }
  uint8_t shard() const { return session_.shard(); }
  const net::Endpoint& switch_endpoint() const { return switch_ep_; }

  // Moves `op` through the switch. Returns when every chunk is done or
  // handed back, or when nothing progressed for switch_timeout_ms.
  SwitchPhaseResult Run(const SwitchOp& op);
  // ops[i] through transports[i], all at once from this thread (striping):
  // one poll over every socket, each core pumped as its results arrive.
  static std::vector<SwitchPhaseResult> RunAll(std::span<SwitchTransport* const> transports,
                                               std::span<const SwitchOp> ops);

  const PathState& path() const { return *path_; }
  const net::UdpSocket& socket() const { return socket_; }

 private:
  class MgmtOut;
  SwitchTransport(const SwitchTransportOptions& o, const SessionConfig& session,
                  net::UdpSocket socket, net::Endpoint switch_ep);
  // Hands what arrived (up to 64 batches) to the session, and to `op`.
  void Drain(OpCore* op);
  int64_t Now() const { return time_->NowNs(); }

  const net::TimeSource* time_;
  net::UdpSocket socket_;
  net::Endpoint switch_ep_;
  sockaddr_storage switch_addr_{};
  socklen_t switch_addr_len_ = 0;
  SessionCore session_;
  std::unique_ptr<MgmtOut> mgmt_out_;
  net::RecvBatch rx_;
  net::SendBatch tx_;
  // Round-trip estimate and congestion window, across operations.
  std::unique_ptr<PathState> path_;
};

// The transports of one rank's group, one per switch it stripes over
// (SwitchTransportOptions::switch_address: "a:9410,b:9410"; docs/design/
// cais-client.md, "Striping"), behind SwitchTransport's interface. With one
// switch every call goes straight to it. Each switch forms its own group
// (JOIN), keeps its own lease, window and sequence numbers; the set is
// ready when every switch is, and an operation is on the switch path only
// if every stripe completes: a stripe declined, handed back or timed out
// sends the whole operation to the host path, as one switch's would.
class SwitchSet {
 public:
  static constexpr size_t kMaxSwitches = 8;
  // The switch addresses of a comma-separated list (at most kMaxSwitches,
  // none repeated); InvalidArgument naming the bad one.
  static absl::StatusOr<std::vector<std::string>> Addresses(const std::string& list);
  static absl::StatusOr<std::unique_ptr<SwitchSet>> Create(const SwitchTransportOptions& o);

  bool Join(std::chrono::milliseconds timeout);
  std::chrono::milliseconds KeepAlive();
  // Each switch hears of its stripe of `op`.
  void Report(const SwitchOp& op, std::chrono::nanoseconds took, wire::ReportPath path);
  void Leave();
  bool ready() const;
  void MarkStale();
  // The first switch's; operation i runs as seq_base + i on every switch
  // (each from its own seq_base).
  uint32_t seq_base() const { return members_[0]->seq_base(); }
  wire::MgmtReason last_refusal() const;
  SwitchPhaseResult Run(const SwitchOp& op);
  size_t size() const { return members_.size(); }
  // The first switch's path (the window the stats report).
  const PathState& path() const { return members_[0]->path(); }

 private:
  // One address naming a switch of several shards (inca-switchd --threads):
  // the set becomes one transport per shard, in shard order, each joined.
  // False when a shard cannot be reached or joined by `deadline`.
  bool JoinShards(int64_t deadline);

  SwitchTransportOptions options_;
  bool one_address_ = false;
  std::vector<std::unique_ptr<SwitchTransport>> members_;
  // The chunk size and world size every switch of the set shares.
  uint32_t chunk_size() const { return options_.core.chunk_size; }
  int world_size() const { return options_.core.world_size; }
};

}  // namespace inca::client
