#include "inca/rl/distributed.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "distributed_internal.h"
#include "inca/olaf/ps_endpoint.h"
#include "inca/olaf/send_control.h"
#include "inca/olaf/worker_endpoint.h"

namespace inca::rl {

namespace fs = std::filesystem;

namespace drl {

int Fail(std::string_view role, absl::string_view what, int code) {
  std::cerr << "olaf-train " << role << ": " << what << "\n";
  return code;
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

bool In(double x, double lo, double hi) {
  return std::isfinite(x) && x >= lo && x <= hi;
}

bool ValidCommon(const DistributedOptions& o, std::string_view role) {
  if (!In(o.duration_s, 1e-3, 86400)) {
    Fail(role, "--duration must be in (0, 86400] seconds");
    return false;
  }
  if (!In(o.delta_t_ms, 1e-3, 1e6)) {
    Fail(role, "--delta-t-ms must be in (0, 1e6]");
    return false;
  }
  if (!In(o.lr_anneal_s, -1, 1e9)) {
    Fail(role, "--lr-anneal-s must be in [-1, 1e9] (0 = constant, < 0 = over --duration)");
    return false;
  }
  if (o.worker.model.hidden > 1024) {
    // 2.1 M parameters: an 8.4 MB model per process and per MODEL broadcast.
    Fail(role, "--hidden must be <= 1024");
    return false;
  }
  if (o.eval_episodes > 10000) {
    Fail(role, "--eval-episodes must be <= 10000");
    return false;
  }
  if (auto st = o.worker.Validate(); !st.ok()) {
    Fail(role, st.message());
    return false;
  }
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) {
    Fail(role, absl::StrCat("cannot create ", o.out_dir, ": ", ec.message()));
    return false;
  }
  return true;
}

std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop = true;
}
void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int StatusExit(const absl::Status& st) {
  return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace drl

namespace {

using drl::Clock;
using drl::Fail;
using drl::g_stop;
using drl::In;
using drl::InstallStopHandlers;
using drl::Seconds;
using drl::StatusExit;
using drl::ValidCommon;

ActorCriticOptions ModelOptions(const DistributedOptions& o) {
  ActorCriticOptions m = o.worker.model;
  m.seed = o.seed;  // every process starts from the same weights
  return m;
}

// A PS or worker started by the launcher stops (SIGTERM: results written)
// when the launcher dies, however it dies.
void StopWithParent() {
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() == 1) g_stop = true;  // the parent is already gone
}

}  // namespace

int RunPsProcess(const DistributedOptions& o) {
  if (!ValidCommon(o, "ps")) return 2;
  if (o.clusters > 0xffff) return Fail("ps", "--clusters must be <= 65535", 2);
  InstallStopHandlers();
  StopWithParent();
  auto model = ActorCritic::Create(ModelOptions(o));
  if (!model.ok()) return Fail("ps", model.status().message(), 2);
  FragmentLearner learner(std::move(model).value(),
                          o.lr_anneal_s < 0 ? o.duration_s : o.lr_anneal_s,
                          olaf::kDefaultUpdatePayloadBytes / 4);

  olaf::OlafPsEndpointOptions po;
  po.bind = o.ps_bind;
  po.ps.granularity = olaf::ApplyGranularity::kFragment;
  po.ps.model_policy = olaf::ModelPolicy::kToUpdatedClusterOnLastFragment;
  po.ps.model_params = [&learner]() { return learner.parameters(); };
  // Fragments of another model size or with non-finite values: rejected
  // and counted by PsCore, never applied.
  po.ps.expected_elements = learner.model().num_parameters();
  const auto start = Clock::now();
  po.ps.apply = [&](const olaf::AppliedUpdate& a) {
    learner.Apply(a.element_offset, a.values, a.model_version, a.new_model_version, a.merged_count,
                  Seconds(Clock::now() - start));
  };
  auto ps = olaf::OlafPsEndpoint::Create(po);
  if (!ps.ok()) return Fail("ps", ps.status().message(), StatusExit(ps.status()));
  std::printf("ps listening %s\n", (*ps)->local_address().c_str());
  std::fflush(stdout);

  std::ofstream csv(fs::path(o.out_dir) / "ps.csv");
  csv << "t_s,ps_updates,worker_updates,staleness,mean_aom_ms\n";
  // Under the launcher the PS serves until SIGTERM (sent when the workers
  // are done); --duration (plus 2 s for late packets) is the hard cap.
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(o.duration_s + 2));
  auto next_sample = start;
  while (Clock::now() < end && !g_stop) {
    (*ps)->Poll(std::chrono::milliseconds(5));
    if (Clock::now() >= next_sample) {
      const dp::TimeNs now = olaf::OlafPsEndpoint::Now();
      double aom = 0;
      int seen = 0;
      for (uint16_t c : (*ps)->core().cluster_ids()) {
        if (auto a = (*ps)->core().aom().Aom(c, now)) {
          aom += static_cast<double>(*a) / 1e6;
          ++seen;
        }
      }
      csv << Seconds(Clock::now() - start) << "," << learner.updates() << ","
          << learner.carried_updates() << "," << learner.TakeWindowStaleness() << ","
          << (seen ? aom / seen : 0.0) << "\n";
      csv.flush();
      next_sample +=
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.sample_s));
    }
  }
  const dp::TimeNs now = olaf::OlafPsEndpoint::Now();
  std::ostringstream clusters;
  double aom_sum = 0;
  int aom_n = 0;
  std::set<uint16_t> ids;
  for (uint16_t c : (*ps)->core().cluster_ids()) ids.insert(c);
  // The expected clusters (0..clusters-1) too: one that never delivered
  // counts at the whole run's age, as in the simulator.
  for (uint32_t c = 0; c < o.clusters; ++c) ids.insert(static_cast<uint16_t>(c));
  for (uint16_t c : ids) {
    auto cs = (*ps)->core().cluster(c, now);
    const bool delivered = cs && cs->aom;
    const double avg = delivered ? cs->aom->average_ns / 1e6 : Seconds(Clock::now() - start) * 1e3;
    aom_sum += avg;
    ++aom_n;
    clusters << (clusters.tellp() > 0 ? "," : "") << "{\"cluster\":" << c
             << ",\"fragments\":" << (cs ? cs->fragments_rx : 0)
             << ",\"delivered\":" << (delivered ? "true" : "false") << ",\"mean_aom_ms\":" << avg
             << "}";
  }
  const double eval = EvaluatePolicy(learner.model(), o.eval_episodes, o.seed);
  std::ofstream(fs::path(o.out_dir) / "ps.json")
      << "{\"ps_updates\":" << learner.updates()
      << ",\"fragments_applied\":" << learner.fragments_applied()
      << ",\"fragments_rejected\":" << learner.rejected() + (*ps)->stats().fragments_inconsistent
      << ",\"worker_fragments_carried\":" << learner.worker_fragments_carried()
      << ",\"fragments_per_update\":" << learner.fragments_per_update()
      << ",\"mean_staleness\":" << learner.mean_staleness()
      << ",\"mean_aom_ms\":" << (aom_n ? aom_sum / aom_n : 0.0)
      << ",\"malformed\":" << (*ps)->stats().malformed << ",\"eval_return\":" << eval
      << ",\"eval_episodes\":" << o.eval_episodes << ",\"clusters\":[" << clusters.str() << "]}\n";
  return 0;
}

