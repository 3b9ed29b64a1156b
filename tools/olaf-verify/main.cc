// olaf-verify: checks an OLAF configuration for AoM fairness with Z3. Flags
// only; the model, the questions and the reports live in src/olafverify
// (docs/olaf-verify.md). Exit: 0 definite answer (whatever it is), 2 bad
// input, 1 solver unknown / timeout / internal error.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "olafverify/fairness_model.h"
#include "util/cli_flags.h"

namespace ov = inca::olafverify;

namespace {

int Fail(const absl::Status& s) {
  std::cerr << "olaf-verify: " << s.message() << "\n";
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  ov::FairnessConfig cfg;
  std::vector<std::string> cluster_flags;
  std::vector<double> periods;
  double link_gbps = 40, update_bytes = 9000, capacity = 0;
  std::string question = "both", norm = "pair-mean";
  bool json = false;

  CLI::App app{
      "olaf-verify: SMT (Z3) check of OLAF AoM fairness between clusters, the switch queue "
      "modelled as OlafQueue (caps, merges, displacement, eviction by time queued)"};
  app.add_option("--threshold-ms", cfg.aom_threshold_ms, "AoM threshold ΔT (ms)")
      ->capture_default_str();
  app.add_option("--cluster", cluster_flags, "NAME:PERIOD_MS[:JITTER_MS], repeatable");
  app.add_option("--periods", periods, "update periods (ms), clusters named c0, c1, ...")
      ->delimiter(',');
  // Given, it must be positive: 0 and -1 were silently the link's capacity.
  CLI::Option* f_capacity = app.add_option(
      "--capacity", capacity, "PS link capacity C (updates/ms), > 0; overrides the link");
  app.add_option("--link-gbps", link_gbps, "PS link rate, with --update-bytes")
      ->capture_default_str();
  app.add_option("--update-bytes", update_bytes, "bytes per update")->capture_default_str();
  app.add_option("--queue-size", cfg.queue_size,
                 "OlafQueue depth: entries queued, not counting the one in service")
      ->capture_default_str();
  app.add_option("--max-transit-ms", cfg.max_transit_ms,
                 "worker-to-switch delay bound: updates queue at A + [0, this], < ΔT")
      ->capture_default_str();
  app.add_option("--epsilon", cfg.epsilon, "fairness bound in [0, 1]")->capture_default_str();
  app.add_option("--norm", norm, "ε relative to: pair-mean or threshold")
      ->check(CLI::IsMember({"pair-mean", "threshold"}))
      ->capture_default_str();
  app.add_option("--horizon", cfg.horizon, "updates of the slowest cluster")->capture_default_str();
  app.add_option("--question", question, "feasible, always or both")
      ->check(CLI::IsMember({"feasible", "always", "both"}))
      ->capture_default_str();
  app.add_option("--timeout-ms", cfg.solver_timeout_ms, "solver budget per question, 0 = none")
      ->capture_default_str();
  app.add_flag("--seed-queue-dynamics", cfg.assert_queue_dynamics,
               "also assert the paper's D(n) >= A(n) + Q(n)/C (redundant, slower)");
  app.add_flag("--json", json, "one JSON object on stdout instead of the report");
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "olaf-verify"); rc >= 0)
    return rc;

  for (const std::string& f : cluster_flags) {
    absl::StatusOr<ov::ClusterSpec> c = ov::ParseClusterSpec(f);
    if (!c.ok()) return Fail(c.status());
    cfg.clusters.push_back(*c);
  }
  for (double p : periods) {
    cfg.clusters.push_back({absl::StrFormat("c%d", cfg.clusters.size()), p, 0});
  }
  if (*f_capacity && !(capacity > 0)) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--capacity ", capacity, " must be positive (updates per ms)")));
  }
  cfg.capacity_updates_per_ms =
      *f_capacity ? capacity : ov::CapacityFromLink(link_gbps, update_bytes);
  cfg.norm = norm == "threshold" ? ov::FairnessNorm::kThreshold : ov::FairnessNorm::kPairMean;
  if (absl::Status s = ov::Validate(cfg); !s.ok()) return Fail(s);

  if (!json) std::cout << ov::FormatConfig(cfg);
  std::vector<std::string> results;
  if (question != "always") {
    absl::StatusOr<ov::FeasibilityResult> r = ov::CheckFeasible(cfg);
    if (!r.ok()) return Fail(r.status());
    json ? results.push_back(ov::ToJson(*r)) : void(std::cout << ov::FormatReport(*r));
  }
  if (question != "feasible") {
    absl::StatusOr<ov::RobustnessResult> r = ov::CheckAlwaysFair(cfg);
    if (!r.ok()) return Fail(r.status());
    json ? results.push_back(ov::ToJson(*r)) : void(std::cout << ov::FormatReport(*r));
  }
  if (json) {
    std::cout << "{\"config\":" << ov::ToJson(cfg) << ",\"results\":["
              << absl::StrJoin(results, ",") << "]}\n";
  }
  return 0;
}
