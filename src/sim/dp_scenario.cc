#include "inca/sim/dp_scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "sim/cais_keys.h"
#include "sim/yaml_keys.h"

namespace inca::sim {

absl::Status DpModel::Validate() const {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (absl::Status st = yaml_keys::CheckModelName(model); !st.ok()) return st;
  if (!(params >= 1e6 && params <= 1e13)) return bad("params must be in [1e6, 1e13]");
  if (seq < 1 || seq > 1'000'000) return bad("seq must be in [1, 1000000]");
  if (micro_batch < 1 || micro_batch > 10'000) return bad("micro_batch must be in [1, 10000]");
  if (accumulation < 1 || accumulation > 10'000) return bad("accumulation must be in [1, 10000]");
  if (tp < 1 || tp > 64) return bad("tp must be in [1, 64]");
  if (grad_bytes != 2 && grad_bytes != 4) return bad("grad_bytes must be 2 (bf16) or 4 (f32)");
  if (bucket_bytes < (uint64_t{1} << 20) || bucket_bytes > (uint64_t{1} << 30)) {
    return bad("bucket_bytes must be in [1 MiB, 1 GiB]");
  }
  if (GradientBytes(*this) / bucket_bytes > 100'000) {
    return bad("more than 100000 buckets: raise bucket_bytes");
  }
  if (!(device_tflops > 0) || device_tflops > 1e5) return bad("device_tflops must be in (0, 1e5]");
  if (!(mfu > 0) || mfu > 1) return bad("mfu must be in (0, 1]");
  return absl::OkStatus();
}

uint64_t GradientBytes(const DpModel& m) {
  return static_cast<uint64_t>(std::llround(m.params / m.tp)) * static_cast<uint64_t>(m.grad_bytes);
}

namespace {

// One micro-batch's FLOPs on one rank: 6 x params x tokens, split by tp.
double StepFlops(const DpModel& m) {
  return 6.0 * m.params * m.seq * m.micro_batch / m.tp;
}

}  // namespace

double ForwardSeconds(const DpModel& m) {
  return StepFlops(m) / 3 / (m.device_tflops * 1e12 * m.mfu);
}
double BackwardSeconds(const DpModel& m) {
  return 2 * ForwardSeconds(m);
}

DpStep DdpStep(const DpModel& m, double bucket_us, double last_us) {
  DpStep st;
  const uint64_t g = GradientBytes(m);
  st.buckets = static_cast<int>((g + m.bucket_bytes - 1) / m.bucket_bytes);
  const double fwd = ForwardSeconds(m) * 1e3, bwd = BackwardSeconds(m) * 1e3;
  st.compute_ms = m.accumulation * (fwd + bwd);
  const double last_backward = (m.accumulation - 1) * (fwd + bwd) + fwd;
  double end = 0;
  for (int i = 0; i < st.buckets; ++i) {
    const double ready = last_backward + bwd * (i + 1) / st.buckets;
    const double us = i + 1 == st.buckets ? last_us : bucket_us;
    end = std::max(ready, end) + us / 1e3;
    st.comm_ms += us / 1e3;
  }
  st.step_ms = std::max(end, st.compute_ms);
  st.comm_share = 1 - st.compute_ms / st.step_ms;
  return st;
}

namespace {

#define INCA_DP_MODEL_KEY(field) INCA_OWN_KEY(DpScenario, #field, model.field)

// The keys of a data-parallel scenario, once (docs/sim.md lists their
// meaning); every other key of a CAIS scenario sets the network.
const OwnKey<DpScenario> kKeys[] = {
    INCA_OWN_KEY(DpScenario, "name", name),
    INCA_DP_MODEL_KEY(model),
    INCA_DP_MODEL_KEY(params),
    INCA_DP_MODEL_KEY(seq),
    INCA_DP_MODEL_KEY(micro_batch),
    INCA_DP_MODEL_KEY(accumulation),
    INCA_DP_MODEL_KEY(tp),
    INCA_DP_MODEL_KEY(grad_bytes),
    {"bucket_bytes",
     [](const YAML::Node& v, std::string_view src, DpScenario* s) {
       return yaml_keys::GetCount(v, src, "bucket_bytes", 1, 1e12, &s->model.bucket_bytes);
     }},
    INCA_DP_MODEL_KEY(device_tflops),
    INCA_DP_MODEL_KEY(mfu),
    {"dp", [](const YAML::Node& v, std::string_view src,
              DpScenario* s) { return yaml_keys::SetList(v, src, "dp", &s->dp); }},
    INCA_OWN_KEY(DpScenario, "ar_samples", ar_samples),
};
#undef INCA_DP_MODEL_KEY

absl::Status SetKey(const std::string& key, const YAML::Node& v, std::string_view src,
                    DpScenario* s) {
  absl::Status st;
  if (yaml_keys::SystemOrSweep(key, v, src, "cais-dp",
                               "a data-parallel scenario has system cais-dp", s, SetKey, &st)) {
    return st;
  }
  return SetEmbeddingKey(
      key, v, src, s, kKeys,
      "hosts: dp x jobs; sizes: the model's buckets; ops: ar_samples; collective: "
      "allreduce");
}

// A bucket of `bytes` as the ranks all-reduce it: a whole number of f32
// per rank (the ring's blocks), rounded up.
uint64_t BucketOnWire(uint64_t bytes, int dp) {
  const uint64_t unit = uint64_t{4} * static_cast<uint64_t>(dp);
  return (bytes + unit - 1) / unit * unit;
}

// The two bucket sizes of a step: full ones, and the last.
std::pair<uint64_t, uint64_t> Buckets(const DpModel& m, int dp) {
  const uint64_t g = GradientBytes(m);
  const uint64_t n = (g + m.bucket_bytes - 1) / m.bucket_bytes;
  return {BucketOnWire(std::min(g, m.bucket_bytes), dp),
          BucketOnWire(g - (n - 1) * m.bucket_bytes, dp)};
}

CaisSimScenario Net(const DpScenario& s, int dp) {
  CaisSimScenario n = s.net;
  n.name = absl::StrCat(s.name, "-dp", dp);
  n.collective = "allreduce";
  n.hosts = dp * n.jobs;  // `jobs` such jobs side by side
  const auto [full, last] = Buckets(s.model, dp);
  n.sizes = {full};
  if (last != full) n.sizes.push_back(last);
  n.ops = s.ar_samples + 1;  // the first warms the client's window up
  return n;
}

// The mean of a row's operations after the first.
double MeanAfterWarmUp(const CaisSimRow& r) {
  double sum = 0;
  for (size_t i = 1; i < r.op_us.size(); ++i) sum += r.op_us[i];
  return sum / static_cast<double>(r.op_us.size() - 1);
}

}  // namespace

absl::Status DpScenario::Validate() const {
  if (auto st = model.Validate(); !st.ok()) return st;
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (dp.empty()) return bad("dp: at least one DP size");
  if (ar_samples < 1 || ar_samples > 100) return bad("ar_samples must be in [1, 100]");
  for (int d : dp) {
    if (d < 2 || d > 8192) return bad(absl::StrCat("dp: ", d, " is not in [2, 8192]"));
    if (auto st = Net(*this, d).Validate(); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("dp ", d, ": ", st.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DpScenario> ParseDpScenario(std::string_view yaml, std::string_view source) {
  return yaml_keys::ParseScenario<DpScenario>(yaml, source, SetKey);
}

absl::Status ApplyDpOverride(std::string_view key_value, DpScenario* s, bool validate) {
  return yaml_keys::ApplyOverride(key_value, s, SetKey, validate);
}

bool IsDpScenario(std::string_view yaml) {
  return yaml_keys::IsSystem(yaml, "cais-dp");
}

absl::StatusOr<DpResult> RunDpScenario(const DpScenario& s, const Progress& progress) {
  if (auto st = s.Validate(); !st.ok()) return st;
  const auto wall_start = std::chrono::steady_clock::now();
  DpResult res;
  for (size_t i = 0; i < s.dp.size(); ++i) {
    const CaisSimScenario net = Net(s, s.dp[i]);
    auto sim = RunCaisSimScenario(net, [&](double f) {
      if (progress) progress((static_cast<double>(i) + f) / static_cast<double>(s.dp.size()));
    });
    if (!sim.ok()) return sim.status();
    res.events += sim->events;
    const size_t per = net.sizes.size();  // rows: each backend's sizes in order
    for (size_t b = 0; b + per <= sim->rows.size(); b += per) {
      const CaisSimRow &full = sim->rows[b], &last = sim->rows[b + per - 1];
      DpRow row;
      row.backend = full.backend;
      row.dp = s.dp[i];
      row.bucket_bytes = full.bytes;
      row.last_bytes = last.bytes;
      row.bucket_us = MeanAfterWarmUp(full);
      row.bucket_closed_form_us = full.closed_form_us;
      row.last_us = MeanAfterWarmUp(last);
      row.step = DdpStep(s.model, row.bucket_us, row.last_us);
      for (size_t k = b; k < b + per; ++k) {
        row.retransmitted += sim->rows[k].retransmitted;
        row.dropped += sim->rows[k].dropped;
        row.wrong += sim->rows[k].wrong;
        row.fallback_chunks += sim->rows[k].fallback_chunks;
        for (size_t d = 0; d < row.switch_drops.size(); ++d) {
          row.switch_drops[d] += sim->rows[k].switch_drops[d];
        }
      }
      res.rows.push_back(row);
    }
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return res;
}

namespace {

// A row's columns after its backend, once for the JSON and the CSV.
struct DpColumn {
  const char* name;
  void (*put)(std::ostream& o, const DpRow& x);
};
#define INCA_DP_COLUMN(name, expr)                               \
  DpColumn {                                                     \
#name, [](std::ostream & o, const DpRow& x) { o << (expr); } \
  }
const DpColumn kColumns[] = {
    INCA_DP_COLUMN(dp, x.dp),
    INCA_DP_COLUMN(bucket_bytes, x.bucket_bytes),
    INCA_DP_COLUMN(last_bytes, x.last_bytes),
    INCA_DP_COLUMN(bucket_us, x.bucket_us),
    INCA_DP_COLUMN(bucket_closed_form_us, x.bucket_closed_form_us),
    INCA_DP_COLUMN(last_us, x.last_us),
    INCA_DP_COLUMN(buckets, x.step.buckets),
    INCA_DP_COLUMN(compute_ms, x.step.compute_ms),
    INCA_DP_COLUMN(comm_ms, x.step.comm_ms),
    INCA_DP_COLUMN(step_ms, x.step.step_ms),
    INCA_DP_COLUMN(comm_share, x.step.comm_share),
    INCA_DP_COLUMN(retransmitted, x.retransmitted),
    INCA_DP_COLUMN(dropped, x.dropped),
    INCA_DP_COLUMN(wrong, x.wrong),
    INCA_DP_COLUMN(fallback_chunks, x.fallback_chunks),
};
#undef INCA_DP_COLUMN

}  // namespace

std::string DpResultJson(const DpScenario& s, const DpResult& r) {
  std::ostringstream o;
  o.precision(10);
  const DpModel& m = s.model;
  const CaisSimScenario& n = s.net;
  o << "{\"name\":\"" << s.name << "\",\"system\":\"cais-dp\",\"model\":\"" << m.model
    << "\",\"params\":" << m.params << ",\"seq\":" << m.seq << ",\"micro_batch\":" << m.micro_batch
    << ",\"accumulation\":" << m.accumulation << ",\"tp\":" << m.tp
    << ",\"grad_bytes\":" << m.grad_bytes << ",\"bucket_bytes\":" << m.bucket_bytes
    << ",\"gradient_bytes\":" << GradientBytes(m) << ",\"device_tflops\":" << m.device_tflops
    << ",\"mfu\":" << m.mfu << ",\"ar_samples\":" << s.ar_samples << ",\"seed\":" << n.seed
    << ",\"mode\":\"" << n.mode << "\",\"link_gbps\":" << n.link_gbps
    << ",\"uplink_gbps\":" << n.UplinkGbps() << ",\"racks\":" << n.racks
    << ",\"spines\":" << n.spines << ",\"fat_tree_k\":" << n.fat_tree_k << ",\"placement\":\""
    << n.placement << "\",\"jobs\":" << n.jobs << ",\"switch_slots\":" << n.switch_slots
    << ",\"window\":" << n.window << ",\"background_load\":" << n.background_load
    << ",\"background_flow_bytes\":" << n.background_flow_bytes << ",\"events\":" << r.events
    << ",\"rows\":[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    o << (i ? "," : "") << "{\"backend\":\"" << r.rows[i].backend << "\"";
    for (const DpColumn& c : kColumns) {
      o << ",\"" << c.name << "\":";
      c.put(o, r.rows[i]);
    }
    o << ",\"switch_drops\":" << SwitchDropsJson(r.rows[i].switch_drops) << "}";
  }
  o << "]}";
  return o.str();
}

std::string DpResultCsv(const DpResult& r) {
  std::ostringstream o;
  o.precision(10);
  o << "backend";
  for (const DpColumn& c : kColumns) o << "," << c.name;
  for (const DpRow& x : r.rows) {
    o << "\n" << x.backend;
    for (const DpColumn& c : kColumns) {
      o << ",";
      c.put(o, x);
    }
  }
  o << "\n";
  return o.str();
}

}  // namespace inca::sim
