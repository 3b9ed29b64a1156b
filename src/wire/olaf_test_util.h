// Test helpers for OLAF packets and tensors, shared by the wire, switch and
// transport tests (src/wire, src/olaf).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <span>
#include <vector>

#include "inca/wire/olaf.h"

namespace inca::olaf {

// start, start + 1, ..., n values.
inline std::vector<float> Ramp(size_t n, float start = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// The floats' bytes, as an OLAF payload carries them.
inline std::vector<uint8_t> F32(std::initializer_list<float> xs) {
  std::vector<uint8_t> b(xs.size() * 4);
  size_t i = 0;
  for (float x : xs) std::memcpy(&b[4 * i++], &x, 4);
  return b;
}

// The datagram parsed; a test failure when it does not parse.
inline OlafPacket MustParse(std::span<const uint8_t> d) {
  OlafPacket p;
  EXPECT_EQ(ParseOlaf(d, &p), OlafParseError::kOk);
  return p;
}

}  // namespace inca::olaf
