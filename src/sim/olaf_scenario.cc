#include "inca/sim/olaf_scenario.h"

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "inca/sim/olaf_nodes.h"
#include "sim/yaml_keys.h"

namespace inca::sim {

namespace {

using yaml_keys::Av;
using yaml_keys::Bad;
using yaml_keys::Get;

absl::Status SetKey(const std::string& key, const YAML::Node& v, std::string_view src,
                    OlafScenario* s) {
  std::string text;
  if (key == "system") {  // inca-sim's choice of scenario kind (the default)
    if (v.IsScalar() && v.Scalar() == "olaf") return absl::OkStatus();
    return Bad(src, key, "an OLAF scenario has system olaf (CAIS scenarios: system cais)");
  }
  if (key == "name") return Get(v, src, key, &s->name);
  if (key == "seed") return Get(v, src, key, &s->seed);
  if (key == "max_events") {
    return yaml_keys::GetCount(v, src, key, 1, yaml_keys::kMaxEventsHi, &s->max_events);
  }
  if (key == "duration_s") return Get(v, src, key, &s->duration_s);
  if (key == "warmup_s") return Get(v, src, key, &s->warmup_s);
  if (key == "topology") return Get(v, src, key, &s->topology);
  if (key == "queue_depth") return Get(v, src, key, &s->queue_depth);
  if (key == "delta_t_ms") return Get(v, src, key, &s->delta_t_ms);
  if (key == "tau_ms") return Get(v, src, key, &s->tau_ms);
  if (key == "egress_gbps") return Get(v, src, key, &s->egress_gbps);
  if (key == "tree_ratio") return Get(v, src, key, &s->tree_ratio);
  if (key == "worker_link_gbps") return Get(v, src, key, &s->worker_link_gbps);
  if (key == "link_delay_us") return Get(v, src, key, &s->link_delay_us);
  if (key == "sample_ms") return Get(v, src, key, &s->sample_ms);
  if (key == "aligned_clusters") return Get(v, src, key, &s->aligned_clusters);
  if (key == "cluster_stagger_us") return Get(v, src, key, &s->cluster_stagger_us);
  if (key == "load") return Get(v, src, key, &s->load);
  if (key == "models") return Get(v, src, key, &s->models);
  if (key == "closed_loop") return Get(v, src, key, &s->closed_loop);
  if (key == "model_wait_ms") return Get(v, src, key, &s->model_wait_ms);
  if (key == "clock_offset_ms") return Get(v, src, key, &s->clock_offset_ms);
  if (key == "clock_drift_ppm") return Get(v, src, key, &s->clock_drift_ppm);
  if (key == "switch_clock_offset_ms") return Get(v, src, key, &s->switch_clock_offset_ms);
  if (key == "worker_clock") {
    if (auto st = Get(v, src, key, &text); !st.ok()) return st;
    if (text != "local" && text != "ps") return Bad(src, key, "use local or ps");
    s->worker_clock = text == "ps" ? olaf::WorkerClock::kPs : olaf::WorkerClock::kLocal;
    return absl::OkStatus();
  }
  if (key == "sweep") return yaml_keys::ParseSweep(v, src, s, SetKey, "clusters");
  if (key == "policy") {
    if (auto st = Get(v, src, key, &text); !st.ok()) return st;
    if (text == "olaf") {
      s->policy = olaf::QueuePolicy::kOlaf;
    } else if (text == "fifo") {
      s->policy = olaf::QueuePolicy::kFifo;
    } else {
      return Bad(src, key, absl::StrCat("'", text, "': use olaf or fifo"));
    }
    return absl::OkStatus();
  }
  if (key == "send_control") {
    if (auto st = Get(v, src, key, &text); !st.ok()) return st;
    if (text == "off") {
      s->send_control = olaf::SendControlMode::kOff;
    } else if (text == "priority") {
      s->send_control = olaf::SendControlMode::kPriority;
    } else if (text == "fairness") {
      s->send_control = olaf::SendControlMode::kFairness;
    } else {
      return Bad(src, key, absl::StrCat("'", text, "': use off, priority or fairness"));
    }
    return absl::OkStatus();
  }
  if (key == "clusters") {
    if (!v.IsSequence()) return Bad(src, key, "must be a list of cluster groups");
    s->clusters.clear();
    for (size_t i = 0; i < v.size(); ++i) {
      ClusterGroup g;
      const std::string where = absl::StrCat(key, "[", i, "]");
      if (!v[i].IsMap()) return Bad(src, where, "must be a map");
      for (const auto& kv : v[i]) {
        const std::string k = kv.first.as<std::string>();
        const std::string kk = absl::StrCat(where, ".", k);
        absl::Status st;
        if (k == "count") {
          st = Get(kv.second, src, kk, &g.count);
        } else if (k == "workers") {
          st = Get(kv.second, src, kk, &g.workers);
        } else if (k == "period_ms") {
          st = Get(kv.second, src, kk, &g.period_ms);
        } else if (k == "exponential") {
          st = Get(kv.second, src, kk, &g.exponential);
        } else if (k == "jitter_us") {
          st = Get(kv.second, src, kk, &g.jitter_us);
        } else if (k == "synchronized") {
          st = Get(kv.second, src, kk, &g.synchronized);
        } else if (k == "elements") {
          st = Get(kv.second, src, kk, &g.elements);
        } else if (k == "behind_sw2") {
          st = Get(kv.second, src, kk, &g.behind_sw2);
        } else {
          return Bad(src, kk,
                     "unknown key; known: count, workers, period_ms, exponential, jitter_us, "
                     "synchronized, elements, behind_sw2");
        }
        if (!st.ok()) return st;
      }
      s->clusters.push_back(g);
    }
    return absl::OkStatus();
  }
  return Bad(
      src, key,
      "unknown key; known: system, name, seed, max_events, duration_s, warmup_s, topology, policy, "
      "send_control, queue_depth, delta_t_ms, tau_ms, egress_gbps, tree_ratio, "
      "worker_link_gbps, link_delay_us, sample_ms, aligned_clusters, cluster_stagger_us, "
      "load, models, closed_loop, model_wait_ms, clock_offset_ms, clock_drift_ppm, "
      "switch_clock_offset_ms, worker_clock, sweep, clusters");
}

}  // namespace

absl::Status OlafScenario::Validate() const {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (!(duration_s > 0) || duration_s > 3600) return bad("duration_s must be in (0, 3600]");
  if (!(warmup_s >= 0) || warmup_s >= duration_s) return bad("warmup_s must be in [0, duration_s)");
  if (topology != "star" && topology != "tree") return bad("topology must be star or tree");
  if (queue_depth < 1 || queue_depth > 65536) return bad("queue_depth must be in [1, 65536]");
  if (!(delta_t_ms > 0) || !(tau_ms > 0)) return bad("delta_t_ms and tau_ms must be positive");
  if (!(egress_gbps > 0) || !(worker_link_gbps > 0)) return bad("link rates must be positive");
  if (!(tree_ratio > 0)) return bad("tree_ratio must be positive");
  // Every key that sets work has a range that bounds it (issue 46: a
  // period of 1e-6 ms was accepted and grew to gigabytes).
  if (!(sample_ms >= 0.01)) return bad("sample_ms must be at least 0.01");
  if (duration_s * 1e3 / sample_ms > 1e7) {
    return bad("duration_s / sample_ms is more than 10000000 samples; raise sample_ms");
  }
  if (!(link_delay_us >= 0) || link_delay_us > 1e6) return bad("link_delay_us must be in [0, 1e6]");
  if (!(cluster_stagger_us >= 0) || cluster_stagger_us > 1e9) {
    return bad("cluster_stagger_us must be in [0, 1e9]");
  }
  if (!(load >= 0) || load > 1000)
    return bad("load must be in [0, 1000] (0: egress_gbps as given)");
  if (!(std::abs(clock_offset_ms) <= 3.6e6) || !(std::abs(switch_clock_offset_ms) <= 3.6e6)) {
    return bad("clock_offset_ms and switch_clock_offset_ms must be within ±3600000");
  }
  if (!(clock_drift_ppm >= 0) || clock_drift_ppm > 1e5) {
    return bad("clock_drift_ppm must be in [0, 100000]");
  }
  if (!(model_wait_ms >= 0) || model_wait_ms > 3.6e6) {
    return bad("model_wait_ms must be in [0, 3600000] (0: delta_t_ms)");
  }
  if (clusters.empty()) return bad("clusters: at least one cluster group");
  uint64_t n = 0, per_switch[2] = {0, 0};
  for (const auto& g : clusters) {
    if (g.count < 1 || g.count > 0xFFFE) return bad("clusters[].count must be in [1, 65534]");
    if (g.workers < 1 || g.workers > 4096) return bad("clusters[].workers must be in [1, 4096]");
    if (!(g.period_ms >= 0.01) || g.period_ms > 3.6e6) {
      return bad("clusters[].period_ms must be in [0.01, 3600000] (10 us to an hour)");
    }
    if (!(g.jitter_us >= 0) || g.jitter_us > 1e9) {
      return bad("clusters[].jitter_us must be in [0, 1e9]");
    }
    if (g.elements < 1 || g.elements > 2233) {
      return bad("clusters[].elements must be in [1, 2233] (one 9000-byte frame)");
    }
    if (g.behind_sw2 && topology != "tree") return bad("clusters[].behind_sw2 needs topology tree");
    n += g.count;
    per_switch[g.behind_sw2 ? 1 : 0] += g.count;
  }
  // One switch port per cluster (workers sit behind their cluster's edge),
  // plus the uplink (and SW1's port to SW2).
  if (per_switch[0] + 2 > dp::kMaxPorts || per_switch[1] + 1 > dp::kMaxPorts) {
    return bad(absl::StrCat("at most ", dp::kMaxPorts - 2, " clusters per switch"));
  }
  if (n > 0xFFFE) return bad("too many clusters");
  return absl::OkStatus();
}

absl::StatusOr<OlafScenario> ParseOlafScenario(std::string_view yaml, std::string_view source) {
  return yaml_keys::ParseScenario<OlafScenario>(yaml, source, SetKey);
}

absl::Status ApplyOverride(std::string_view key_value, OlafScenario* s, bool validate) {
  return yaml_keys::ApplyOverride(key_value, s, SetKey, validate);
}

double JainIndex(const std::vector<double>& x) {
  double sum = 0, sq = 0;
  for (double v : x) {
    sum += v;
    sq += v * v;
  }
  if (x.empty() || sq == 0) return 1;
  return sum * sum / (static_cast<double>(x.size()) * sq);
}

namespace {

// One worker update as the switch's egress counts it: the UPDATE datagram
// of `elements` f32 (at most one frame, Validate) with the per-frame
// overhead.
double UpdateFrameBits(uint32_t elements) {
  std::vector<uint8_t> payload(size_t{elements} * 4, 0);
  const size_t bytes = olaf::BuildUpdate(olaf::UpdateHeader{}, payload).size() +
                       olaf::OlafSwitchConfig{}.egress_overhead_bytes;
  return static_cast<double>(bytes) * 8;
}

double OfferedGbps(const OlafScenario& s) {
  double bps = 0;
  for (const ClusterGroup& g : s.clusters) {
    bps += static_cast<double>(g.count) * g.workers * UpdateFrameBits(g.elements) /
           (g.period_ms / 1e3);
  }
  return bps / 1e9;
}

// AomParts of one cluster: Σ D·Y and Σ Y² over the updates that make the
// age at the PS younger, from the window's start.
class AgeSplit {
 public:
  void Start(TimeNs t) {
    started_ = true;
    start_ = t;
  }
  void OnApply(TimeNs gen, TimeNs at) {
    if (have_ && gen <= gen_) return;  // no younger: the age goes on growing
    if (started_ && have_) Close(at);
    have_ = true;
    gen_ = gen;
    seg_ = at;
    d_ = static_cast<double>(at - gen);
  }
  AomParts Finish(TimeNs end, double period_ms) {
    if (!started_ || !have_) return {};
    Close(end);
    const double t = static_cast<double>(end - start_);
    AomParts p;
    p.queueing_ms = sum_dy_ / t / 1e6;
    p.period_ms = period_ms / 2;
    p.gaps_ms = sum_y2_ / (2 * t) / 1e6 - p.period_ms;
    return p;
  }