int RunWorkerProcess(const DistributedOptions& o) {
  if (!ValidCommon(o, "worker")) return 2;
  if (o.peer.empty()) return Fail("worker", "--peer (the switch HOST:PORT) is required", 2);
  if (!In(o.cycle_ms, 1e-3, 1e6) || !In(o.slowdown, 1e-3, 1e3)) {
    return Fail("worker", "--cycle-ms must be in (0, 1e6] and --slowdown in (0, 1000]", 2);
  }
  if (o.cluster > 0xfffe) return Fail("worker", "--cluster must be 0..65534", 2);
  if (o.clock != "ps" && o.clock != "local")
    return Fail("worker", "--clock must be ps or local", 2);
  const auto mode = olaf::ParseSendControlMode(o.send_control);
  if (!mode) return Fail("worker", "--send-control must be off, priority or fairness", 2);
  InstallStopHandlers();
  StopWithParent();
  AsyncWorkerOptions ao = o.worker;
  ao.model = ModelOptions(o);
  ao.seed = o.seed * 1'000'003 + o.cluster * 10000 + o.index + 1;
  auto agent = AsyncWorker::Create(ao);
  if (!agent.ok()) return Fail("worker", agent.status().message(), 2);
  olaf::OlafWorkerEndpointOptions wo;
  wo.bind = o.bind;
  wo.peer = o.peer;
  wo.worker.cluster_id = static_cast<uint16_t>(o.cluster);
  wo.worker.send_control.mode = *mode;
  wo.worker.send_control.delta_t_ns = static_cast<dp::TimeNs>(o.delta_t_ms * 1e6);
  wo.worker.seed = ao.seed;
  wo.worker.model_elements = (*agent)->num_parameters();  // other models: rejected, counted
  wo.worker.clock = o.clock == "ps" ? olaf::WorkerClock::kPs : olaf::WorkerClock::kLocal;
  auto ep = olaf::OlafWorkerEndpoint::Create(wo);
  if (!ep.ok()) return Fail("worker", ep.status().message(), StatusExit(ep.status()));

  const std::string stem = absl::StrCat("worker-", o.cluster, "-", o.index);
  std::ofstream csv(fs::path(o.out_dir) / (stem + ".csv"));
  csv << "t_ns,return\n";
  const auto cycle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(o.cycle_ms * o.slowdown));
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(o.duration_s));
  uint32_t version = 0;
  uint64_t adopted = 0, send_errors = 0;
  while (Clock::now() < end && !g_stop) {
    const auto cycle_start = Clock::now();
    if (const olaf::AssembledModel* m = (*ep)->latest_model();
        m != nullptr && (adopted == 0 || m->model_version > version)) {
      if ((*agent)->SetModel(m->values).ok()) {
        version = m->model_version;
        ++adopted;
      }
    }
    auto g = (*agent)->Next();
    if (!g.ok()) return Fail("worker", g.status().message());
    for (double r : g->episode_returns) csv << olaf::OlafWorkerEndpoint::Now() << "," << r << "\n";
    // The rest of the cycle: what a machine this slow would still be
    // computing. Models and ACKs are taken meanwhile.
    // Never past the end of the run, and a signal ends the wait.
    const auto cycle_end = std::min(cycle_start + cycle, end);
    while (!g_stop) {
      const auto left = cycle_end - Clock::now();
      if (left <= Clock::duration::zero()) break;
      (*ep)->Poll(std::min(std::chrono::milliseconds(100),
                           std::chrono::duration_cast<std::chrono::milliseconds>(left)));
      if (cycle_end - Clock::now() < std::chrono::milliseconds(1)) {
        std::this_thread::sleep_until(cycle_end);
        break;
      }
    }
    if (g_stop || Clock::now() >= end) break;
    auto s = (*ep)->Send(g->gradient, version);
    if (!s.ok()) return Fail("worker", s.status().message());
    send_errors += s->send_errors;
    (*ep)->Poll(std::chrono::milliseconds(0));
  }
  for (int i = 0; i < 5; ++i) (*ep)->Poll(std::chrono::milliseconds(10));
  const olaf::WorkerCounters& c = (*ep)->stats();
  std::ofstream(fs::path(o.out_dir) / (stem + ".json"))
      << "{\"cluster\":" << o.cluster << ",\"index\":" << o.index
      << ",\"generated\":" << c.generated << ",\"sent\":" << c.sent
      << ",\"suppressed\":" << c.suppressed << ",\"datagrams_sent\":" << c.datagrams_sent
      << ",\"send_errors\":" << send_errors << ",\"acks\":" << c.acks_rx
      << ",\"models\":" << c.models_rx << ",\"models_rejected\":" << c.models_rejected
      << ",\"models_adopted\":" << adopted << ",\"episodes\":" << (*agent)->episodes()
      << ",\"env_steps\":" << (*agent)->env_steps() << "}\n";
  return 0;
}

}  // namespace inca::rl
