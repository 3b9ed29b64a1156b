// CAIS wire format: the 20-byte header of the CAIS design (after arXiv
// 2605.05628, section 3.1) carried in a UDP datagram, followed by the
// payload. Byte-by-byte layout and semantics: docs/protocol.md.
//
// Header fields are big-endian (network byte order). Payload elements are
// little-endian IEEE-754 / two's complement (see docs/protocol.md for why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/util/endian.h"

namespace inca::wire {

inline constexpr size_t kCaisHeaderBytes = 20;
inline constexpr uint8_t kCaisVersion = 1;
// Default UDP port of a CAIS switch.
inline constexpr uint16_t kCaisDefaultUdpPort = 9410;

// The collective this packet belongs to (header byte 0, `op_type`).
enum class CaisOp : uint8_t {
  kAllReduce = 0,
  kAllGather = 1,
  kBroadcast = 2,
  kReduceScatter = 3,
};
inline constexpr uint8_t kCaisOpCount = 4;

// Element-wise reduction operator (high nibble of header byte 18).
enum class ReduceOp : uint8_t {
  kSum = 0,
  kMax = 1,
  kMin = 2,
  kProduct = 3,
};
inline constexpr uint8_t kReduceOpCount = 4;
inline constexpr ReduceOp kReduceOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin,
                                          ReduceOp::kProduct};

// Element type of the payload (low nibble of header byte 18).
enum class DType : uint8_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kI32 = 3,
};
inline constexpr uint8_t kDTypeCount = 4;
inline constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32};

// Flag bits (header byte 17).
namespace cais_flags {
inline constexpr uint8_t kResult = 0x01;      // switch -> host: carries a result
inline constexpr uint8_t kRetransmit = 0x02;  // host -> switch: a resend
inline constexpr uint8_t kFallback = 0x04;    // switch -> host: finish on host
// switch -> host, with FALLBACK|RESULT: the offload policy declined the whole
// operation; run it on the host path and stay joined.
inline constexpr uint8_t kDeclined = 0x08;
// switch -> host, with RESULT and an empty payload: a ReduceScatter chunk is
// complete and its result went to the chunk's owner; this contributor's part
// is done (it clears the contribution from the sender's window).
inline constexpr uint8_t kAck = 0x10;
// switch -> host, with RESULT and an empty payload: the answer to a result
// request for a chunk that is not complete; `block` is 1 if the switch
// holds the asking port's contribution, 0 if not.
inline constexpr uint8_t kPending = 0x20;
inline constexpr uint8_t kKnownMask = 0x3F;  // any other bit set is an error
// Flags only the switch may set.
inline constexpr uint8_t kSwitchOnly = kResult | kFallback | kDeclined | kAck | kPending;
}  // namespace cais_flags

// `block` of a FALLBACK notice: why the switch gave the chunk up.
inline constexpr uint8_t kFallbackClosed = 0;  // timed out, or closed before this packet
// The contributors' headers differ (op, dtype, reduce op, sizes, root): the
// ranks disagree about the operation (docs/protocol.md, "Fallback notice").
inline constexpr uint8_t kFallbackShapeMismatch = 1;

// `block` of a DECLINED notice: why the switch sent the operation to the
// host path (docs/protocol.md, "Declined notice"). 0 from switches before.
enum class DeclineReason : uint8_t {
  kUnknown = 0,
  kRule = 1,      // a host-path rule for its layer (cais-cli rules)
  kModel = 2,     // outside the offload model's size range (a class not measured)
  kMeasured = 3,  // the host path measured faster for its size class
  kExplore = 4,   // one operation sent the other way to measure that path
  kHeld = 5,      // the group is held on the host path: its chunks fell back
  kTree = 6,      // a collective this tree of switches does not carry (docs/protocol.md, Blocks)
};
inline constexpr uint8_t kDeclineReasonCount = 7;
std::string_view ToString(DeclineReason r);

// `block` of an AllReduce chunk from a host: 0, or for a broadcast that the
// client carries as an all-reduce-sum (docs/protocol.md), 1 + root mod 255,
// so that the switch sees ranks that disagree on the root or the collective.
constexpr uint8_t BroadcastTag(int root) {
  return static_cast<uint8_t>(1 + static_cast<unsigned>(root) % 255u);
}

constexpr size_t ElementBytes(DType t) {
  return (t == DType::kF16 || t == DType::kBF16) ? 2 : 4;
}

std::string_view ToString(CaisOp op);
std::string_view ToString(ReduceOp op);
std::string_view ToString(DType t);

