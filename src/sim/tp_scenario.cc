#include "inca/sim/tp_scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/cais_keys.h"
#include "sim/yaml_keys.h"

namespace inca::sim {

namespace {

using yaml_keys::SetList;

#define INCA_TP_KEY(field) INCA_OWN_KEY(TpScenario, #field, field)
#define INCA_TP_MODEL_KEY(field) INCA_OWN_KEY(TpScenario, #field, model.field)

// The keys of a tensor-parallel scenario, once (docs/sim.md lists their
// meaning); every other key of a CAIS scenario sets the network.
const OwnKey<TpScenario> kKeys[] = {
    INCA_TP_KEY(name),
    INCA_TP_MODEL_KEY(model),
    INCA_TP_MODEL_KEY(hidden),
    INCA_TP_MODEL_KEY(seq),
    INCA_TP_MODEL_KEY(layers),
    INCA_TP_MODEL_KEY(micro_batch),
    INCA_TP_MODEL_KEY(element_bytes),
    INCA_TP_MODEL_KEY(device_tflops),
    INCA_TP_MODEL_KEY(mfu),
    INCA_TP_MODEL_KEY(overlap),
    INCA_TP_MODEL_KEY(sequence_parallel),
    INCA_TP_MODEL_KEY(compute_jitter),
    INCA_TP_MODEL_KEY(straggler_prob),
    INCA_TP_MODEL_KEY(straggler_slowdown),
    {"tp", [](const YAML::Node& v, std::string_view src,
              TpScenario* s) { return SetList(v, src, "tp", &s->tp); }},
    {"link_gbps", [](const YAML::Node& v, std::string_view src,
                     TpScenario* s) { return SetList(v, src, "link_gbps", &s->link_gbps); }},
    INCA_TP_KEY(steps),
    INCA_TP_KEY(ar_samples),
};
#undef INCA_TP_MODEL_KEY
#undef INCA_TP_KEY

absl::Status SetKey(const std::string& key, const YAML::Node& v, std::string_view src,
                    TpScenario* s) {
  absl::Status st;
  if (yaml_keys::SystemOrSweep(key, v, src, "cais-tp",
                               "a tensor-parallel scenario has system cais-tp", s, SetKey, &st)) {
    return st;
  }
  return SetEmbeddingKey(key, v, src, s, kKeys,
                         "hosts: tp x jobs; sizes: the model; ops: ar_samples; collective: "
                         "sequence_parallel");
}

// The network of one configuration, for one of the layer's collectives.
CaisSimScenario Net(const TpScenario& s, int tp, double gbps, const std::string& collective) {
  CaisSimScenario n = s.net;
  n.name = absl::StrCat(s.name, "-tp", tp, "-", gbps, "g");
  n.collective = collective;
  n.hosts = tp * n.jobs;  // `jobs` such jobs side by side
  n.link_gbps = gbps;
  n.sizes = {AllReduceBytes(s.model)};
  n.ops = s.ar_samples + 1;  // the first warms the client's window up
  return n;
}

// The layer's collectives: an all-reduce, or with sequence parallelism a
// reduce-scatter and an all-gather.
std::vector<std::string> Collectives(const TpModel& m) {
  if (m.sequence_parallel) return {"reduce_scatter", "all_gather"};
  return {"allreduce"};
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
}

}  // namespace

absl::Status TpScenario::Validate() const {
  if (auto st = model.Validate(); !st.ok()) return st;
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (tp.empty()) return bad("tp: at least one TP degree");
  for (int t : tp) {
    if (t < 2 || t > 256) return bad(absl::StrCat("tp: ", t, " is not in [2, 256]"));
  }
  if (link_gbps.empty()) return bad("link_gbps: at least one rate");
  if (steps < 1 || steps > 1000000) return bad("steps must be in [1, 1000000]");
  if (ar_samples < 1 || ar_samples > 10000) return bad("ar_samples must be in [1, 10000]");
  // Every configuration's network must be valid too (rates, sizes, modes).
  for (int t : tp) {
    for (double g : link_gbps) {
      for (const std::string& c : Collectives(model)) {
        if (auto st = Net(*this, t, g, c).Validate(); !st.ok()) return st;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TpScenario> ParseTpScenario(std::string_view yaml, std::string_view source) {
  return yaml_keys::ParseScenario<TpScenario>(yaml, source, SetKey);
}

absl::Status ApplyTpOverride(std::string_view key_value, TpScenario* s, bool validate) {
  return yaml_keys::ApplyOverride(key_value, s, SetKey, validate);
}

bool IsTpScenario(std::string_view yaml) {
  return yaml_keys::IsSystem(yaml, "cais-tp");
}

absl::StatusOr<TpResult> RunTpScenario(const TpScenario& s, const Progress& progress) {
  if (auto st = s.Validate(); !st.ok()) return st;
  const auto wall_start = std::chrono::steady_clock::now();
  TpResult res;
  const double configs = static_cast<double>(s.tp.size() * s.link_gbps.size());
  double done = 0;
  const std::vector<std::string> collectives = Collectives(s.model);
  const double per_config = static_cast<double>(collectives.size());
  for (int tp : s.tp) {
    for (double gbps : s.link_gbps) {
      // Per backend, each collective's samples (after the warm-up) and rows.
      std::vector<TpComm> comm;
      std::vector<TpRow> rows;
      for (size_t c = 0; c < collectives.size(); ++c) {
        const CaisSimScenario net = Net(s, tp, gbps, collectives[c]);
        auto sim = RunCaisSimScenario(net, [&](double f) {
          if (progress) progress((done + (static_cast<double>(c) + f) / per_config) / configs);
        });
        if (!sim.ok()) return sim.status();
        res.events += sim->events;
        comm.resize(sim->rows.size());
        rows.resize(sim->rows.size());
        for (size_t b = 0; b < sim->rows.size(); ++b) {
          const CaisSimRow& r = sim->rows[b];
          const std::vector<double> us(r.op_us.begin() + 1, r.op_us.end());
          (collectives[c] == "reduce_scatter" ? comm[b].rs_us
           : collectives[c] == "all_gather"   ? comm[b].ag_us
                                              : comm[b].ar_us) = us;
          TpRow& row = rows[b];
          row.backend = r.backend;
          row.tp = tp;
          row.link_gbps = gbps;
          row.ar_bytes = r.bytes;
          // With sequence parallelism: the reduce-scatter and all-gather
          // together, which stand where an all-reduce stood.
          double sum = 0;
          for (double x : us) sum += x;
          row.ar_mean_us += sum / static_cast<double>(us.size());
          row.ar_p99_us += Quantile(us, 0.99);
          row.ar_closed_form_us += r.closed_form_us;
          row.retransmitted += r.retransmitted;
          row.dropped += r.dropped;
          row.wrong += r.wrong;
          row.fallback_chunks += r.fallback_chunks;
        }
      }
      for (size_t b = 0; b < rows.size(); ++b) {
        TpRow& row = rows[b];
        row.compute_layer_ms = 3e3 * (AttentionFlops(s.model, tp) + MlpFlops(s.model, tp)) /
                               (s.model.device_tflops * 1e12 * s.model.mfu);
        // The same seed for every backend: the same compute, step for step.
        row.step = SimulateTpSteps(s.model, tp, comm[b], s.steps, s.net.seed);
        res.rows.push_back(row);
      }
      ++done;
    }
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return res;
}

std::string TpResultJson(const TpScenario& s, const TpResult& r) {
  std::ostringstream o;
  o.precision(10);
  const TpModel& m = s.model;
  o << "{\"name\":\"" << s.name << "\",\"system\":\"cais-tp\",\"model\":\"" << m.model
    << "\",\"hidden\":" << m.hidden << ",\"seq\":" << m.seq << ",\"layers\":" << m.layers
    << ",\"micro_batch\":" << m.micro_batch << ",\"element_bytes\":" << m.element_bytes
    << ",\"device_tflops\":" << m.device_tflops << ",\"mfu\":" << m.mfu
    << ",\"overlap\":" << (m.overlap ? "true" : "false")
    << ",\"sequence_parallel\":" << (m.sequence_parallel ? "true" : "false")
    << ",\"compute_jitter\":" << m.compute_jitter << ",\"straggler_prob\":" << m.straggler_prob
    << ",\"straggler_slowdown\":" << m.straggler_slowdown << ",\"steps\":" << s.steps
    << ",\"ar_samples\":" << s.ar_samples << ",\"seed\":" << s.net.seed << ",\"mode\":\""
    << s.net.mode << "\",\"background_load\":" << s.net.background_load
    << ",\"background_flow_bytes\":" << s.net.background_flow_bytes << ",\"events\":" << r.events
    << ",\"rows\":[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const TpRow& x = r.rows[i];
    o << (i ? "," : "") << "{\"backend\":\"" << x.backend << "\",\"tp\":" << x.tp
      << ",\"link_gbps\":" << x.link_gbps << ",\"ar_bytes\":" << x.ar_bytes
      << ",\"ar_mean_us\":" << x.ar_mean_us << ",\"ar_p99_us\":" << x.ar_p99_us
      << ",\"ar_closed_form_us\":" << x.ar_closed_form_us
      << ",\"compute_layer_ms\":" << x.compute_layer_ms << ",\"step_mean_ms\":" << x.step.mean_ms
      << ",\"step_p50_ms\":" << x.step.p50_ms << ",\"step_p99_ms\":" << x.step.p99_ms
      << ",\"step_max_ms\":" << x.step.max_ms << ",\"p99_over_mean\":" << x.step.p99_over_mean
      << ",\"compute_ms\":" << x.step.compute_ms << ",\"comm_share\":" << x.step.comm_share
      << ",\"retransmitted\":" << x.retransmitted << ",\"dropped\":" << x.dropped
      << ",\"wrong\":" << x.wrong << ",\"fallback_chunks\":" << x.fallback_chunks << "}";
  }
  o << "]}";
  return o.str();
}

std::string TpResultCsv(const TpResult& r) {
  std::ostringstream o;
  o.precision(10);
  o << "backend,tp,link_gbps,ar_bytes,ar_mean_us,ar_p99_us,ar_closed_form_us,compute_layer_ms,"
       "step_mean_ms,step_p50_ms,step_p99_ms,step_max_ms,p99_over_mean,compute_ms,comm_share,"
       "retransmitted,dropped,wrong,fallback_chunks\n";
  for (const TpRow& x : r.rows) {
    o << x.backend << "," << x.tp << "," << x.link_gbps << "," << x.ar_bytes << "," << x.ar_mean_us
      << "," << x.ar_p99_us << "," << x.ar_closed_form_us << "," << x.compute_layer_ms << ","
      << x.step.mean_ms << "," << x.step.p50_ms << "," << x.step.p99_ms << "," << x.step.max_ms
      << "," << x.step.p99_over_mean << "," << x.step.compute_ms << "," << x.step.comm_share << ","
      << x.retransmitted << "," << x.dropped << "," << x.wrong << "," << x.fallback_chunks << "\n";
  }
  return o.str();
}

}  // namespace inca::sim
