#include "inca/olaf/cluster_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace inca::olaf {

ClusterTable::ClusterTable(size_t capacity)
    : capacity_(std::clamp<size_t>(capacity, 1, kMaxCapacity)), by_port_(kMaxCapacity, kNone) {}

absl::Status ClusterTable::Set(uint16_t udp_port, uint16_t cluster_id) {
  if (cluster_id == kNone) {
    return absl::InvalidArgumentError(
        "cluster_id 65535 (0xFFFF) is reserved for \"unassigned\"; use 0..65534");
  }
  uint16_t& slot = by_port_[udp_port];
  if (slot == kNone) {
    if (size_ >= capacity_) {
      return absl::ResourceExhaustedError(absl::StrCat("cluster table is full (", capacity_,
                                                       " mappings); erase one before adding port ",
                                                       udp_port));
    }
    ++size_;
  }
  slot = cluster_id;
  return absl::OkStatus();
}

absl::Status ClusterTable::Erase(uint16_t udp_port) {
  uint16_t& slot = by_port_[udp_port];
  if (slot == kNone) {
    return absl::NotFoundError(absl::StrCat("no cluster mapping for UDP port ", udp_port));
  }
  slot = kNone;
  --size_;
  return absl::OkStatus();
}

void ClusterTable::Clear() {
  std::fill(by_port_.begin(), by_port_.end(), kNone);
  size_ = 0;
}

std::vector<ClusterMapping> ClusterTable::Dump() const {
  std::vector<ClusterMapping> out;
  out.reserve(size_);
  for (size_t p = 0; p < by_port_.size(); ++p) {
    if (by_port_[p] != kNone) out.push_back({static_cast<uint16_t>(p), by_port_[p]});
  }
  return out;
}

}  // namespace inca::olaf
