// monitor_dashboard_demo: serves the monitoring endpoints with synthetic,
// changing figures (SyntheticMetrics), no switch involved. Used by
// tests/browser/dashboard_test.sh and to look at the dashboard by hand.
// Prints "listening on URL" once serving; runs until SIGINT/SIGTERM or
// --duration-s.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "monitor/http_server.h"
#include "monitor/synthetic.h"
#include "util/cli_flags.h"
#include "util/stop_signals.h"

namespace {

std::atomic<bool> g_stop{false};
extern "C" void OnSignal(int /*signo*/) {
  g_stop.store(true);
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  std::string port_file;
  double duration_s = 0;
  CLI::App app{"Serves the inca monitoring dashboard with synthetic figures"};
  app.add_option("--listen", listen, "HOST:PORT (port 0 picks a free one)")->capture_default_str();
  app.add_option("--port-file", port_file, "write the bound port here once serving");
  app.add_option("--duration-s", duration_s, "exit after this long; 0 = until a signal")
      ->check(CLI::Range(0.0, 86400.0));
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "monitor_dashboard_demo");
      rc >= 0) {
    return rc;
  }

  inca::monitor::SyntheticMetrics synthetic;
  // Each request advances the synthetic clock by one second, so a poll
  // every second looks like real time, under the browser's virtual time too.
  auto server = inca::monitor::MonitorServer::Start(
      listen, [&synthetic] { return synthetic.Next(std::chrono::seconds(1)); });
  if (!server.ok()) {
    std::cerr << "monitor_dashboard_demo: " << server.status().message() << "\n";
    return 2;
  }
  inca::util::OnStopSignals(OnSignal);

  if (!port_file.empty()) {
    std::ofstream(port_file + ".tmp") << (*server)->port() << "\n";
    std::rename((port_file + ".tmp").c_str(), port_file.c_str());  // appears whole
  }
  std::cout << "listening on " << (*server)->url() << std::endl;

  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(duration_s));
  while (!g_stop.load() && (duration_s == 0 || std::chrono::steady_clock::now() < deadline)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  (*server)->Stop();
  return 0;
}
