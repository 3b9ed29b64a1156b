// What inca's fuzz targets share: Check (abort, so the fuzzer records the
// input), the input as a span, and the record stream the stateful targets
// (reducer_fuzz, switch_fuzz) read:
//   byte 0 (left to the target), then records
//   [a u8][b u8][len u16 little-endian][len bytes]
// where a record's bytes stop at the input's end.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

namespace inca::fuzz {

inline void Check(bool ok) {
  if (!ok) std::abort();
}

// The whole input (empty when size is 0: data may then be null).
inline std::span<const uint8_t> Input(const uint8_t* data, size_t size) {
  return size == 0 ? std::span<const uint8_t>() : std::span<const uint8_t>(data, size);
}

struct Record {
  uint8_t a = 0;  // the targets' port byte
  uint8_t b = 0;  // the targets' time-step byte
  std::span<const uint8_t> bytes;
};

class Records {
 public:
  Records(const uint8_t* data, size_t size) : in_(Input(data, size)) {}
  // The next record; false at the end of the input.
  bool Next(Record* r) {
    if (at_ + 4 > in_.size()) return false;
    r->a = in_[at_];
    r->b = in_[at_ + 1];
    size_t len = size_t{in_[at_ + 2]} | size_t{in_[at_ + 3]} << 8;
    at_ += 4;
    len = std::min(len, in_.size() - at_);
    r->bytes = in_.subspan(at_, len);
    at_ += len;
    return true;
  }

 private:
  std::span<const uint8_t> in_;
  size_t at_ = 1;
};

}  // namespace inca::fuzz
