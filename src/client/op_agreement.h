// What every rank says about an operation before the group runs it on the
// host path (or while recovering one that left the switch), and the check
// that turns any disagreement into one error, the same text on every rank
// (docs/design/cais-client.md, "Ranks that disagree"). Pure: no I/O.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "client/transport_core.h"
#include "inca/client/delegated_op.h"

namespace inca::client {

// Fixed size and layout: exchanged as raw bytes between the ranks of one
// build (Gloo allgather), never across versions.
struct OpDescriptor {
  uint64_t count = 0;  // elements of the whole operation (per block for AllGather/ReduceScatter)
  int32_t root = 0;    // Broadcast; 0 otherwise
  uint16_t layer_id = 0;
  uint8_t kind = 0;       // OpKind
  uint8_t dtype = 0;      // wire::DType, or kForeignCode + a name's index (DescribeDelegated)
  uint8_t reduce = 0;     // wire::ReduceOp, likewise; 0 where the collective reduces nothing
  uint8_t delegated = 0;  // 1: the rank hands the operation to another library
  uint8_t pad[6] = {};
};
static_assert(sizeof(OpDescriptor) == 24);

// The collective as the user called it (a broadcast rides the switch as an
// all-reduce, but is its own kind here).
enum class OpKind : uint8_t {
  kAllReduce = 0,
  kAllGather = 1,
  kBroadcast = 2,
  kReduceScatter = 3,
  // Collectives inca does not run, which a rank can only delegate.
  kReduce = 4,
  kGather = 5,
  kScatter = 6,
  kAllToAll = 7,
  kLeaving = 255,  // no operation: the rank is destroying its communicator
};

// `op` as every rank must describe it; `whole_count`: the operation's count
// before it was split into pieces.
OpDescriptor Describe(const SwitchOp& op, uint64_t whole_count);

// Codes at or above this in `dtype` and `reduce` name a type or reduction
// inca does not have (f64, avg...): DescribeDelegated's tables.
constexpr uint8_t kForeignCode = 0x40;

// An operation handed to another library (inca/client/delegated_op.h),
// described so that it is compared with
// what the peers run: `dtype` and `reduce` by name ("f64", "avg"; inca's
// own names match its operations'; an unknown name is "other").
OpDescriptor DescribeDelegated(const DelegatedOp& op);

// What a rank destroying its communicator says (its last agreement round).
OpDescriptor Leaving();

// OK when every record in `all` (one per rank, in rank order) is the same;
// otherwise InvalidArgument naming each field that differs and which ranks
// gave which value, e.g. "group 0, operation 7: the ranks disagree on dtype
// (f32 on ranks 0,2; i32 on rank 1); no rank ran it".
absl::Status CheckAgreement(uint32_t group_id, uint64_t op_index,
                            std::span<const OpDescriptor> all);

}  // namespace inca::client
