// inca-switchd: a data-plane program (CAIS reduction, or the OLAF/FIFO
// queue) served over UDP. Parses flags and the YAML config (flags win), then
// hands over to inca::daemon::RunSwitchd (src/daemon), which runs until
// SIGINT or SIGTERM and prints the final counters as one JSON line on
// stdout. Logs go to stderr. Every setting's flag comes from its one
// declaration in src/switchd/settings.cc; the reference is docs/settings.md.

#include <CLI/CLI.hpp>
#include <iostream>

#include "absl/strings/numbers.h"
#include "cli/cli_common.h"
#include "daemon/daemon.h"
#include "inca/control/stats.h"
#include "switchd/config.h"
#include "switchd/settings.h"
#include "util/cli_flags.h"

namespace {

// --cluster SRC_PORT=CLUSTER, repeatable; false (after one line on stderr)
// for a malformed one.
bool ParseClusters(const std::vector<std::string>& args,
                   std::vector<std::pair<uint16_t, uint16_t>>* out) {
  out->clear();
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    uint32_t port = 0, cluster = 0;
    if (eq == std::string::npos || !absl::SimpleAtoi(a.substr(0, eq), &port) ||
        !absl::SimpleAtoi(a.substr(eq + 1), &cluster) || port > 65535 || cluster > 65534) {
      std::cerr << "inca-switchd: --cluster '" << a
                << "' must be SRC_PORT=CLUSTER (port 0..65535, cluster 0..65534)\n";
      return false;
    }
    out->emplace_back(static_cast<uint16_t>(port), static_cast<uint16_t>(cluster));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using inca::switchd::SwitchdSettings;
  inca::switchd::SwitchdConfig c;  // defaults; the file, then the flags given, override them
  CLI::App app{
      "inca-switchd: CAIS in-network reduction switch over UDP (docs/switchd.md, "
      "every setting: docs/settings.md)"};
  std::string config_path, control_token;
  std::vector<std::string> cluster_args;
  bool markdown = false, counters_markdown = false, stats_proto = false, json = false;
  app.add_option("--config", config_path, "YAML config file (config/switchd.example.yaml)");
  inca::settings::FlagSet flags;
  flags.Add(app, SwitchdSettings(), c);
  app.add_option("--control-token", control_token, "bearer token the control API requires")
      ->envname("INCA_TOKEN")
      ->check(inca::cli::ControlTokenCheck());
  CLI::Option* f_clusters = app.add_option(
      "--cluster", cluster_args, "OLAF: cluster table entry SRC_PORT=CLUSTER (repeatable)");
  app.add_flag("--settings-markdown", markdown,
               "print the settings reference (docs/settings.md) and exit");
  app.add_flag("--counters-markdown", counters_markdown,
               "print the front end's counter rows of docs/monitoring.md and exit");
  app.add_flag("--settings-json", json,
               "print the settings' keys, types, ranges and run-time flags as JSON and exit");
  app.add_flag("--stats-proto", stats_proto,
               "print the control API's proto/inca/control/v1/stats.proto and exit");
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "inca-switchd"); rc >= 0)
    return rc;
  if (markdown || counters_markdown || stats_proto || json) {
    std::cout << (markdown            ? inca::switchd::SettingsMarkdown()
                  : counters_markdown ? inca::switchd::CountersMarkdown()
                  : json              ? inca::switchd::SettingsJson()
                                      : inca::control::StatsProto());
    return 0;
  }

  if (!config_path.empty()) {
    auto loaded = inca::switchd::LoadSwitchdConfigYaml(config_path);
    if (!loaded.ok()) {
      std::cerr << "inca-switchd: " << loaded.status().message() << "\n";
      return 2;
    }
    c = *loaded;
  }
  if (absl::Status s = flags.Apply(SwitchdSettings(), &c); !s.ok()) {
    std::cerr << "inca-switchd: " << s.message() << "\n";
    return 2;
  }
  if (*f_clusters && !ParseClusters(cluster_args, &c.olaf.clusters)) return 2;
  if (absl::Status s = c.Validate(); !s.ok()) {
    std::cerr << "inca-switchd: " << s.message() << "\n";
    return 2;
  }
  return inca::daemon::RunSwitchd(c, control_token);
}
