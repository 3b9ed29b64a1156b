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
#include "inca/olaf/ps_endpoint.h"
#include "inca/olaf/send_control.h"
#include "inca/olaf/worker_endpoint.h"
#include "launch/process.h"

namespace inca::rl {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

int Fail(std::string_view role, absl::string_view what, int code = 1) {
  std::cerr << "olaf-train " << role << ": " << what << "\n";
  return code;
}

ActorCriticOptions ModelOptions(const DistributedOptions& o) {
  ActorCriticOptions m = o.worker.model;
  m.seed = o.seed;  // every process starts from the same weights
  return m;
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

// A PS or worker started by the launcher stops (SIGTERM: results written)
// when the launcher dies, however it dies.
void StopWithParent() {
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() == 1) g_stop = true;  // the parent is already gone
}

// Bad addresses and options are the caller's mistake: exit 2.
int StatusExit(const absl::Status& st) {
  return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
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

namespace {

// Whether something has bound UDP 127.0.0.1:`port` (Linux /proc/net/udp;
// looking, not binding, so the switch is never raced for its port).
bool UdpBound(int port) {
  std::ifstream in("/proc/net/udp");
  char want[32];
  std::snprintf(want, sizeof(want), "0100007F:%04X ", port);
  for (std::string line; std::getline(in, line);) {
    if (line.find(want) != std::string::npos) return true;
  }
  return false;
}

struct Episode {
  int64_t t_ns;
  double ret;
};

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The number after "key": in a flat JSON object (our own files).
double JsonNumber(const std::string& json, std::string_view key) {
  const std::string k = absl::StrCat("\"", absl::string_view(key.data(), key.size()), "\":");
  const size_t at = json.find(k);
  if (at == std::string::npos) return 0;
  size_t end = at + k.size();
  while (end < json.size() &&
         (std::isdigit(static_cast<unsigned char>(json[end])) || json[end] == '.' ||
          json[end] == '-' || json[end] == 'e' || json[end] == '+')) {
    ++end;
  }
  double v = 0;
  return absl::SimpleAtod(absl::string_view(json).substr(at + k.size(), end - at - k.size()), &v)
             ? v
             : 0;
}

// What the launcher hands its children: the switch binary, the ports and
// addresses, and the arguments the PS and every worker share.
struct Launch {
  std::string switchd;
  std::set<int> taken;  // distinct ports for the PS, the switch and every worker
  int sw_port = 0;
  std::string ps_addr, sw_addr;
  std::vector<int> ports;  // the workers', cluster by cluster
  std::vector<std::string> model_args;
};

// The launcher's children; destroyed (killed if still running) workers
// first, then the switch, then the PS.
struct Children {
  launch::Process ps;
  launch::Process sw;
  std::vector<launch::Process> workers;
};

// Every worker's results, read back from its files.
struct Merged {
  std::vector<Episode> episodes;  // in time order
  double generated = 0, sent = 0, models = 0;
};

// A loopback UDP port not handed out before in this run (0: none found).
int FreshPort(std::set<int>* taken) {
  for (int i = 0; i < 100; ++i) {
    const int p = launch::FreeLoopbackPort(true);
    if (p > 0 && taken->insert(p).second) return p;
  }
  return 0;
}

// Checks the launcher's options and finds inca-switchd; 0 or the exit code.
int CheckRunOptions(const DistributedOptions& o, const std::string& self, std::string* switchd) {
  if (!ValidCommon(o, "run")) return 2;
  if (o.program != "olaf" && o.program != "fifo") {
    return Fail("run", "--program must be olaf or fifo", 2);
  }
  if (!olaf::ParseSendControlMode(o.send_control)) {
    return Fail("run", "--send-control must be off, priority or fairness", 2);
  }
  if (o.clusters < 1 || o.clusters > 60 || o.workers_per_cluster < 1 ||
      uint64_t{o.clusters} * o.workers_per_cluster > 60) {
    return Fail("run", "--clusters x --workers-per-cluster must be 1..60 workers", 2);
  }
  if (!In(o.egress_mbps, 1e-3, 1e7) || !In(o.slow_factor, 1e-3, 1e3) ||
      !In(o.cycle_ms, 1e-3, 1e6) || !In(o.tau_ms, 1e-3, 1e6)) {
    return Fail("run",
                "--egress-mbps (0, 1e7], --slow-factor (0, 1000], --cycle-ms (0, 1e6] and "
                "--tau-ms (0, 1e6] please",
                2);
  }
  if (o.queue_depth < 1 || o.queue_depth > 65536) {
    return Fail("run", "--depth must be 1..65536", 2);
  }
  if (o.clock != "ps" && o.clock != "local") return Fail("run", "--clock must be ps or local", 2);
  if (!(o.clock_skew_s >= 0 && o.clock_skew_s <= 3600)) {
    return Fail("run", "--clock-skew-s must be in [0, 3600]", 2);
  }
  if (o.clock_skew_s > 0 && geteuid() != 0) {
    return Fail("run", "--clock-skew-s needs root (it runs workers in time namespaces)", 2);
  }
  *switchd = o.switchd;
  if (switchd->empty()) *switchd = (fs::path(self).parent_path() / "inca-switchd").string();
  if (access(switchd->c_str(), X_OK) != 0) {
    return Fail("run", absl::StrCat("inca-switchd not found at ", *switchd, " (--switchd)"), 2);
  }
  return 0;
}

// Removes an earlier run's results from --out; 0 or the exit code.
int RemoveOldResults(const DistributedOptions& o) {
  std::error_code ec;
  for (fs::directory_iterator it(o.out_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind("worker-", 0) == 0 || n.rfind("ps.", 0) == 0 || n == "summary.json" ||
        n == "curve.csv" || n == "switchd.json") {
      std::error_code rm;
      fs::remove(it->path(), rm);
      if (rm) return Fail("run", absl::StrCat("cannot remove old ", it->path().string()));
    }
  }
  if (ec) return Fail("run", absl::StrCat("cannot list ", o.out_dir, ": ", ec.message()));
  return 0;
}

// Picks the PS's and the switch's ports and starts the PS; 0 or the exit code.
int StartPs(const DistributedOptions& o, const std::string& self, Launch* l, Children* ch) {
  const int ps_port = FreshPort(&l->taken);
  l->sw_port = FreshPort(&l->taken);
  l->ps_addr = absl::StrCat("127.0.0.1:", ps_port);
  l->sw_addr = absl::StrCat("127.0.0.1:", l->sw_port);
  l->model_args = {"--seed",       absl::StrCat(o.seed),
                   "--out",        o.out_dir,
                   "--hidden",     absl::StrCat(o.worker.model.hidden),
                   "--lr",         absl::StrCat(o.worker.model.learning_rate),
                   "--delta-t-ms", absl::StrCat(o.delta_t_ms)};
  // The PS serves until told to stop; its --duration is only a hard cap.
  std::vector<std::string> ps_args = {
      "ps",
      "--bind",
      l->ps_addr,
      "--duration",
      absl::StrCat(o.duration_s + 60),
      "--clusters",
      absl::StrCat(o.clusters),
      "--eval-episodes",
      absl::StrCat(o.eval_episodes),
      "--lr-anneal-s",
      absl::StrCat(o.lr_anneal_s < 0 ? o.duration_s : o.lr_anneal_s)};
  ps_args.insert(ps_args.end(), l->model_args.begin(), l->model_args.end());
  ch->ps = launch::Process::SpawnToFile(self, ps_args, (fs::path(o.out_dir) / "ps.log").string());
  if (!ch->ps.running()) return Fail("run", "cannot start the PS");
  return 0;
}

// Picks every worker's port, starts inca-switchd and waits until it listens;
// 0 or the exit code.
int StartSwitch(const DistributedOptions& o, Launch* l, Children* ch) {
  std::vector<std::string> sw_args = {"--program",
                                      o.program,
                                      "--ps",
                                      l->ps_addr,
                                      "--listen",
                                      l->sw_addr,
                                      "--egress-mbps",
                                      absl::StrCat(o.egress_mbps),
                                      "--depth",
                                      absl::StrCat(o.queue_depth),
                                      "--delta-t-ms",
                                      absl::StrCat(o.delta_t_ms),
                                      "--tau-ms",
                                      absl::StrCat(o.tau_ms),
                                      "--log-level",
                                      "warn",
                                      "--control-listen",
                                      "off",
                                      "--http-listen",
                                      "off"};
  for (uint32_t c = 0; c < o.clusters; ++c) {
    for (uint32_t w = 0; w < o.workers_per_cluster; ++w) {
      l->ports.push_back(FreshPort(&l->taken));
      sw_args.push_back("--cluster");
      sw_args.push_back(absl::StrCat(l->ports.back(), "=", c));
    }
  }
  ch->sw = launch::Process::SpawnToFile(l->switchd, sw_args,
                                        (fs::path(o.out_dir) / "switchd.json").string());
  if (!ch->sw.running()) return Fail("run", "cannot start inca-switchd");
  for (const auto up_by = Clock::now() + std::chrono::seconds(20); !UdpBound(l->sw_port);) {
    if (const int rc = ch->sw.Wait(std::chrono::milliseconds(20)); rc >= 0) {
      return Fail("run", absl::StrCat("inca-switchd exited with ", rc, " at start-up"));
    }
    if (Clock::now() > up_by || g_stop) return Fail("run", "inca-switchd did not come up in 20 s");
  }
  return 0;
}

// Starts every worker, cluster by cluster; 0 or the exit code.
int StartWorkers(const DistributedOptions& o, const std::string& self, const Launch& l,
                 Children* ch) {
  for (uint32_t c = 0; c < o.clusters; ++c) {
    const double slowdown = c < o.fast_clusters ? 1.0 : o.slow_factor;
    for (uint32_t w = 0; w < o.workers_per_cluster; ++w) {
      std::vector<std::string> args = {
          "worker",
          "--peer",
          l.sw_addr,
          "--bind",
          absl::StrCat("127.0.0.1:", l.ports[c * o.workers_per_cluster + w]),
          "--cluster",
          absl::StrCat(c),
          "--index",
          absl::StrCat(w),
          "--cycle-ms",
          absl::StrCat(o.cycle_ms),
          "--slowdown",
          absl::StrCat(slowdown),
          "--send-control",
          o.send_control,
          "--duration",
          absl::StrCat(o.duration_s)};
      args.insert(args.end(), l.model_args.begin(), l.model_args.end());
      args.insert(args.end(), {"--clock", o.clock});
      std::string exe = self;
      if (o.clock_skew_s > 0) {  // another "host": its own CLOCK_MONOTONIC
        const int k = static_cast<int>((c * o.workers_per_cluster + w) % 3) - 1;
        args.insert(args.begin(), {"--time", absl::StrCat("--monotonic=", k * o.clock_skew_s),
                                   "--fork", "--kill-child=SIGTERM", self});
        exe = "/usr/bin/unshare";
      }
      ch->workers.push_back(launch::Process::SpawnToFile(
          exe, args, (fs::path(o.out_dir) / absl::StrCat("worker-", c, "-", w, ".log")).string()));
      if (!ch->workers.back().running()) return Fail("run", "cannot start a worker");
    }
  }
  return 0;
}

// Waits for the workers; past one deadline for all (or on Ctrl-C) they get
// SIGTERM, then SIGKILL, before anything is merged. Returns how many failed.
int WaitForWorkers(const DistributedOptions& o, std::vector<launch::Process>* workers_ptr) {
  std::vector<launch::Process>& workers = *workers_ptr;
  int failures = 0;
  std::vector<int> codes(workers.size(), -1);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(o.duration_s + 30));
  for (size_t done = 0; done < workers.size();) {
    done = 0;
    for (size_t i = 0; i < workers.size(); ++i) {
      if (codes[i] < 0) codes[i] = workers[i].Wait(std::chrono::milliseconds(0));
      if (codes[i] >= 0) ++done;
    }
    if (done == workers.size()) break;
    if (g_stop || Clock::now() > deadline) {
      for (size_t i = 0; i < workers.size(); ++i) {
        if (codes[i] < 0) workers[i].Signal(SIGTERM);
      }
      for (size_t i = 0; i < workers.size(); ++i) {
        if (codes[i] < 0) codes[i] = workers[i].Wait(std::chrono::seconds(5));
        if (codes[i] < 0) {
          workers[i].Signal(SIGKILL);
          codes[i] = workers[i].Wait(std::chrono::seconds(5));  // 137: a failure
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int c : codes) failures += c != 0 ? 1 : 0;
  return failures;
}

// Stops the PS or the switch: SIGTERM, up to `grace` to exit, then SIGKILL.
// Returns 1 if it did not exit with 0, else 0.
int StopServer(launch::Process* p, std::chrono::seconds grace) {
  p->Signal(SIGTERM);
  const int rc = p->Wait(grace);
  if (rc < 0) {
    p->Signal(SIGKILL);
    p->Wait(std::chrono::seconds(5));
  }
  return rc != 0 ? 1 : 0;
}

// Reads back every worker's episodes (sorted by time) and counters.
Merged MergeWorkers(const DistributedOptions& o) {
  Merged m;
  for (uint32_t c = 0; c < o.clusters; ++c) {
    for (uint32_t w = 0; w < o.workers_per_cluster; ++w) {
      const fs::path stem = fs::path(o.out_dir) / absl::StrCat("worker-", c, "-", w);
      std::ifstream in(stem.string() + ".csv");
      std::string line;
      std::getline(in, line);  // header
      while (std::getline(in, line)) {
        std::vector<absl::string_view> f = absl::StrSplit(line, ',');
        Episode e{};
        if (f.size() == 2 && absl::SimpleAtoi(f[0], &e.t_ns) && absl::SimpleAtod(f[1], &e.ret)) {
          m.episodes.push_back(e);
        }
      }
      const std::string j = ReadAll(stem.string() + ".json");
      m.generated += JsonNumber(j, "generated");
      m.sent += JsonNumber(j, "sent");
      m.models += JsonNumber(j, "models");
    }
  }
  std::sort(m.episodes.begin(), m.episodes.end(),
            [](const Episode& a, const Episode& b) { return a.t_ns < b.t_ns; });
  return m;
}

// Writes curve.csv, the training curve over the merged episodes; returns
// the final windowed mean return.
double WriteCurve(const DistributedOptions& o, const std::vector<Episode>& episodes,
                  dp::TimeNs start_ns) {
  std::ofstream curve(fs::path(o.out_dir) / "curve.csv");
  curve << "t_s,episodes,mean_return\n";
  ReturnWindow window;
  double final_return = 0;
  for (size_t i = 0; i < episodes.size(); ++i) {
    window.Add(episodes[i].ret);
    final_return = window.mean();
    curve << static_cast<double>(episodes[i].t_ns - start_ns) / 1e9 << "," << i + 1 << ","
          << final_return << "\n";
  }
  return final_return;
}

// Writes summary.json from the merged results and ps.json, and prints the
// one-line result.
void Report(const DistributedOptions& o, const Merged& m, double final_return, size_t workers,
            int failures) {
  const std::string psj = ReadAll(fs::path(o.out_dir) / "ps.json");
  const double carried = JsonNumber(psj, "worker_fragments_carried") /
                         std::max(1.0, JsonNumber(psj, "fragments_per_update"));
  const double loss = m.sent > 0 ? 1.0 - std::min(1.0, carried / m.sent) : 0.0;
  std::ofstream(fs::path(o.out_dir) / "summary.json")
      << "{\"program\":\"" << o.program << "\",\"send_control\":\"" << o.send_control
      << "\",\"seed\":" << o.seed << ",\"duration_s\":" << o.duration_s
      << ",\"egress_mbps\":" << o.egress_mbps << ",\"workers\":" << workers
      << ",\"generated\":" << m.generated << ",\"sent\":" << m.sent << ",\"loss\":" << loss
      << ",\"models_received\":" << m.models << ",\"episodes\":" << m.episodes.size()
      << ",\"final_return\":" << final_return
      << ",\"eval_return\":" << JsonNumber(psj, "eval_return")
      << ",\"ps_updates\":" << JsonNumber(psj, "ps_updates")
      << ",\"mean_staleness\":" << JsonNumber(psj, "mean_staleness")
      << ",\"mean_aom_ms\":" << JsonNumber(psj, "mean_aom_ms") << ",\"failures\":" << failures
      << "}\n";
  std::printf(
      "%s%s: final return %.1f (eval %.1f), %.0f PS updates, loss %.1f%%, staleness %.1f, AoM "
      "%.1f ms, %zu episodes\n",
      o.program.c_str(), o.send_control == "off" ? "" : ("+" + o.send_control).c_str(),
      final_return, JsonNumber(psj, "eval_return"), JsonNumber(psj, "ps_updates"), 100 * loss,
      JsonNumber(psj, "mean_staleness"), JsonNumber(psj, "mean_aom_ms"), m.episodes.size());
}

}  // namespace

int RunDistributed(const DistributedOptions& o, const std::string& self) {
  Launch l;
  if (const int rc = CheckRunOptions(o, self, &l.switchd); rc != 0) return rc;
  // Old results must not mix with this run's.
  if (const int rc = RemoveOldResults(o); rc != 0) return rc;
  InstallStopHandlers();  // Ctrl-C: stop the children, still merge what they wrote

  Children ch;
  if (const int rc = StartPs(o, self, &l, &ch); rc != 0) return rc;
  if (const int rc = StartSwitch(o, &l, &ch); rc != 0) return rc;
  std::fprintf(stderr,
               "olaf-train run: %s, send control %s, %u clusters x %u workers, egress %.1f "
               "Mbit/s, %.0f s; results in %s\n",
               o.program.c_str(), o.send_control.c_str(), o.clusters, o.workers_per_cluster,
               o.egress_mbps, o.duration_s, o.out_dir.c_str());
  const auto start_ns = olaf::OlafWorkerEndpoint::Now();
  if (const int rc = StartWorkers(o, self, l, &ch); rc != 0) return rc;
  int failures = WaitForWorkers(o, &ch.workers);
  // The PS writes ps.json (and evaluates the model) on the way out.
  failures += StopServer(&ch.ps, std::chrono::seconds(300));
  failures += StopServer(&ch.sw, std::chrono::seconds(10));
  if (failures > 0) {
    Fail("run", absl::StrCat(failures,
                             " process(es) failed or had to be stopped; their stderr is "
                             "above, their stdout in the .log files in ",
                             o.out_dir));
  }

  // Merge: every worker's episodes in time order -> the training curve.
  const Merged merged = MergeWorkers(o);
  const double final_return = WriteCurve(o, merged.episodes, start_ns);
  Report(o, merged, final_return, ch.workers.size(), failures);
  return failures > 0 ? 1 : 0;
}

}  // namespace inca::rl
