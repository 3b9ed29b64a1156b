// A tensor-parallel training step on the simulator (docs/sim.md,
// "Tensor-parallel step"): Megatron-LM's transformer layer split over `tp`
// ranks, its compute from the device's FLOP rate, and its all-reduces drawn
// from packet-level runs of inca and the ring (cais_scenario.h). Pure: no
// clock, no I/O; randomness comes from the seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace inca::sim {

// A transformer's shape (a named public model) and how it is run. The
// defaults are GPT-3 175B (Brown et al. 2020: h = 12288, 96 layers,
// 2048 tokens) at micro-batch 1, as Megatron-LM trains it (Narayanan et
// al. 2021), on an H100 SXM (989 TFLOP/s dense bf16).
struct TpModel {
  std::string model = "GPT-3 175B";
  int hidden = 12288;
  int seq = 2048;
  int layers = 96;
  int micro_batch = 1;
  int element_bytes = 2;       // activations on the wire (bf16)
  double device_tflops = 989;  // the device's peak for these GEMMs
  double mfu = 0.4;            // the fraction of peak the layer's compute reaches
  // Backward: each all-reduce of the input gradient runs beside the
  // weight-gradient GEMM that does not depend on it.
  bool overlap = false;
  // Megatron-LM's sequence parallelism (Korthikanti et al. 2022): each
  // all-reduce becomes a reduce-scatter after the sublayer and an
  // all-gather before it (forward and backward alike).
  bool sequence_parallel = false;
  // Each compute phase of each rank takes its time times a log-normal
  // factor of mean 1 and this coefficient of variation.
  double compute_jitter = 0.02;
  // Per step, with this probability one rank (chosen at random) computes
  // straggler_slowdown times slower for the whole step.
  double straggler_prob = 0;
  double straggler_slowdown = 1.5;
  absl::Status Validate() const;
};

// Forward FLOPs per layer and rank at TP degree `tp` (Megatron-LM's count,
// 24bsh² + 4bs²h per layer, split): attention (QKV, scores, context and
// output projection) and MLP. Backward is twice each.
double AttentionFlops(const TpModel& m, int tp);
double MlpFlops(const TpModel& m, int tp);
// Bytes of each of the layer's four all-reduces (two forward, two
// backward): the activations, b·s·h elements.
uint64_t AllReduceBytes(const TpModel& m);

struct TpStepStats {
  int steps = 0;
  double mean_ms = 0, p50_ms = 0, p99_ms = 0, max_ms = 0;
  double p99_over_mean = 0;
  double compute_ms = 0;  // mean step with the same compute and no communication
  double comm_share = 0;  // 1 - compute_ms / mean_ms: the exposed communication
};

// The collectives' times (us) to draw from: all-reduces, or with sequence
// parallelism reduce-scatters and all-gathers. Samples of each kind in
// equal numbers; none at all: communication takes no time.
struct TpComm {
  std::vector<double> ar_us, rs_us, ag_us;
};

// Runs `steps` steps on `tp` ranks. A layer's collective starts when the
// last rank is ready and ends for all ranks together, after a time drawn
// (uniformly, with replacement) from its samples; nothing else is shared,
// so a slow rank holds the others at every collective. The same seed gives
// the same compute on every call, so two backends are compared step for
// step.
TpStepStats SimulateTpSteps(const TpModel& m, int tp, const TpComm& comm, int steps, uint64_t seed);
inline TpStepStats SimulateTpSteps(const TpModel& m, int tp, const std::vector<double>& ar_us,
                                   int steps, uint64_t seed) {
  return SimulateTpSteps(m, tp, TpComm{ar_us, {}, {}}, steps, seed);
}

}  // namespace inca::sim
