// olaf-train: asynchronous DRL (LunarLander-v3, PPO-style actor-critic)
// through an OLAF or FIFO switch, the OLAF paper's §4.2 experiment
// (docs/rl.md "Distributed training").
//
//   olaf-train sim     co-simulated: workers, PS and switch inside inca-sim
//   olaf-train run     real: starts inca-switchd, a PS and worker processes
//                      on loopback and collects their results
//   olaf-train ps      one PS process (what `run` starts)
//   olaf-train worker  one worker process (what `run` starts)
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "inca/rl/distributed.h"
#include "inca/sim/drl_training.h"
#include "util/cli_flags.h"

namespace {

namespace fs = std::filesystem;

int Fail(const std::string& what, int code = 1) {
  std::cerr << "olaf-train: " << what << "\n";
  return code;
}

int RunSim(const std::vector<std::string>& sets, const std::string& out_dir, bool quiet) {
  inca::sim::DrlTrainingConfig c;
  for (const std::string& kv : sets) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return Fail("--set '" + kv + "' must be KEY=VALUE", 2);
    if (auto st = inca::sim::SetDrlKey(std::string_view(kv).substr(0, eq),
                                       std::string_view(kv).substr(eq + 1), &c);
        !st.ok()) {
      return Fail(std::string(st.message()), 2);
    }
  }
  if (auto st = c.Validate(); !st.ok()) return Fail(std::string(st.message()), 2);
  if (!quiet) {
    std::fprintf(stderr, "%s: %s, send control %s, egress %.0f Mbit/s, %.0f s simulated\n",
                 c.name.c_str(), c.policy == inca::olaf::QueuePolicy::kOlaf ? "OLAF" : "FIFO",
                 std::string(inca::olaf::ToString(c.send_control)).c_str(), c.egress_mbps,
                 c.duration_s);
  }
  auto r = inca::sim::RunDrlTraining(c, [&](const inca::sim::DrlSample& p) {
    if (quiet || static_cast<int64_t>(p.t_s) % 10 != 0 || p.t_s == 0) return;
    std::fprintf(stderr,
                 "  t=%6.1fs  PS updates %8.0f  episodes %6lu  return(100) %7.1f  AoM %7.1f ms  "
                 "staleness %5.1f\n",
                 p.t_s, p.ps_updates, static_cast<unsigned long>(p.episodes), p.mean_return,
                 p.mean_aom_ms, p.staleness);
  });
  if (!r.ok()) {
    return Fail(std::string(r.status().message()),
                r.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1);
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Fail("cannot create " + out_dir + ": " + ec.message());
  for (const auto& [ext, text] : {std::pair{".json", inca::sim::DrlResultJson(*r) + "\n"},
                                  std::pair{".csv", inca::sim::DrlSeriesCsv(*r)}}) {
    const fs::path path = fs::path(out_dir) / (c.name + ext);
    std::ofstream out(path);
    out << text;
    out.close();
    if (!out) return Fail("cannot write " + path.string());
  }
  std::printf(
      "%-20s final return %7.1f  eval %7.1f  %s %.0f at %.1f s (%.0f PS updates)  AoM %.1f ms  "
      "staleness %.1f  loss %.1f%%  %.1f s wall\n",
      c.name.c_str(), r->final_return, r->eval_return, r->reached ? "reached" : "did not reach",
      c.threshold, r->time_to_threshold_s, r->updates_to_threshold, r->mean_aom_ms,
      r->mean_staleness, 100 * r->loss, r->wall_s);
  return 0;
}

void AddModelOptions(CLI::App& app, inca::rl::DistributedOptions* d) {
  app.add_option("--seed", d->seed, "seed (initial model, environments, draws)")
      ->capture_default_str();
  app.add_option("--duration", d->duration_s, "seconds of training")->capture_default_str();
  app.add_option("--out", d->out_dir, "output directory")->capture_default_str();
  app.add_option("--hidden", d->worker.model.hidden, "hidden units per layer (24: one frame)")
      ->capture_default_str();
  app.add_option("--lr", d->worker.model.learning_rate, "Adam learning rate")
      ->capture_default_str();
  app.add_option("--delta-t-ms", d->delta_t_ms, "OLAF AoM threshold (switch, send control)")
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"olaf-train: asynchronous DRL on LunarLander through an OLAF or FIFO switch"};
  app.require_subcommand(1);
  std::vector<std::string> sets;
  std::string out_dir = "olaf-train-out";
  bool quiet = false;
  auto* sim = app.add_subcommand("sim", "co-simulated training on inca-sim (deterministic)");
  sim->add_option(
      "--set", sets,
      "KEY=VALUE (repeatable): name, seed, duration_s, policy olaf|fifo, send_control "
      "off|priority|fairness, egress_mbps, queue_depth, delta_t_ms, tau_ms, "
      "link_gbps, gradient_ms, env_step_us, clusters COUNTxWORKERSxSLOWDOWN,..., "
      "threshold, stop_at_threshold, lr_anneal_s, hidden, lr, envs, rollout, epochs, minibatch");
  sim->add_option("--out", out_dir, "output directory")->capture_default_str();
  sim->add_flag("--quiet", quiet, "no progress on stderr");

