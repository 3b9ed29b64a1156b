#include "daemon/daemon.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>
#include <new>

#include "absl/strings/str_cat.h"
#include "inca/control/offload_loop.h"
#include "monitor/http_server.h"
#include "monitor/olaf_metrics.h"
#include "switchd/control_service.h"
#include "switchd/olaf_control.h"
#include "switchd/olaf_server.h"
#include "switchd/shards.h"
#include "switchd/switch_server.h"
#include "util/stop_signals.h"

namespace inca::daemon {

namespace {

std::atomic<switchd::SwitchShards*> g_cais{nullptr};
std::atomic<switchd::OlafServer*> g_olaf{nullptr};

extern "C" void OnSignal(int /*signo*/) {
  if (auto* s = g_cais.load()) s->Stop();  // async-signal-safe
  if (auto* s = g_olaf.load()) s->Stop();
}

int Fail(const absl::Status& s) {
  std::cerr << "inca-switchd: " << s.message() << "\n";
  return 2;
}

bool Enabled(const std::string& listen) {
  return !listen.empty() && listen != "off";
}

// Slot memory is allocated and touched at start: more than this machine
// has would be killed by the kernel (or throw) instead of one clear line.
absl::Status CheckSlotMemory(size_t sram_bytes) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return absl::OkStatus();
  const double machine = static_cast<double>(pages) * static_cast<double>(page);
  if (static_cast<double>(sram_bytes) > machine / 2) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "sram_bytes ", sram_bytes, " is more than half of this machine's memory (",
        static_cast<uint64_t>(machine), " bytes); slot memory is allocated and touched at start"));
  }
  return absl::OkStatus();
}

int RunCais(const switchd::SwitchdConfig& c, const std::string& token) {
  if (absl::Status s = CheckSlotMemory(c.cais.sram_bytes); !s.ok()) return Fail(s);
  absl::StatusOr<std::unique_ptr<switchd::SwitchShards>> server;
  try {
    server = switchd::SwitchShards::Create(c);
  } catch (const std::bad_alloc&) {
    return Fail(absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", c.cais.sram_bytes, " bytes of slot memory; lower --sram-bytes")));
  }
  if (!server.ok()) return Fail(server.status());
  control::OffloadControllerConfig oc;
  oc.host_bandwidth_bps = c.offload_host_gbps * 1e9 / 8;
  oc.switch_rate_bps = c.offload_switch_gbps * 1e9 / 8;
  oc.host_latency_s = c.offload_host_latency_us * 1e-6;
  oc.use_measurements = c.offload_measured;
  oc.explore_interval_ns = static_cast<dp::TimeNs>(c.offload_explore_ms * dp::kNsPerMs);
  if (absl::Status s = oc.Validate(); !s.ok()) return Fail(s);
  switchd::ControlService control;
  if (!Enabled(c.control_listen)) {
    control.plane =
        std::make_unique<switchd::SwitchControl>(switchd::Targets((*server)->servers()), 0);
  } else {
    auto started = switchd::StartControlService((*server)->servers(), c.control_listen, token);
    if (!started.ok()) return Fail(started.status());
    control = std::move(*started);
    spdlog::info("event=control_listening port={} token={}", control.server->port(),
                 token.empty() ? "none" : "required");
  }
  std::unique_ptr<control::OffloadLoopThread> offload_loop;
  if (c.offload_controller == "embedded") {
    control::OffloadLoopOptions lo;
    lo.controller = oc;
    offload_loop = std::make_unique<control::OffloadLoopThread>(control.plane.get(), lo);
  }
  std::unique_ptr<monitor::MonitorServer> mon;
  if (Enabled(c.http_listen)) {
    // The monitor reads the control API, as any control client does.
    control::ControlPlane* plane = control.plane.get();
    auto started = monitor::MonitorServer::Start(c.http_listen, [plane] {
      const auto stats = plane->GetStats();
      const auto policy = plane->cais()->GetOffloadPolicy();
      return monitor::FromControl(stats.ok() ? *stats : control::Stats{},
                                  policy.ok() ? *policy : control::OffloadPolicy{},
                                  std::chrono::system_clock::now());
    });
    if (!started.ok()) return Fail(started.status());
    mon = std::move(*started);
    spdlog::info("event=http_listening url={}", mon->url());
  }
  if ((*server)->size() > 1) {
    spdlog::info("event=shards_started threads={} ports={}-{}", (*server)->size(),
                 (*server)->base_port(), (*server)->base_port() + (*server)->size() - 1);
  }
  g_cais.store(server->get());
  util::OnStopSignals(OnSignal);
  const absl::Status run = (*server)->Run();
  offload_loop.reset();  // its calls go through the server, which has stopped
  if (mon) mon->Stop();
  std::cout << (*server)->counters().ToJson() << std::endl;
  g_cais.store(nullptr);
  if (!run.ok()) {
    std::cerr << "inca-switchd: " << run.message() << "\n";
    return 1;
  }
  return 0;
}

int RunOlaf(const switchd::SwitchdConfig& c, const std::string& token) {
  switchd::OlafServerConfig o;
  o.listen = c.listen;
  o.ps = c.olaf.ps;
  o.program.policy = c.program == "fifo" ? olaf::QueuePolicy::kFifo : olaf::QueuePolicy::kOlaf;
  o.program.depth = c.olaf.depth;
  o.program.delta_t_ns = static_cast<dp::TimeNs>(std::llround(c.olaf.delta_t_ms * 1e6));
  o.program.tau_ns = static_cast<dp::TimeNs>(std::llround(c.olaf.tau_ms * 1e6));
  o.program.egress_rate_bps = static_cast<uint64_t>(std::llround(c.olaf.egress_mbps * 1e6));
  o.clusters = c.olaf.clusters;
  o.socket_buffer_bytes = c.socket_buffer_bytes;
  o.io = c.io;
  o.batch_size = c.batch_size;
  o.lease_ms = c.lease_ms;
  auto server = switchd::OlafServer::Create(o);
  if (!server.ok()) return Fail(server.status());
  auto control = switchd::StartOlafControlService(server->get(), c.control_listen, token);
  if (!control.ok()) return Fail(control.status());
  if (control->server) {
    spdlog::info("event=control_listening port={} token={}", control->server->port(),
                 token.empty() ? "none" : "required");
  }
  std::unique_ptr<monitor::MonitorServer> mon;
  if (Enabled(c.http_listen)) {
    switchd::OlafControl* plane = control->plane.get();
    monitor::Renderers r;
    r.metrics = [plane] {
      auto st = plane->GetOlafStats();
      return monitor::RenderOlafPrometheus(st.ok() ? *st : control::OlafStats{});
    };
    r.stats_json = [plane] {
      auto st = plane->GetOlafStats();
      return monitor::RenderOlafStatsJson(st.ok() ? *st : control::OlafStats{});
    };
    auto started = monitor::MonitorServer::Start(c.http_listen, std::move(r));
    if (!started.ok()) return Fail(started.status());
    mon = std::move(*started);
    spdlog::info("event=http_listening url={}", mon->url());
  }
  g_olaf.store(server->get());
  util::OnStopSignals(OnSignal);
  const absl::Status run = (*server)->Run();
  if (mon) mon->Stop();
  std::cout << (*server)->counters().ToJson() << std::endl;
  g_olaf.store(nullptr);
  if (!run.ok()) {
    std::cerr << "inca-switchd: " << run.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int RunSwitchd(const switchd::SwitchdConfig& config, const std::string& control_token) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("inca-switchd"));
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  return config.program == "cais" ? RunCais(config, control_token) : RunOlaf(config, control_token);
}

}  // namespace inca::daemon
