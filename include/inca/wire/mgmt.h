// Management datagrams between hosts and inca-switchd: joining a group
// (which assigns the host's endpoint a switch port and installs the group's
// rule), liveness pings, leaving. They share the switch's UDP port with
// CAIS data and are told apart by byte 0: 0xCA is never a valid CAIS
// op_type. Layout: docs/protocol.md, "Management datagrams".
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace inca::wire {

inline constexpr uint8_t kMgmtMagic = 0xCA;
// Version 2 added `job` (JOIN) and `lease_ms` (JOIN_REPLY, PONG): leases
// and re-runs replacing their own dead group (issue 18). A version-1
// datagram is malformed to a version-2 switch, and the reverse.
inline constexpr uint8_t kMgmtVersion = 3;
inline constexpr size_t kMgmtHeaderBytes = 36;
inline constexpr uint16_t kAnyPort = 0xFFFF;

enum class MgmtType : uint8_t {
  kJoin = 1,        // host -> switch
  kJoinReply = 2,   // switch -> host
  kPing = 3,        // host -> switch
  kPong = 4,        // switch -> host
  kLeave = 5,       // host -> switch
  kLeaveReply = 6,  // switch -> host
  kReport = 7,      // host -> switch, no reply: one operation's measured time
};
inline constexpr uint8_t kMgmtTypeCount = 7;
// A REPORT carries kMgmtReportBytes after the header (and no rank ports).
inline constexpr size_t kMgmtReportBytes = 16;

// Size classes of operations, shared by REPORTs and the switch's offload
// decisions: class b holds sizes in [2^b, 2^(b+1)) bytes (0 also in class 0).
inline constexpr int kSizeClasses = 64;
constexpr int SizeClass(uint64_t bytes) {
  return bytes == 0 ? 0 : static_cast<int>(std::bit_width(bytes)) - 1;
}

// Which path a REPORT's operation ran on.
enum class ReportPath : uint8_t {
  kSwitch = 0,  // through the switch (including a mid-operation fallback)
  kHost = 1,    // on the host path because the switch declined it
};

enum class MgmtStatus : uint8_t {
  kOk = 0,       // JOIN: group complete, rule installed ("ready"); PONG: member known
  kPending = 1,  // JOIN: waiting for the rest of the group; resend JOIN
  kRefused = 2,  // see MgmtReason
  kUnknown = 3,  // PONG/LEAVE: this endpoint is not a member (e.g. switch restarted)
};

// How a group's ranks are ordered for ReduceScatter, AllGather and
// Broadcast (their blocks, by index): by their ports at the switch (one
// switch), or by rank (a tree of switches, where a leaf's uplink stands for
// many ranks: docs/design/tree.md, "Blocks").
enum class BlockOrder : uint8_t {
  kPorts = 0,
  kRanks = 1,
};

enum class MgmtReason : uint8_t {
  kNone = 0,
  kBadRequest = 1,         // world_size 0 or > 64, rank >= world_size, bad port
  kWorldSizeMismatch = 2,  // group already forming with another world_size
  kRankTaken = 3,          // another endpoint holds this rank
  kNoFreePort = 4,         // all switch ports (dp::kMaxPorts, 1,024) in use
  kGroupConflict = 5,      // a statically configured rule owns this group
  kPortTaken = 6,          // requested port held by another endpoint
  kGroupBusy = 7,          // another job (another `job`) holds this group and is alive
  kSourceLimit = 8,        // this source address already has too many groups forming
};
inline constexpr uint8_t kMgmtReasonMax = 8;

std::string_view ToString(MgmtType t);
std::string_view ToString(MgmtStatus s);
std::string_view ToString(MgmtReason r);
std::string_view ToString(ReportPath p);

// The most rank_ports a JOIN_REPLY carries: a group's world size, up to
// 64 x 64 ranks across a tree of switches (docs/design/tree.md); its reply
// is then kMgmtHeaderBytes + 8,192 bytes.
inline constexpr size_t kMaxMgmtRankPorts = 4096;

struct MgmtMessage {
  MgmtType type = MgmtType::kPing;
  MgmtStatus status = MgmtStatus::kOk;  // replies only
  MgmtReason reason = MgmtReason::kNone;
  uint8_t group_id = 0;
  uint32_t nonce = 0;  // chosen by the host, echoed in the reply
  uint16_t rank = 0;
  uint16_t world_size = 0;
  uint16_t port = kAnyPort;  // JOIN: requested port; JOIN_REPLY: assigned port
  uint32_t seq_base = 0;     // JOIN_REPLY ok: first seq_num of the group's epoch
  // JOIN_REPLY ok: switch port of each rank, in rank order (world_size entries).
  std::vector<uint16_t> rank_ports;
  // JOIN_REPLY ok: the order of the group's blocks (ReduceScatter owners,
  // AllGather contributors, the Broadcast root's index), on the wire in
  // byte 9 (`reason` in every other message; version 3).
  BlockOrder block_order = BlockOrder::kPorts;
  // JOIN: the job this rank belongs to, the same on every rank of one run
  // and different for every run (rank 0 draws it at random). A JOIN whose
  // job differs from the group's replaces the group when the group's members
  // have all been silent for half a lease (a re-run after a crash); while
  // they are alive it is refused with group_busy. 0 elsewhere.
  uint64_t job = 0;
  // JOIN_REPLY (ok, pending) and PONG ok: the most chunks each member
  // should keep in flight, so that every group present at the switch (and,
  // in a tree, at every switch above it) fits its slots at once: the
  // switch's pending limits divided among its groups (docs/protocol.md,
  // "Window advice"). On the wire in bytes 24-25, where a JOIN carries
  // `job`. 0: no advice (a switch from before it); 0 in every other message.
  uint16_t window_chunks = 0;
  // JOIN_REPLY (ok, pending) and PONG ok: the switch's lease period. A member
  // silent (no JOIN, PING, REPORT or data) for that long loses its group;
  // hosts send PING at least every lease_ms / 4. 0 elsewhere.
  uint32_t lease_ms = 0;
  // JOIN_REPLY (ok, pending) from a switch with more than one data-plane
  // shard (inca-switchd --threads N): `shards` = N and this port's shard
  // index. The shards listen on N consecutive UDP ports, shard 0 first; each
  // forms its own group, and a host stripes every operation over all of
  // them (docs/design/cais-client.md, "Shards"). 0 and 0 from a switch with
  // one shard, and in every other message.
  uint8_t shards = 0;
  uint8_t shard = 0;
  // REPORT only: the operation's size as the switch estimates it
  // (total_chunks x the first chunk's payload_len), how long it took this
  // rank from its start to its completion, and on which path.
  uint64_t report_bytes = 0;
  uint32_t report_duration_us = 0;
  ReportPath report_path = ReportPath::kSwitch;

  friend bool operator==(const MgmtMessage&, const MgmtMessage&) = default;
};

inline bool IsMgmtDatagram(std::span<const uint8_t> d) {
  return !d.empty() && d[0] == kMgmtMagic;
}

// Returns false for anything malformed (wrong magic/version/type/reason, short,
// rank_ports length disagreeing with world_size, trailing bytes; a REPORT
// that is not exactly header + kMgmtReportBytes, has rank ports, an unknown
// path or non-zero reserved bytes).
bool ParseMgmt(std::span<const uint8_t> datagram, MgmtMessage* out);

// Appends the encoding of `m` to `out` (cleared first).
void SerializeMgmt(const MgmtMessage& m, std::vector<uint8_t>* out);

}  // namespace inca::wire
