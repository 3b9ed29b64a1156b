#include "inca/sim/drl_training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "inca/olaf/olaf_switch.h"
#include "inca/olaf/ps.h"
#include "inca/olaf/worker.h"
#include "inca/sim/olaf_nodes.h"
#include "inca/sim/olaf_scenario.h"
#include "inca/sim/simulator.h"

namespace inca::sim {

std::vector<DrlClusterSpec> DrlTrainingConfig::DefaultClusters() {
  return {{.count = 3, .workers = 4, .slowdown = 1}, {.count = 6, .workers = 4, .slowdown = 3}};
}

namespace {
bool In(double x, double lo, double hi) {
  return std::isfinite(x) && x >= lo && x <= hi;
}
}  // namespace

absl::Status DrlTrainingConfig::Validate() const {
  if (absl::Status st = worker.Validate(); !st.ok()) return st;
  if (name.empty() || name.size() > 100 ||
      name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
          std::string::npos) {
    return absl::InvalidArgumentError("name: 1..100 characters of [A-Za-z0-9._-] (a file name)");
  }
  if (!In(duration_s, 1e-3, 1e6)) return absl::InvalidArgumentError("duration_s: 0.001..1e6");
  if (queue_depth < 1 || queue_depth > 1u << 16) {
    return absl::InvalidArgumentError("queue_depth must be 1..65536");
  }
  if (!In(delta_t_ms, 1e-3, 1e6) || !In(tau_ms, 1e-3, 1e6)) {
    return absl::InvalidArgumentError("delta_t_ms and tau_ms: 0.001..1e6");
  }
  if (!In(egress_mbps, 1e-3, 1e7)) return absl::InvalidArgumentError("egress_mbps: 0.001..1e7");
  if (!In(link_gbps, 1e-3, 1e4)) return absl::InvalidArgumentError("link_gbps: 0.001..1e4");
  if (!In(link_delay_us, 0, 1e6)) return absl::InvalidArgumentError("link_delay_us: 0..1e6");
  if (!In(gradient_ms, 1e-6, 1e6) || !In(env_step_us, 0, 1e6)) {
    return absl::InvalidArgumentError("gradient_ms: 1e-6..1e6, env_step_us: 0..1e6");
  }
  if (!In(sample_s, 1e-3, duration_s) || duration_s / sample_s > 1e6) {
    return absl::InvalidArgumentError("sample_s: 0.001..duration_s, at most 1e6 samples");
  }
  if (!In(lr_anneal_s, 0, 1e9)) return absl::InvalidArgumentError("lr_anneal_s: 0..1e9");
  if (!std::isfinite(threshold)) return absl::InvalidArgumentError("threshold must be finite");
  if (eval_episodes > 10000) return absl::InvalidArgumentError("eval_episodes must be <= 10000");
  if (clusters.empty()) return absl::InvalidArgumentError("clusters: at least one");
  uint64_t n_clusters = 0, n_workers = 0;
  for (const DrlClusterSpec& c : clusters) {
    if (c.count < 1 || c.count > 1000 || c.workers < 1 || c.workers > 1000 ||
        !In(c.slowdown, 1e-3, 1e3)) {
      return absl::InvalidArgumentError(
          "clusters: count 1..1000, workers 1..1000 and slowdown 0.001..1000 each");
    }
    n_clusters += c.count;
    n_workers += uint64_t{c.count} * c.workers;
  }
  if (n_clusters > 1000) return absl::InvalidArgumentError("clusters: at most 1000 in all");
  if (n_workers > 4096) return absl::InvalidArgumentError("clusters: at most 4096 workers in all");
  // Each worker holds a model (+ Adam state); keep the whole run under ~2 GiB.
  const auto h = static_cast<uint64_t>(worker.model.hidden);
  const uint64_t params = 2 * (h * h + 10 * h) + 5;
  if (n_workers * params * 12 > (uint64_t{2} << 30)) {
    return absl::InvalidArgumentError(
        "workers x model size: over 2 GiB of models; fewer or smaller");
  }
  return absl::OkStatus();
}

namespace {

template <typename T>
absl::Status ParseNumber(std::string_view key, std::string_view value, T* out) {
  const absl::string_view v(value.data(), value.size());
  bool ok = false;
  if constexpr (std::is_same_v<T, double>) {
    ok = absl::SimpleAtod(v, out);
  } else if constexpr (std::is_same_v<T, bool>) {
    ok = absl::SimpleAtob(v, out);
  } else {
    ok = absl::SimpleAtoi(v, out);
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(key.data(), key.size()), ": '",
                                                   v, "' is not a valid value"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SetDrlKey(std::string_view key, std::string_view value, DrlTrainingConfig* c) {
  const absl::string_view v(value.data(), value.size());
  if (key == "name") {
    c->name = std::string(value);
    return absl::OkStatus();
  }
  if (key == "policy") {
    if (v == "olaf") {
      c->policy = olaf::QueuePolicy::kOlaf;
    } else if (v == "fifo") {
      c->policy = olaf::QueuePolicy::kFifo;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("policy: '", v, "' is not olaf or fifo"));
    }
    return absl::OkStatus();
  }
  if (key == "send_control") {
    const auto m = olaf::ParseSendControlMode(value);
    if (!m.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("send_control: '", v, "' is not off, priority or fairness"));
    }
    c->send_control = *m;
    return absl::OkStatus();
  }
  if (key == "clusters") {
    // count x workers x slowdown, comma-separated groups.
    std::vector<DrlClusterSpec> groups;
    for (absl::string_view g : absl::StrSplit(v, ',', absl::SkipEmpty())) {
      std::vector<absl::string_view> f = absl::StrSplit(g, 'x');
      DrlClusterSpec spec;
      if (f.size() != 3 || !absl::SimpleAtoi(f[0], &spec.count) ||
          !absl::SimpleAtoi(f[1], &spec.workers) || !absl::SimpleAtod(f[2], &spec.slowdown)) {
        return absl::InvalidArgumentError(
            absl::StrCat("clusters: '", g, "' is not COUNTxWORKERSxSLOWDOWN (e.g. 3x4x1,6x4x3)"));
      }
      groups.push_back(spec);
    }
    c->clusters = std::move(groups);
    return absl::OkStatus();
  }
  if (key == "seed") return ParseNumber(key, value, &c->seed);
  if (key == "duration_s") return ParseNumber(key, value, &c->duration_s);
  if (key == "queue_depth") return ParseNumber(key, value, &c->queue_depth);
  if (key == "delta_t_ms") return ParseNumber(key, value, &c->delta_t_ms);
  if (key == "tau_ms") return ParseNumber(key, value, &c->tau_ms);
  if (key == "egress_mbps") return ParseNumber(key, value, &c->egress_mbps);
  if (key == "link_gbps") return ParseNumber(key, value, &c->link_gbps);
  if (key == "link_delay_us") return ParseNumber(key, value, &c->link_delay_us);
  if (key == "gradient_ms") return ParseNumber(key, value, &c->gradient_ms);
  if (key == "env_step_us") return ParseNumber(key, value, &c->env_step_us);
  if (key == "threshold") return ParseNumber(key, value, &c->threshold);
  if (key == "stop_at_threshold") return ParseNumber(key, value, &c->stop_at_threshold);
  if (key == "sample_s") return ParseNumber(key, value, &c->sample_s);
  if (key == "eval_episodes") return ParseNumber(key, value, &c->eval_episodes);
  if (key == "hidden") return ParseNumber(key, value, &c->worker.model.hidden);
  if (key == "lr_anneal_s") return ParseNumber(key, value, &c->lr_anneal_s);
  if (key == "lr") return ParseNumber(key, value, &c->worker.model.learning_rate);
  if (key == "envs") return ParseNumber(key, value, &c->worker.num_envs);
  if (key == "rollout") return ParseNumber(key, value, &c->worker.rollout_steps);
  if (key == "epochs") return ParseNumber(key, value, &c->worker.epochs);
  if (key == "minibatch") return ParseNumber(key, value, &c->worker.minibatch_size);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown key '", absl::string_view(key.data(), key.size()), "'"));
}

namespace {

double Uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

struct Shared {
  rl::ReturnWindow episodes;  // every worker's, in completion order
  uint64_t env_steps = 0;
  uint64_t sent = 0;
  std::function<void()> on_episode;  // threshold check
};

// A DRL worker: computes with the newest model it received, then, after the
// modelled compute time, sends the gradient through its WorkerCore.
class DrlWorkerNode final : public Node {
 public:
  // `core`: the OLAF worker core (WorkerCore::Create's, checked by the caller).
  DrlWorkerNode(std::string name, std::unique_ptr<rl::AsyncWorker> agent,
                std::unique_ptr<olaf::WorkerCore> core, uint64_t seed, double slowdown,
                const DrlTrainingConfig& config, TimeNs phase, Shared* shared)
      : Node(std::move(name)),
        agent_(std::move(agent)),
        core_(std::move(core)),
        slowdown_(slowdown),
        gradient_ns_(config.gradient_ms * 1e6),
        env_step_ns_(config.env_step_us * 1e3),
        phase_(phase),
        rng_(seed ^ 0x9e3779b97f4a7c15ULL),
        shared_(shared) {}
  void Start() override {
    sim().Schedule(phase_, [this] { Compute(); });
  }
  void Receive(dp::PortId, Packet packet) override { core_->OnDatagram(packet, sim().now()); }
  const olaf::WorkerCore& core() const { return *core_; }

