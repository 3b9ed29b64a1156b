// Big-endian (network byte order) field types for packed wire headers, in the
// style of BESS core/utils/endian.h. A Be16/Be32 has alignment 1 and stores
// its bytes in network order; reading converts to host order. Safe to overlay
// on any byte buffer through a bounds-checked view.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace inca {

// std::byteswap is C++23; this is the C++20 equivalent for 16/32/64 bits.
template <typename T>
constexpr T ByteSwap(T v) noexcept {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
  if constexpr (sizeof(T) == 2) {
    return static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(v)));
  } else if constexpr (sizeof(T) == 4) {
    return static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(v)));
  } else {
    return static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(v)));
  }
}

template <typename T>
class BigEndian {
 public:
  BigEndian() = default;
  explicit BigEndian(T host) { set(host); }

  T value() const {
    T v;
    std::memcpy(&v, bytes_, sizeof(T));
    return std::endian::native == std::endian::big ? v : ByteSwap(v);
  }
  void set(T host) {
    T v = std::endian::native == std::endian::big ? host : ByteSwap(host);
    std::memcpy(bytes_, &v, sizeof(T));
  }

 private:
  unsigned char bytes_[sizeof(T)] = {};
};

using Be16 = BigEndian<uint16_t>;
using Be32 = BigEndian<uint32_t>;
using Be64 = BigEndian<uint64_t>;
static_assert(sizeof(Be16) == 2 && alignof(Be16) == 1);
static_assert(sizeof(Be32) == 4 && alignof(Be32) == 1);
static_assert(sizeof(Be64) == 8 && alignof(Be64) == 1);

}  // namespace inca