 private:
  // The segment from the last reset to `at`, less any part before the
  // window (the age carried into it is a gap, not queueing).
  void Close(TimeNs at) {
    const double y = static_cast<double>(at - seg_);
    const double before = static_cast<double>(std::max<TimeNs>(0, start_ - seg_));
    sum_dy_ += d_ * (y - before);
    sum_y2_ += y * y - before * before;
  }
  bool started_ = false, have_ = false;
  TimeNs start_ = 0, gen_ = 0, seg_ = 0;
  double d_ = 0, sum_dy_ = 0, sum_y2_ = 0;
};

// What the PS's apply function sees: the age split and the paper's AoM per
// cluster after warm-up, and when the PS made each model version.
struct ApplyLog {
  std::vector<AgeSplit> age;
  std::vector<double> stale_ns;
  std::vector<uint64_t> stale_n;
  std::vector<TimeNs> made_at = {0};  // by model version (0: the initial model)
  uint32_t version = 0;
  bool in_window = false;
  uint32_t max_merged = 0;

  void Resize(size_t clusters) {
    age.resize(clusters);
    stale_ns.assign(clusters, 0);
    stale_n.assign(clusters, 0);
  }
  void StartWindow(TimeNs t) {
    in_window = true;
    for (AgeSplit& a : age) a.Start(t);
  }
  void OnApply(const olaf::AppliedUpdate& u) {
    const size_t c = u.cluster_id;
    const auto at = static_cast<uint64_t>(std::max<TimeNs>(0, u.applied_ns));
    const auto gen = static_cast<TimeNs>(std::min(u.gen_time_ns, at));  // unknown: on arrival
    if (c < age.size()) age[c].OnApply(gen, u.applied_ns);
    if (in_window && c < age.size()) {
      const uint32_t used = std::min(u.model_version, version);
      if (used < made_at.size() && version < made_at.size()) {
        stale_ns[c] += static_cast<double>(made_at[version] - made_at[used]);
        ++stale_n[c];
      }
      max_merged = std::max(max_merged, u.merged_count);
    }
    version = u.new_model_version;
    if (version >= made_at.size()) made_at.resize(size_t{version} + 1, u.applied_ns);
  }
};

olaf::OlafSwitchConfig SwitchConfig(const OlafScenario& s, double gbps) {
  olaf::OlafSwitchConfig c;
  c.policy = s.policy;
  c.depth = s.queue_depth;
  c.delta_t_ns = static_cast<TimeNs>(s.delta_t_ms * 1e6);
  c.tau_ns = static_cast<TimeNs>(s.tau_ms * 1e6);
  c.egress_rate_bps = static_cast<uint64_t>(gbps * 1e9);
  c.ps_port = 0;
  return c;
}

double Uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

std::vector<std::vector<WorkerNodeConfig>> WorkerConfigs(const OlafScenario& s) {
  std::vector<std::vector<WorkerNodeConfig>> out;
  std::mt19937_64 phase_rng(s.seed);
  std::mt19937_64 clock_rng(s.seed ^ 0xC10C);  // its own stream: other draws are unchanged
  uint16_t cluster = 0;
  for (const ClusterGroup& g : s.clusters) {
    for (uint32_t k = 0; k < g.count; ++k, ++cluster) {
      const auto period = static_cast<TimeNs>(g.period_ms * 1e6);
      const TimeNs cluster_phase =
          s.aligned_clusters
              ? static_cast<TimeNs>(s.cluster_stagger_us * 1e3 * cluster)
              : static_cast<TimeNs>(Uniform(phase_rng) * static_cast<double>(period));
      out.emplace_back();
      for (uint32_t w = 0; w < g.workers; ++w) {
        WorkerNodeConfig wc;
        wc.cluster_id = cluster;
        wc.worker_id = uint32_t{cluster} * 10000 + w + 1;
        wc.elements = g.elements;
        wc.period_ns = period;
        wc.dist = g.exponential ? PeriodDist::kExponential : PeriodDist::kFixed;
        wc.jitter_ns = static_cast<TimeNs>(g.jitter_us * 1e3);
        wc.phase_ns = g.synchronized
                          ? cluster_phase
                          : static_cast<TimeNs>(Uniform(phase_rng) * static_cast<double>(period));
        wc.send_control.mode = s.send_control;
        wc.send_control.delta_t_ns = static_cast<TimeNs>(s.delta_t_ms * 1e6);
        wc.seed = s.seed * 1'000'003 + wc.worker_id;
        wc.closed_loop = s.closed_loop;
        wc.model_wait_ns =
            static_cast<TimeNs>((s.model_wait_ms > 0 ? s.model_wait_ms : s.delta_t_ms) * 1e6);
        wc.clock = s.worker_clock;
        wc.clock_offset_ns =
            static_cast<TimeNs>((2 * Uniform(clock_rng) - 1) * s.clock_offset_ms * 1e6);
        wc.clock_drift_ppm = (2 * Uniform(clock_rng) - 1) * s.clock_drift_ppm;
        out.back().push_back(wc);
      }
    }
  }
  return out;
}

namespace {

// Every cluster: an edge on its switch and its workers behind it.
absl::StatusOr<std::vector<std::vector<WorkerNode*>>> AddClusters(const OlafScenario& s,
                                                                  Network& net, SwitchNode* sw1,
                                                                  SwitchNode* sw2) {
  const TimeNs delay = static_cast<TimeNs>(s.link_delay_us * 1e3);
  const LinkConfig link{s.worker_link_gbps * 1e9, delay, 9000, 66, 4096};
  std::vector<std::vector<WorkerNode*>> workers;
  size_t cluster = 0;
  const std::vector<std::vector<WorkerNodeConfig>> configs = WorkerConfigs(s);
  for (const ClusterGroup& g : s.clusters) {
    for (uint32_t k = 0; k < g.count; ++k, ++cluster) {
      auto* edge = net.Add(std::make_unique<ClusterEdge>(absl::StrCat("edge", cluster)));
      net.Connect(edge, g.behind_sw2 ? sw2 : sw1, link);
      edge->set_workers(g.workers);
      workers.emplace_back();
      for (uint32_t w = 0; w < g.workers; ++w) {
        auto created = WorkerNode::Create(absl::StrCat("w", cluster, ".", w), configs[cluster][w]);
        if (!created.ok()) return created.status();
        auto* node = net.Add(*std::move(created));
        net.Connect(node, edge, link);
        workers.back().push_back(node);
      }
    }
  }
  return workers;
}

// The per-cluster figures at the end of a run.
ClusterResult CollectCluster(uint16_t id, const std::vector<WorkerNode*>& workers, const PsNode& ps,
                             ApplyLog& log, TimeNs end) {
  ClusterResult r;
  r.cluster_id = id;
  for (WorkerNode* w : workers) {
    r.generated += w->generated();
    r.sent += w->sent();
  }
  if (auto cs = ps.core().cluster(r.cluster_id, end)) {
    r.received = cs->updates_applied;
    r.carried = cs->worker_updates_applied;
    if (cs->aom) {
      r.mean_aom_ms = cs->aom->average_ns / 1e6;
      r.peak_aom_ms = static_cast<double>(cs->aom->peak_max_ns) / 1e6;
    }
  } else {
    // Never delivered: its age is the whole window (a lower bound).
    r.mean_aom_ms = static_cast<double>(end) / 1e6;
    r.peak_aom_ms = r.mean_aom_ms;
  }
  r.loss = r.sent
               ? 1.0 - std::min(1.0, static_cast<double>(r.carried) / static_cast<double>(r.sent))
               : 0.0;
  const double period_ms =
      workers.empty() ? 0 : static_cast<double>(workers[0]->config().period_ns) / 1e6;
  r.aom_parts = log.age[id].Finish(end, period_ms);
  if (r.received == 0) {  // never delivered: all of its (lower-bound) age is a gap
    r.aom_parts = AomParts{0, period_ms / 2, r.mean_aom_ms - period_ms / 2};
  }
  r.starved = r.peak_aom_ms > 10 * period_ms;
  r.paper_aom_ms =
      log.stale_n[id] ? log.stale_ns[id] / static_cast<double>(log.stale_n[id]) / 1e6 : 0;
  return r;
}

}  // namespace

absl::StatusOr<OlafResult> RunOlafScenario(const OlafScenario& s,
                                           const std::function<void(double)>& progress) {
  if (auto st = s.Validate(); !st.ok()) return st;
  const auto wall_start = std::chrono::steady_clock::now();
  Simulator sim;
  Network net(&sim);
  OlafResult out;
  out.name = s.name;
  out.offered_gbps = OfferedGbps(s);
  out.egress_gbps = s.load > 0 ? out.offered_gbps / s.load : s.egress_gbps;
  ApplyLog log;
  std::vector<float> model(2233, 0.0f);
  PsNodeConfig pc;
  pc.ps.apply = [&log](const olaf::AppliedUpdate& u) { log.OnApply(u); };
  if (s.models || s.closed_loop || s.worker_clock == olaf::WorkerClock::kPs) {
    uint32_t elements = 1;
    for (const ClusterGroup& g : s.clusters) elements = std::max(elements, g.elements);
    model.resize(elements);
    pc.ps.model_policy = olaf::ModelPolicy::kToUpdatedCluster;
    pc.ps.model_params = [&model] { return std::span<const float>(model); };
  }
  auto ps_node = PsNode::Create("ps", std::move(pc));
  if (!ps_node.ok()) return ps_node.status();
  auto* ps = net.Add(*std::move(ps_node));

  const TimeNs delay = static_cast<TimeNs>(s.link_delay_us * 1e3);
  const double r1 = out.egress_gbps, r2 = out.egress_gbps / s.tree_ratio;
  std::vector<SwitchNode*> switches;
  const auto sw_offset = static_cast<TimeNs>(s.switch_clock_offset_ms * 1e6);
  auto sw1_node = SwitchNode::Create("sw1", SwitchConfig(s, r1), sw_offset);
  if (!sw1_node.ok()) return sw1_node.status();
  auto* sw1 = net.Add(*std::move(sw1_node));
  switches.push_back(sw1);
  // The uplink serialises at the switch's paced rate: delivery = end of transmission.
  net.Connect(sw1, ps, LinkConfig{r1 * 1e9, delay, 9000, 66, 1u << 20});
  SwitchNode* sw2 = nullptr;
  if (s.topology == "tree") {
    auto sw2_node = SwitchNode::Create("sw2", SwitchConfig(s, r2), sw_offset);
    if (!sw2_node.ok()) return sw2_node.status();
    sw2 = net.Add(*std::move(sw2_node));
    switches.push_back(sw2);
    net.Connect(sw2, sw1, LinkConfig{r2 * 1e9, delay, 9000, 66, 1u << 20});
  }
  auto added = AddClusters(s, net, sw1, sw2);
  if (!added.ok()) return added.status();
  const std::vector<std::vector<WorkerNode*>> workers = *std::move(added);
  const size_t n_clusters = workers.size();
  log.Resize(n_clusters);
  // Sampling: AoM at the PS and queue occupancy, every sample_ms.
  const auto sample_every = static_cast<TimeNs>(s.sample_ms * 1e6);
  const auto end = static_cast<TimeNs>(s.duration_s * 1e9);
  const auto warm = static_cast<TimeNs>(s.warmup_s * 1e9);
  std::function<void()> sample = [&] {
    SamplePoint p;
    p.t_ms = static_cast<double>(sim.now()) / 1e6;
    for (size_t c = 0; c < n_clusters; ++c) {
      auto st = ps->core().aom().Stats(static_cast<uint16_t>(c), sim.now());
      p.aom_ms.push_back(st ? static_cast<double>(st->current_ns) / 1e6 : std::nan(""));
    }
    for (SwitchNode* sw : switches)
      p.queue.push_back(sw->program().queue_state(sim.now()).occupancy);
    out.series.push_back(std::move(p));
    if (sim.now() + sample_every <= end) sim.ScheduleIn(sample_every, sample);
  };
  sim.Schedule(0, sample);
  uint64_t bytes_at_warm = 0;
  auto bytes_sent = [&] {
    uint64_t b = 0;
    for (const auto& cl : workers)
      for (WorkerNode* w : cl) b += w->bytes_sent();
    return b;
  };
  sim.Schedule(warm, [&] {
    ps->mutable_core().ResetAomWindow(sim.now());
    log.StartWindow(sim.now());
    bytes_at_warm = bytes_sent();
  });
  net.Start();
  const TimeNs step = std::max<TimeNs>(end / 20, 1);
  sim.set_event_budget(s.max_events);
  for (TimeNs t = step; t < end + step; t += step) {
    sim.RunUntil(std::min(t, end));
    if (sim.budget_spent()) return absl::ResourceExhaustedError(EventBudgetMessage(s.max_events));
    if (progress) progress(static_cast<double>(std::min(t, end)) / static_cast<double>(end));
  }
  std::vector<double> aoms;
  for (size_t c = 0; c < n_clusters; ++c) {
    ClusterResult r = CollectCluster(static_cast<uint16_t>(c), workers[c], *ps, log, end);
    out.generated += r.generated;
    out.sent += r.sent;
    out.received += r.received;
    out.carried += r.carried;
    aoms.push_back(r.mean_aom_ms);
    const double k = 1.0 / static_cast<double>(n_clusters);
    out.aom_parts.queueing_ms += k * r.aom_parts.queueing_ms;
    out.aom_parts.period_ms += k * r.aom_parts.period_ms;
    out.aom_parts.gaps_ms += k * r.aom_parts.gaps_ms;
    out.paper_aom_ms += k * r.paper_aom_ms;
    out.starved += r.starved ? 1 : 0;
    for (WorkerNode* w : workers[c]) out.model_waits_timed_out += w->model_waits_timed_out();
    out.clusters.push_back(r);
  }
  double sum = 0;
  for (double a : aoms) sum += a;
  out.mean_aom_ms = aoms.empty() ? 0 : sum / static_cast<double>(aoms.size());
  out.loss = out.generated ? 1.0 - std::min(1.0, static_cast<double>(out.carried) /
                                                     static_cast<double>(out.generated))
                           : 0.0;
  out.jain_aom = JainIndex(aoms);
  out.max_merged = log.max_merged;
  out.rho = static_cast<double>(bytes_sent() - bytes_at_warm) * 8 /
            (out.egress_gbps * 1e9 * static_cast<double>(end - warm) / 1e9);
  out.ps_traffic = PsTraffic::Of(ps->core().counters());
  out.events = sim.events_run();
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return out;
}

PsTraffic PsTraffic::Of(const olaf::PsCounters& c) {
  PsTraffic t;
  t.update_datagrams = c.fragments_rx;
  t.update_bytes = c.update_bytes_rx;
  t.ack_datagrams = c.acks_sent;
  t.ack_bytes = c.ack_bytes;
  t.model_datagrams = c.model_datagrams_built;
  t.model_bytes = c.model_bytes_built;
  return t;
}

std::string PsTraffic::Json() const {
  return absl::StrCat("{\"update_datagrams\":", update_datagrams,
                      ",\"update_bytes\":", update_bytes, ",\"ack_datagrams\":", ack_datagrams,
                      ",\"ack_bytes\":", ack_bytes, ",\"model_datagrams\":", model_datagrams,
                      ",\"model_bytes\":", model_bytes, "}");
}

namespace {
std::string PartsJson(const AomParts& p) {
  return absl::StrCat("{\"queueing_ms\":", p.queueing_ms, ",\"period_ms\":", p.period_ms,
                      ",\"gaps_ms\":", p.gaps_ms, "}");
}
}  // namespace

std::string ResultJson(const OlafResult& r) {
  std::ostringstream o;
  o.precision(6);
  o << "{\"name\":\"" << r.name << "\",\"mean_aom_ms\":" << r.mean_aom_ms << ",\"loss\":" << r.loss
    << ",\"generated\":" << r.generated << ",\"sent\":" << r.sent << ",\"received\":" << r.received
    << ",\"carried\":" << r.carried << ",\"jain_aom\":" << r.jain_aom << ",\"events\":" << r.events
    << ",\"egress_gbps\":" << r.egress_gbps << ",\"offered_gbps\":" << r.offered_gbps
    << ",\"rho\":" << r.rho << ",\"aom_parts\":" << PartsJson(r.aom_parts)
    << ",\"paper_aom_ms\":" << r.paper_aom_ms << ",\"max_merged\":" << r.max_merged
    << ",\"model_waits_timed_out\":" << r.model_waits_timed_out << ",\"starved\":" << r.starved
    << ",\"ps_traffic\":" << r.ps_traffic.Json() << ",\"clusters\":[";
  for (size_t i = 0; i < r.clusters.size(); ++i) {
    const ClusterResult& c = r.clusters[i];
    o << (i ? "," : "") << "{\"cluster\":" << c.cluster_id << ",\"mean_aom_ms\":" << c.mean_aom_ms
      << ",\"peak_aom_ms\":" << c.peak_aom_ms << ",\"generated\":" << c.generated
      << ",\"sent\":" << c.sent << ",\"received\":" << c.received << ",\"carried\":" << c.carried
      << ",\"loss\":" << c.loss << ",\"aom_parts\":" << PartsJson(c.aom_parts)
      << ",\"paper_aom_ms\":" << c.paper_aom_ms << ",\"starved\":" << c.starved << "}";
  }
  o << "]}";
  return o.str();
}

std::string SeriesCsv(const OlafResult& r) {
  std::ostringstream o;
  o << "t_ms";
  const size_t nc = r.clusters.size();
  for (size_t c = 0; c < nc; ++c) o << ",aom_ms_c" << c;
  const size_t ns = r.series.empty() ? 0 : r.series[0].queue.size();
  for (size_t q = 0; q < ns; ++q) o << ",queue_sw" << q + 1;
  o << "\n";
  for (const SamplePoint& p : r.series) {
    o << p.t_ms;
    for (double a : p.aom_ms) {
      o << ",";
      if (!std::isnan(a)) o << a;
    }
    for (uint64_t q : p.queue) o << "," << q;
    o << "\n";
  }
  return o.str();
}

}  // namespace inca::sim
