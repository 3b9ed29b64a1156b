// cais-perf: an nccl-tests-style benchmark and checker for the CAIS client.
// The launcher forks the ranks (and starts inca-switchd when no switch is
// given), every rank runs each size, checks every element against an exact
// reference, and the launcher prints one row per size. Or it runs as one
// rank of a multi-host job (PerfOptions::rank), as torchrun users expect.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/client/communicator.h"
#include "inca/wire/cais.h"

namespace inca::perf {

enum class Collective { kAllReduce, kAllGather, kBroadcast, kReduceScatter };

struct PerfOptions {
  Collective op = Collective::kAllReduce;
  int ranks = 4;
  uint64_t min_bytes = 1024;
  uint64_t max_bytes = uint64_t{64} << 20;
  double factor = 4;
  int iters = 10;
  int warmup = 2;
  // Warm up for at least this long too (rank 0's clock; the ranks agree on
  // each extra iteration), at most 1,000 extra iterations. With the switch's
  // measured offload controller the first operations of a size are its
  // first sample and its one exploration of the other path (docs/control.md).
  int warmup_ms = 0;
  // Time about this long per size: one more warm-up operation, timed on
  // rank 0, sets the number of timed iterations (at least `iters`, at most
  // 10,000 more; the ranks agree on it once), so that jobs run side by side
  // overlap for a known time. 0: exactly `iters`.
  int duration_ms = 0;
  // The last rank sleeps this long before each timed operation: ranks that
  // arrive apart (docs/design/cais-client.md, "Ranks that arrive apart").
  int straggler_ms = 0;
  wire::DType type = wire::DType::kF32;
  wire::ReduceOp reduce = wire::ReduceOp::kSum;
  int root = 0;
  bool use_switch = true;                 // --backend switch|gloo
  std::string switch_address;             // empty: start inca-switchd
  std::string switchd_path;               // inca-switchd binary (default: beside cais-perf)
  std::vector<std::string> switchd_args;  // extra flags for a started switch
  // Every client setting (chunk size, window, competitive mode, pacing, I/O
  // path, group, timeouts, ...), as client/settings.cc declares them; the
  // ranks' communicators take these. window_trace_samples: the window
  // samples rank 0 reports (one-rank mode).
  CommunicatorOptions client;
  bool check = true;
  int timeout_s = 600;
  bool json = false;  // also one JSON line with every row
  // One rank of a job whose ranks run elsewhere (>= 0; `ranks` is then the
  // world size): inca's store on master_addr:master_port + 1, served by
  // rank 0; local sockets on bind_ip.
  int rank = -1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string bind_ip = "127.0.0.1";
};

absl::StatusOr<Collective> ParseCollective(const std::string& s);

struct PerfRow {
  uint64_t bytes = 0;
  uint64_t count = 0;
  double time_us = 0;  // slowest rank's mean per operation
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  uint64_t wrong = 0;  // summed over ranks
  std::string path;    // switch, host or host/mixed
  // host/mixed: why (HostReason names, comma-separated: "explore,measured").
  std::string why;
  // The switch backend: the timed and checking operations of this size that
  // ran on the host path (declined by the offload controller, an explore,
  // or fell back), the most any rank saw. 0 on the switch path throughout.
  uint32_t host_ops = 0;
  // Summed over ranks, over warm-up, timed and checking operations.
  uint64_t chunks_sent = 0;
  uint64_t chunks_retransmitted = 0;
  // Summed over ranks: entries into the transport's competitive mode so far.
  uint64_t competitive_entries = 0;
  // One rank of a multi-host job: this rank's steady clock (CLOCK_MONOTONIC
  // ns) at the start of the timed loop, then at the end of each timed
  // iteration, so that jobs run side by side can be compared over the time
  // they overlap. Empty in the forking launcher.
  std::vector<int64_t> timeline_ns;
  // One-rank mode with --window-trace: rank 0's window samples so far
  // (at_ns on the same clock, window in chunks, srtt in us).
  std::vector<WindowSample> window_trace;
};

// Runs the whole benchmark; prints the table to `out` as rows complete.
// Call before this process starts any thread (it forks). With rank >= 0
// runs that one rank instead (rank 0 prints).
absl::StatusOr<std::vector<PerfRow>> RunPerf(const PerfOptions& options, std::ostream& out);

}  // namespace inca::perf
