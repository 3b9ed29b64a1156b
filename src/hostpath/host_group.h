// Host-path collectives over Gloo (TCP transport) for the CAIS client: used
// when the switch declines, times out or disappears. A HostGroup is one Gloo
// context (full mesh) over the ranks of one communicator.
//
// Semantics match the switch path "in meaning" (docs/design/cais-client.md):
// f16/bf16 are widened to f32, reduced, and rounded to nearest even once at
// the end (as the switch accumulates in f32); i32 wraps; max/min propagate
// NaN. Reduction order differs from the switch's, so float results may
// differ in the last bits.
//
// Thread-compatibility: one thread uses a HostGroup at a time. All calls
// are collective: every rank must make the same calls in the same order.
// Errors (peer gone, timeout) come back as absl::Status, never exceptions:
// Unavailable for I/O errors and timeouts, Internal for other Gloo failures,
// InvalidArgument for bad arguments (which leave the group usable). After a
// Gloo failure the mesh state is unknown, so the group refuses every later
// collective with FailedPrecondition; create a new group to recover.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/wire/cais.h"

namespace gloo::rendezvous {
class Store;
}

namespace inca::hostpath {

struct HostGroupOptions {
  int rank = 0;
  int world_size = 1;
  // Address this rank's Gloo TCP device binds to (an IP of a local
  // interface; loopback by default).
  std::string bind_ip = "127.0.0.1";
  // Keys in the store are prefixed with this, so several groups can share
  // one store.
  std::string store_prefix = "inca";
  std::chrono::milliseconds timeout{30000};
};

class HostGroup {
 public:
  // Connects the full mesh through `store` (all ranks must call Create);
  // options.timeout bounds the rendezvous as well as every later collective.
  // `store` may be null when world_size == 1 (nothing to connect).
  static absl::StatusOr<std::unique_ptr<HostGroup>> Create(
      const HostGroupOptions& options, std::shared_ptr<gloo::rendezvous::Store> store);
  ~HostGroup();

  // In place: data[i] = op over ranks of data[i], count elements of `type`.
  absl::Status AllReduce(void* data, size_t count, wire::DType type, wire::ReduceOp op);
  // Root's `bytes` bytes at `data` are copied to every rank's `data`.
  absl::Status Broadcast(void* data, size_t bytes, int root);
  // out (world_size * bytes_per_rank bytes) = concatenation of every rank's
  // `in` in rank order. `in` may alias this rank's slot in `out`.
  absl::Status AllGather(const void* in, void* out, size_t bytes_per_rank);

  int rank() const;
  int world_size() const;

 private:
  struct Impl;
  explicit HostGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace inca::hostpath
