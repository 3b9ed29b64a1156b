// What a rank keeps of its last operation, so that a peer that lost the
// operation's end can be served it on the host path
// (docs/design/cais-client.md, "Recovery"): the result of an all-reduce,
// all-gather or broadcast, or, for a reduce-scatter (whose results differ
// per rank), this rank's whole input. At most `limit_bytes`; an operation
// over it is not kept, and the peers learn that in the agreement round.
// Pure: no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "client/transport_core.h"

namespace inca::client {

// A reduce-scatter's input blocks, packed: block r at r * count elements.
std::vector<uint8_t> PackedInput(const SwitchOp& s, int world_size);

// The bytes of `s`'s result on every rank (an all-gather: every block).
size_t ResultBytes(const SwitchOp& s, int world_size);

class RecoveryCache {
 public:
  RecoveryCache(size_t limit_bytes, int world_size)
      : limit_(limit_bytes), world_size_(world_size) {}

  // An all-reduce within the limit: where the switch path writes each
  // result as it arrives (SwitchOp::mirror), so that Keep() has nothing left
  // to copy; nullptr otherwise. Writing over the last operation's bytes is
  // safe from the first result on: a result means every rank contributed to
  // this operation, so none is still behind and needs the last one served.
  uint8_t* Mirror(const SwitchOp& s);
  // The mirror was written although this operation did not finish on the
  // switch path: the last operation's bytes are (partly) gone.
  void Invalidate() { valid_ = false; }
  // Keeps operation `index` (`s`); `mirrored`: its result is already here.
  // An operation of no elements keeps only its completion.
  void Keep(uint64_t index, const SwitchOp& s, bool mirrored = false);

  // Whether operation `index` is kept, so that this rank can serve it.
  bool Holds(uint64_t index) const { return valid_ && index_ == index; }
  // What is kept: a result, or a reduce-scatter's packed input.
  std::span<const uint8_t> bytes() const { return {buf_.data(), bytes_}; }
  bool reduce_scatter() const { return reduce_scatter_; }
  wire::DType type() const { return type_; }
  wire::ReduceOp reduce() const { return reduce_; }

 private:
  size_t limit_;
  int world_size_;
  std::vector<uint8_t> buf_;  // may be longer than the kept operation's bytes
  size_t bytes_ = 0;
  uint64_t index_ = 0;
  bool valid_ = false;
  bool reduce_scatter_ = false;
  wire::DType type_ = wire::DType::kF32;
  wire::ReduceOp reduce_ = wire::ReduceOp::kSum;
};

}  // namespace inca::client
