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

}  // namespace

int RunOlafCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"olaf-cli: manage an inca OLAF switch through its control API"};
  app.require_subcommand(1);
  app.fallthrough();
  std::string device = "127.0.0.1:50051", token;
  bool json = false;
  int timeout_ms = 3000;
  app.add_option("--device", device, "switch control API, HOST[:PORT] (default port 50051)");
  app.add_option("--token", token, "bearer token, if the switch requires one")
      ->envname("INCA_TOKEN");
  app.add_flag("--json", json, "machine-readable output");
  app.add_option("--timeout-ms", timeout_ms, "per-request deadline")->check(CLI::Range(1, 3600000));
  auto* clusters = app.add_subcommand("clusters", "list, set or delete cluster table entries");
  std::string action = "list";
  int64_t src_port = -1, cluster = -1;
  clusters->add_option("action", action, "list | set | del");
  clusters->add_option("--src-port", src_port, "worker UDP source port (the table's key)");
  clusters->add_option("--cluster", cluster, "cluster id 0..65534");
  auto* stats = app.add_subcommand("show-stats", "queue state and per-cluster AoM");
  auto* ports = app.add_subcommand("ports", "list the peers' switch ports, or release one");
  std::string paction = "list";
  int64_t port = -1;
  ports->add_option("action", paction, "list | release");
  ports->add_option("--port", port,
                    absl::StrCat("release: the switch port 0..", dp::kMaxPorts - 1));
  inca::util::RejectNegativeUnsigned(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      out << app.help();
      return kOk;
    }
    err << "olaf-cli: " << e.what() << "\n";
    return kUsage;
  }
  if (*clusters && action != "list" && action != "set" && action != "del") {
    err << "olaf-cli: clusters action must be list, set or del\n";
    return kUsage;
  }
  if (*clusters && (action == "set" || action == "del") && (src_port < 0 || src_port > 65535)) {
    err << "olaf-cli: clusters " << action << " needs --src-port 0..65535\n";
    return kUsage;
  }
  if (*clusters && action == "set" && (cluster < 0 || cluster > 65534)) {
    err << "olaf-cli: clusters set needs --cluster 0..65534\n";
    return kUsage;
  }
  if (*ports && paction != "list" && paction != "release") {
    err << "olaf-cli: ports action must be list or release\n";
    return kUsage;
  }
  if (*ports && paction == "release" && (port < 0 || port >= dp::kMaxPorts)) {
    err << "olaf-cli: ports release needs --port 0.." << dp::kMaxPorts - 1 << "\n";
    return kUsage;
  }
  auto plane = control::ConnectControl(Device(device), token, timeout_ms);
  if (!plane.ok()) return Report(plane.status(), err);
  control::ControlPlane& cp = **plane;

  if (*clusters) {
    if (action == "set") {
      const absl::Status s =
          cp.SetClusterMapping(static_cast<uint16_t>(src_port), static_cast<uint16_t>(cluster));
      if (s.ok())
        out << (json ? "{\"ok\":true}"
                     : absl::StrCat("src_port ", src_port, " -> cluster ", cluster))
            << "\n";
      return Report(s, err);
    }
    if (action == "del") {
      const absl::Status s = cp.DeleteClusterMapping(static_cast<uint16_t>(src_port));
      if (s.ok())
        out << (json ? "{\"ok\":true}" : absl::StrCat("deleted src_port ", src_port)) << "\n";
      return Report(s, err);
    }
    auto m = cp.ListClusterMappings();
    if (!m.ok()) return Report(m.status(), err);
    if (json) {
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
  if (*ports) {
    if (paction == "release") {
      auto n = cp.ReleasePort(static_cast<uint16_t>(port));
      if (!n.ok()) return Report(n.status(), err);
      out << (json ? std::string("{\"ok\":true}") : absl::StrCat("released port ", port)) << "\n";
      return kOk;
    }
    auto ps = cp.ListPorts();
    if (!ps.ok()) return Report(ps.status(), err);
    for (const auto& p : *ps) {
      out << "port " << p.port << " -> " << p.endpoint << (p.is_static ? " (static)" : "") << "\n";
    }
    return kOk;
  }
  if (*stats) {
    auto st = cp.GetOlafStats();
    if (!st.ok()) return Report(st.status(), err);
    if (json) {
      out << "{\"device\":\"" << Device(device) << "\",\"program\":\"" << st->policy
          << "\",\"depth\":" << st->depth << ",\"occupancy\":" << st->occupancy
          << ",\"queue_util\":" << st->queue_util << ",\"active_clusters\":" << st->active_clusters
          << ",\"updates_rx\":" << st->updates_rx << ",\"updates_tx\":" << st->updates_tx
          << ",\"dropped\":" << st->dropped
          << ",\"conserved\":" << (st->conserved ? "true" : "false") << ",\"clusters\":[";
      for (size_t i = 0; i < st->clusters.size(); ++i) {
        const auto& c = st->clusters[i];
        out << (i ? "," : "") << "{\"cluster\":" << c.cluster_id << ",\"workers\":" << c.workers
            << ",\"offered\":" << c.offered << ",\"merged\":" << c.merged
            << ",\"dequeued\":" << c.dequeued << ",\"dropped\":" << c.dropped;
        if (c.aom_valid) {
          out << ",\"aom_ms\":" << c.aom_current_ms << ",\"aom_average_ms\":" << c.aom_average_ms
              << ",\"aom_peak_ms\":" << c.aom_peak_ms;
        }
        out << "}";
      }
      out << "]}\n";
      return kOk;
    }
    out << std::fixed << std::setprecision(1) << "Device: " << Device(device) << "\n"
        << "Program: " << st->policy << " (depth " << st->depth << ", delta_t " << st->delta_t_ms
        << " ms, tau " << st->tau_ms << " ms, egress "
        << static_cast<double>(st->egress_rate_bps) / 1e6 << " Mbit/s)\n"
        << "Queue: " << st->occupancy << "/" << st->depth << " (" << 100 * st->queue_util << "%), "
        << st->active_clusters << " active clusters\n"
        << "Updates: rx " << st->updates_rx << ", tx " << st->updates_tx << ", dropped "
        << st->dropped << (st->conserved ? "" : "  (counters do not add up!)") << "\n";
    for (const auto& [k, v] : st->drops) out << "Dropped " << k << ": " << v << "\n";
    out << "CLUSTER  WORKERS  OFFERED  MERGED  DEQUEUED  DROPPED  AOM_MS  AVG_AOM_MS  "
           "PEAK_AOM_MS\n";
    for (const auto& c : st->clusters) {
      out << std::left << std::setw(9) << c.cluster_id << std::setw(9) << c.workers << std::setw(9)
          << c.offered << std::setw(8) << c.merged << std::setw(10) << c.dequeued << std::setw(9)
          << c.dropped;
      if (c.aom_valid) {
        out << std::setw(8) << c.aom_current_ms << std::setw(12) << c.aom_average_ms
            << c.aom_peak_ms;
      } else {
        out << "-";
      }
      out << "\n";
    }
    return kOk;
  }
  return kUsage;
}

}  // namespace inca::cli