 private:
  void Compute() {
    if (const olaf::AssembledModel* m = core_->latest_model();
        m != nullptr && (!have_model_ || m->model_version > version_)) {
      if (agent_->SetModel(m->values).ok()) {
        version_ = m->model_version;
        have_model_ = true;
      }
    }
    const bool rollout = agent_->rollout_pending();
    auto g = agent_->Next();
    if (!g.ok()) return;  // cannot happen with validated options; the worker stops
    double cost = gradient_ns_;
    if (rollout) cost += env_step_ns_ * static_cast<double>(g->env_steps);
    pending_ = std::move(*g);
    pending_version_ = version_;
    sim().ScheduleIn(std::max<TimeNs>(1, static_cast<TimeNs>(cost * slowdown_)),
                     [this] { Done(); });
  }
  void Done() {
    shared_->env_steps += pending_.env_steps;
    for (double r : pending_.episode_returns) {
      shared_->episodes.Add(r);
      if (shared_->on_episode) shared_->on_episode();
    }
    auto s =
        core_->GenerateWithDraw(pending_.gradient, pending_version_, sim().now(), Uniform01(rng_));
    if (s.ok() && s->sent) {
      ++shared_->sent;
      for (auto& d : s->datagrams) Send(0, std::move(d));
    }
    Compute();
  }

