// OLAF wire format: parsing, validation, serialisation and rendering of the
// headers declared in include/inca/wire/olaf.h. Layout: docs/protocol.md, OLAF section.
#include "inca/wire/olaf.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/string_compat.h"

namespace inca::olaf {

std::string_view ToString(OlafType t) {
  switch (t) {
    case OlafType::kUpdate: return "update";
    case OlafType::kAck: return "ack";
    case OlafType::kModel: return "model";
  }
  return "unknown";
}

std::string_view ToString(OlafParseError e) {
  switch (e) {
    case OlafParseError::kOk: return "ok";
    case OlafParseError::kNotOlaf: return "not_olaf";
    case OlafParseError::kTooShort: return "too_short";
    case OlafParseError::kBadVersion: return "bad_version";
    case OlafParseError::kUnknownType: return "unknown_type";
    case OlafParseError::kUnknownFlags: return "unknown_flags";
    case OlafParseError::kPayloadLenMismatch: return "payload_len_mismatch";
    case OlafParseError::kPayloadMisaligned: return "payload_misaligned";
    case OlafParseError::kEmptyPayload: return "empty_payload";
    case OlafParseError::kFragmentOutOfRange: return "fragment_out_of_range";
    case OlafParseError::kZeroMergedCount: return "zero_merged_count";
  }
  return "unknown";
}

namespace {

constexpr size_t kPrefixBytes = 4;

size_t HeaderBytes(uint8_t type) {
  switch (type) {
    case static_cast<uint8_t>(OlafType::kUpdate): return kOlafUpdateHeaderBytes;
    case static_cast<uint8_t>(OlafType::kAck): return kOlafAckBytes;
    case static_cast<uint8_t>(OlafType::kModel): return kOlafModelHeaderBytes;
    default: return 0;
  }
}

uint32_t GetU24(const uint8_t b[3]) {
  return (uint32_t{b[0]} << 16) | (uint32_t{b[1]} << 8) | uint32_t{b[2]};
}

void PutU24(uint8_t b[3], uint32_t v) {
  b[0] = static_cast<uint8_t>(v >> 16);
  b[1] = static_cast<uint8_t>(v >> 8);
  b[2] = static_cast<uint8_t>(v);
}

// What ErrorMessage needs to explain a failure: the raw bytes of the header
// (zero where the datagram is shorter) and the datagram size.
struct RawHeader {
  uint8_t bytes[kOlafUpdateHeaderBytes] = {};  // the largest header
  size_t size = 0;
  template <typename W>
  W As() const {
    W w;
    std::memcpy(&w, bytes, sizeof(W));
    return w;
  }
};

OlafParseError CheckPayload(uint32_t payload_len, size_t payload_bytes) {
  if (payload_len != payload_bytes) return OlafParseError::kPayloadLenMismatch;
  if (payload_len % 4 != 0) return OlafParseError::kPayloadMisaligned;
  if (payload_len == 0) return OlafParseError::kEmptyPayload;
  return OlafParseError::kOk;
}

// Checks run in the order of OlafParseError. Fills `*raw` with as many header
// bytes as are present; `out` must not be null and is complete only on success.
OlafParseError ParseImpl(std::span<const uint8_t> d, RawHeader* raw, OlafPacket* out) noexcept {
  raw->size = d.size();
  if (!d.empty()) std::memcpy(raw->bytes, d.data(), std::min(d.size(), sizeof(raw->bytes)));
  if (d.size() < 2 || d[0] != kOlafMagic0 || d[1] != kOlafMagic1) return OlafParseError::kNotOlaf;
  if (d.size() < kPrefixBytes) return OlafParseError::kTooShort;
  if (d[2] != kOlafVersion) return OlafParseError::kBadVersion;
  const size_t header = HeaderBytes(d[3]);
  if (header == 0) return OlafParseError::kUnknownType;
  if (d.size() < header) return OlafParseError::kTooShort;
  const uint8_t known =
      d[3] == static_cast<uint8_t>(OlafType::kUpdate) ? kOlafKnownUpdateFlags : kOlafKnownFlags;
  if ((d[4] & ~known) != 0) return OlafParseError::kUnknownFlags;
  const size_t payload_bytes = d.size() - header;

  switch (static_cast<OlafType>(d[3])) {
    case OlafType::kUpdate: {
      const auto w = raw->As<OlafWireUpdate>();
      const uint32_t len = w.payload_len.value();
      if (OlafParseError e = CheckPayload(len, payload_bytes); e != OlafParseError::kOk) return e;
      if (w.frag_index.value() >= w.frag_count.value()) {
        return OlafParseError::kFragmentOutOfRange;
      }
      if (w.merged_count.value() == 0) return OlafParseError::kZeroMergedCount;
      UpdateHeader& h = out->update;
      h.flags = w.flags;
      h.reserved = w.reserved;
      h.cluster_id = w.cluster_id.value();
      h.worker_id = w.worker_id.value();
      h.model_version = w.model_version.value();
      h.gen_time_ns = w.gen_time_ns.value();
      h.merged_count = w.merged_count.value();
      h.update_id = w.update_id.value();
      h.frag_index = w.frag_index.value();
      h.frag_count = w.frag_count.value();
      h.payload_len = len;
      break;
    }
    case OlafType::kAck: {
      if (payload_bytes != 0) return OlafParseError::kPayloadLenMismatch;
      const auto w = raw->As<OlafWireAck>();
      AckHeader& h = out->ack;
      h.flags = w.flags;
      h.queue_util = GetU24(w.queue_util);
      h.worker_id = w.worker_id.value();
      h.update_id = w.update_id.value();
      h.model_version = w.model_version.value();
      h.aom_us = w.aom_us.value();
      h.cluster_id = w.cluster_id.value();
      h.active_clusters = w.active_clusters.value();
      break;
    }
    case OlafType::kModel: {
      const auto w = raw->As<OlafWireModel>();
      const uint32_t len = w.payload_len.value();
      if (OlafParseError e = CheckPayload(len, payload_bytes); e != OlafParseError::kOk) return e;
      if (w.frag_index.value() >= w.frag_count.value()) {
        return OlafParseError::kFragmentOutOfRange;
      }
      ModelHeader& h = out->model;
      h.flags = w.flags;
      h.reserved = w.reserved;
      h.cluster_id = w.cluster_id.value();
      h.model_version = w.model_version.value();
      h.frag_index = w.frag_index.value();
      h.frag_count = w.frag_count.value();
      h.gen_time_ns = w.gen_time_ns.value();
      h.payload_len = len;
      break;
    }
  }
  out->type = static_cast<OlafType>(d[3]);
  out->payload = d.subspan(header, payload_bytes);
  return OlafParseError::kOk;
}

using util::Av;
using util::Hex2;

// "<error name>: <field and values>".
std::string ErrorMessage(OlafParseError e, const RawHeader& r) {
  const absl::string_view name = Av(ToString(e));
  const uint8_t type = r.bytes[3];
  const absl::string_view type_name = Av(ToString(static_cast<OlafType>(type)));
  const size_t header = HeaderBytes(type);
  uint32_t payload_len = 0;
  uint16_t frag_index = 0, frag_count = 0;
  if (type == static_cast<uint8_t>(OlafType::kUpdate)) {
    const auto w = r.As<OlafWireUpdate>();
    payload_len = w.payload_len.value();
    frag_index = w.frag_index.value();
    frag_count = w.frag_count.value();
  } else if (type == static_cast<uint8_t>(OlafType::kModel)) {
    const auto w = r.As<OlafWireModel>();
    payload_len = w.payload_len.value();
    frag_index = w.frag_index.value();
    frag_count = w.frag_count.value();
  }
  switch (e) {
    case OlafParseError::kOk: return std::string(name);
    case OlafParseError::kNotOlaf:
      return r.size < 2 ? absl::StrCat(name, ": datagram of ", r.size,
                                       " bytes cannot hold the 2-byte magic \"OL\"")
                        : absl::StrCat(name, ": magic ", Hex2(r.bytes[0]), " ", Hex2(r.bytes[1]),
                                       " is not \"OL\" (0x4f 0x4c)");
    case OlafParseError::kTooShort:
      if (r.size < kPrefixBytes) {
        return absl::StrCat(name, ": datagram of ", r.size,
                            " bytes is shorter than the 4-byte OLAF prefix");
      }
      return absl::StrCat(name, ": datagram of ", r.size, " bytes is shorter than the ", header,
                          "-byte OLAF ", type_name, " header");
    case OlafParseError::kBadVersion:
      return absl::StrCat(name, ": version ", r.bytes[2], " is not supported (expected ",
                          kOlafVersion, ")");
    case OlafParseError::kUnknownType:
      return absl::StrCat(name, ": type ", type, " is unknown (1 update, 2 ack, 3 model)");
    case OlafParseError::kUnknownFlags:
      return absl::StrCat(
          name, ": flags ", Hex2(r.bytes[4]), " has unknown bits (known mask ",
          Hex2(type == static_cast<uint8_t>(OlafType::kUpdate) ? kOlafKnownUpdateFlags
                                                               : kOlafKnownFlags),
          ")");
    case OlafParseError::kPayloadLenMismatch:
      if (type == static_cast<uint8_t>(OlafType::kAck)) {
        return absl::StrCat(name, ": ack datagram of ", r.size, " bytes; an ack is exactly ",
                            kOlafAckBytes, " bytes");
      }
      return absl::StrCat(name, ": payload_len ", payload_len, " disagrees with datagram (",
                          r.size - header, " payload bytes)");
    case OlafParseError::kPayloadMisaligned:
      return absl::StrCat(name, ": payload_len ", payload_len,
                          " is not a multiple of the 4-byte f32 element size");
    case OlafParseError::kEmptyPayload:
      return absl::StrCat(name, ": payload_len 0: an ", type_name, " carries at least one f32");
    case OlafParseError::kFragmentOutOfRange:
      return absl::StrCat(name, ": frag_index ", frag_index, " is not below frag_count ",
                          frag_count);
    case OlafParseError::kZeroMergedCount:
      return absl::StrCat(name, ": merged_count 0: an update carries at least one worker update");
  }
  return std::string(name);
}

void PutPrefix(uint8_t* magic, uint8_t* version, uint8_t* type, OlafType t) {
  magic[0] = kOlafMagic0;
  magic[1] = kOlafMagic1;
  *version = kOlafVersion;
  *type = static_cast<uint8_t>(t);
}

}  // namespace

bool HasOlafMagic(std::span<const uint8_t> d) noexcept {
  return d.size() >= 2 && d[0] == kOlafMagic0 && d[1] == kOlafMagic1;
}

OlafParseError ParseOlaf(std::span<const uint8_t> datagram, OlafPacket* out) noexcept {
  RawHeader raw;
  OlafPacket scratch;
  return ParseImpl(datagram, &raw, out != nullptr ? out : &scratch);
}

absl::StatusOr<OlafPacket> ParseOlafOrStatus(std::span<const uint8_t> datagram) {
  RawHeader raw;
  OlafPacket p;
  const OlafParseError e = ParseImpl(datagram, &raw, &p);
  if (e != OlafParseError::kOk) return absl::InvalidArgumentError(ErrorMessage(e, raw));
  return p;
}

size_t SerializeUpdateHeader(const UpdateHeader& h, std::span<uint8_t> out) noexcept {
  if (out.size() < kOlafUpdateHeaderBytes) return 0;
  OlafWireUpdate w;
  PutPrefix(w.magic, &w.version, &w.type, OlafType::kUpdate);
  w.flags = h.flags;
  w.reserved = h.reserved;
  w.cluster_id.set(h.cluster_id);
  w.worker_id.set(h.worker_id);
  w.model_version.set(h.model_version);
  w.gen_time_ns.set(h.gen_time_ns);
  w.merged_count.set(h.merged_count);
  w.update_id.set(h.update_id);
  w.frag_index.set(h.frag_index);
  w.frag_count.set(h.frag_count);
  w.payload_len.set(h.payload_len);
  std::memcpy(out.data(), &w, sizeof(w));
  return sizeof(w);
}

size_t SerializeAck(const AckHeader& h, std::span<uint8_t> out) noexcept {
  if (out.size() < kOlafAckBytes) return 0;
  OlafWireAck w;
  PutPrefix(w.magic, &w.version, &w.type, OlafType::kAck);
  w.flags = h.flags;
  PutU24(w.queue_util, h.queue_util);
  w.worker_id.set(h.worker_id);
  w.update_id.set(h.update_id);
  w.model_version.set(h.model_version);
  w.aom_us.set(h.aom_us);
  w.cluster_id.set(h.cluster_id);
  w.active_clusters.set(h.active_clusters);
  std::memcpy(out.data(), &w, sizeof(w));
  return sizeof(w);
}

size_t SerializeModelHeader(const ModelHeader& h, std::span<uint8_t> out) noexcept {
  if (out.size() < kOlafModelHeaderBytes) return 0;
  OlafWireModel w;
  PutPrefix(w.magic, &w.version, &w.type, OlafType::kModel);
  w.flags = h.flags;
  w.reserved = h.reserved;
  w.cluster_id.set(h.cluster_id);
  w.model_version.set(h.model_version);
  w.frag_index.set(h.frag_index);
  w.frag_count.set(h.frag_count);
  w.gen_time_ns.set(h.gen_time_ns);
  w.payload_len.set(h.payload_len);
  std::memcpy(out.data(), &w, sizeof(w));
  return sizeof(w);
}

std::vector<uint8_t> BuildUpdate(UpdateHeader h, std::span<const uint8_t> payload) {
  h.payload_len = static_cast<uint32_t>(payload.size());
  std::vector<uint8_t> d(kOlafUpdateHeaderBytes + payload.size());
  SerializeUpdateHeader(h, d);
  if (!payload.empty())
    std::memcpy(d.data() + kOlafUpdateHeaderBytes, payload.data(), payload.size());
  return d;
}

std::vector<uint8_t> BuildModel(ModelHeader h, std::span<const uint8_t> payload) {
  h.payload_len = static_cast<uint32_t>(payload.size());
  std::vector<uint8_t> d(kOlafModelHeaderBytes + payload.size());
  SerializeModelHeader(h, d);
  if (!payload.empty())
    std::memcpy(d.data() + kOlafModelHeaderBytes, payload.data(), payload.size());
  return d;
}

std::string Describe(const OlafPacket& p) {
  switch (p.type) {
    case OlafType::kUpdate: {
      const UpdateHeader& h = p.update;
      return absl::StrCat("olaf v1 update cluster=", h.cluster_id, " worker=", h.worker_id,
                          " update=", h.update_id, " frag=", h.frag_index, "/", h.frag_count,
                          " model_version=", h.model_version, " gen_time_ns=", h.gen_time_ns,
                          " merged=", h.merged_count, " len=", h.payload_len);
    }
    case OlafType::kAck: {
      const AckHeader& h = p.ack;
      return absl::StrCat("olaf v1 ack cluster=", h.cluster_id, " worker=", h.worker_id,
                          " update=", h.update_id, " model_version=", h.model_version,
                          " queue_util=", Hex2(h.queue_util),
                          " active_clusters=", h.active_clusters, " aom_us=", h.aom_us);
    }
    case OlafType::kModel: {
      const ModelHeader& h = p.model;
      return absl::StrCat("olaf v1 model cluster=", h.cluster_id,
                          " model_version=", h.model_version, " frag=", h.frag_index, "/",
                          h.frag_count, " gen_time_ns=", h.gen_time_ns, " len=", h.payload_len);
    }
  }
  return "olaf ?";
}

}  // namespace inca::olaf
