// A set of switch ports (0 .. kMaxPorts-1) as a fixed bitset of kMaxPorts
// bits (1,024: 16 words). Operations touch only the words up to the highest
// member, so masks of low ports cost about what a 64-bit mask did.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "inca/dataplane/program.h"

namespace inca::cais {

// At most this many input ports per rule, hence members per group: a slot
// keeps one cell per contributor in deterministic mode (slot_pool.h), and the
// write-up's tensor-parallel groups are 2-64 ranks. The switch itself serves
// up to dp::kMaxPorts peers across its groups.
inline constexpr int kMaxGroupMembers = 64;
// The most ranks of one group across a tree of switches (two levels of 64
// members: docs/design/tree.md). A JOIN may name a world size up to this;
// at most kMaxGroupMembers of its ranks JOIN any one switch.
inline constexpr int kMaxTreeRanks = kMaxGroupMembers * kMaxGroupMembers;

class PortMask {
 public:
  static constexpr int kWords = (dp::kMaxPorts + 63) / 64;

  constexpr PortMask() = default;
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
    if (p >= dp::kMaxPorts) return;
    words_[p / 64] |= uint64_t{1} << (p % 64);
    if (p / 64 >= used_) used_ = static_cast<uint8_t>(p / 64 + 1);
  }
  constexpr bool contains(dp::PortId p) const {
    return p < dp::kMaxPorts && ((words_[p / 64] >> (p % 64)) & 1u) != 0;
  }
  constexpr int count() const {
    int n = 0;
    for (int w = 0; w < used_; ++w) n += std::popcount(words_[w]);
    return n;
  }
  constexpr bool empty() const { return count() == 0; }
  // Position of `p` among the members in ascending order (p must be a member).
  constexpr int rank_of(dp::PortId p) const {
    int n = 0;
    for (int w = 0; w < p / 64; ++w) n += std::popcount(words_[w]);
    return n + std::popcount(words_[p / 64] & ((uint64_t{1} << (p % 64)) - 1));
  }
  // The member at ascending position `index` (< count()).
  dp::PortId nth(int index) const {
    for (int w = 0; w < used_; ++w) {
      uint64_t b = words_[w];
      const int here = std::popcount(b);
      if (index >= here) {
        index -= here;
        continue;
      }
      for (int i = 0; i < index; ++i) b &= b - 1;
      return static_cast<dp::PortId>(w * 64 + std::countr_zero(b));
    }
    return dp::kMaxPorts;
  }
  std::vector<dp::PortId> ToVector() const;
  // "1,2,3,4"
  std::string ToString() const;

  template <typename F>
  void ForEach(F&& f) const {
    for (int w = 0; w < used_; ++w) {
      for (uint64_t b = words_[w]; b != 0; b &= b - 1) {
        f(static_cast<dp::PortId>(w * 64 + std::countr_zero(b)));
      }
    }
  }

  friend constexpr bool operator==(const PortMask& a, const PortMask& b) {
    return a.words_ == b.words_;
  }

 private:
  std::array<uint64_t, kWords> words_{};
  uint8_t used_ = 0;  // words_[used_..] are zero
};

}  // namespace inca::cais
