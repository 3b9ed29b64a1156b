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

// Every flag's variable, starting at the config defaults, and the option that
// sets it (to tell whether it was given). CLI11 keeps pointers: never moved.
struct Flags {
  explicit Flags(const inca::switchd::SwitchdConfig& c)
      : listen(c.listen),
        log_level(c.log_level),
        sram_bytes(c.cais.sram_bytes),
        sram_usage_limit(c.cais.sram_usage_limit),
        group_share(c.cais.group_share),
        max_pending_chunks(c.cais.max_pending_chunks),
        chunk_size(c.cais.max_payload_bytes),
        timeout_ms(static_cast<double>(c.cais.timeout_ns) / 1e6),
        result_hold_ms(static_cast<double>(c.cais.result_hold_ns) / 1e6),
        loss_seed(c.loss_seed),
        socket_buffer_bytes(c.socket_buffer_bytes),
        batch_size(c.batch_size),
        lease_ms(c.lease_ms),
        io(c.io),
        control_listen(c.control_listen),
        http_listen(c.http_listen),
        offload_mode(c.offload_controller),
        host_gbps(c.offload_host_gbps),
        switch_gbps(c.offload_switch_gbps),
        host_latency_us(c.offload_host_latency_us),
        measured(c.offload_measured),
        explore_ms(c.offload_explore_ms),
        program(c.program),
        olaf(c.olaf) {}
  Flags(const Flags&) = delete;
  Flags& operator=(const Flags&) = delete;

  std::string config_path;
  std::string listen;
  std::string log_level;
  size_t sram_bytes;
  double sram_usage_limit;
  double group_share;
  uint32_t max_pending_chunks;
  uint32_t chunk_size;
  double timeout_ms;
  double result_hold_ms;
  bool deterministic = false;
  double ingress_loss = 0, egress_loss = 0, stats_interval_s = 0;
  uint64_t loss_seed;
  size_t socket_buffer_bytes;
  uint32_t batch_size;
  uint32_t lease_ms;
  std::string io;
  std::string control_listen, control_token;
  std::string http_listen;
  std::string offload_mode;
  double host_gbps, switch_gbps;
  double host_latency_us;
  bool measured;
  double explore_ms;
  std::string program;
  inca::switchd::OlafSettings olaf;
  std::vector<std::string> cluster_args;

  CLI::Option *f_listen = nullptr, *f_sram = nullptr, *f_limit = nullptr, *f_pending = nullptr,
              *f_share = nullptr, *f_chunk = nullptr, *f_timeout = nullptr, *f_hold = nullptr,
              *f_lease = nullptr, *f_det = nullptr;
  CLI::Option *f_iloss = nullptr, *f_eloss = nullptr, *f_seed = nullptr, *f_log = nullptr,
              *f_stats = nullptr, *f_sockbuf = nullptr, *f_batch = nullptr, *f_io = nullptr;
  CLI::Option *f_control = nullptr, *f_http = nullptr, *f_mode = nullptr, *f_hgbps = nullptr,
              *f_hlat = nullptr, *f_sgbps = nullptr, *f_measured = nullptr, *f_explore = nullptr;
  CLI::Option *f_program = nullptr, *f_ps = nullptr, *f_depth = nullptr, *f_dt = nullptr,
              *f_tau = nullptr, *f_egress = nullptr, *f_clusters = nullptr;
};

// --config, --listen and the reduction core's flags.
void AddCaisFlags(CLI::App& app, Flags* f) {
  app.add_option("--config", f->config_path, "YAML config file (config/switchd.example.yaml)");
  f->f_listen =
      app.add_option("--listen", f->listen, "HOST:PORT to listen on")->capture_default_str();
  f->f_sram =
      app.add_option("--sram-bytes", f->sram_bytes, "slot memory bytes")->capture_default_str();
  f->f_limit = app.add_option("--sram-usage-limit", f->sram_usage_limit, "admission limit, (0, 1]")
                   ->capture_default_str();
  f->f_pending =
      app.add_option("--max-pending-chunks", f->max_pending_chunks, "chunks aggregating at once")
          ->capture_default_str();
  f->f_share =
      app.add_option("--group-share", f->group_share,
                     "fraction of pending chunks and SRAM reserved in equal parts for the groups "
                     "with rules, [0, 1]")
          ->check(CLI::Range(0.0, 1.0))
          ->capture_default_str();
  f->f_chunk =
      app.add_option("--chunk-size", f->chunk_size, "largest CAIS payload (bytes, multiple of 4)")
          ->capture_default_str();
  f->f_timeout = app.add_option("--timeout-ms", f->timeout_ms, "chunk timeout")
                     ->check(CLI::Range(0.001, 3.6e6))
                     ->capture_default_str();
  f->f_hold =
      app.add_option("--result-hold-ms", f->result_hold_ms, "how long results are kept for resends")
          ->check(CLI::Range(0.0, 3.6e6))
          ->capture_default_str();
  f->f_lease =
      app.add_option(
             "--lease-ms", f->lease_ms,
             "a group member silent this long (no JOIN, PING, REPORT or data) loses its "
             "group; hosts PING every lease/4. OLAF: a peer silent this long loses its port")
          ->check(CLI::Range(inca::switchd::kMinLeaseMs, inca::switchd::kMaxLeaseMs))
          ->capture_default_str();
  f->f_det =
      app.add_flag("--deterministic", f->deterministic, "bitwise-reproducible reduction order");
}

