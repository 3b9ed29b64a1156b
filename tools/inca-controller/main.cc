// inca-controller: the CAIS offload controller (write-up 3.3/4.4) run
// standalone against one or more inca-switchd processes over their gRPC
// control API. Start the switches with --offload-controller external.
//   inca-controller --switch 10.0.0.1:50051 --switch 10.0.0.2:50051
// Logs each decision change; on exit (SIGINT/SIGTERM or --duration-s)
// prints one JSON line per switch with its last policy.
//
// With --topology FILE it is the aggregation manager of a network of
// switches (docs/design/tree.md): it reads every switch of the topology
// through its `control` address, builds a tree for each group whose ranks
// JOINed several switches, installs it, and withdraws it when a switch of
// it dies. On exit it prints one JSON line per tree it keeps and one with
// its counters.
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

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cli_common.h"
#include "control/controller_service.h"
#include "inca/tree/manager.h"
#include "util/cli_flags.h"
#include "util/spdlog_event_log.h"
#include "util/stop_signals.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop.store(true);
}

std::string Bytes(uint64_t b) {
  return b == UINT64_MAX ? "inf" : absl::StrCat(b);
}

struct ManagerFlags {
  std::string topology;
  double switch_lease_ms = 3000;
  int64_t window_chunks = inca::tree::ManagerConfig{}.window_chunks;
};

// The aggregation manager's host: connects to every switch of the
// topology, ticks the manager every `period` until a stop signal or
// `duration_s`, prints its trees and counters as JSON lines.
int RunManager(const ManagerFlags& f, const std::string& token, int rpc_timeout_ms,
               std::chrono::nanoseconds period, double duration_s) {
  std::ifstream in(f.topology);
  if (!in) {
    std::cerr << "inca-controller: cannot read --topology " << f.topology << "\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto topo = inca::tree::Topology::FromYaml(text.str(), f.topology);
  if (topo.ok()) {
    for (const auto& sw : topo->switches) {
      if (sw.control.empty()) {
        topo = absl::InvalidArgumentError(absl::StrCat(f.topology, ": switch '", sw.name,
                                                       "' has no 'control' address (HOST:PORT)"));
        break;
      }
    }
  }
  if (!topo.ok()) {
    std::cerr << "inca-controller: " << topo.status().message() << "\n";
    return 2;
  }
  std::vector<std::unique_ptr<inca::control::ControlClient>> clients;
  std::vector<inca::control::ControlPlane*> planes;
  for (const auto& sw : topo->switches) {
    auto c = inca::control::ConnectControl(sw.control, token, rpc_timeout_ms);
    if (!c.ok()) {
      std::cerr << "inca-controller: switch " << sw.name << ": " << c.status().message() << "\n";
      return 2;
    }
    planes.push_back(c->get());
    clients.push_back(std::move(*c));
  }
  inca::tree::ManagerConfig mc;
  mc.switch_lease_ns = static_cast<inca::dp::TimeNs>(f.switch_lease_ms * 1e6);
  mc.window_chunks = f.window_chunks;
  inca::tree::AggregationManager manager(*topo, planes, mc, &inca::ProcessEventLog());
  spdlog::info("event=manager_started switches={} topology={}", topo->switches.size(), f.topology);
  const auto start = std::chrono::steady_clock::now();
  auto next = start;
  while (!g_stop.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (duration_s > 0 && now - start >= std::chrono::duration<double>(duration_s)) break;
    manager.Tick(std::chrono::duration_cast<std::chrono::nanoseconds>(now - start).count());
    next += period;
    std::this_thread::sleep_until(next);
  }
  for (const auto& t : manager.trees()) {
    std::vector<std::string> names;
    for (int sw : t.switches) names.push_back("\"" + topo->switches[sw].name + "\"");
    std::cout << "{\"tree\":{\"group\":" << int{t.group_id} << ",\"job\":" << t.job
              << ",\"world_size\":" << t.world_size << ",\"depth\":" << t.depth
              << ",\"seq_base\":" << t.seq_base << ",\"switches\":[" << absl::StrJoin(names, ",")
              << "],\"formation_ms\":" << static_cast<double>(t.formation_ns) / 1e6 << "}}"
              << std::endl;
  }
  const auto& c = manager.counters();
  std::cout << "{\"manager\":{\"rounds\":" << c.rounds
            << ",\"trees_installed\":" << c.trees_installed
            << ",\"trees_withdrawn\":" << c.trees_withdrawn
            << ",\"trees_retired\":" << c.trees_retired
            << ",\"install_failures\":" << c.install_failures
            << ",\"trees_refused\":" << c.trees_refused << ",\"switch_errors\":" << c.switch_errors
            << "}}" << std::endl;
  return 0;
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
  ManagerFlags mf;
  app.add_option("--switch", o.switches,
                 "a switch's control API HOST:PORT (repeatable): decide its offload");
  app.add_option("--topology", mf.topology,
                 "a network of switches (YAML, docs/design/tree.md): be its aggregation manager")
      ->check(CLI::ExistingFile);
  app.add_option("--switch-lease-ms", mf.switch_lease_ms,
                 "aggregation manager: a switch silent this long is down, its trees withdrawn")
      ->check(CLI::Range(100.0, 3600000.0))
      ->capture_default_str();
  app.add_option("--window-chunks", mf.window_chunks,
                 "aggregation manager: the ranks' window (their max_pending_chunks); warn where "
                 "a tree's switch reserves fewer pending chunks for the group")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
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
  if (o.switches.empty() == mf.topology.empty()) {
    std::cerr << "inca-controller: give --switch (the offload controller) or --topology (the "
                 "aggregation manager), not both\n";
    return 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("inca-controller"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  if (!mf.topology.empty()) {
    inca::util::OnStopSignals(OnSignal);
    return RunManager(mf, o.token, o.rpc_timeout_ms, std::chrono::nanoseconds(c.period_ns),
                      duration_s);
  }
  auto svc = inca::control::ControllerService::Create(o);
  if (!svc.ok()) {
    std::cerr << "inca-controller: " << svc.status().message() << "\n";
    return 2;
  }
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