  std::unique_ptr<rl::AsyncWorker> agent_;
  std::unique_ptr<olaf::WorkerCore> core_;
  double slowdown_, gradient_ns_, env_step_ns_;
  TimeNs phase_;
  std::mt19937_64 rng_;
  Shared* shared_;
  rl::WorkerGradient pending_;
  uint32_t pending_version_ = 0, version_ = 0;
  bool have_model_ = false;
};

// One simulated training run: the simulator, its network (which owns the
// nodes) and what the nodes share.
struct DrlRun {
  DrlRun(const DrlTrainingConfig& c, rl::FragmentLearner& l)
      : config(c),
        learner(l),
        n_params(l.model().num_parameters()),
        link{c.link_gbps * 1e9, static_cast<TimeNs>(c.link_delay_us * 1e3), 9000, 66, 4096} {}

  const DrlTrainingConfig& config;
  rl::FragmentLearner& learner;
  const size_t n_params;
  const LinkConfig link;  // every link of the network
  Simulator sim;
  Network net{&sim};
  Shared shared;
  PsNode* ps = nullptr;
  SwitchNode* sw = nullptr;
  std::vector<std::vector<DrlWorkerNode*>> by_cluster;
};

// Adds the PS, which applies fragments to the learner as they arrive.
absl::Status AddPs(DrlRun* r) {
  rl::FragmentLearner& learner = r->learner;
  const Simulator& sim = r->sim;
  PsNodeConfig pc;
  pc.ps.granularity = olaf::ApplyGranularity::kFragment;
  pc.ps.model_policy = olaf::ModelPolicy::kToUpdatedClusterOnLastFragment;
  pc.ps.model_params = [&learner]() { return learner.parameters(); };
  pc.ps.apply = [&](const olaf::AppliedUpdate& a) {
    learner.Apply(a.element_offset, a.values, a.model_version, a.new_model_version, a.merged_count,
                  static_cast<double>(sim.now()) / 1e9);
  };
  pc.ps.expected_elements = r->n_params;
  auto ps = PsNode::Create("ps", std::move(pc));
  if (!ps.ok()) return ps.status();
  r->ps = r->net.Add(*std::move(ps));
  return absl::OkStatus();
}

// The switch's configuration from the run's.
olaf::OlafSwitchConfig SwitchConfig(const DrlTrainingConfig& config) {
  olaf::OlafSwitchConfig sc;
  sc.policy = config.policy;
  sc.depth = config.queue_depth;
  sc.delta_t_ns = static_cast<TimeNs>(config.delta_t_ms * 1e6);
  sc.tau_ns = static_cast<TimeNs>(config.tau_ms * 1e6);
  sc.egress_rate_bps = static_cast<uint64_t>(config.egress_mbps * 1e6);
  sc.ps_port = 0;
  return sc;
}

// Adds the switch and links it to the PS.
absl::Status AddSwitch(DrlRun* r) {
  auto sw = SwitchNode::Create("sw", SwitchConfig(r->config));
  if (!sw.ok()) return sw.status();
  r->sw = r->net.Add(*std::move(sw));
  r->net.Connect(r->sw, r->ps, r->link);
  return absl::OkStatus();
}

// Adds every cluster (an edge linked to the switch) and its workers, each
// starting from the learner's model.
absl::Status AddWorkers(DrlRun* r, const rl::ActorCriticOptions& model_options) {
  const DrlTrainingConfig& config = r->config;
  const auto delta_t_ns = static_cast<TimeNs>(config.delta_t_ms * 1e6);  // as the switch's
  std::mt19937_64 phase_rng(config.seed * 7919 + 17);
  uint16_t cluster = 0;
  for (const DrlClusterSpec& g : config.clusters) {
    for (uint32_t k = 0; k < g.count; ++k, ++cluster) {
      auto* edge = r->net.Add(std::make_unique<ClusterEdge>(absl::StrCat("edge", cluster)));
      r->net.Connect(edge, r->sw, r->link);
      edge->set_workers(g.workers);
      r->by_cluster.emplace_back();
      for (uint32_t w = 0; w < g.workers; ++w) {
        rl::AsyncWorkerOptions ao = config.worker;
        const uint32_t worker_id = uint32_t{cluster} * 10000 + w + 1;
        ao.seed = config.seed * 1'000'003 + worker_id;
        ao.model = model_options;
        auto agent = rl::AsyncWorker::Create(ao);
        if (!agent.ok()) return agent.status();
        if (auto st = (*agent)->SetModel(r->learner.parameters()); !st.ok()) return st;
        olaf::WorkerOptions wo;
        wo.cluster_id = cluster;
        wo.worker_id = worker_id;
        wo.send_control.mode = config.send_control;
        wo.send_control.delta_t_ns = delta_t_ns;
        wo.seed = ao.seed;
        wo.model_elements = r->n_params;
        // Workers start spread over one gradient time: no global step boundary.
        const auto phase =
            static_cast<TimeNs>(Uniform01(phase_rng) * config.gradient_ms * 1e6 * g.slowdown);
        auto core = olaf::WorkerCore::Create(wo);
        if (!core.ok()) return core.status();
        DrlWorkerNode* node = r->net.Add(std::make_unique<DrlWorkerNode>(
            absl::StrCat("w", cluster, ".", w), std::move(agent).value(), *std::move(core), wo.seed,
            g.slowdown, config, phase, &r->shared));
        r->net.Connect(node, edge, r->link);
        r->by_cluster.back().push_back(node);
      }
    }
  }
  return absl::OkStatus();
}

// One sample of the run's progress, now.
DrlSample TakeSample(DrlRun* r) {
  const Simulator& sim = r->sim;
  DrlSample p;
  p.t_s = static_cast<double>(sim.now()) / 1e9;
  p.ps_updates = r->learner.updates();
  p.worker_updates_sent = r->shared.sent;
  p.episodes = r->shared.episodes.episodes();
  p.env_steps = r->shared.env_steps;
  p.mean_return = r->shared.episodes.mean();
  double aom = 0;
  size_t seen = 0;
  for (size_t c = 0; c < r->by_cluster.size(); ++c) {
    if (auto st = r->ps->core().aom().Stats(static_cast<uint16_t>(c), sim.now())) {
      aom += static_cast<double>(st->current_ns) / 1e6;
      ++seen;
    }
  }
  p.mean_aom_ms = seen ? aom / static_cast<double>(seen) : 0;
  p.staleness = r->learner.TakeWindowStaleness();
  p.queue = r->sw->program().queue_state(sim.now()).occupancy;
  return p;
}

// Runs the simulation to duration_s (or, with stop_at_threshold, until the
// threshold is reached), sampling every sample_s; fills the threshold
// fields, the series and sim_s of `out`.
void Simulate(DrlRun* r, const std::function<void(const DrlSample&)>& on_sample,
              DrlTrainingResult* out) {
  const DrlTrainingConfig& config = r->config;
  Simulator& sim = r->sim;
  Shared& shared = r->shared;
  const auto end = static_cast<TimeNs>(config.duration_s * 1e9);
  bool stop = false;
  shared.on_episode = [&] {
    if (out->reached || shared.episodes.size() < 100 || shared.episodes.mean() < config.threshold) {
      return;
    }
    out->reached = true;
    out->time_to_threshold_s = static_cast<double>(sim.now()) / 1e9;
    out->updates_to_threshold = r->learner.updates();
    out->env_steps_to_threshold = shared.env_steps;
    if (config.stop_at_threshold) stop = true;
  };

  const auto sample_every = static_cast<TimeNs>(config.sample_s * 1e9);
  std::function<void()> sample = [&] {
    DrlSample p = TakeSample(r);
    if (on_sample) on_sample(p);
    out->series.push_back(p);
    if (sim.now() + sample_every <= end) sim.ScheduleIn(sample_every, sample);
  };
  sim.Schedule(0, sample);
  r->net.Start();
  // Run in slices so that stop_at_threshold can end the run early.
  const TimeNs slice = std::max<TimeNs>(sample_every, 1);
  TimeNs t = 0;
  while (t < end && !stop) {
    t = std::min(end, t + slice);
    sim.RunUntil(t);
  }
  out->sim_s = static_cast<double>(sim.now()) / 1e9;
  shared.on_episode = nullptr;  // it refers to this function's locals; no event runs after
}

// Fills the run's totals into `out`: counters, AoM and its fairness, loss.
void Totals(const DrlRun& r, DrlTrainingResult* out) {
  const rl::FragmentLearner& learner = r.learner;
  std::vector<double> aoms;
  for (size_t c = 0; c < r.by_cluster.size(); ++c) {
    for (DrlWorkerNode* w : r.by_cluster[c]) {
      out->generated += w->core().counters().generated;
      out->sent += w->core().counters().sent;
    }
    if (auto cs = r.ps->core().cluster(static_cast<uint16_t>(c), r.sim.now()); cs && cs->aom) {
      aoms.push_back(cs->aom->average_ns / 1e6);
    } else {
      aoms.push_back(out->sim_s * 1e3);  // never delivered: its age is the whole run
    }
  }
  double sum = 0;
  for (double a : aoms) sum += a;
  out->mean_aom_ms = aoms.empty() ? 0 : sum / static_cast<double>(aoms.size());
  out->jain_aom = JainIndex(aoms);
  out->fragments_applied = learner.fragments_applied();
  out->ps_updates = learner.updates();
  out->mean_staleness = learner.mean_staleness();
  const double offered_fragments = static_cast<double>(out->sent) * out->fragments_per_update;
  out->loss = offered_fragments > 0
                  ? 1.0 - std::min(1.0, static_cast<double>(learner.worker_fragments_carried()) /
                                            offered_fragments)
                  : 0.0;
  out->episodes = r.shared.episodes.episodes();
  out->env_steps = r.shared.env_steps;
  out->final_return = r.shared.episodes.mean();
  out->ps_traffic = PsTraffic::Of(r.ps->core().counters());
  out->events = r.sim.events_run();
}

}  // namespace

absl::StatusOr<DrlTrainingResult> RunDrlTraining(
    const DrlTrainingConfig& config, const std::function<void(const DrlSample&)>& on_sample) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  const auto wall_start = std::chrono::steady_clock::now();
  rl::ActorCriticOptions model_options = config.worker.model;
  model_options.seed = config.seed;
  auto model = rl::ActorCritic::Create(model_options);
  if (!model.ok()) return model.status();
  rl::FragmentLearner learner(std::move(model).value(), config.lr_anneal_s,
                              olaf::kDefaultUpdatePayloadBytes / 4);

