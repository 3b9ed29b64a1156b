// Fuzz target for the OLAF parser: every byte sequence parses or is rejected
// without crashing; the Status form agrees with the enum form; accepted
// datagrams re-serialise to exactly the input bytes (abort() on violation,
// so libFuzzer and the replay driver both report it).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "inca/wire/olaf.h"
#include "util/fuzz_records.h"

using inca::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inca::olaf;
  const std::span<const uint8_t> in = inca::fuzz::Input(data, size);
  OlafPacket p;
  const OlafParseError e = ParseOlaf(in, &p);
  Check(!ToString(e).empty());
  Check(HasOlafMagic(in) == (e != OlafParseError::kNotOlaf));
  const auto s = ParseOlafOrStatus(in);
  Check(s.ok() == (e == OlafParseError::kOk));
  if (!s.ok()) {
    const absl::string_view m = s.status().message();
    const std::string_view name = ToString(e);
    Check(std::string_view(m.data(), m.size()).substr(0, name.size()) == name);
    return 0;
  }
  Check(p.payload.size() % 4 == 0);
  Check(p.payload.empty() ||
        (p.payload.data() >= data && p.payload.data() + p.payload.size() == data + size));
  std::vector<uint8_t> again;
  switch (p.type) {
    case OlafType::kUpdate:
      Check(p.update == s->update);
      Check(p.update.frag_index < p.update.frag_count && p.update.merged_count >= 1);
      again = BuildUpdate(p.update, p.payload);
      break;
    case OlafType::kAck:
      Check(p.ack == s->ack && size == kOlafAckBytes);
      again.resize(kOlafAckBytes);
      Check(SerializeAck(p.ack, again) == kOlafAckBytes);
      break;
    case OlafType::kModel:
      Check(p.model == s->model);
      Check(p.model.frag_index < p.model.frag_count);
      again = BuildModel(p.model, p.payload);
      break;
  }
  Check(again.size() == size && std::memcmp(again.data(), data, size) == 0);
  Check(!Describe(p).empty());
  return 0;
}