// Loss injection, logging, stats and the socket I/O flags.
void AddIoFlags(CLI::App& app, Flags* f) {
  f->f_iloss = app.add_option("--ingress-loss", f->ingress_loss,
                              "drop probability of CAIS datagrams in, [0, 1]");
  f->f_eloss = app.add_option("--egress-loss", f->egress_loss,
                              "drop probability of CAIS datagrams out, [0, 1]");
  f->f_seed =
      app.add_option("--loss-seed", f->loss_seed, "loss injection seed")->capture_default_str();
  f->f_log = app.add_option("--log-level", f->log_level, "trace|debug|info|warn|error|critical|off")
                 ->capture_default_str();
  f->f_stats = app.add_option("--stats-interval-s", f->stats_interval_s,
                              "seconds between stats log lines; 0 = off");
  f->f_sockbuf = app.add_option("--socket-buffer-bytes", f->socket_buffer_bytes,
                                "SO_RCVBUF/SO_SNDBUF requested (best effort)")
                     ->capture_default_str();
  f->f_batch = app.add_option("--batch-size", f->batch_size, "datagrams per recvmmsg/sendmmsg")
                   ->capture_default_str();
  f->f_io = app.add_option("--io", f->io,
                           "socket path: 'gso' (UDP GSO/GRO where the kernel has them) or "
                           "'mmsg' (one datagram per message)")
                ->capture_default_str();
}

// The control API, the HTTP monitor and the offload controller's flags.
void AddControlFlags(CLI::App& app, Flags* f) {
  f->f_control = app.add_option("--control-listen", f->control_listen,
                                "gRPC control API HOST:PORT (port 0 = any free; 'off' = none)")
                     ->capture_default_str();
  app.add_option("--control-token", f->control_token, "bearer token the control API requires")
      ->envname("INCA_TOKEN");
  f->f_http = app.add_option("--http-listen", f->http_listen,
                             "HOST:PORT for /metrics, /stats.json and the dashboard; 'off' = none")
                  ->capture_default_str();
  f->f_mode = app.add_option("--offload-controller", f->offload_mode,
                             "who decides what to offload: 'embedded' (this process, every "
                             "100 ms), 'external' (an inca-controller pushes decisions) or "
                             "'off' (offload all)")
                  ->check(CLI::IsMember({"embedded", "external", "off"}))
                  ->capture_default_str();
  f->f_hgbps = app.add_option("--offload-host-gbps", f->host_gbps,
                              "host path bandwidth the controller assumes")
                   ->check(CLI::PositiveNumber)
                   ->capture_default_str();
  f->f_hlat = app.add_option("--offload-host-latency-us", f->host_latency_us,
                             "fixed cost of one host collective the controller assumes")
                  ->check(CLI::NonNegativeNumber)
                  ->capture_default_str();
  f->f_sgbps = app.add_option("--offload-switch-gbps", f->switch_gbps,
                              "reduction rate the controller assumes")
                   ->check(CLI::PositiveNumber)
                   ->capture_default_str();
  f->f_measured =
      app.add_option("--offload-measured", f->measured,
                     "judge from the operation times hosts report (true) or the model alone")
          ->capture_default_str();
  f->f_explore = app.add_option("--offload-explore-ms", f->explore_ms,
                                "measure the unused path of a size class again this often")
                     ->check(CLI::Range(1.0, 86400e3))
                     ->capture_default_str();
}

// --program and the OLAF program's flags.
void AddOlafFlags(CLI::App& app, Flags* f) {
  f->f_program = app.add_option("--program", f->program,
                                "data-plane program: cais (in-switch reduction), olaf "
                                "(AoM-aware queue for async DRL) or fifo (OLAF's baseline)")
                     ->check(CLI::IsMember({"cais", "olaf", "fifo"}))
                     ->capture_default_str();
  f->f_ps = app.add_option("--ps", f->olaf.ps, "OLAF: the parameter server HOST:PORT");
  f->f_depth = app.add_option("--depth", f->olaf.depth, "OLAF: queue depth")->capture_default_str();
  f->f_dt = app.add_option("--delta-t-ms", f->olaf.delta_t_ms, "OLAF: AoM threshold")
                ->check(CLI::PositiveNumber)
                ->capture_default_str();
  f->f_tau = app.add_option("--tau-ms", f->olaf.tau_ms, "OLAF: merge decay constant")
                 ->check(CLI::PositiveNumber)
                 ->capture_default_str();
  f->f_egress =
      app.add_option("--egress-mbps", f->olaf.egress_mbps, "OLAF: PS-facing line rate; 0 = unpaced")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
  f->f_clusters = app.add_option("--cluster", f->cluster_args,
                                 "OLAF: cluster table entry SRC_PORT=CLUSTER (repeatable)");
}

