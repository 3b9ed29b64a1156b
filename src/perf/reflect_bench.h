// switchd-bench: datagrams per second through inca-switchd against the
// plain udp-forwarder on the same machine, measured in one run, on each
// socket I/O path (--io mmsg and gso, src/net/udp.h).
//
// One client keeps `window` CAIS AllReduce packets in flight to a target and
// sends a new one for every reply, in batches, on the same I/O path as the
// target. Through inca-switchd the client is a one-rank group, so every
// packet is parsed, looked up, admitted to a slot, reduced (a copy into the
// accumulator), deparsed and sent back; through the forwarder it is only
// received and reflected. Two figures per target: packets per second of
// wall time, and packets per CPU-second of the target process (utime +
// stime from /proc; on two cores the load generator and softirq share the
// CPUs, so this is the target's own cost per packet).
//
// With --threads N > 1 inca-switchd is also measured with --threads 1 and
// --threads N (switchd/shards.h): one client per shard, each a one-rank
// group on its shard's port, driven from a thread of its own; the packets
// of all clients over the wall time, and per CPU-second of the switchd
// process (all its threads).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "net/udp.h"

namespace inca::perf {

struct ReflectOptions {
  std::string switchd_path;
  std::string forwarder_path;
  uint32_t payload_bytes = 8952;
  uint32_t window = 64;
  uint64_t packets = 200000;
  double max_seconds = 5;
  std::vector<net::IoMode> io = {net::IoMode::kMmsg, net::IoMode::kGso};
  uint32_t threads = 1;  // > 1: also inca-switchd --threads 1 against --threads N
  // Also the io_uring reflector (udp-forwarder --io uring), against the
  // forwarder on each --io path.
  bool uring = false;
  // Set: measure only this reflector, which something else started
  // (another namespace, another machine: scripts/bench-xdp.py), on each --io
  // path of the client; target_pid (if > 0) is its process, for its CPU.
  std::string target;
  pid_t target_pid = 0;
};

struct TargetLoad {
  uint64_t packets = 0;    // replies received
  double seconds = 0;      // wall time
  double cpu_seconds = 0;  // the target process's utime + stime meanwhile
  // Every core's busy time meanwhile (MachineBusySeconds), softirq and the
  // load generator included.
  double machine_cpu_seconds = 0;
  uint64_t lost = 0;  // window refills after 100 ms of silence, in packets
  double pps() const { return seconds > 0 ? static_cast<double>(packets) / seconds : 0; }
  double per_cpu_second() const {
    return cpu_seconds > 0 ? static_cast<double>(packets) / cpu_seconds : 0;
  }
  double per_machine_cpu_second() const {
    return machine_cpu_seconds > 0 ? static_cast<double>(packets) / machine_cpu_seconds : 0;
  }
};

struct ReflectRow {
  net::IoMode io = net::IoMode::kMmsg;
  TargetLoad forwarder;
  TargetLoad switchd;
  // options.threads > 1: one client per shard, --threads 1 and --threads N.
  TargetLoad one_shard, sharded;
};

struct ReflectResult {
  std::vector<ReflectRow> rows;  // one per options.io entry, in order
  TargetLoad uring;              // options.uring: udp-forwarder --io uring
  // options.target: that reflector, one per options.io entry, in order.
  std::vector<TargetLoad> external;
};

absl::StatusOr<ReflectResult> RunReflectBench(const ReflectOptions& options, std::ostream& out);

// utime + stime of process `pid` in seconds (/proc/PID/stat); -1 if unreadable.
double ProcessCpuSeconds(pid_t pid);
// Busy seconds of all cores since boot (/proc/stat: user, nice, system,
// irq and softirq; not idle, iowait or steal); -1 if unreadable.
double MachineBusySeconds();

}  // namespace inca::perf
