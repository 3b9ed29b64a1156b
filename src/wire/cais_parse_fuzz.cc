// Fuzz target for the CAIS parser: every byte sequence must parse or be
// rejected without crashing, and accepted packets must satisfy the
// invariants below (abort() on violation, so libFuzzer and the replay driver
// both report it).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/wire/cais.h"
#include "inca/wire/mgmt.h"
#include "util/fuzz_records.h"

using inca::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inca::wire;
  const std::span<const uint8_t> in = inca::fuzz::Input(data, size);

  // The same bytes as a management datagram: parse, and if accepted, the
  // encoding must reproduce them exactly.
  MgmtMessage mm;
  if (ParseMgmt(in, &mm)) {
    std::vector<uint8_t> again;
    SerializeMgmt(mm, &again);
    Check(again.size() == size && std::memcmp(again.data(), data, size) == 0);
  }

  CaisPacketView v;
  const CaisParseError e = ParseCais(in, &v);
  Check(!ToString(e).empty());

  // The Status form must agree with the enum form.
  absl::StatusOr<CaisPacketView> s = ParseCaisOrStatus(in);
  Check(s.ok() == (e == CaisParseError::kOk));
  if (!s.ok()) {
    Check(s.status().code() == absl::StatusCode::kInvalidArgument);
    // The message starts with the error's name.
    const absl::string_view m = s.status().message();
    const std::string_view msg(m.data(), m.size());
    const std::string_view name = ToString(e);
    Check(msg.substr(0, name.size()) == name);
    return 0;
  }

  // Payload lies inside the input, immediately after the header.
  Check(size >= kCaisHeaderBytes);
  Check(v.payload.data() == data + kCaisHeaderBytes);
  Check(v.payload.size() == size - kCaisHeaderBytes);
  Check(v.header.payload_len == size - kCaisHeaderBytes);
  Check(v.header.chunk_id < v.header.total_chunks);
  Check(v.header.version == kCaisVersion);
  Check(v.header.payload_len % ElementBytes(v.header.dtype) == 0);
  // Empty only for fallback notices, ACKs, PENDING answers and result
  // requests (RETRANSMIT, no RESULT).
  Check(v.header.payload_len != 0 || v.header.has_flag(cais_flags::kFallback) ||
        v.header.has_flag(cais_flags::kAck) || v.header.has_flag(cais_flags::kPending) ||
        (v.header.has_flag(cais_flags::kRetransmit) && !v.header.has_flag(cais_flags::kResult)));
  Check(s->header == v.header);
  Check(s->payload.data() == v.payload.data() && s->payload.size() == v.payload.size());

  // Serialising the parsed header reproduces the input's header bytes.
  std::array<uint8_t, kCaisHeaderBytes> out{};
  Check(SerializeCaisHeader(v.header, out) == kCaisHeaderBytes);
  Check(std::memcmp(out.data(), data, kCaisHeaderBytes) == 0);

  const std::string d = Describe(v.header);
  Check(!d.empty());
  return 0;
}