  DrlRun r(config, learner);
  if (absl::Status st = AddPs(&r); !st.ok()) return st;
  if (absl::Status st = AddSwitch(&r); !st.ok()) return st;
  if (absl::Status st = AddWorkers(&r, model_options); !st.ok()) return st;

  DrlTrainingResult out;
  out.name = config.name;
  out.num_parameters = r.n_params;
  out.fragments_per_update = learner.fragments_per_update();
  Simulate(&r, on_sample, &out);
  Totals(r, &out);

  // The PS's final model on fresh episodes (sampled actions, as in training).
  out.eval_return = rl::EvaluatePolicy(learner.model(), config.eval_episodes, config.seed);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return out;
}

std::string DrlResultJson(const DrlTrainingResult& r) {
  std::ostringstream o;
  o.precision(8);
  o << "{\"name\":\"" << r.name << "\",\"reached\":" << (r.reached ? "true" : "false")
    << ",\"time_to_threshold_s\":" << r.time_to_threshold_s
    << ",\"updates_to_threshold\":" << r.updates_to_threshold
    << ",\"env_steps_to_threshold\":" << r.env_steps_to_threshold
    << ",\"final_return\":" << r.final_return << ",\"eval_return\":" << r.eval_return
    << ",\"mean_aom_ms\":" << r.mean_aom_ms << ",\"jain_aom\":" << r.jain_aom
    << ",\"mean_staleness\":" << r.mean_staleness << ",\"loss\":" << r.loss
    << ",\"generated\":" << r.generated << ",\"sent\":" << r.sent
    << ",\"ps_traffic\":" << r.ps_traffic.Json() << ",\"ps_updates\":" << r.ps_updates
    << ",\"fragments_applied\":" << r.fragments_applied << ",\"episodes\":" << r.episodes
    << ",\"env_steps\":" << r.env_steps << ",\"num_parameters\":" << r.num_parameters
    << ",\"fragments_per_update\":" << r.fragments_per_update << ",\"events\":" << r.events
    << ",\"sim_s\":" << r.sim_s << ",\"wall_s\":" << r.wall_s << "}";
  return o.str();
}

std::string DrlSeriesCsv(const DrlTrainingResult& r) {
  std::ostringstream o;
  o.precision(8);
  o << "t_s,ps_updates,worker_updates_sent,episodes,env_steps,mean_return,mean_aom_ms,staleness,"
       "queue\n";
  for (const DrlSample& p : r.series) {
    o << p.t_s << "," << p.ps_updates << "," << p.worker_updates_sent << "," << p.episodes << ","
      << p.env_steps << "," << p.mean_return << "," << p.mean_aom_ms << "," << p.staleness << ","
      << p.queue << "\n";
  }
  return o.str();
}

}  // namespace inca::sim
