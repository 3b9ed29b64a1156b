// switchd-bench: inca-switchd vs a plain UDP forwarder, same machine, same
// run, on each socket I/O path (--io). Logic: src/perf/reflect_bench.cc.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "perf/reflect_bench.h"
#include "util/cli_flags.h"

int main(int argc, char** argv) {
  inca::perf::ReflectOptions o;
  std::vector<uint32_t> payloads = {1024, 8952};
  CLI::App app{"switchd-bench: packets/s through inca-switchd vs udp-forwarder"};
  app.add_option("--payload", payloads, "payload sizes in bytes (repeatable)");
  app.add_option("--window", o.window, "packets in flight");
  app.add_option("--packets", o.packets, "replies to wait for per target");
  app.add_option("--max-seconds", o.max_seconds, "time limit per target");
  app.add_option("--threads", o.threads,
                 "also measure inca-switchd --threads 1 against --threads N, one client per shard")
      ->check(CLI::Range(1, 64));
  app.add_flag("--uring", o.uring,
               "also measure the io_uring reflector (udp-forwarder --io uring) against the "
               "forwarder on each --io path");
  app.add_option("--target", o.target,
                 "HOST:PORT: measure only this reflector, started elsewhere (another namespace: "
                 "scripts/bench-xdp.py)");
  app.add_option("--target-pid", o.target_pid, "--target's process, for its CPU time")
      ->check(CLI::PositiveNumber);
  std::vector<std::string> io = {"mmsg", "gso"};
  app.add_option("--io", io, "socket paths to measure, in order (mmsg, gso; repeatable)");
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "switchd-bench"); rc >= 0)
    return rc;
  o.io.clear();
  for (const std::string& m : io) {
    auto mode = inca::net::ParseIoMode(m);
    if (!mode.ok()) {
      std::cerr << "switchd-bench: " << mode.status().message() << "\n";
      return 2;
    }
    o.io.push_back(*mode);
  }
  std::error_code ec;
  const auto dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  o.switchd_path = (dir / "inca-switchd").string();
  o.forwarder_path = (dir / "udp-forwarder").string();
  for (uint32_t p : payloads) {
    o.payload_bytes = p;
    auto r = inca::perf::RunReflectBench(o, std::cout);
    if (!r.ok()) {
      std::cerr << "switchd-bench: " << r.status().message() << "\n";
      return 1;
    }
  }
  return 0;
}
