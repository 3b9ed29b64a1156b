// How one operation splits and its parts' results merge: into pieces of
// at most 65,535 chunks run one after the other (chunk ids are 16 bits),
// and into stripes run at once over several switches. Pure functions, used
// by the communicator, SwitchSet and inca-sim alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "client/transport_core.h"

namespace inca::client {

// Pieces.
//
// Chunk ids are 16 bits: an operation of more chunks runs in pieces of at
// most kMaxPieceChunks (over all blocks), one after the other, each its own
// sequence number.
inline constexpr uint64_t kMaxPieceChunks = 65535;
// Elements of each block per piece of `whole`.
size_t PieceElements(const SwitchOp& whole, uint32_t chunk_size, int world_size);
// The piece of `whole` from element `offset` of each block, `count` long:
// the same slice of every block; block_stride_bytes stays the whole
// operation's (AllGather: output blocks, ReduceScatter: input blocks).
SwitchOp PieceOf(const SwitchOp& whole, size_t offset, size_t count);

// Adds a piece's (or a stripe's) flags and counters to `into`; `have`,
// total_chunks and `complete` are the caller's.
void AddCounters(const SwitchPhaseResult& x, SwitchPhaseResult* into);

// Striping (docs/design/cais-client.md, "Striping"): an operation cut into
// up to k stripes at chunk boundaries, stripe i for switch i. An
// all-reduce or broadcast splits its chunks; a reduce-scatter or
// all-gather splits each block's chunks alike (every stripe has a piece of
// every block). Stripes that would be empty are left out; `first` is each
// stripe's first chunk (of a block).
struct Stripe {
  SwitchOp op;
  uint32_t first = 0;
};
std::vector<Stripe> StripeOp(const SwitchOp& op, uint32_t chunk_size, size_t k);
// The operation's result from its stripes' (one per stripe, in order):
// chunks numbered as the whole operation's core numbers them, counters
// summed; complete if every stripe is, declined or handed back if any.
SwitchPhaseResult MergeStripes(const SwitchOp& op, uint32_t chunk_size, int world_size,
                               const std::vector<Stripe>& stripes,
                               const std::vector<SwitchPhaseResult>& results);

}  // namespace inca::client
