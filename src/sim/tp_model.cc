#include "inca/sim/tp_model.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "sim/yaml_keys.h"

namespace inca::sim {

absl::Status TpModel::Validate() const {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (absl::Status st = yaml_keys::CheckModelName(model); !st.ok()) return st;
  if (hidden < 1 || hidden > 1 << 20) return bad("hidden must be in [1, 1048576]");
  if (seq < 1 || seq > 1 << 22) return bad("seq must be in [1, 4194304]");
  if (layers < 1 || layers > 10000) return bad("layers must be in [1, 10000]");
  if (micro_batch < 1 || micro_batch > 65536) return bad("micro_batch must be in [1, 65536]");
  if (element_bytes != 2 && element_bytes != 4) return bad("element_bytes must be 2 or 4");
  if (!(device_tflops > 0) || device_tflops > 1e6) {
    return bad("device_tflops must be in (0, 1e6]");
  }
  if (!(mfu > 0) || mfu > 1) return bad("mfu must be in (0, 1]");
  if (!(compute_jitter >= 0) || compute_jitter > 10) {
    return bad("compute_jitter must be in [0, 10]");
  }
  if (!(straggler_prob >= 0) || straggler_prob > 1) return bad("straggler_prob must be in [0, 1]");
  if (!(straggler_slowdown >= 1) || straggler_slowdown > 1000) {
    return bad("straggler_slowdown must be in [1, 1000]");
  }
  return absl::OkStatus();
}

double AttentionFlops(const TpModel& m, int tp) {
  const double b = m.micro_batch, s = m.seq, h = m.hidden;
  return (8 * b * s * h * h + 4 * b * s * s * h) / tp;
}

double MlpFlops(const TpModel& m, int tp) {
  const double b = m.micro_batch, s = m.seq, h = m.hidden;
  return 16 * b * s * h * h / tp;
}

uint64_t AllReduceBytes(const TpModel& m) {
  return static_cast<uint64_t>(m.micro_batch) * static_cast<uint64_t>(m.seq) *
         static_cast<uint64_t>(m.hidden) * static_cast<uint64_t>(m.element_bytes);
}

namespace {

// One step's draws, replayed for the step without communication.
struct StepDraws {
  std::mt19937_64 rng;
  std::lognormal_distribution<double> jitter;
  std::uniform_int_distribution<size_t> pick_ar;
};

// The step's time in seconds: `comm` null means no communication.
double Step(const TpModel& m, int tp, const TpComm* comm, StepDraws d) {
  const double flops_s = m.device_tflops * 1e12 * m.mfu;
  const double attn = AttentionFlops(m, tp) / flops_s, mlp = MlpFlops(m, tp) / flops_s;
  std::vector<double> slow(static_cast<size_t>(tp), 1.0);
  if (std::uniform_real_distribution<double>(0, 1)(d.rng) < m.straggler_prob) {
    slow[std::uniform_int_distribution<size_t>(0, slow.size() - 1)(d.rng)] = m.straggler_slowdown;
  }
  std::vector<double> ready(static_cast<size_t>(tp), 0.0), wgrad_done(ready.size(), 0.0);
  auto draw = [&](double base, size_t r) {
    return base * slow[r] * (m.compute_jitter > 0 ? d.jitter(d.rng) : 1.0);
  };
  // One collective's time, drawn either way, so that the step without
  // communication sees the same compute draws.
  auto collective = [&](const std::vector<double> TpComm::*kind) {
    const size_t k = d.pick_ar(d.rng);
    return comm == nullptr ? 0 : (comm->*kind)[k] * 1e-6;
  };
  const bool sp = m.sequence_parallel;
  // Every rank computes `base` (then, backward, its weight gradient of the
  // same cost), then all meet in an all-reduce (sequence parallelism: an
  // all-gather before the compute, a reduce-scatter after it).
  auto phase = [&](double base, bool backward) {
    if (sp) {
      const double start = *std::max_element(ready.begin(), ready.end());
      const double ag = collective(&TpComm::ag_us);
      for (double& r : ready) r = start + ag;
    }
    double start = 0;
    for (size_t r = 0; r < ready.size(); ++r) {
      ready[r] += draw(base, r);
      wgrad_done[r] = backward ? ready[r] + draw(base, r) : ready[r];
      start = std::max(start, ready[r]);
    }
    const double t = collective(sp ? &TpComm::rs_us : &TpComm::ar_us);
    for (size_t r = 0; r < ready.size(); ++r) {
      // Without overlap the weight-gradient GEMM follows the collective.
      ready[r] = !backward   ? start + t
                 : m.overlap ? std::max(start + t, wgrad_done[r])
                             : start + t + (wgrad_done[r] - ready[r]);
    }
  };
  for (int l = 0; l < m.layers; ++l) {
    phase(attn, false);
    phase(mlp, false);
  }
  for (int l = 0; l < m.layers; ++l) {
    phase(mlp, true);
    phase(attn, true);
  }
  return *std::max_element(ready.begin(), ready.end());
}

}  // namespace

TpStepStats SimulateTpSteps(const TpModel& m, int tp, const TpComm& comm, int steps,
                            uint64_t seed) {
  TpStepStats st;
  const std::vector<double>& first = m.sequence_parallel ? comm.rs_us : comm.ar_us;
  if (tp < 1 || steps < 1 || first.empty()) return st;
  if (m.sequence_parallel && comm.ag_us.size() != comm.rs_us.size()) return st;
  const double cv2 = m.compute_jitter * m.compute_jitter;
  // (Never drawn without jitter; the distribution needs a positive sigma.)
  const double sigma = std::max(1e-9, std::sqrt(std::log1p(cv2)));
  StepDraws d{std::mt19937_64(seed), std::lognormal_distribution<double>(-sigma * sigma / 2, sigma),
              std::uniform_int_distribution<size_t>(0, first.size() - 1)};
  std::vector<double> times;
  double sum = 0, compute = 0;
  for (int i = 0; i < steps; ++i) {
    d.rng.seed(seed + static_cast<uint64_t>(i));
    times.push_back(Step(m, tp, &comm, d) * 1e3);
    compute += Step(m, tp, nullptr, d) * 1e3;
    sum += times.back();
  }
  std::sort(times.begin(), times.end());
  auto quantile = [&](double q) {
    const auto i = static_cast<size_t>(std::ceil(q * static_cast<double>(times.size()))) - 1;
    return times[std::min(i, times.size() - 1)];
  };
  st.steps = steps;
  st.mean_ms = sum / steps;
  st.p50_ms = quantile(0.5);
  st.p99_ms = quantile(0.99);
  st.max_ms = times.back();
  st.p99_over_mean = st.p99_ms / st.mean_ms;
  st.compute_ms = compute / steps;
  st.comm_share = 1 - st.compute_ms / st.mean_ms;
  return st;
}

}  // namespace inca::sim
