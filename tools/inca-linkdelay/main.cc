// inca-linkdelay: netem's delay, jitter and reorder in user space, for the
// host links of the testbed on kernels without sch_netem (scripts/testbed.py
// starts it; docs/testbed.md). Prints "ready" once every port is open, runs
// until SIGINT or SIGTERM, then prints its counters as one JSON line.
// Logic: src/linkdelay.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>

#include "absl/time/time.h"
#include "linkdelay/packet_link.h"
#include "util/cli_flags.h"
#include "util/stop_signals.h"

namespace {

std::atomic<inca::linkdelay::PacketLink*> g_link{nullptr};

extern "C" void OnSignal(int /*signo*/) {
  if (auto* l = g_link.load()) l->Stop();  // async-signal-safe
}

// "2ms", "500us", "0": absl's duration syntax.
bool ParseNs(const std::string& text, const char* what, int64_t& out) {
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration()) {
    std::cerr << "inca-linkdelay: " << what << " " << text
              << " is not a duration like 2ms, 500us or 0\n";
    return false;
  }
  out = absl::ToInt64Nanoseconds(d);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  inca::linkdelay::PacketLinkConfig c;
  std::string up_delay = "0", up_jitter = "0", down_delay = "0", down_jitter = "0";
  std::string resolution = "50us";
  CLI::App app{"inca-linkdelay: delay, jitter and reordering for one link, in user space"};
  std::vector<std::string> links;
  app.add_option("--link", links,
                 "HOST_PORT,SWITCH_PORT: the interfaces facing the host and "
                 "the switch (repeatable)")
      ->required();
  app.add_option("--up-delay", up_delay, "host -> switch delay")->capture_default_str();
  app.add_option("--up-jitter", up_jitter, "host -> switch jitter (uniform +-)")
      ->capture_default_str();
  app.add_option("--up-reorder", c.up.reorder, "host -> switch fraction sent at once")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--down-delay", down_delay, "switch -> host delay")->capture_default_str();
  app.add_option("--down-jitter", down_jitter, "switch -> host jitter (uniform +-)")
      ->capture_default_str();
  app.add_option("--down-reorder", c.down.reorder, "switch -> host fraction sent at once")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--limit-frames", c.limits.max_frames, "frames held per direction")
      ->check(CLI::Range(size_t{1}, size_t{10'000'000}))
      ->capture_default_str();
  app.add_option("--limit-bytes", c.limits.max_bytes, "bytes held per direction")
      ->check(CLI::Range(size_t{65536}, size_t{1} << 34))
      ->capture_default_str();
  app.add_option("--resolution", resolution,
                 "frames due within this of each other leave in one sendmmsg")
      ->capture_default_str();
  app.add_option("--seed", c.seed, "seed of the delays drawn")->capture_default_str();
  app.add_option("--batch", c.batch, "frames per recvmmsg or sendmmsg")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "inca-linkdelay"); rc >= 0)
    return rc;
  for (const std::string& l : links) {
    const size_t comma = l.find(',');
    if (comma == std::string::npos || l.find(',', comma + 1) != std::string::npos) {
      std::cerr << "inca-linkdelay: --link " << l << " is not HOST_PORT,SWITCH_PORT\n";
      return 2;
    }
    c.links.push_back({l.substr(0, comma), l.substr(comma + 1)});
  }
  if (!ParseNs(up_delay, "--up-delay", c.up.delay_ns) ||
      !ParseNs(up_jitter, "--up-jitter", c.up.jitter_ns) ||
      !ParseNs(down_delay, "--down-delay", c.down.delay_ns) ||
      !ParseNs(down_jitter, "--down-jitter", c.down.jitter_ns) ||
      !ParseNs(resolution, "--resolution", c.resolution_ns)) {
    return 2;
  }

  auto link = inca::linkdelay::PacketLink::Create(c);
  if (!link.ok()) {
    std::cerr << "inca-linkdelay: " << link.status().message() << "\n";
    return 2;
  }
  g_link.store(link->get());
  inca::util::OnStopSignals(OnSignal);
  std::cout << "ready" << std::endl;

  const absl::Status run = (*link)->Run();
  std::cout << (*link)->counters().ToJson() << std::endl;
  g_link.store(nullptr);
  if (!run.ok()) {
    std::cerr << "inca-linkdelay: " << run.message() << "\n";
    return 1;
  }
  return 0;
}
