// OLAF wire format: the UPDATE (worker -> PS), ACK (PS -> worker) and MODEL
// (PS -> workers of a cluster) datagrams of the OLAF design (seed 000,
// sections 2-3), carried as UDP payloads. Byte-by-byte layout and semantics:
// docs/protocol.md (OLAF section).
//
// Every OLAF datagram starts with the magic "OL" (0x4F 0x4C), a version byte
// and a type byte. Anything else is "not OLAF" (a switch passes it through).
// Header fields are big-endian; payload elements are little-endian f32 (as in
// CAIS). Headers are fixed-size per type; there is no padding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/util/endian.h"

namespace inca::olaf {

inline constexpr uint8_t kOlafMagic0 = 0x4F;  // 'O'
inline constexpr uint8_t kOlafMagic1 = 0x4C;  // 'L'
inline constexpr uint8_t kOlafVersion = 1;
inline constexpr size_t kOlafUpdateHeaderBytes = 40;
inline constexpr size_t kOlafAckBytes = 28;  // an ACK is header only
inline constexpr size_t kOlafModelHeaderBytes = 28;
// cluster_id meaning "not assigned yet" (UPDATE) or "every cluster" (MODEL).
inline constexpr uint16_t kUnassignedCluster = 0xFFFF;
inline constexpr uint16_t kAllClusters = 0xFFFF;
// worker_id meaning "not stamped yet": the first OLAF switch stamps it.
inline constexpr uint32_t kUnstampedWorker = 0;
// queue_util is occupancy/depth in 24-bit fixed point: 0xFFFFFF = full.
inline constexpr uint32_t kQueueUtilOne = 0xFFFFFF;
// ACK aom_us value meaning "no update of this cluster delivered yet"; real
// ages saturate one below it.
inline constexpr uint32_t kAomUnknown = 0xFFFFFFFF;

enum class OlafType : uint8_t {
  kUpdate = 1,  // worker -> PS: a (possibly merged) gradient fragment
  kAck = 2,     // PS -> worker: acknowledges an update, carries queue state
  kModel = 3,   // PS -> workers of a cluster: a model fragment
};
std::string_view ToString(OlafType t);

// Flag bits. UPDATE defines one, PS_CLOCK: gen_time_ns is on the parameter
// server's clock (the worker estimated its offset from MODELs, docs/design/
// olaf-core.md "Clocks across hosts"), so a switch converts it to its own
// clock before comparing. ACK and MODEL define none. A bit a type does not
// define is an error (kUnknownFlags).
inline constexpr uint8_t kUpdateFlagPsClock = 0x01;
inline constexpr uint8_t kOlafKnownUpdateFlags = kUpdateFlagPsClock;
inline constexpr uint8_t kOlafKnownFlags = 0x00;  // ACK and MODEL
// gen_time_ns of an UPDATE whose sender does not know the PS's clock yet:
// later than any real time, so every receiver takes it as "now" (age 0 on
// arrival, never stale) rather than comparing clocks it cannot relate.
inline constexpr uint64_t kGenTimeUnknown = ~uint64_t{0};

// ---- Packed wire layouts (big-endian fields, alignment 1) ----

struct OlafWireUpdate {
  uint8_t magic[2];
  uint8_t version;
  uint8_t type;
  uint8_t flags;
  uint8_t reserved;  // senders write 0; receivers ignore (kept for round-trips)
  Be16 cluster_id;
  Be32 worker_id;
  Be32 model_version;
  Be64 gen_time_ns;
  Be32 merged_count;
  Be32 update_id;
  Be16 frag_index;
  Be16 frag_count;
  Be32 payload_len;
};
static_assert(sizeof(OlafWireUpdate) == kOlafUpdateHeaderBytes);
static_assert(alignof(OlafWireUpdate) == 1);

struct OlafWireAck {
  uint8_t magic[2];
  uint8_t version;
  uint8_t type;
  uint8_t flags;
  uint8_t queue_util[3];  // u24 big-endian
  Be32 worker_id;
  Be32 update_id;
  Be32 model_version;
  Be32 aom_us;
  Be16 cluster_id;
  Be16 active_clusters;
};
static_assert(sizeof(OlafWireAck) == kOlafAckBytes);
static_assert(alignof(OlafWireAck) == 1);

struct OlafWireModel {
  uint8_t magic[2];
  uint8_t version;
  uint8_t type;
  uint8_t flags;
  uint8_t reserved;
  Be16 cluster_id;
  Be32 model_version;
  Be16 frag_index;
  Be16 frag_count;
  Be64 gen_time_ns;
  Be32 payload_len;
};
static_assert(sizeof(OlafWireModel) == kOlafModelHeaderBytes);
static_assert(alignof(OlafWireModel) == 1);

// ---- Decoded headers (host order) ----

struct UpdateHeader {
  uint8_t flags = 0;
  uint8_t reserved = 0;
  uint16_t cluster_id = kUnassignedCluster;
  uint32_t worker_id = kUnstampedWorker;
  uint32_t model_version = 0;  // PS model version the gradient was computed on
  uint64_t gen_time_ns = 0;    // generation time, sender clock
  uint32_t merged_count = 1;   // worker updates merged into this one (>= 1)
  uint32_t update_id = 0;      // per-worker counter; pairs fragments
  uint16_t frag_index = 0;
  uint16_t frag_count = 1;
  uint32_t payload_len = 0;  // bytes; multiple of 4 (f32 LE elements)
  friend bool operator==(const UpdateHeader&, const UpdateHeader&) = default;
};

struct AckHeader {
  uint8_t flags = 0;
  uint32_t queue_util = 0;  // 24-bit: occupancy/depth x kQueueUtilOne (max on the path)
  uint32_t worker_id = 0;
  uint32_t update_id = 0;
  uint32_t model_version = 0;     // PS model version now
  uint32_t aom_us = kAomUnknown;  // AoM of the cluster at the PS, microseconds
  uint16_t cluster_id = kUnassignedCluster;
  uint16_t active_clusters = 0;  // at the switch that reported queue_util
  friend bool operator==(const AckHeader&, const AckHeader&) = default;
};

struct ModelHeader {
  uint8_t flags = 0;
  uint8_t reserved = 0;
  uint16_t cluster_id = kAllClusters;
  uint32_t model_version = 0;
  uint16_t frag_index = 0;
  uint16_t frag_count = 1;
  uint64_t gen_time_ns = 0;  // when the PS produced this model version
  uint32_t payload_len = 0;
  friend bool operator==(const ModelHeader&, const ModelHeader&) = default;
};

// Why a datagram is not a valid OLAF packet. Checked in this order.
enum class OlafParseError : uint8_t {
  kOk = 0,
  kNotOlaf,             // fewer than 2 bytes, or the magic is not "OL"
  kTooShort,            // shorter than the 4-byte prefix or the type's header
  kBadVersion,          // version != kOlafVersion
  kUnknownType,         // type not 1..3
  kUnknownFlags,        // a flag bit outside kOlafKnownFlags
  kPayloadLenMismatch,  // payload_len != datagram length - header (ACK: length != 28)
  kPayloadMisaligned,   // payload_len not a multiple of 4
  kEmptyPayload,        // UPDATE/MODEL with payload_len 0
  kFragmentOutOfRange,  // frag_index >= frag_count (includes frag_count 0)
  kZeroMergedCount,     // UPDATE with merged_count 0
};
inline constexpr size_t kOlafParseErrorCount = 11;
std::string_view ToString(OlafParseError e);

// A parsed datagram. Only the header matching `type` is meaningful;
// `payload` aliases the datagram passed to ParseOlaf (empty for ACKs).
struct OlafPacket {
  OlafType type = OlafType::kUpdate;
  UpdateHeader update;
  AckHeader ack;
  ModelHeader model;
  std::span<const uint8_t> payload;
};

// True when the datagram starts with the OLAF magic (whatever follows).
bool HasOlafMagic(std::span<const uint8_t> datagram) noexcept;

// Bounds-checked parse of a whole datagram. Never reads outside `datagram`,
// never allocates. On error `*out` is unspecified.
OlafParseError ParseOlaf(std::span<const uint8_t> datagram, OlafPacket* out) noexcept;

// Same, as a Status for tools and control paths: InvalidArgument whose
// message starts with the error's name and names the offending field.
absl::StatusOr<OlafPacket> ParseOlafOrStatus(std::span<const uint8_t> datagram);

// Serialisers write the header (magic, version and type included) to `out`
// and return the bytes written, or 0 if `out` is too small. They do not
// validate the header (tests use them to build invalid packets).
size_t SerializeUpdateHeader(const UpdateHeader& h, std::span<uint8_t> out) noexcept;
size_t SerializeAck(const AckHeader& h, std::span<uint8_t> out) noexcept;
size_t SerializeModelHeader(const ModelHeader& h, std::span<uint8_t> out) noexcept;

// A complete UPDATE/MODEL datagram: header (payload_len set from `payload`)
// followed by `payload`. For tools, tests and client libraries.
std::vector<uint8_t> BuildUpdate(UpdateHeader h, std::span<const uint8_t> payload);
std::vector<uint8_t> BuildModel(ModelHeader h, std::span<const uint8_t> payload);

// One-line human-readable rendering for logs and CLIs.
std::string Describe(const OlafPacket& p);

}  // namespace inca::olaf
