#include "client/recovery_cache.h"

#include <cstring>

namespace inca::client {
namespace {

// What Keep() keeps: the result, or a reduce-scatter's whole input.
size_t KeptBytes(const SwitchOp& s, int world_size) {
  return s.op == wire::CaisOp::kReduceScatter
             ? s.count * wire::ElementBytes(s.type) * static_cast<size_t>(world_size)
             : ResultBytes(s, world_size);
}

}  // namespace

std::vector<uint8_t> PackedInput(const SwitchOp& s, int world_size) {
  const size_t b = s.count * wire::ElementBytes(s.type);
  std::vector<uint8_t> buf(b * static_cast<size_t>(world_size));
  if (b == 0) return buf;  // no elements: the buffers may be null
  for (int r = 0; r < world_size; ++r) {
    std::memcpy(buf.data() + static_cast<size_t>(r) * b,
                s.in + static_cast<size_t>(r) * s.block_stride_bytes, b);
  }
  return buf;
}

size_t ResultBytes(const SwitchOp& s, int world_size) {
  const size_t b = s.count * wire::ElementBytes(s.type);
  return s.op == wire::CaisOp::kAllGather ? b * static_cast<size_t>(world_size) : b;
}

uint8_t* RecoveryCache::Mirror(const SwitchOp& s) {
  const size_t bytes = KeptBytes(s, world_size_);
  if (s.op != wire::CaisOp::kAllReduce || bytes > limit_) return nullptr;
  if (buf_.size() < bytes) buf_.resize(bytes);  // keeps the last operation's bytes
  return buf_.data();
}

void RecoveryCache::Keep(uint64_t index, const SwitchOp& s, bool mirrored) {
  const size_t bytes = KeptBytes(s, world_size_);
  valid_ = bytes <= limit_;
  index_ = index;
  reduce_scatter_ = s.op == wire::CaisOp::kReduceScatter;
  type_ = s.type;
  reduce_ = s.reduce;
  if (!valid_ || bytes == 0) {
    bytes_ = 0;
    return;
  }
  if (reduce_scatter_) {
    buf_ = PackedInput(s, world_size_);
    bytes_ = buf_.size();
    return;
  }
  bytes_ = bytes;
  if (mirrored) return;
  if (buf_.size() < bytes) buf_.resize(bytes);
  if (s.op == wire::CaisOp::kAllGather) {
    const size_t b = s.count * wire::ElementBytes(s.type);
    for (int r = 0; r < world_size_; ++r) {
      std::memcpy(buf_.data() + static_cast<size_t>(r) * b,
                  s.out + static_cast<size_t>(r) * s.block_stride_bytes, b);
    }
  } else {
    std::memcpy(buf_.data(), s.data, bytes);
  }
}

}  // namespace inca::client
