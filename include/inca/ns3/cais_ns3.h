// A CAIS all-reduce on ns-3 (docs/ns3.md): ranks on a star of ns-3
// point-to-point links around one switch node, CaisRankApp on each host and
// CaisSwitchApp on the switch (inca/ns3/cais_apps.h). Every rank JOINs, the
// all-reduce starts on all of them when the last has joined, and the result
// is checked element by element.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace inca {

struct CaisNs3Config {
  int hosts = 4;
  double link_gbps = 100;
  double delay_us = 1;
  uint64_t bytes = uint64_t{4} << 20;  // each rank's f32 vector
  uint32_t chunk_size = 8952;          // payload bytes per chunk (a multiple of 4)
  uint64_t seed = 1;                   // the job id and the switch's first sequence base
  // InvalidArgument naming the field.
  absl::Status Validate() const;
};

struct CaisNs3Result {
  bool exact = false;   // every rank holds the exact sums
  int completed = 0;    // ranks whose every chunk's result arrived
  double time_ms = 0;   // from the last JOIN answered to the last rank done
  uint64_t resent = 0;  // chunks the ranks resent
  uint64_t events = 0;
  double wall_s = 0;
};

absl::StatusOr<CaisNs3Result> RunCaisAllReduceOnNs3(const CaisNs3Config& c);

}  // namespace inca