// The header as it lies on the wire: packed, big-endian fields.
struct CaisWireHeader {
  uint8_t op_type;
  uint8_t group_id;
  Be16 layer_id;
  Be16 chunk_id;
  Be16 total_chunks;
  Be32 seq_num;
  Be32 payload_len;
  // The seed's `reserved` u32, split into four bytes:
  uint8_t version;          // kCaisVersion
  uint8_t flags;            // cais_flags
  uint8_t reduce_op_dtype;  // (ReduceOp << 4) | DType
  uint8_t block;            // AllGather/Broadcast: a block index; results of
                            // AllReduce/ReduceScatter: the switch wait (EncodeWait)
};
static_assert(sizeof(CaisWireHeader) == kCaisHeaderBytes);
static_assert(alignof(CaisWireHeader) == 1);

// The header decoded into host-order values.
struct CaisHeader {
  CaisOp op = CaisOp::kAllReduce;
  uint8_t group_id = 0;
  uint16_t layer_id = 0;
  uint16_t chunk_id = 0;
  uint16_t total_chunks = 1;
  uint32_t seq_num = 0;  // operation sequence number (see docs/protocol.md)
  uint32_t payload_len = 0;
  uint8_t version = kCaisVersion;
  uint8_t flags = 0;
  ReduceOp reduce_op = ReduceOp::kSum;
  DType dtype = DType::kF32;
  uint8_t block = 0;

  size_t element_count() const { return payload_len / ElementBytes(dtype); }
  bool has_flag(uint8_t f) const { return (flags & f) != 0; }
  friend bool operator==(const CaisHeader&, const CaisHeader&) = default;
};

// Why a datagram is not a valid CAIS packet. Checked in this order.
enum class CaisParseError : uint8_t {
  kOk = 0,
  kTooShort,            // fewer than kCaisHeaderBytes bytes
  kBadVersion,          // version != kCaisVersion
  kUnknownOp,           // op_type >= kCaisOpCount
  kUnknownReduceOp,     // reduce_op >= kReduceOpCount
  kUnknownDType,        // dtype >= kDTypeCount
  kUnknownFlags,        // a flag bit outside cais_flags::kKnownMask
  kPayloadLenMismatch,  // payload_len != datagram length - header
  kChunkOutOfRange,     // chunk_id >= total_chunks (includes total_chunks == 0)
  kPayloadMisaligned,   // payload_len not a multiple of the element size
  kEmptyPayload,        // payload_len == 0, not a FALLBACK notice nor a RETRANSMIT request
};
std::string_view ToString(CaisParseError e);

// A parsed packet. `payload` aliases the datagram passed to ParseCais.
struct CaisPacketView {
  CaisHeader header;
  std::span<const uint8_t> payload;
};

// Bounds-checked parse of a whole datagram (header + payload). Never reads
// outside `datagram`; never allocates. On error `*out` is unspecified.
CaisParseError ParseCais(std::span<const uint8_t> datagram, CaisPacketView* out) noexcept;

// Same, as a Status for tools and control paths (message names the field).
absl::StatusOr<CaisPacketView> ParseCaisOrStatus(std::span<const uint8_t> datagram);

// Writes the 20-byte header for `h` to `out` (which must hold at least
// kCaisHeaderBytes). Returns the number of bytes written, or 0 if too small.
// Does not validate `h`.
size_t SerializeCaisHeader(const CaisHeader& h, std::span<uint8_t> out) noexcept;
// One whole datagram: `h`'s header followed by `payload` (h.payload_len is
// not checked against it).
std::vector<uint8_t> SerializeCais(const CaisHeader& h, std::span<const uint8_t> payload);

// The switch wait: on a RESULT (or ACK) of an AllReduce or ReduceScatter
// chunk, `block` says how long the receiving port's own contribution waited
// in the switch for the other contributors (docs/protocol.md, "Switch
// wait"). A log scale of 16 steps per octave: 0 is under 1 us, v in 1..255
// is 2^((v - 1) / 16) us (1 us to about 60 ms, within 4.4 %), saturating.
uint8_t EncodeWait(int64_t wait_ns) noexcept;
int64_t DecodeWait(uint8_t v) noexcept;
// Whether a RESULT of `op` carries the switch wait in `block`.
constexpr bool CarriesWait(CaisOp op) {
  return op == CaisOp::kAllReduce || op == CaisOp::kReduceScatter;
}

// One-line human-readable rendering, e.g. for logs and `cais-cli`.
std::string Describe(const CaisHeader& h);

}  // namespace inca::wire
