// switchd-bench: datagrams per second through inca-switchd against the
// plain udp-forwarder on the same machine, measured in one run.
//
// One client keeps `window` CAIS AllReduce packets in flight to a target and
// sends a new one for every reply. Through inca-switchd the client is a
// one-rank group, so every packet is parsed, looked up, admitted to a slot,
// reduced (a copy into the accumulator), deparsed and sent back; through the
// forwarder it is only received and reflected. The ratio is what the
// reduction pipeline costs on top of the same batched socket I/O.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"

namespace inca::perf {

struct ReflectOptions {
  std::string switchd_path;
  std::string forwarder_path;
  uint32_t payload_bytes = 8952;
  uint32_t window = 64;
  uint64_t packets = 200000;
  double max_seconds = 5;
};

struct ReflectResult {
  double forwarder_pps = 0;
  double switchd_pps = 0;
  uint64_t forwarder_lost = 0;
  uint64_t switchd_lost = 0;
};

absl::StatusOr<ReflectResult> RunReflectBench(const ReflectOptions& options, std::ostream& out);

}  // namespace inca::perf
