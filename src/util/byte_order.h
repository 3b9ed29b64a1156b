// Fixed-width integers at unaligned byte addresses, in a stated byte order:
// little-endian for the reduction's element data (docs/protocol.md), big-endian
// (network order) for the headers the testbed's tools parse. One definition
// for the kernels, their tests and the tools. (std::byteswap is C++23, hence
// the builtins.)
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace inca::util {

inline constexpr bool kBigEndianHost = std::endian::native == std::endian::big;

inline uint16_t LoadLe16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (kBigEndianHost) v = __builtin_bswap16(v);
  return v;
}
inline uint32_t LoadLe32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (kBigEndianHost) v = __builtin_bswap32(v);
  return v;
}
inline void StoreLe16(uint8_t* p, uint16_t v) {
  if constexpr (kBigEndianHost) v = __builtin_bswap16(v);
  std::memcpy(p, &v, sizeof(v));
}
inline void StoreLe32(uint8_t* p, uint32_t v) {
  if constexpr (kBigEndianHost) v = __builtin_bswap32(v);
  std::memcpy(p, &v, sizeof(v));
}
inline uint16_t LoadBe16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
inline void StoreBe16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void StoreBe32(uint8_t* p, uint32_t v) {
  for (int k = 0; k < 4; ++k) p[k] = static_cast<uint8_t>(v >> (24 - 8 * k));
}

}  // namespace inca::util
