// inca-switchd: the CAIS in-switch reduction core served over UDP. Parses
// flags and the YAML config (flags win), runs the server until SIGINT or
// SIGTERM, prints the final counters as one JSON line on stdout. Logs go to
// stderr. Behaviour lives in src/switchd; flags and keys: docs/switchd.md.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>

#include "inca/control/offload_loop.h"
#include "monitor/http_server.h"
#include "switchd/config.h"
#include "switchd/switch_control.h"
#include "switchd/switch_server.h"

namespace {

std::atomic<inca::switchd::SwitchServer*> g_server{nullptr};

extern "C" void OnSignal(int /*signo*/) {
  if (auto* s = g_server.load()) s->Stop();  // async-signal-safe
}

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
  uint32_t max_pending_chunks = c.cais.max_pending_chunks;
  uint32_t chunk_size = c.cais.max_payload_bytes;
  double timeout_ms = static_cast<double>(c.cais.timeout_ns) / 1e6;
  double result_hold_ms = static_cast<double>(c.cais.result_hold_ns) / 1e6;
  bool deterministic = false;
  double ingress_loss = 0, egress_loss = 0, stats_interval_s = 0;
  uint64_t loss_seed = c.loss_seed;
  size_t socket_buffer_bytes = c.socket_buffer_bytes;
  uint32_t batch_size = c.batch_size;

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
  if (*f_pending) c.cais.max_pending_chunks = max_pending_chunks;
  if (*f_chunk) c.cais.max_payload_bytes = chunk_size;
  if (*f_timeout) c.cais.timeout_ns = MsToNs(timeout_ms);
  if (*f_hold) c.cais.result_hold_ns = MsToNs(result_hold_ms);
  if (*f_det) c.cais.deterministic = deterministic;
  if (*f_iloss) c.ingress_loss = ingress_loss;
  if (*f_eloss) c.egress_loss = egress_loss;
  if (*f_seed) c.loss_seed = loss_seed;
  if (*f_log) c.log_level = log_level;
  if (*f_stats) c.stats_interval_s = stats_interval_s;
  if (*f_sockbuf) c.socket_buffer_bytes = socket_buffer_bytes;
  if (*f_batch) c.batch_size = batch_size;
  if (*f_control) c.control_listen = control_listen;
  if (*f_http) c.http_listen = http_listen;
  if (*f_mode) c.offload_controller = offload_mode;
  if (*f_hgbps) c.offload_host_gbps = host_gbps;
  if (*f_hlat) c.offload_host_latency_us = host_latency_us;
  if (*f_sgbps) c.offload_switch_gbps = switch_gbps;
  if (absl::Status s = c.Validate(); !s.ok()) {
    std::cerr << "inca-switchd: " << s.message() << "\n";
    return 2;
  }

  spdlog::set_default_logger(spdlog::stderr_color_mt("inca-switchd"));
  spdlog::set_level(spdlog::level::from_str(c.log_level));
  auto server = inca::switchd::SwitchServer::Create(c);
  if (!server.ok()) {
    std::cerr << "inca-switchd: " << server.status().message() << "\n";
    return 2;
  }
  inca::control::OffloadControllerConfig oc;
  oc.host_bandwidth_bps = c.offload_host_gbps * 1e9 / 8;
  oc.switch_rate_bps = c.offload_switch_gbps * 1e9 / 8;
  oc.host_latency_s = c.offload_host_latency_us * 1e-6;
  inca::switchd::ControlService control;
  if (c.control_listen == "off") {
    control.plane = std::make_unique<inca::switchd::SwitchControl>(server->get(), 0);
  } else {
    auto started =
        inca::switchd::StartControlService(server->get(), c.control_listen, control_token);
    if (!started.ok()) {
      std::cerr << "inca-switchd: " << started.status().message() << "\n";
      return 2;
    }
    control = std::move(*started);
    spdlog::info("event=control_listening port={} token={}", control.server->port(),
                 control_token.empty() ? "none" : "required");
  }
  std::unique_ptr<inca::control::OffloadLoopThread> offload_loop;
  if (c.offload_controller == "embedded") {
    inca::control::OffloadLoopOptions lo;
    lo.controller = oc;
    if (absl::Status s = oc.Validate(); !s.ok()) {
      std::cerr << "inca-switchd: " << s.message() << "\n";
      return 2;
    }
    offload_loop = std::make_unique<inca::control::OffloadLoopThread>(control.plane.get(), lo);
  }
  std::unique_ptr<inca::monitor::MonitorServer> monitor;
  if (c.http_listen != "off" && !c.http_listen.empty()) {
    inca::switchd::SwitchServer* sw = server->get();
    inca::switchd::SwitchControl* plane = control.plane.get();
    auto started = inca::monitor::MonitorServer::Start(c.http_listen, [sw, plane] {
      inca::monitor::MetricsSnapshot s;
      sw->Execute([&](inca::switchd::SwitchServer::Control& ctl) {
        inca::monitor::CollectReducer(ctl.reducer, &s);
      });
      s.switch_counters = sw->counters();
      s.taken_at = std::chrono::system_clock::now();
      inca::monitor::ApplyOffloadPolicy(*plane->GetOffloadPolicy(), &s);
      return s;
    });
    if (!started.ok()) {
      std::cerr << "inca-switchd: " << started.status().message() << "\n";
      return 2;
    }
    monitor = std::move(*started);
    spdlog::info("event=http_listening url={}", monitor->url());
  }
  g_server.store(server->get());
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  const absl::Status run = (*server)->Run();
  offload_loop.reset();  // its calls go through the server, which has stopped
  if (monitor) monitor->Stop();
  std::cout << (*server)->counters().ToJson() << std::endl;
  g_server.store(nullptr);
  if (!run.ok()) {
    std::cerr << "inca-switchd: " << run.message() << "\n";
    return 1;
  }
  return 0;
}
