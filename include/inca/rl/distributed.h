// Real asynchronous DRL through inca-switchd (olaf-train run/ps/worker):
// the OLAF paper's §4.2 set-up (arXiv 2507.05876) as separate processes on
// loopback UDP, or in the network namespaces of a testbed.
//
//  RunPsProcess      an ActorCritic behind an OlafPsEndpoint: applies every
//                    UPDATE fragment as a partial gradient and answers each
//                    update's last fragment with the model, to the updating
//                    cluster (the switch multicasts it). Writes ps.csv
//                    (progress) and ps.json (totals, final evaluation).
//  RunWorkerProcess  an AsyncWorker behind an OlafWorkerEndpoint: computes
//                    a gradient on the newest model it received, pads the
//                    cycle to cycle_ms x slowdown of wall time (the modelled
//                    compute of a slower machine), sends it through the
//                    switch. Writes worker-C-I.csv (episode returns) and
//                    worker-C-I.json (counters).
//  RunDistributed    the launcher (launcher.cc): a PS, inca-switchd (program
//                    olaf or fifo, egress paced below the offered load or
//                    unpaced behind a shaped link, one cluster-table
//                    entry per worker port) and the workers; waits, stops
//                    the switch, merges everything into summary.json and
//                    curve.csv (time, running mean of the last 100 training
//                    episodes, PS updates, AoM).
//
// Workers stop at duration_s; the launcher waits for them against one
// deadline (SIGTERM, then SIGKILL, past it), then stops the PS (SIGTERM:
// it evaluates and writes its results; its own duration is only a cap) and
// the switch. The PS and workers die with the launcher (PR_SET_PDEATHSIG).
// All of them start from the same initial model (ActorCriticOptions::seed
// = seed), so no initial broadcast is needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inca/rl/async_worker.h"

namespace inca::rl {

struct DistributedOptions {
  // Shared by every role.
  uint64_t seed = 1;
  double duration_s = 120;  // wall time of training
  std::string out_dir = "olaf-train-out/real";
  AsyncWorkerOptions worker = DefaultAsyncWorkerOptions();
  double delta_t_ms = 400;  // OLAF ΔT (switch and send control)

  // Launcher (run).
  std::string switchd;               // inca-switchd path; empty: next to this executable
  std::string program = "olaf";      // olaf | fifo
  std::string send_control = "off";  // off | priority | fairness
  uint32_t clusters = 9;
  uint32_t workers_per_cluster = 2;
  uint32_t fast_clusters = 3;  // the rest compute `slow_factor` times slower
  double slow_factor = 3;
  double egress_mbps = 20;  // switch -> PS pacing
  uint32_t queue_depth = 8;
  double tau_ms = 100;
  // > 0: emulate hosts whose CLOCK_MONOTONICs disagree: worker k runs in a
  // Linux time namespace (unshare --time, root) with its monotonic clock
  // offset by ((k mod 3) - 1) x clock_skew_s seconds.
  double clock_skew_s = 0;
  // Placement on a namespace testbed (docs/testbed.md, "OLAF on the
  // testbed"; root): "NS@IP" runs the role in network namespace NS (ip netns
  // exec), bound to IPv4 address IP, on fixed ports (PS 9600, switch 9500,
  // worker k 9700 + k). All three or none; workers take place_workers round
  // robin. None: everything on loopback with free ports.
  std::string place_ps, place_switch;
  std::vector<std::string> place_workers;

  // PS (ps). `clusters` (above) also tells the PS which clusters to expect
  // (ids 0..clusters-1): one that never delivers counts at the whole run's
  // age in its mean AoM.
  std::string ps_bind = "127.0.0.1:0";
  // Anneal the learning rate linearly to 2 % over this many seconds of
  // training (as DrlTrainingConfig::lr_anneal_s); 0 = constant, < 0 = over
  // duration_s.
  double lr_anneal_s = -1;
  double sample_s = 1;
  uint32_t eval_episodes = 20;

  // Worker (worker).
  std::string peer;  // the switch HOST:PORT
  std::string bind = "127.0.0.1:0";
  uint32_t cluster = 0;
  uint32_t index = 0;    // within the cluster
  double cycle_ms = 10;  // wall time per gradient at slowdown 1 (padded by waiting)
  double slowdown = 1;
  // Whose clock updates are stamped on: "ps" (estimated from MODELs, right
  // across hosts) or "local" (this host's; right only on the PS's host).
  std::string clock = "ps";
};

// Each returns the process exit status: 0 ok, 1 runtime failure, 2 bad options.
int RunPsProcess(const DistributedOptions& o);
int RunWorkerProcess(const DistributedOptions& o);
// `self` is this executable (for the ps/worker subcommands).
int RunDistributed(const DistributedOptions& o, const std::string& self);

}  // namespace inca::rl
