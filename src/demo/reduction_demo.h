// The quick-start demo: N simulated ranks all-reduce a tensor through the
// pure CAIS reducer, with packets interleaved in a seeded random order, some
// contributions lost and retransmitted, and one chunk left to time out and
// finish on the host path. Checks every element against a reference and
// reports the switch's counters. Used by `inca-demo` and its test.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "inca/cais/reducer.h"

namespace inca::demo {

struct ReductionDemoOptions {
  int ranks = 4;
  size_t tensor_bytes = size_t{16} << 20;  // f32 elements
  uint32_t chunk_bytes = 8952;
  double loss = 0.01;  // fraction of contributions lost (then retransmitted)
  uint64_t seed = 1;
  bool deterministic = false;
  bool timeout_demo = true;  // leave one chunk incomplete to show the fallback path
  cais::CaisConfig switch_config;
};

struct ReductionDemoReport {
  uint64_t chunks = 0;
  uint64_t packets_sent = 0;
  uint64_t lost = 0;
  uint64_t retransmitted = 0;
  uint64_t fallback_chunks = 0;  // finished on the host path
  uint64_t wrong_elements = 0;
  double elapsed_s = 0;  // wall time spent inside the reducer
  cais::GroupCounters totals;
  dp::ProgramCounters program;
  cais::SramUsage sram_peak;
  bool conserved = false;
};

absl::StatusOr<ReductionDemoReport> RunReductionDemo(const ReductionDemoOptions& options);

void PrintReport(const ReductionDemoOptions& options, const ReductionDemoReport& report,
                 std::ostream& os);

}  // namespace inca::demo
