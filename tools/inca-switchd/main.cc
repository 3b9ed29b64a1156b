// inca-switchd: a data-plane program (CAIS reduction, or the OLAF/FIFO
// queue) served over UDP. Parses flags and the YAML config (flags win), then
// hands over to inca::daemon::RunSwitchd (src/daemon), which runs until
// SIGINT or SIGTERM and prints the final counters as one JSON line on
// stdout. Logs go to stderr. Flags and keys: docs/switchd.md.

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>

#include "absl/strings/numbers.h"
#include "daemon/daemon.h"
#include "monitor/http_server.h"
#include "switchd/config.h"
#include "util/cli_flags.h"

namespace {

inca::dp::TimeNs MsToNs(double ms) {
  return static_cast<inca::dp::TimeNs>(std::llround(ms * 1e6));
}

}  // namespace

int main(int argc, char** argv) {
  inca::switchd::SwitchdConfig c;  // defaults; flags below override file values
  std::string config_path;
  std::string listen = c.listen;
  std::string log_level = c.log_level;
  size_t sram_bytes = c.cais.sram_bytes;
  double sram_usage_limit = c.cais.sram_usage_limit;
  double group_share = c.cais.group_share;
  uint32_t max_pending_chunks = c.cais.max_pending_chunks;
  uint32_t chunk_size = c.cais.max_payload_bytes;
  double timeout_ms = static_cast<double>(c.cais.timeout_ns) / 1e6;
  double result_hold_ms = static_cast<double>(c.cais.result_hold_ns) / 1e6;
  bool deterministic = false;
  double ingress_loss = 0, egress_loss = 0, stats_interval_s = 0;
  uint64_t loss_seed = c.loss_seed;
  size_t socket_buffer_bytes = c.socket_buffer_bytes;
  uint32_t batch_size = c.batch_size;
  uint32_t lease_ms = c.lease_ms;
  std::string io = c.io;

  CLI::App app{"inca-switchd: CAIS in-network reduction switch over UDP (docs/switchd.md)"};
  app.add_option("--config", config_path, "YAML config file (config/switchd.example.yaml)");
  auto* f_listen =
      app.add_option("--listen", listen, "HOST:PORT to listen on")->capture_default_str();
  auto* f_sram =
      app.add_option("--sram-bytes", sram_bytes, "slot memory bytes")->capture_default_str();
  auto* f_limit = app.add_option("--sram-usage-limit", sram_usage_limit, "admission limit, (0, 1]")
                      ->capture_default_str();
  auto* f_pending =
      app.add_option("--max-pending-chunks", max_pending_chunks, "chunks aggregating at once")
          ->capture_default_str();
  auto* f_share =
      app.add_option("--group-share", group_share,
                     "fraction of pending chunks and SRAM reserved in equal parts for the groups "
                     "with rules, [0, 1]")
          ->check(CLI::Range(0.0, 1.0))
          ->capture_default_str();
  auto* f_chunk =
      app.add_option("--chunk-size", chunk_size, "largest CAIS payload (bytes, multiple of 4)")
          ->capture_default_str();
  auto* f_timeout = app.add_option("--timeout-ms", timeout_ms, "chunk timeout")
                        ->check(CLI::Range(0.001, 3.6e6))
                        ->capture_default_str();
  auto* f_hold =
      app.add_option("--result-hold-ms", result_hold_ms, "how long results are kept for resends")
          ->check(CLI::Range(0.0, 3.6e6))
          ->capture_default_str();
  auto* f_lease =
      app.add_option(
             "--lease-ms", lease_ms,
             "a group member silent this long (no JOIN, PING, REPORT or data) loses its "
             "group; hosts PING every lease/4. OLAF: a peer silent this long loses its port")
          ->check(CLI::Range(inca::switchd::kMinLeaseMs, inca::switchd::kMaxLeaseMs))
          ->capture_default_str();
  auto* f_det =
      app.add_flag("--deterministic", deterministic, "bitwise-reproducible reduction order");
  auto* f_iloss = app.add_option("--ingress-loss", ingress_loss,
                                 "drop probability of CAIS datagrams in, [0, 1]");
  auto* f_eloss = app.add_option("--egress-loss", egress_loss,
                                 "drop probability of CAIS datagrams out, [0, 1]");
  auto* f_seed =
      app.add_option("--loss-seed", loss_seed, "loss injection seed")->capture_default_str();
  auto* f_log = app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off")
                    ->capture_default_str();
  auto* f_stats = app.add_option("--stats-interval-s", stats_interval_s,
                                 "seconds between stats log lines; 0 = off");
  auto* f_sockbuf = app.add_option("--socket-buffer-bytes", socket_buffer_bytes,
                                   "SO_RCVBUF/SO_SNDBUF requested (best effort)")
                        ->capture_default_str();
  auto* f_batch = app.add_option("--batch-size", batch_size, "datagrams per recvmmsg/sendmmsg")
                      ->capture_default_str();
  auto* f_io = app.add_option("--io", io,
                              "socket path: 'gso' (UDP GSO/GRO where the kernel has them) or "
                              "'mmsg' (one datagram per message)")
                   ->capture_default_str();
  std::string control_listen = c.control_listen, control_token;
  auto* f_control = app.add_option("--control-listen", control_listen,
                                   "gRPC control API HOST:PORT (port 0 = any free; 'off' = none)")
                        ->capture_default_str();
  app.add_option("--control-token", control_token, "bearer token the control API requires")
      ->envname("INCA_TOKEN");
  std::string http_listen = c.http_listen;
  auto* f_http =
      app.add_option("--http-listen", http_listen,
                     "HOST:PORT for /metrics, /stats.json and the dashboard; 'off' = none")
          ->capture_default_str();
  std::string offload_mode = c.offload_controller;
  auto* f_mode = app.add_option("--offload-controller", offload_mode,
                                "who decides what to offload: 'embedded' (this process, every "
                                "100 ms), 'external' (an inca-controller pushes decisions) or "
                                "'off' (offload all)")
                     ->check(CLI::IsMember({"embedded", "external", "off"}))
                     ->capture_default_str();
  double host_gbps = c.offload_host_gbps, switch_gbps = c.offload_switch_gbps;
  double host_latency_us = c.offload_host_latency_us;
  auto* f_hgbps =
      app.add_option("--offload-host-gbps", host_gbps, "host path bandwidth the controller assumes")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
  auto* f_hlat = app.add_option("--offload-host-latency-us", host_latency_us,
                                "fixed cost of one host collective the controller assumes")
                     ->check(CLI::NonNegativeNumber)
                     ->capture_default_str();
  auto* f_sgbps =
      app.add_option("--offload-switch-gbps", switch_gbps, "reduction rate the controller assumes")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
  bool measured = c.offload_measured;
  auto* f_measured =
      app.add_option("--offload-measured", measured,
                     "judge from the operation times hosts report (true) or the model alone")
          ->capture_default_str();
  double explore_ms = c.offload_explore_ms;
  auto* f_explore = app.add_option("--offload-explore-ms", explore_ms,
                                   "measure the unused path of a size class again this often")
                        ->check(CLI::Range(1.0, 86400e3))
                        ->capture_default_str();
  std::string program = c.program;
  auto* f_program = app.add_option("--program", program,
                                   "data-plane program: cais (in-switch reduction), olaf "
                                   "(AoM-aware queue for async DRL) or fifo (OLAF's baseline)")
                        ->check(CLI::IsMember({"cais", "olaf", "fifo"}))
                        ->capture_default_str();
  inca::switchd::OlafSettings olaf = c.olaf;
  std::vector<std::string> cluster_args;
  auto* f_ps = app.add_option("--ps", olaf.ps, "OLAF: the parameter server HOST:PORT");
  auto* f_depth = app.add_option("--depth", olaf.depth, "OLAF: queue depth")->capture_default_str();
  auto* f_dt = app.add_option("--delta-t-ms", olaf.delta_t_ms, "OLAF: AoM threshold")
                   ->check(CLI::PositiveNumber)
                   ->capture_default_str();
  auto* f_tau = app.add_option("--tau-ms", olaf.tau_ms, "OLAF: merge decay constant")
                    ->check(CLI::PositiveNumber)
                    ->capture_default_str();
  auto* f_egress =
      app.add_option("--egress-mbps", olaf.egress_mbps, "OLAF: PS-facing line rate; 0 = unpaced")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
  auto* f_clusters = app.add_option("--cluster", cluster_args,
                                    "OLAF: cluster table entry SRC_PORT=CLUSTER (repeatable)");
  inca::util::RejectNegativeUnsigned(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "inca-switchd: " << e.what() << "\n";
    return 2;
  }

  if (!config_path.empty()) {
    auto loaded = inca::switchd::LoadSwitchdConfigYaml(config_path);
    if (!loaded.ok()) {
      std::cerr << "inca-switchd: " << loaded.status().message() << "\n";
      return 2;
    }
    c = *loaded;
  }
  if (*f_listen) c.listen = listen;
  if (*f_sram) c.cais.sram_bytes = sram_bytes;
  if (*f_limit) c.cais.sram_usage_limit = sram_usage_limit;
  if (*f_share) c.cais.group_share = group_share;
  if (*f_pending) c.cais.max_pending_chunks = max_pending_chunks;
  if (*f_chunk) c.cais.max_payload_bytes = chunk_size;
  if (*f_timeout) c.cais.timeout_ns = MsToNs(timeout_ms);
  if (*f_hold) c.cais.result_hold_ns = MsToNs(result_hold_ms);
  if (*f_lease) c.lease_ms = lease_ms;
  if (*f_det) c.cais.deterministic = deterministic;
  if (*f_iloss) c.ingress_loss = ingress_loss;
  if (*f_eloss) c.egress_loss = egress_loss;
  if (*f_seed) c.loss_seed = loss_seed;
  if (*f_log) c.log_level = log_level;
  if (*f_stats) c.stats_interval_s = stats_interval_s;
  if (*f_sockbuf) c.socket_buffer_bytes = socket_buffer_bytes;
  if (*f_batch) c.batch_size = batch_size;
  if (*f_io) c.io = io;
  if (*f_program) c.program = program;
  if (*f_ps) c.olaf.ps = olaf.ps;
  if (*f_depth) c.olaf.depth = olaf.depth;
  if (*f_dt) c.olaf.delta_t_ms = olaf.delta_t_ms;
  if (*f_tau) c.olaf.tau_ms = olaf.tau_ms;
  if (*f_egress) c.olaf.egress_mbps = olaf.egress_mbps;
  if (*f_clusters) {
    c.olaf.clusters.clear();
    for (const std::string& a : cluster_args) {
      const size_t eq = a.find('=');
      uint32_t port = 0, cluster = 0;
      if (eq == std::string::npos || !absl::SimpleAtoi(a.substr(0, eq), &port) ||
          !absl::SimpleAtoi(a.substr(eq + 1), &cluster) || port > 65535 || cluster > 65534) {
        std::cerr << "inca-switchd: --cluster '" << a
                  << "' must be SRC_PORT=CLUSTER (port 0..65535, cluster 0..65534)\n";
        return 2;
      }
      c.olaf.clusters.emplace_back(static_cast<uint16_t>(port), static_cast<uint16_t>(cluster));
    }
  }
  if (*f_control) c.control_listen = control_listen;
  if (*f_http) c.http_listen = http_listen;
  if (*f_mode) c.offload_controller = offload_mode;
  if (*f_hgbps) c.offload_host_gbps = host_gbps;
  if (*f_hlat) c.offload_host_latency_us = host_latency_us;
  if (*f_sgbps) c.offload_switch_gbps = switch_gbps;
  if (*f_measured) c.offload_measured = measured;
  if (*f_explore) c.offload_explore_ms = explore_ms;
  if (absl::Status s = c.Validate(); !s.ok()) {
    std::cerr << "inca-switchd: " << s.message() << "\n";
    return 2;
  }

  return inca::daemon::RunSwitchd(c, control_token);
}
