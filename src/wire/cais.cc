// CAIS wire format: parsing, validation, serialisation and rendering of the
// 20-byte header declared in include/inca/wire/cais.h. Layout and semantics:
// docs/protocol.md.
#include "inca/wire/cais.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/string_compat.h"

namespace inca::wire {

std::string_view ToString(CaisOp op) {
  switch (op) {
    case CaisOp::kAllReduce: return "allreduce";
    case CaisOp::kAllGather: return "allgather";
    case CaisOp::kBroadcast: return "broadcast";
    case CaisOp::kReduceScatter: return "reducescatter";
  }
  return "unknown";
}

std::string_view ToString(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kProduct: return "product";
  }
  return "unknown";
}

std::string_view ToString(DeclineReason r) {
  switch (r) {
    case DeclineReason::kUnknown: return "unknown";
    case DeclineReason::kRule: return "rule";
    case DeclineReason::kModel: return "model";
    case DeclineReason::kMeasured: return "measured";
    case DeclineReason::kExplore: return "explore";
    case DeclineReason::kHeld: return "held";
    case DeclineReason::kTree: return "tree";
  }
  return "unknown";
}

std::string_view ToString(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
  }
  return "unknown";
}

std::string_view ToString(CaisParseError e) {
  switch (e) {
    case CaisParseError::kOk: return "ok";
    case CaisParseError::kTooShort: return "too_short";
    case CaisParseError::kBadVersion: return "bad_version";
    case CaisParseError::kUnknownOp: return "unknown_op";
    case CaisParseError::kUnknownReduceOp: return "unknown_reduce_op";
    case CaisParseError::kUnknownDType: return "unknown_dtype";
    case CaisParseError::kUnknownFlags: return "unknown_flags";
    case CaisParseError::kPayloadLenMismatch: return "payload_len_mismatch";
    case CaisParseError::kChunkOutOfRange: return "chunk_out_of_range";
    case CaisParseError::kPayloadMisaligned: return "payload_misaligned";
    case CaisParseError::kEmptyPayload: return "empty_payload";
  }
  return "unknown";
}

