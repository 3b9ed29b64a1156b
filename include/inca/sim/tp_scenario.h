// Tensor-parallel scenarios for inca-sim (`system: cais-tp`, docs/sim.md,
// "Tensor-parallel step"): for each TP degree and host link rate, the
// model's all-reduce runs on the packet-level star (inca through the real
// CaisReducer, and the ring), and the step model (tp_model.h) draws from
// those times for every layer of every step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/sim/cais_scenario.h"
#include "inca/sim/tp_model.h"

namespace inca::sim {

struct TpScenario {
  std::string name = "tp";
  TpModel model;
  std::vector<int> tp = {4, 8, 16};                 // TP degrees (hosts)
  std::vector<double> link_gbps = {100, 200, 400};  // host link rates
  int steps = 1000;                                 // per TP degree, rate and backend
  // All-reduces simulated per configuration (after one of warm-up); every
  // layer's all-reduce is one of them, drawn at random.
  int ar_samples = 30;
  // The network: links, switch, transport, backends, background traffic
  // and the seed, as in a CAIS scenario; hosts, sizes and ops follow from
  // tp, the model and ar_samples. Timing mode by default.
  CaisSimScenario net;
  std::string sweep_key;
  std::vector<std::string> sweep_values;
  TpScenario() { net.mode = "timing"; }
  absl::Status Validate() const;
};

absl::StatusOr<TpScenario> ParseTpScenario(std::string_view yaml, std::string_view source);
absl::Status ApplyTpOverride(std::string_view key_value, TpScenario* s, bool validate = true);
// True if the YAML text is a tensor-parallel scenario (`system: cais-tp`).
bool IsTpScenario(std::string_view yaml);

struct TpRow {
  std::string backend;
  int tp = 0;
  double link_gbps = 0;
  uint64_t ar_bytes = 0;  // the tensor each collective moves, b·s·h elements
  // The layer's all-reduce; with sequence parallelism the reduce-scatter
  // and the all-gather that stand in its place, summed (each's mean, p99
  // and closed form).
  double ar_mean_us = 0, ar_p99_us = 0, ar_closed_form_us = 0;
  double compute_layer_ms = 0;  // one layer's forward and backward compute, one rank, no jitter
  TpStepStats step;
  uint64_t retransmitted = 0, dropped = 0, wrong = 0;
  uint64_t fallback_chunks = 0;  // left to the host path (not simulated; cais_scenario.h)
};

struct TpResult {
  std::vector<TpRow> rows;
  uint64_t events = 0;
  double wall_s = 0;
};

// Deterministic: the same scenario gives the same rows.
absl::StatusOr<TpResult> RunTpScenario(const TpScenario& s, const Progress& progress = {});

std::string TpResultJson(const TpScenario& s, const TpResult& r);
std::string TpResultCsv(const TpResult& r);

}  // namespace inca::sim
