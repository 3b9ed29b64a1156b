// inca-switchd --threads N: the CAIS data plane over N cores (issue 16).
//
// N shards, each a whole SwitchServer: its own thread, UDP socket (listen
// port + i, so shard 0 is the port hosts are told), reducer with sram_bytes
// / N of slot memory, group manager and leases. Nothing is shared between
// shards on the packet path, so there is no lock or cache line the threads
// fight over, and each shard's conservation equations hold on their own.
//
// Operations are sharded by (group, seq, chunk) at the hosts: a host that
// joins shard 0 learns N from its JOIN_REPLY (wire `shards`), joins the
// other shards, and stripes each operation's chunks over them in shard
// order, the same way it stripes over several switches
// (docs/design/cais-client.md, "Striping"). One offload decision per
// operation still holds: a stripe declined or timed out sends the whole
// operation to the host path.
//
// A port per shard rather than SO_REUSEPORT: the kernel's reuseport
// steering picks a socket per flow (or per a BPF program's answer), and
// every rank's flow carries every chunk of an operation, so a steering
// program would have to parse CAIS headers in the kernel while JOIN,
// leases and results still needed one shard per group. With a port per
// shard the hosts, which already know the chunk of every packet, steer.
//
// The control plane (SwitchControl) applies changes to every shard and sums
// their figures (control::MergeShards); /metrics shows the sum and each
// shard.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/counters/switch_counters.h"
#include "net/clock.h"
#include "switchd/config.h"
#include "switchd/switch_server.h"

namespace inca::switchd {

class SwitchShards {
 public:
  // config.threads shards on consecutive ports from config.listen's. With
  // port 0 an ephemeral base is chosen (retried while a port above it is
  // taken); otherwise Unavailable names the shard whose port is taken.
  static absl::StatusOr<std::unique_ptr<SwitchShards>> Create(
      const SwitchdConfig& config, const net::TimeSource& clock = net::SystemClock());
  ~SwitchShards();
  SwitchShards(const SwitchShards&) = delete;
  SwitchShards& operator=(const SwitchShards&) = delete;

  // Serves until Stop(): shard 0 on the calling thread, the others on a
  // thread each. Returns when all have stopped: OK, or the first error (a
  // failing shard stops the others).
  absl::Status Run();
  // Async-signal-safe; any thread; idempotent.
  void Stop() noexcept;

  size_t size() const { return shards_.size(); }
  SwitchServer& shard(size_t i) { return *shards_[i]; }
  std::vector<SwitchServer*> servers() const;
  uint16_t base_port() const { return shards_[0]->local_port(); }
  // Every shard's published counters, summed (SwitchCounters::Add).
  counters::SwitchCounters counters() const;

 private:
  SwitchShards() = default;
  std::vector<std::unique_ptr<SwitchServer>> shards_;
};

}  // namespace inca::switchd
