// A set of switch ports (0 .. kMaxPorts-1) as a 64-bit mask.
#pragma once

#include <bit>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "inca/dataplane/program.h"

namespace inca::cais {

static_assert(dp::kMaxPorts == 64, "PortMask is a 64-bit mask");

class PortMask {
 public:
  constexpr PortMask() = default;
  constexpr explicit PortMask(uint64_t bits) : bits_(bits) {}
  PortMask(std::initializer_list<dp::PortId> ports) {
    for (dp::PortId p : ports) add(p);
  }
  static PortMask FromVector(const std::vector<dp::PortId>& ports) {
    PortMask m;
    for (dp::PortId p : ports) m.add(p);
    return m;
  }

  // Ports >= kMaxPorts are ignored; validate before adding.
  constexpr void add(dp::PortId p) {
    if (p < dp::kMaxPorts) bits_ |= uint64_t{1} << p;
  }
  constexpr bool contains(dp::PortId p) const {
    return p < dp::kMaxPorts && ((bits_ >> p) & 1u) != 0;
  }
  constexpr int count() const { return std::popcount(bits_); }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr uint64_t bits() const { return bits_; }
  // Position of `p` among the members in ascending order (p must be a member).
  constexpr int rank_of(dp::PortId p) const {
    return std::popcount(bits_ & ((uint64_t{1} << p) - 1));
  }
  // The member at ascending position `index` (< count()).
  dp::PortId nth(int index) const {
    uint64_t b = bits_;
    for (int i = 0; i < index; ++i) b &= b - 1;
    return static_cast<dp::PortId>(std::countr_zero(b));
  }
  std::vector<dp::PortId> ToVector() const;
  // "1,2,3,4"
  std::string ToString() const;

  template <typename F>
  void ForEach(F&& f) const {
    for (uint64_t b = bits_; b != 0; b &= b - 1) f(static_cast<dp::PortId>(std::countr_zero(b)));
  }

  friend constexpr bool operator==(PortMask, PortMask) = default;

 private:
  uint64_t bits_ = 0;
};

}  // namespace inca::cais
