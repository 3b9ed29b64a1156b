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

#include "inca/sim/drl_training.h"

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
  if (!r.ok()) return Fail(std::string(r.status().message()));
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Fail("cannot create " + out_dir + ": " + ec.message());
  std::ofstream(fs::path(out_dir) / (c.name + ".json")) << inca::sim::DrlResultJson(*r) << "\n";
  std::ofstream(fs::path(out_dir) / (c.name + ".csv")) << inca::sim::DrlSeriesCsv(*r);
  std::printf(
      "%-20s final return %7.1f  eval %7.1f  %s %.0f at %.1f s (%.0f PS updates)  AoM %.1f ms  "
      "staleness %.1f  loss %.1f%%  %.1f s wall\n",
      c.name.c_str(), r->final_return, r->eval_return, r->reached ? "reached" : "did not reach",
      c.threshold, r->time_to_threshold_s, r->updates_to_threshold, r->mean_aom_ms,
      r->mean_staleness, 100 * r->loss, r->wall_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"olaf-train: asynchronous DRL on LunarLander through an OLAF or FIFO switch"};
  app.require_subcommand(1);
  std::vector<std::string> sets;
  std::string out_dir = "olaf-train-out";
  bool quiet = false;
  auto* sim = app.add_subcommand("sim", "co-simulated training on inca-sim (deterministic)");
  sim->add_option("--set", sets,
                  "KEY=VALUE (repeatable): name, seed, duration_s, policy olaf|fifo, send_control "
                  "off|priority|fairness, egress_mbps, queue_depth, delta_t_ms, tau_ms, "
                  "link_gbps, gradient_ms, env_step_us, clusters COUNTxWORKERSxSLOWDOWN,..., "
                  "threshold, stop_at_threshold, hidden, lr, envs, rollout, epochs, minibatch");
  sim->add_option("--out", out_dir, "output directory")->capture_default_str();
  sim->add_flag("--quiet", quiet, "no progress on stderr");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "olaf-train: " << e.what() << "\n";
    return 2;
  }
  return RunSim(sets, out_dir, quiet);
}
