// One member's session with one switch, as a pure core: JOIN until the
// group forms, keep-alive PINGs within the switch's lease, REPORTs, LEAVE,
// the group's layout and epoch (seq_base, shards), data that arrives before
// its operation starts.
// Time comes with each call and management datagrams go out through a
// MgmtSink; no socket, clock, thread or logging inside.
//
// SwitchTransport drives it over UDP, inca-sim's CaisRankNode over
// simulated links, and session_core_test on a manual clock against the
// switch's own dispatcher. The protocol, and how a leaf switch will drive
// the same core toward its parent: docs/design/tree.md.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "client/op_split.h"
#include "client/transport_core.h"
#include "inca/wire/mgmt.h"

namespace inca::client {

struct SessionConfig {
  // Group id, world size, chunk size and the operation core's settings.
  TransportConfig transport;
  int rank = 0;
  uint64_t job = 0;  // the same on every member of one run (JOIN)
  int port = -1;     // the switch port to ask for; -1: any
  // A JOIN is sent again this often until its reply comes.
  int64_t join_resend_ns = 20'000'000;
  // At most one REPORT per path and size class this often.
  int64_t report_interval_ns = 5'000'000;
  // The first nonce (randomness is the caller's); each JOIN attempt and
  // each other message takes the next.
  uint32_t first_nonce = 1;
};

// Where the session's management datagrams go (to its switch).
class MgmtSink {
 public:
  virtual ~MgmtSink() = default;
  virtual void Send(std::span<const uint8_t> datagram) = 0;
};

class SessionCore {
 public:
  enum class State {
    kIdle,     // not joined (or stale: the switch lost the group)
    kJoining,  // a JOIN attempt under way
    kFormed,   // the group is complete; operations may run
    kRefused,  // the last attempt was refused (last_refusal())
  };

  explicit SessionCore(const SessionConfig& config);

  // Starts a JOIN attempt (one nonce, sent now and every join_resend_ns by
  // JoinTick) and returns when JoinTick wants to be called again.
  int64_t StartJoin(int64_t now, MgmtSink& out);
  // While joining: sends the JOIN again when due; returns the next time.
  int64_t JoinTick(int64_t now, MgmtSink& out);
  // The caller's deadline passed without a reply: back to kIdle.
  void JoinTimedOut();

  // A datagram from the switch. Management goes to the session (the
  // JOIN_REPLY of the attempt under way, PONGs); data goes to `op` when it
  // belongs to it (op may be null or finished), and is kept, bounded, for
  // the next operation otherwise. Returns true for management.
  bool OnDatagram(std::span<const uint8_t> datagram, int64_t now, OpCore* op);

  // An operation's core, with this session's layout, started at `now`, and
  // the data kept for it replayed. `op`, `path` and `result` must outlive it.
  std::unique_ptr<OpCore> StartOp(const SwitchOp& op, PathState* path, SwitchPhaseResult* result,
                                  int64_t now);

  // While idle and formed: a PING when nothing went to the switch, or no
  // window advice came from it, for a quarter of the lease it announced. Returns when to call again
  // (a minute on when there is nothing to keep alive).
  int64_t KeepAlive(int64_t now, MgmtSink& out);
  // Data went to the switch at `now` (it renews the lease as a PING does).
  void NoteSent(int64_t now) { last_sent_ = now; }
  // What one operation of `bytes` (OffloadEstimate) cost on `path`, for the
  // switch's offload controller; rate-limited (report_interval_ns).
  void Report(uint64_t bytes, int64_t took_ns, wire::ReportPath path, int64_t now, MgmtSink& out);
  // Leaves the group (best effort): back to kIdle.
  void Leave(int64_t now, MgmtSink& out);
  // The group is taken as lost (an operation left the switch).
  void MarkStale();

  State state() const { return state_; }
  bool formed() const { return state_ == State::kFormed; }
  uint32_t seq_base() const { return seq_base_; }
  const GroupLayout& layout() const { return layout_; }
  uint8_t shards() const { return shards_; }
  uint8_t shard() const { return shard_; }
  uint32_t lease_ms() const { return lease_ms_; }
  // The window the switch advises (JOIN_REPLY, PONG; 0: none): each
  // operation's window stays within it (PathState::set_window_cap).
  uint16_t window_chunks() const { return window_chunks_; }
  wire::MgmtReason last_refusal() const { return last_refusal_; }
  uint64_t joins_sent() const { return joins_sent_; }
  size_t early_kept() const { return early_.size(); }
  const SessionConfig& config() const { return config_; }

 private:
  wire::MgmtMessage Mgmt(wire::MgmtType type);
  void SendMgmt(const wire::MgmtMessage& m, int64_t now, MgmtSink& out);
  void OnJoinReply(const wire::MgmtMessage& reply, int64_t now);
  void OnPong(const wire::MgmtMessage& pong, int64_t now);
  void KeepEarly(std::span<const uint8_t> datagram);

  SessionConfig config_;
  State state_ = State::kIdle;
  uint32_t nonce_;
  wire::MgmtMessage join_;  // the attempt under way
  int64_t next_join_ = 0;
  uint64_t joins_sent_ = 0;
  uint32_t seq_base_ = 0;
  uint8_t shards_ = 0, shard_ = 0;
  uint32_t lease_ms_ = 0;  // from the last JOIN_REPLY/PONG; 0 = no keep-alives
  // The switch's window advice from the last JOIN_REPLY/PONG (0: none),
  // and when it came (or was last asked for).
  uint16_t window_chunks_ = 0;
  int64_t advised_at_ = 0;
  int64_t last_sent_ = 0;  // last datagram to the switch
  wire::MgmtReason last_refusal_ = wire::MgmtReason::kNone;
  GroupLayout layout_;
  // Per path and size class: an explore's one report is never held back.
  std::array<std::array<int64_t, wire::kSizeClasses>, 2> last_report_;
  std::deque<std::vector<uint8_t>> early_;
  size_t early_limit_;
  std::vector<uint8_t> buf_;
};

}  // namespace inca::client