namespace {

constexpr uint8_t HighNibble(uint8_t b) {
  return static_cast<uint8_t>(b >> 4);
}
constexpr uint8_t LowNibble(uint8_t b) {
  return static_cast<uint8_t>(b & 0x0F);
}

// Parses `datagram`, leaving the raw header in `*raw` once at least the
// header bytes are present (so callers can explain an error). Checks run in
// the order of CaisParseError. Writes `*out` only on success.
CaisParseError ParseImpl(std::span<const uint8_t> datagram, CaisWireHeader* raw,
                         CaisPacketView* out) noexcept {
  if (datagram.size() < kCaisHeaderBytes) return CaisParseError::kTooShort;
  // Copy into an aligned local object: never overlay the (possibly
  // unaligned) datagram bytes with a struct pointer.
  std::memcpy(raw, datagram.data(), kCaisHeaderBytes);
  const CaisWireHeader& w = *raw;

  if (w.version != kCaisVersion) return CaisParseError::kBadVersion;
  if (w.op_type >= kCaisOpCount) return CaisParseError::kUnknownOp;
  const uint8_t reduce_op = HighNibble(w.reduce_op_dtype);
  const uint8_t dtype = LowNibble(w.reduce_op_dtype);
  if (reduce_op >= kReduceOpCount) return CaisParseError::kUnknownReduceOp;
  if (dtype >= kDTypeCount) return CaisParseError::kUnknownDType;
  if ((w.flags & ~cais_flags::kKnownMask) != 0) return CaisParseError::kUnknownFlags;

  const size_t payload_bytes = datagram.size() - kCaisHeaderBytes;
  const uint32_t payload_len = w.payload_len.value();
  if (payload_len != payload_bytes) return CaisParseError::kPayloadLenMismatch;

  const uint16_t chunk_id = w.chunk_id.value();
  const uint16_t total_chunks = w.total_chunks.value();
  if (chunk_id >= total_chunks) return CaisParseError::kChunkOutOfRange;

  const auto t = static_cast<DType>(dtype);
  if (payload_len % ElementBytes(t) != 0) return CaisParseError::kPayloadMisaligned;
  // Empty payloads: fallback notices, ReduceScatter ACKs, PENDING answers, and result
  // requests (RETRANSMIT without RESULT) from hosts that lost a result.
  const bool notice =
      (w.flags & (cais_flags::kFallback | cais_flags::kAck | cais_flags::kPending)) != 0;
  const bool request =
      (w.flags & (cais_flags::kRetransmit | cais_flags::kResult)) == cais_flags::kRetransmit;
  if (payload_len == 0 && !notice && !request) {
    return CaisParseError::kEmptyPayload;
  }

  if (out != nullptr) {
    CaisHeader& h = out->header;
    h.op = static_cast<CaisOp>(w.op_type);
    h.group_id = w.group_id;
    h.layer_id = w.layer_id.value();
    h.chunk_id = chunk_id;
    h.total_chunks = total_chunks;
    h.seq_num = w.seq_num.value();
    h.payload_len = payload_len;
    h.version = w.version;
    h.flags = w.flags;
    h.reduce_op = static_cast<ReduceOp>(reduce_op);
    h.dtype = t;
    h.block = w.block;
    out->payload = datagram.subspan(kCaisHeaderBytes, payload_bytes);
  }
  return CaisParseError::kOk;
}

using util::Av;
using util::Hex2;

// Renders flag bits as "result|retransmit|fallback" ("none" when zero);
// unknown bits are appended in hex.
std::string FlagsToString(uint8_t flags) {
  if (flags == 0) return "none";
  std::string s;
  auto add = [&s](std::string_view part) {
    if (!s.empty()) s += '|';
    s += part;
  };
  if ((flags & cais_flags::kResult) != 0) add("result");
  if ((flags & cais_flags::kRetransmit) != 0) add("retransmit");
  if ((flags & cais_flags::kFallback) != 0) add("fallback");
  if ((flags & cais_flags::kDeclined) != 0) add("declined");
  if ((flags & cais_flags::kAck) != 0) add("ack");
  if ((flags & cais_flags::kPending) != 0) add("pending");
  const uint8_t unknown = static_cast<uint8_t>(flags & ~cais_flags::kKnownMask);
  if (unknown != 0) add(Hex2(unknown));
  return s;
}

// The message for a failed parse: "<error name>: <field and values>".
std::string ErrorMessage(CaisParseError e, const CaisWireHeader& w, size_t size) {
  const absl::string_view name = Av(ToString(e));
  const size_t payload_bytes = size >= kCaisHeaderBytes ? size - kCaisHeaderBytes : 0;
  switch (e) {
    case CaisParseError::kOk: return std::string(name);
    case CaisParseError::kTooShort:
      return absl::StrCat(name, ": datagram of ", size, " bytes is shorter than the ",
                          kCaisHeaderBytes, "-byte CAIS header");
    case CaisParseError::kBadVersion:
      return absl::StrCat(name, ": version ", w.version, " is not supported (expected ",
                          kCaisVersion, ")");
    case CaisParseError::kUnknownOp:
      return absl::StrCat(name, ": op_type ", w.op_type, " is unknown (valid 0..", kCaisOpCount - 1,
                          ")");
    case CaisParseError::kUnknownReduceOp:
      return absl::StrCat(name, ": reduce_op ", HighNibble(w.reduce_op_dtype),
                          " is unknown (valid 0..", kReduceOpCount - 1,
                          "; byte 18 = ", Hex2(w.reduce_op_dtype), ")");
    case CaisParseError::kUnknownDType:
      return absl::StrCat(name, ": dtype ", LowNibble(w.reduce_op_dtype), " is unknown (valid 0..",
                          kDTypeCount - 1, "; byte 18 = ", Hex2(w.reduce_op_dtype), ")");
    case CaisParseError::kUnknownFlags:
      return absl::StrCat(name, ": flags ", Hex2(w.flags), " has unknown bits ",
                          Hex2(static_cast<uint8_t>(w.flags & ~cais_flags::kKnownMask)),
                          " (known mask ", Hex2(cais_flags::kKnownMask), ")");
    case CaisParseError::kPayloadLenMismatch:
      return absl::StrCat(name, ": payload_len ", w.payload_len.value(),
                          " disagrees with datagram (", payload_bytes, " payload bytes)");
    case CaisParseError::kChunkOutOfRange:
      return absl::StrCat(name, ": chunk_id ", w.chunk_id.value(), " is not below total_chunks ",
                          w.total_chunks.value());
    case CaisParseError::kPayloadMisaligned: {
      const auto t = static_cast<DType>(LowNibble(w.reduce_op_dtype));
      return absl::StrCat(name, ": payload_len ", w.payload_len.value(),
                          " is not a multiple of the ", ElementBytes(t), "-byte ", Av(ToString(t)),
                          " element size");
    }
    case CaisParseError::kEmptyPayload:
      return absl::StrCat(name,
                          ": payload_len 0 without the FALLBACK flag or a RETRANSMIT request "
                          "(flags ",
                          Hex2(w.flags), ")");
  }
  return std::string(name);
}

}  // namespace

