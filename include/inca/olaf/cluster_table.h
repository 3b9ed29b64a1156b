// The OLAF cluster mapping table (seed 000, section 5.2 `table
// cluster_mapping { key = { hdr.udp.src_port: exact; } size = 1024; }`):
// exact match on a worker flow's UDP source port -> cluster_id.
//
// Capacity is fixed at construction (default 1024, at most 65536 = every
// port). Reconfigurable at run time: Set/Erase/Clear take effect for the next
// packet. Lookup is O(1) (one array load). Not thread-safe: owned by the
// data-plane thread; the driver marshals control changes onto it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"

namespace inca::olaf {

struct ClusterMapping {
  uint16_t udp_port = 0;
  uint16_t cluster_id = 0;
  friend bool operator==(const ClusterMapping&, const ClusterMapping&) = default;
};

class ClusterTable {
 public:
  static constexpr size_t kDefaultCapacity = 1024;
  static constexpr size_t kMaxCapacity = 65536;

  // `capacity` is clamped to [1, kMaxCapacity]; OlafSwitchConfig::Validate
  // rejects out-of-range values before they get here.
  explicit ClusterTable(size_t capacity = kDefaultCapacity);

  // Maps `udp_port` to `cluster_id`, replacing an existing mapping of that
  // port. InvalidArgument for cluster_id 0xFFFF (reserved: "unassigned"),
  // ResourceExhausted when the port is new and the table is full.
  absl::Status Set(uint16_t udp_port, uint16_t cluster_id);
  // NotFound if the port has no mapping.
  absl::Status Erase(uint16_t udp_port);
  void Clear();

  std::optional<uint16_t> Lookup(uint16_t udp_port) const noexcept {
    const uint16_t c = by_port_[udp_port];
    if (c == kNone) return std::nullopt;
    return c;
  }
  // Every mapping, ascending by port. O(65536).
  std::vector<ClusterMapping> Dump() const;

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

 private:
  static constexpr uint16_t kNone = 0xFFFF;
  size_t capacity_;
  size_t size_ = 0;
  std::vector<uint16_t> by_port_;  // 65536 entries, kNone = no mapping
};

}  // namespace inca::olaf
