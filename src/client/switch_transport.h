// The switch path of the CAIS client: one UDP socket joined to one group at
// inca-switchd, and the engine that moves one operation's chunks through
// the switch (window of max_pending_chunks, retransmission with exponential
// backoff, result requests, fallback notices). Internal to the client; used
// only by the communicator's progress thread (not thread-safe).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/client/communicator.h"
#include "inca/wire/cais.h"
#include "inca/wire/mgmt.h"

namespace inca::client {

// Parses "host:port" (IPv4 dotted quad or "localhost").
absl::StatusOr<sockaddr_in> ParseIpv4Endpoint(const std::string& address);

// One operation (or one piece of a larger one) as the switch sees it.
struct SwitchOp {
  wire::CaisOp op = wire::CaisOp::kAllReduce;
  wire::DType type = wire::DType::kF32;
  wire::ReduceOp reduce = wire::ReduceOp::kSum;
  uint32_t seq = 0;
  uint16_t layer_id = 0;
  // AllReduce and Broadcast: `data` holds `count` elements, in place.
  // AllGather: `in` holds this rank's `count` elements; block r of the
  // result goes to out + r * block_stride_bytes.
  // ReduceScatter: block r of the input (`count` elements) is at
  // in + r * block_stride_bytes; this rank's reduced block goes to `out`.
  uint8_t* data = nullptr;
  const uint8_t* in = nullptr;
  uint8_t* out = nullptr;
  size_t block_stride_bytes = 0;
  size_t count = 0;
  int root = 0;  // Broadcast
  // A broadcast carried as an AllReduce-sum (the communicator's choice).
  bool broadcast = false;
};

// Number of chunks `op` needs (AllGather, ReduceScatter: over all blocks).
uint64_t ChunkCount(const SwitchOp& op, uint32_t chunk_size, int world_size);

struct SwitchPhaseResult {
  bool complete = false;
  uint32_t total_chunks = 0;
  // have[c] != 0: this rank holds chunk c's final value.
  std::vector<uint8_t> have;
  bool fallback_notice = false;  // the switch handed back at least one chunk
  // The switch's offload policy declined the operation (DECLINED notice):
  // run it on the host path and stay joined.
  bool declined = false;
  uint64_t sent = 0;
  uint64_t retransmitted = 0;
  uint64_t requests = 0;
  uint64_t notices = 0;
};

class SwitchTransport {
 public:
  static absl::StatusOr<std::unique_ptr<SwitchTransport>> Create(const CommunicatorOptions& o);
  ~SwitchTransport();

  // Sends JOIN until the group is complete (true), refused or `timeout`
  // passes (false). Idempotent; also used to detect a switch that came back.
  bool Join(std::chrono::milliseconds timeout);
  // Tells the switch this rank leaves (best effort).
  void Leave();
  bool ready() const { return ready_; }
  void MarkStale() { ready_ = false; }
  uint32_t seq_base() const { return seq_base_; }
  wire::MgmtReason last_refusal() const { return last_refusal_; }

  // Moves `op` through the switch. Returns when every chunk is done or
  // handed back, or when nothing progressed for switch_timeout_ms.
  SwitchPhaseResult Run(const SwitchOp& op);

 private:
  explicit SwitchTransport(const CommunicatorOptions& o);
  struct Engine;

  CommunicatorOptions options_;
  int fd_ = -1;
  sockaddr_in switch_addr_{};
  bool ready_ = false;
  uint32_t seq_base_ = 0;
  uint32_t nonce_ = 1;
  wire::MgmtReason last_refusal_ = wire::MgmtReason::kNone;
  std::vector<uint16_t> rank_ports_;
  // index_of_rank_[r]: rank r's position among the group's ports in
  // ascending order (the switch's input-port order); rank_at_index_ inverse.
  std::vector<int> index_of_rank_;
  std::vector<int> rank_at_index_;
  std::vector<uint8_t> recv_buf_;
  // Results of the next operation that arrive while this rank is still on
  // the current one (a faster rank's AllGather blocks): kept, bounded, and
  // replayed when that operation starts, instead of being requested again.
  std::deque<std::vector<uint8_t>> early_;
  size_t early_limit_ = 0;
  // Round-trip estimate (RFC 6298 style, Karn's rule) across operations;
  // the retransmission timeout is max(retransmit_timeout_ms, srtt + 4 rttvar).
  double srtt_ns_ = 0;
  double rttvar_ns_ = 0;
  int64_t RtoNs() const;
  void SampleRtt(int64_t rtt_ns);
};

}  // namespace inca::client
