// lunar-train: single-process synchronous PPO (or A2C) on LunarLander-v3 (the
// baseline for OLAF-distributed training). Prints progress and stops when
// the mean return over the last 100 episodes reaches --target or after
// --max-seconds / --max-steps.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "inca/rl/actor_critic.h"
#include "util/cli_flags.h"

int main(int argc, char** argv) {
  inca::rl::A2cTrainerOptions o;
  // Defaults: PPO over the ComputeGradients/ApplyGradients interface, the
  // configuration measured to solve LunarLander (docs/rl.md). Plain A2C:
  // --epochs 0 --ppo-clip 0 --norm-adv false --rollout 16 --lr 7e-4.
  o.num_envs = 16;
  o.rollout_steps = 256;
  o.ppo_epochs = 4;
  o.minibatch_size = 64;
  o.model = inca::rl::PpoOptions();
  double target = inca::rl::kSolvedReturn, max_seconds = 600;
  uint64_t max_steps = 20'000'000;
  double report_every_s = 10;
  CLI::App app{"PPO/A2C on LunarLander-v3 (Eigen, one process)"};
  app.add_option("--envs", o.num_envs, "parallel environments");
  app.add_option("--rollout", o.rollout_steps, "steps per environment per update");
  app.add_option("--hidden", o.model.hidden, "hidden units per layer");
  app.add_option("--lr", o.model.learning_rate, "Adam learning rate");
  app.add_option("--gamma", o.model.gamma);
  app.add_option("--lambda", o.model.gae_lambda, "GAE lambda");
  app.add_option("--entropy", o.model.entropy_coef);
  app.add_option("--value-coef", o.model.value_coef);
  app.add_option("--clip", o.model.max_grad_norm, "gradient global-norm clip");
  app.add_option("--ppo-clip", o.model.ppo_clip, "PPO ratio clip (0 = plain A2C loss)");
  app.add_option("--epochs", o.ppo_epochs, "PPO epochs per rollout (0 = one A2C step)");
  app.add_option("--minibatch", o.minibatch_size, "PPO minibatch size (steps)");
  app.add_option("--norm-adv", o.model.normalize_advantages, "normalise advantages per batch");
  app.add_option("--anneal-steps", o.anneal_steps, "anneal lr linearly to 0 over these env steps");
  app.add_option("--seed", o.seed);
  app.add_option("--target", target, "stop at this mean return over 100 episodes");
  app.add_option("--max-seconds", max_seconds);
  app.add_option("--max-steps", max_steps);
  app.add_option("--report-every", report_every_s, "seconds between progress lines");
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "lunar-train"); rc >= 0)
    return rc;
  o.model.seed = o.seed;

  double next_report = report_every_s;
  auto r = inca::rl::TrainA2c(o, [&](const inca::rl::A2cProgress& p) {
    const bool done = (p.episodes >= 100 && p.mean_return_last100 >= target) ||
                      p.wall_s >= max_seconds || p.env_steps >= max_steps;
    if (p.wall_s >= next_report || done) {
      std::printf("t=%7.1fs steps=%10lu episodes=%7lu mean100=%8.1f\n", p.wall_s,
                  static_cast<unsigned long>(p.env_steps), static_cast<unsigned long>(p.episodes),
                  p.mean_return_last100);
      std::fflush(stdout);
      next_report += report_every_s;
    }
    return done;
  });
  if (!r.ok()) {
    std::fprintf(stderr, "lunar-train: %s\n", std::string(r.status().message()).c_str());
    return 1;
  }
  const bool solved = r->episodes >= 100 && r->mean_return_last100 >= target;
  std::printf("%s: mean return over last 100 episodes %.1f after %lu steps, %.1f s\n",
              solved ? "SOLVED" : "STOPPED", r->mean_return_last100,
              static_cast<unsigned long>(r->env_steps), r->wall_s);
  return 0;
}
