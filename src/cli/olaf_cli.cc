#include "cli/olaf_cli.h"

#include <CLI/CLI.hpp>
#include <iomanip>

#include "absl/strings/str_cat.h"
#include "cli/cli_common.h"
#include "inca/control/control_plane.h"
#include "inca/dataplane/program.h"
#include "util/cli_flags.h"

namespace inca::cli {

namespace {

int Report(const absl::Status& s, std::ostream& err) {
  return cli::Report("olaf-cli", s, err);
}

// Every flag of every verb, as parsed.
struct Args {
  std::string device = "127.0.0.1:50051";
  bool json = false;
  std::string action = "list";  // clusters
  int64_t src_port = -1, cluster = -1;
  std::string paction = "list";  // ports
  int64_t port = -1;
  std::vector<std::string> settings;  // configure
};

// The flags of the verb given, checked before connecting: kOk, or one line on
// `err` and kUsage.
int CheckArgs(const Args& a, const CLI::App& clusters, const CLI::App& ports, std::ostream& err) {
  if (clusters && a.action != "list" && a.action != "set" && a.action != "del") {
    err << "olaf-cli: clusters action must be list, set or del\n";
    return kUsage;
  }
  if (clusters && (a.action == "set" || a.action == "del") &&
      (a.src_port < 0 || a.src_port > 65535)) {
    err << "olaf-cli: clusters " << a.action << " needs --src-port 0..65535\n";
    return kUsage;
  }
  if (clusters && a.action == "set" && (a.cluster < 0 || a.cluster > 65534)) {
    err << "olaf-cli: clusters set needs --cluster 0..65534\n";
    return kUsage;
  }
  if (ports && a.paction != "list" && a.paction != "release") {
    err << "olaf-cli: ports action must be list or release\n";
    return kUsage;
  }
  std::string bad;
  ParseSettings(a.settings, &bad);
  if (!bad.empty()) {
    err << "olaf-cli: '" << bad << "' must be key=value, e.g. delta_t_ms=300\n";
    return kUsage;
  }
  if (ports && a.paction == "release" && (a.port < 0 || a.port >= dp::kMaxPorts)) {
    err << "olaf-cli: ports release needs --port 0.." << dp::kMaxPorts - 1 << "\n";
    return kUsage;
  }
  return kOk;
}

// One function per verb: the switch's answer on `out`, or a one-line error
// on `err`; the exit code (kOk, 1 refused, 3 unreachable).
int Clusters(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  if (a.action == "set") {
    const absl::Status s =
        cp.SetClusterMapping(static_cast<uint16_t>(a.src_port), static_cast<uint16_t>(a.cluster));
    if (s.ok())
      out << (a.json ? "{\"ok\":true}"
                     : absl::StrCat("src_port ", a.src_port, " -> cluster ", a.cluster))
          << "\n";
    return Report(s, err);
  }
  if (a.action == "del") {
    const absl::Status s = cp.DeleteClusterMapping(static_cast<uint16_t>(a.src_port));
    if (s.ok())
      out << (a.json ? "{\"ok\":true}" : absl::StrCat("deleted src_port ", a.src_port)) << "\n";
    return Report(s, err);
  }
  auto m = cp.ListClusterMappings();
  if (!m.ok()) return Report(m.status(), err);
  if (a.json) {
    out << "[";
    for (size_t i = 0; i < m->size(); ++i) {
      out << (i ? "," : "") << "{\"src_port\":" << (*m)[i].src_port
          << ",\"cluster\":" << (*m)[i].cluster_id << "}";
    }
    out << "]\n";
  } else {
    out << "SRC_PORT  CLUSTER\n";
    for (const auto& e : *m) {
      out << std::left << std::setw(10) << e.src_port << e.cluster_id << "\n";
    }
    out << m->size() << " entr" << (m->size() == 1 ? "y" : "ies") << "\n";
  }
  return kOk;
}

int Ports(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  if (a.paction == "release") {
    auto n = cp.ReleasePort(static_cast<uint16_t>(a.port));
    if (!n.ok()) return Report(n.status(), err);
    out << (a.json ? std::string("{\"ok\":true}") : absl::StrCat("released port ", a.port)) << "\n";
    return kOk;
  }
  return ListPorts("olaf-cli", cp, out, err);
}

// show-stats --json: the queue and every cluster as one JSON line.
void PrintStatsJson(const std::string& device, const control::OlafStats& st, std::ostream& out) {
  out << "{\"device\":\"" << device << "\",\"program\":\"" << st.policy
      << "\",\"depth\":" << st.depth << ",\"occupancy\":" << st.occupancy
      << ",\"queue_util\":" << st.queue_util << ",\"active_clusters\":" << st.active_clusters
      << ",\"updates_rx\":" << st.server.olaf.updates_rx
      << ",\"updates_tx\":" << st.server.olaf.updates_tx << ",\"dropped\":" << st.dropped
      << ",\"conserved\":" << (st.conserved ? "true" : "false") << ",\"clusters\":[";
  for (size_t i = 0; i < st.clusters.size(); ++i) {
    const auto& c = st.clusters[i];
    out << (i ? "," : "") << "{\"cluster\":" << c.cluster_id << ",\"workers\":" << c.workers << ","
        << counters::JsonFields<olaf::QueueCounters>(olaf::kQueueCounters, c.queue)
        << ",\"dropped\":" << c.dropped;
    if (c.aom_valid) {
      out << ",\"aom_ms\":" << c.aom_current_ms << ",\"aom_average_ms\":" << c.aom_average_ms
          << ",\"aom_peak_ms\":" << c.aom_peak_ms;
    }
    out << "}";
  }
  out << "]}\n";
}

// show-stats: the queue's summary, then a table of the clusters.
void PrintStatsText(const std::string& device, const control::OlafStats& st, std::ostream& out) {
  out << std::fixed << std::setprecision(1) << "Device: " << device << "\n"
      << "Program: " << st.policy << " (depth " << st.depth << ", delta_t " << st.delta_t_ms
      << " ms, tau " << st.tau_ms << " ms, egress " << static_cast<double>(st.egress_rate_bps) / 1e6
      << " Mbit/s)\n"
      << "Queue: " << st.occupancy << "/" << st.depth << " (" << 100 * st.queue_util << "%), "
      << st.active_clusters << " active clusters\n"
      << "Updates: rx " << st.server.olaf.updates_rx << ", tx " << st.server.olaf.updates_tx
      << ", dropped " << st.dropped << (st.conserved ? "" : "  (counters do not add up!)") << "\n";
  for (const auto& [k, v] : st.drops) out << "Dropped " << k << ": " << v << "\n";
  out << "CLUSTER  WORKERS  OFFERED  MERGED  DEQUEUED  DROPPED  AOM_MS  AVG_AOM_MS  "
         "PEAK_AOM_MS\n";
  for (const auto& c : st.clusters) {
    out << std::left << std::setw(9) << c.cluster_id << std::setw(9) << c.workers << std::setw(9)
        << c.queue.offered << std::setw(8) << c.queue.merged << std::setw(10) << c.queue.dequeued
        << std::setw(9) << c.dropped;
    if (c.aom_valid) {
      out << std::setw(8) << c.aom_current_ms << std::setw(12) << c.aom_average_ms << c.aom_peak_ms;
    } else {
      out << "-";
    }
    out << "\n";
  }
}

int ShowStats(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  auto st = cp.GetOlafStats();
  if (!st.ok()) return Report(st.status(), err);
  if (a.json) {
    PrintStatsJson(Device(a.device), *st, out);
  } else {
    PrintStatsText(Device(a.device), *st, out);
  }
  return kOk;
}

// configure [KEY=VALUE ...]: sets them (all or nothing; a change of
// delta_t_ms, depth or verify_epsilon is verified by the switch first and
// refused when it cannot be fair, unless override=true), then prints the
// configuration.
int Configure(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  std::string bad;  // checked in CheckArgs
  return SetAndPrintConfig("olaf-cli", ParseSettings(a.settings, &bad), a.json, cp, out, err);
}

}  // namespace

int RunOlafCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"olaf-cli: manage an inca OLAF switch through its control API"};
  Args a;
  std::string token;
  int timeout_ms = 3000;
  AddConnectionOptions(app, &a.device, &token, &a.json, &timeout_ms);
  auto* clusters = app.add_subcommand("clusters", "list, set or delete cluster table entries");
  clusters->add_option("action", a.action, "list | set | del");
  clusters->add_option("--src-port", a.src_port, "worker UDP source port (the table's key)");
  clusters->add_option("--cluster", a.cluster, "cluster id 0..65534");
  auto* stats = app.add_subcommand("show-stats", "queue state and per-cluster AoM");
  auto* ports = app.add_subcommand("ports", "list the peers' switch ports, or release one");
  ports->add_option("action", a.paction, "list | release");
  ports->add_option("--port", a.port,
                    absl::StrCat("release: the switch port 0..", dp::kMaxPorts - 1));
  auto* conf = app.add_subcommand(
      "configure",
      "show or set delta_t_ms, tau_ms, depth, verify_epsilon (key=value ...; override=true "
      "applies a change the verifier refuses)");
  conf->add_option("settings", a.settings, "e.g. delta_t_ms=300 depth=16");
  if (const int rc = ParseArgs(app, argc, argv, "olaf-cli", out, err); rc >= 0) return rc;
  if (int rc = CheckArgs(a, *clusters, *ports, err); rc != kOk) return rc;
  // A verified change waits for the solver (seconds): a longer default deadline.
  if (*conf && app.get_option("--timeout-ms")->count() == 0) timeout_ms = 30000;
  auto plane = control::ConnectControl(Device(a.device), token, timeout_ms);
  if (!plane.ok()) return Report(plane.status(), err);

  using Verb = int (*)(const Args&, control::ControlClient&, std::ostream&, std::ostream&);
  const std::pair<CLI::App*, Verb> verbs[] = {
      {clusters, Clusters}, {ports, Ports}, {stats, ShowStats}, {conf, Configure}};
  for (const auto& [command, verb] : verbs) {
    if (*command) return verb(a, **plane, out, err);
  }
  return kUsage;
}

}  // namespace inca::cli
