// inca-controller: the CAIS offload controller (write-up 3.3/4.4) run
// standalone against one or more inca-switchd processes over their gRPC
// control API. Start the switches with --offload-controller external.
//   inca-controller --switch 10.0.0.1:50051 --switch 10.0.0.2:50051
// Logs each decision change; on exit (SIGINT/SIGTERM or --duration-s)
// prints one JSON line per switch with its last policy.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cli/cli_common.h"
#include "control/controller_service.h"
#include "util/cli_flags.h"
#include "util/stop_signals.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop.store(true);
}

std::string Bytes(uint64_t b) {
  return b == UINT64_MAX ? "inf" : absl::StrCat(b);
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"inca-controller: decides what the CAIS switches offload (CAIS write-up 3.3)"};
  inca::control::ControllerServiceOptions o;
  o.loop.name = "inca-controller";
  inca::control::OffloadControllerConfig& c = o.loop.controller;
  double period_ms = 100, duration_s = 0;
  double host_gbps = c.host_bandwidth_bps * 8 / 1e9, switch_gbps = c.switch_rate_bps * 8 / 1e9;
  double host_latency_us = c.host_latency_s * 1e6;
  std::string log_level = "info";
  app.add_option("--switch", o.switches, "a switch's control API HOST:PORT (repeatable)")
      ->required();
  app.add_option("--token", o.token, "bearer token the switches require")
      ->envname("INCA_TOKEN")
      ->check(inca::cli::ControlTokenCheck());
  app.add_option("--name", o.loop.name, "name reported to the switches")->capture_default_str();
  app.add_option("--period-ms", period_ms, "re-evaluation period")
      ->check(CLI::Range(1.0, 60000.0))
      ->capture_default_str();
  app.add_option("--duration-s", duration_s, "stop after this long; 0 = until SIGINT/SIGTERM")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--offload-host-gbps", host_gbps, "host path bandwidth assumed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--offload-host-latency-us", host_latency_us,
                 "fixed cost of one host collective assumed")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--offload-switch-gbps", switch_gbps, "switch reduction rate assumed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--rpc-timeout-ms", o.rpc_timeout_ms, "deadline of each control call")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")
      ->capture_default_str();
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "inca-controller"); rc >= 0)
    return rc;
  c.host_bandwidth_bps = host_gbps * 1e9 / 8;
  c.switch_rate_bps = switch_gbps * 1e9 / 8;
  c.host_latency_s = host_latency_us * 1e-6;
  c.period_ns = static_cast<inca::dp::TimeNs>(period_ms * 1e6);
  auto svc = inca::control::ControllerService::Create(o);
  if (!svc.ok()) {
    std::cerr << "inca-controller: " << svc.status().message() << "\n";
    return 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("inca-controller"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  inca::util::OnStopSignals(OnSignal);

  const auto start = std::chrono::steady_clock::now();
  const auto period = std::chrono::nanoseconds(c.period_ns);
  std::map<std::string, inca::control::SwitchTickResult> last;
  std::map<std::string, std::string> last_error;
  std::set<std::string> ever_ok;  // switches that answered at least once
  auto next = start;
  while (!g_stop.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (duration_s > 0 && now - start >= std::chrono::duration<double>(duration_s)) break;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch());
    for (auto& r : (*svc)->Tick(ns.count())) {
      if (!r.status.ok()) {
        if (last_error[r.target] != r.status.message()) {
          last_error[r.target] = std::string(r.status.message());
          spdlog::warn("event=switch_unreachable switch={} error=\"{}\"", r.target,
                       last_error[r.target]);
        }
      } else {
        ever_ok.insert(r.target);
        last_error.erase(r.target);
        if (r.changed) {
          for (const auto& g : r.policy.groups) {
            spdlog::info(
                "event=offload_decision switch={} group={} participants={} min_bytes={} "
                "max_bytes={} threshold={:.2f} queue_delay_us={:.1f} sram_usage={:.2f}",
                r.target, g.group_id, g.participants, Bytes(g.min_bytes), Bytes(g.max_bytes),
                r.policy.threshold, r.policy.queue_delay_us, r.policy.sram_usage);
          }
        }
      }
      if (r.status.ok() || !last.count(r.target)) last[r.target] = r;
    }
    next += period;
    std::this_thread::sleep_until(next);  // paces the loop; SIGINT ends the sleep's next check
  }
  for (const auto& [target, r] : last) {
    std::string groups;
    for (const auto& g : r.policy.groups) {
      absl::StrAppend(&groups, groups.empty() ? "" : ",", "{\"group\":", g.group_id,
                      ",\"participants\":", g.participants, ",\"min_bytes\":", g.min_bytes,
                      ",\"max_bytes\":", g.max_bytes, "}");
    }
    std::cout << "{\"switch\":\"" << target << "\",\"ok\":" << (r.status.ok() ? "true" : "false")
              << ",\"threshold\":" << r.policy.threshold << ",\"groups\":[" << groups << "]}"
              << std::endl;
  }
  // Exit codes as cais-cli's: 0 when at least one switch took a decision,
  // 1 when every switch refused (a token, an embedded controller), 3 when
  // none could be reached.
  if (!ever_ok.empty()) return 0;
  bool refused = false;
  for (const auto& [target, r] : last) {
    refused = refused || (r.status.code() != absl::StatusCode::kUnavailable &&
                          r.status.code() != absl::StatusCode::kDeadlineExceeded);
  }
  std::cerr << "inca-controller: no switch accepted this controller ("
            << (refused ? "refused" : "unreachable") << "; the warnings above say why)\n";
  return refused ? 1 : 3;
}