// Every flag, in --help order.
void AddFlags(CLI::App& app, Flags* f) {
  AddCaisFlags(app, f);
  AddIoFlags(app, f);
  AddControlFlags(app, f);
  AddOlafFlags(app, f);
}

// The reduction core, I/O, logging and --program flags given override the config file's values.
void OverrideCore(const Flags& f, inca::switchd::SwitchdConfig* c) {
  if (*f.f_listen) c->listen = f.listen;
  if (*f.f_sram) c->cais.sram_bytes = f.sram_bytes;
  if (*f.f_limit) c->cais.sram_usage_limit = f.sram_usage_limit;
  if (*f.f_share) c->cais.group_share = f.group_share;
  if (*f.f_pending) c->cais.max_pending_chunks = f.max_pending_chunks;
  if (*f.f_chunk) c->cais.max_payload_bytes = f.chunk_size;
  if (*f.f_timeout) c->cais.timeout_ns = MsToNs(f.timeout_ms);
  if (*f.f_hold) c->cais.result_hold_ns = MsToNs(f.result_hold_ms);
  if (*f.f_lease) c->lease_ms = f.lease_ms;
  if (*f.f_det) c->cais.deterministic = f.deterministic;
  if (*f.f_iloss) c->ingress_loss = f.ingress_loss;
  if (*f.f_eloss) c->egress_loss = f.egress_loss;
  if (*f.f_seed) c->loss_seed = f.loss_seed;
  if (*f.f_log) c->log_level = f.log_level;
  if (*f.f_stats) c->stats_interval_s = f.stats_interval_s;
  if (*f.f_sockbuf) c->socket_buffer_bytes = f.socket_buffer_bytes;
  if (*f.f_batch) c->batch_size = f.batch_size;
  if (*f.f_io) c->io = f.io;
  if (*f.f_program) c->program = f.program;
}

// The OLAF flags given override the config file's values; false (after one
// line on stderr) for a malformed --cluster.
bool OverrideOlaf(const Flags& f, inca::switchd::SwitchdConfig* c) {
  if (*f.f_ps) c->olaf.ps = f.olaf.ps;
  if (*f.f_depth) c->olaf.depth = f.olaf.depth;
  if (*f.f_dt) c->olaf.delta_t_ms = f.olaf.delta_t_ms;
  if (*f.f_tau) c->olaf.tau_ms = f.olaf.tau_ms;
  if (*f.f_egress) c->olaf.egress_mbps = f.olaf.egress_mbps;
  if (*f.f_clusters) {
    c->olaf.clusters.clear();
    for (const std::string& a : f.cluster_args) {
      const size_t eq = a.find('=');
      uint32_t port = 0, cluster = 0;
      if (eq == std::string::npos || !absl::SimpleAtoi(a.substr(0, eq), &port) ||
          !absl::SimpleAtoi(a.substr(eq + 1), &cluster) || port > 65535 || cluster > 65534) {
        std::cerr << "inca-switchd: --cluster '" << a
                  << "' must be SRC_PORT=CLUSTER (port 0..65535, cluster 0..65534)\n";
        return false;
      }
      c->olaf.clusters.emplace_back(static_cast<uint16_t>(port), static_cast<uint16_t>(cluster));
    }
  }
  return true;
}

// The control, monitor and offload flags given override the config file's values.
void OverrideControl(const Flags& f, inca::switchd::SwitchdConfig* c) {
  if (*f.f_control) c->control_listen = f.control_listen;
  if (*f.f_http) c->http_listen = f.http_listen;
  if (*f.f_mode) c->offload_controller = f.offload_mode;
  if (*f.f_hgbps) c->offload_host_gbps = f.host_gbps;
  if (*f.f_hlat) c->offload_host_latency_us = f.host_latency_us;
  if (*f.f_sgbps) c->offload_switch_gbps = f.switch_gbps;
  if (*f.f_measured) c->offload_measured = f.measured;
  if (*f.f_explore) c->offload_explore_ms = f.explore_ms;
}

}  // namespace

int main(int argc, char** argv) {
  inca::switchd::SwitchdConfig c;  // defaults; flags below override file values
  Flags f(c);
  CLI::App app{"inca-switchd: CAIS in-network reduction switch over UDP (docs/switchd.md)"};
  AddFlags(app, &f);
  inca::util::RejectNegativeUnsigned(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "inca-switchd: " << e.what() << "\n";
    return 2;
  }

  if (!f.config_path.empty()) {
    auto loaded = inca::switchd::LoadSwitchdConfigYaml(f.config_path);
    if (!loaded.ok()) {
      std::cerr << "inca-switchd: " << loaded.status().message() << "\n";
      return 2;
    }
    c = *loaded;
  }
  OverrideCore(f, &c);
  if (!OverrideOlaf(f, &c)) return 2;
  OverrideControl(f, &c);
  if (absl::Status s = c.Validate(); !s.ok()) {
    std::cerr << "inca-switchd: " << s.message() << "\n";
    return 2;
  }

  return inca::daemon::RunSwitchd(c, f.control_token);
}