  inca::rl::DistributedOptions d;
  auto* run = app.add_subcommand("run", "real processes through inca-switchd on loopback");
  AddModelOptions(*run, &d);
  run->add_option("--program", d.program, "olaf | fifo")->capture_default_str();
  run->add_option("--send-control", d.send_control, "off | priority | fairness")
      ->capture_default_str();
  run->add_option("--clusters", d.clusters)->capture_default_str();
  run->add_option("--workers-per-cluster", d.workers_per_cluster)->capture_default_str();
  run->add_option("--fast-clusters", d.fast_clusters, "clusters at full speed")
      ->capture_default_str();
  run->add_option("--slow-factor", d.slow_factor, "compute-time multiplier of the others")
      ->capture_default_str();
  run->add_option("--cycle-ms", d.cycle_ms, "wall time per gradient at full speed")
      ->capture_default_str();
  run->add_option("--egress-mbps", d.egress_mbps,
                  "the switch's paced egress toward the PS (0: unpaced)")
      ->capture_default_str();
  run->add_option("--depth", d.queue_depth, "switch queue depth")->capture_default_str();
  run->add_option("--tau-ms", d.tau_ms, "OLAF merge decay")->capture_default_str();
  run->add_option("--eval-episodes", d.eval_episodes, "episodes to evaluate the final model")
      ->capture_default_str();
  run->add_option("--lr-anneal-s", d.lr_anneal_s,
                  "PS: anneal the learning rate to 2 % over this many seconds (0 = constant, "
                  "< 0 = over --duration)")
      ->capture_default_str();
  run->add_option("--switchd", d.switchd, "inca-switchd path (default: beside olaf-train)");
  run->add_option("--place-ps", d.place_ps,
                  "NS@IP: run the PS in network namespace NS bound to IP, port 9600 (root; "
                  "with --place-switch and --place-workers; docs/testbed.md)");
  run->add_option("--place-switch", d.place_switch, "NS@IP: inca-switchd there, port 9500");
  run->add_option("--place-workers", d.place_workers,
                  "NS@IP,...: workers there, round robin, ports 9700 + k")
      ->delimiter(',');
  run->add_option("--clock", d.clock, "workers stamp updates on the PS's clock (ps) or their own")
      ->capture_default_str();
  run->add_option("--clock-skew-s", d.clock_skew_s,
                  "root: worker k's CLOCK_MONOTONIC offset by ((k mod 3) - 1) x this, in a time "
                  "namespace (hosts whose clocks disagree)")
      ->capture_default_str();
  auto* ps = app.add_subcommand("ps", "one PS process");
  AddModelOptions(*ps, &d);
  ps->add_option("--bind", d.ps_bind, "HOST:PORT")->capture_default_str();
  ps->add_option("--clusters", d.clusters,
                 "clusters expected (ids 0..N-1); one that never delivers counts at the whole "
                 "run's age in the mean AoM")
      ->capture_default_str();
  ps->add_option("--eval-episodes", d.eval_episodes)->capture_default_str();
  ps->add_option("--lr-anneal-s", d.lr_anneal_s)->capture_default_str();
  auto* worker = app.add_subcommand("worker", "one worker process");
  AddModelOptions(*worker, &d);
  worker->add_option("--peer", d.peer, "the switch HOST:PORT")->required();
  worker->add_option("--bind", d.bind, "HOST:PORT")->capture_default_str();
  worker->add_option("--cluster", d.cluster)->capture_default_str();
  worker->add_option("--index", d.index, "worker index within the cluster")->capture_default_str();
  worker->add_option("--cycle-ms", d.cycle_ms)->capture_default_str();
  worker->add_option("--slowdown", d.slowdown)->capture_default_str();
  worker->add_option("--send-control", d.send_control)->capture_default_str();
  worker->add_option("--clock", d.clock, "ps | local: whose clock updates are stamped on")
      ->capture_default_str();
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "olaf-train"); rc >= 0)
    return rc;
  if (*sim) return RunSim(sets, out_dir, quiet);
  if (*run) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);  // argv[0] may be bare
    return inca::rl::RunDistributed(d, ec ? std::string(argv[0]) : self.string());
  }
  if (*ps) return inca::rl::RunPsProcess(d);
  return inca::rl::RunWorkerProcess(d);
}
