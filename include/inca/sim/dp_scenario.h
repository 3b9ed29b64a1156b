// Data-parallel scenarios for inca-sim (`system: cais-dp`, docs/sim.md,
// "Data-parallel step"): a training step's gradient all-reduce at DP size
// 64-1,024 across the racks of a fabric, bucketed as PyTorch DDP buckets
// it, each bucket's all-reduce a packet-level run of inca (the real
// CaisReducer and client cores, up the aggregation manager's tree), the
// ring and NCCL's double binary tree on the same fabric; the step overlaps
// the buckets with the backward pass as DDP does.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/sim/cais_scenario.h"

namespace inca::sim {

// The model and how each DP rank runs it. The defaults are Llama 2 7B
// (Touvron et al. 2023: 6.74 B parameters, 4,096 tokens) with tensor
// parallelism of 8 inside each node (each DP rank holds an eighth of the
// gradients), bf16 gradients, DDP's 25 MiB buckets, on an H100 SXM at 40 %
// of its dense bf16 peak (as scripts/evaluate-cais.sh).
struct DpModel {
  std::string model = "Llama 2 7B";
  double params = 6.74e9;
  int seq = 4096;        // tokens per sequence
  int micro_batch = 1;   // sequences per micro-batch and rank
  int accumulation = 1;  // micro-batches per step (DDP's no_sync before the last)
  int tp = 8;            // tensor parallelism inside a node: a rank's share of the model
  int grad_bytes = 2;    // per gradient element on the wire (bf16)
  uint64_t bucket_bytes = uint64_t{25} << 20;  // DDP's bucket_cap_mb
  double device_tflops = 989;
  double mfu = 0.4;
  absl::Status Validate() const;
};

// The gradient bytes each rank all-reduces per step: params / tp x
// grad_bytes.
uint64_t GradientBytes(const DpModel& m);
// Forward and backward compute of one micro-batch on one rank (6 x params
// x tokens / tp FLOPs: 2 forward, 4 backward), in seconds.
double ForwardSeconds(const DpModel& m);
double BackwardSeconds(const DpModel& m);

struct DpStep {
  int buckets = 0;
  double compute_ms = 0;  // the step with no communication
  double comm_ms = 0;     // the buckets' all-reduces back to back
  double step_ms = 0;     // with DDP's overlap
  double comm_share = 0;  // 1 - compute_ms / step_ms: the exposed communication
};

// DDP's step: `accumulation` micro-batches, the buckets filled in order
// through the last one's backward (bucket i ready at forward + (i + 1) /
// B of the backward), each all-reduced once ready and once the one before
// it is done, one at a time; the step ends when the backward and the last
// bucket have. `bucket_us`: a full bucket's all-reduce, `last_us` the
// last (smaller) bucket's.
DpStep DdpStep(const DpModel& m, double bucket_us, double last_us);

struct DpScenario {
  std::string name = "dp";
  DpModel model;
  std::vector<int> dp = {64, 256, 1024};  // DP sizes (hosts)
  int ar_samples = 2;                     // all-reduces per size, after one of warm-up
  // The fabric and everything else of a CAIS scenario; hosts, sizes, ops,
  // collective follow from dp and the model. Timing mode by default.
  CaisSimScenario net;
  std::string sweep_key;
  std::vector<std::string> sweep_values;
  DpScenario() { net.mode = "timing"; }
  absl::Status Validate() const;
};

absl::StatusOr<DpScenario> ParseDpScenario(std::string_view yaml, std::string_view source);
absl::Status ApplyDpOverride(std::string_view key_value, DpScenario* s, bool validate = true);
// True if the YAML text is a data-parallel scenario (`system: cais-dp`).
bool IsDpScenario(std::string_view yaml);

struct DpRow {
  std::string backend;
  int dp = 0;
  uint64_t bucket_bytes = 0, last_bytes = 0;
  double bucket_us = 0, bucket_closed_form_us = 0, last_us = 0;
  DpStep step;
  uint64_t retransmitted = 0, dropped = 0, wrong = 0, fallback_chunks = 0;
  std::array<uint64_t, dp::kDropReasonCount> switch_drops{};  // inca's reducers', by reason
};

struct DpResult {
  std::vector<DpRow> rows;
  uint64_t events = 0;
  double wall_s = 0;
};

// Deterministic: the same scenario gives the same rows.
absl::StatusOr<DpResult> RunDpScenario(const DpScenario& s, const Progress& progress = {});

std::string DpResultJson(const DpScenario& s, const DpResult& r);
std::string DpResultCsv(const DpResult& r);

}  // namespace inca::sim