CaisParseError ParseCais(std::span<const uint8_t> datagram, CaisPacketView* out) noexcept {
  CaisWireHeader raw;
  return ParseImpl(datagram, &raw, out);
}

absl::StatusOr<CaisPacketView> ParseCaisOrStatus(std::span<const uint8_t> datagram) {
  CaisWireHeader raw{};
  CaisPacketView view;
  const CaisParseError e = ParseImpl(datagram, &raw, &view);
  if (e != CaisParseError::kOk) {
    return absl::InvalidArgumentError(ErrorMessage(e, raw, datagram.size()));
  }
  return view;
}

size_t SerializeCaisHeader(const CaisHeader& h, std::span<uint8_t> out) noexcept {
  if (out.size() < kCaisHeaderBytes) return 0;
  CaisWireHeader w;
  w.op_type = static_cast<uint8_t>(h.op);
  w.group_id = h.group_id;
  w.layer_id.set(h.layer_id);
  w.chunk_id.set(h.chunk_id);
  w.total_chunks.set(h.total_chunks);
  w.seq_num.set(h.seq_num);
  w.payload_len.set(h.payload_len);
  w.version = h.version;
  w.flags = h.flags;
  w.reduce_op_dtype = static_cast<uint8_t>((LowNibble(static_cast<uint8_t>(h.reduce_op)) << 4) |
                                           LowNibble(static_cast<uint8_t>(h.dtype)));
  w.block = h.block;
  std::memcpy(out.data(), &w, kCaisHeaderBytes);
  return kCaisHeaderBytes;
}

std::vector<uint8_t> SerializeCais(const CaisHeader& h, std::span<const uint8_t> payload) {
  std::vector<uint8_t> d(kCaisHeaderBytes + payload.size());
  SerializeCaisHeader(h, d);
  if (!payload.empty()) std::memcpy(d.data() + kCaisHeaderBytes, payload.data(), payload.size());
  return d;
}

uint8_t EncodeWait(int64_t wait_ns) noexcept {
  if (wait_ns < 1000) return 0;
  const double v = 1 + std::floor(16 * std::log2(static_cast<double>(wait_ns) / 1000.0));
  return static_cast<uint8_t>(std::min(v, 255.0));
}

int64_t DecodeWait(uint8_t v) noexcept {
  if (v == 0) return 0;
  return static_cast<int64_t>(std::exp2((v - 1) / 16.0) * 1000.0);
}

std::string Describe(const CaisHeader& h) {
  return absl::StrCat("cais v", h.version, " ", Av(ToString(h.op)), " group=", h.group_id,
                      " layer=", h.layer_id, " seq=", h.seq_num, " chunk=", h.chunk_id, "/",
                      h.total_chunks, " ", Av(ToString(h.reduce_op)), "/", Av(ToString(h.dtype)),
                      " len=", h.payload_len, " (", h.element_count(),
                      " elems) flags=", FlagsToString(h.flags), " block=", h.block);
}

}  // namespace inca::wire
