// udp-forwarder: the plain UDP forwarding baseline for benchmarks (same
// batched I/O as inca-switchd, no reducer). Every datagram goes to each
// --forward target, or back to its sender without one. Runs until SIGINT or
// SIGTERM, then prints its counters as one JSON line. Logic: src/switchd.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>

#include "switchd/udp_forwarder.h"
#include "switchd/uring_reflector.h"
#include "util/cli_flags.h"

namespace {

std::atomic<inca::switchd::UdpForwarder*> g_forwarder{nullptr};
std::atomic<inca::switchd::UringReflector*> g_uring{nullptr};

extern "C" void OnSignal(int /*signo*/) {
  if (auto* f = g_forwarder.load()) f->Stop();  // async-signal-safe
  if (auto* f = g_uring.load()) f->Stop();
}

void InstallSignals() {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// --io uring: the io_uring reflector (src/switchd/uring_reflector.h).
int RunUring(const inca::switchd::UdpForwarderConfig& c) {
  auto r = inca::switchd::UringReflector::Create(c);
  if (!r.ok()) {
    std::cerr << "udp-forwarder: " << r.status().message() << "\n";
    return 2;
  }
  std::cerr << "udp-forwarder: listening on port " << (*r)->socket().local.port() << " io=uring\n";
  g_uring.store(r->get());
  InstallSignals();
  const absl::Status run = (*r)->Run();
  std::cout << (*r)->counters().ToJson() << std::endl;
  g_uring.store(nullptr);
  if (!run.ok()) {
    std::cerr << "udp-forwarder: " << run.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  inca::switchd::UdpForwarderConfig c;
  CLI::App app{"udp-forwarder: plain UDP forwarder (benchmark baseline for inca-switchd)"};
  app.add_option("--listen", c.listen, "HOST:PORT to listen on")->capture_default_str();
  app.add_option("--forward", c.forward,
                 "HOST:PORT to send every datagram to (repeatable); none = reflect");
  app.add_option("--batch-size", c.batch_size, "datagrams per recvmmsg/sendmmsg")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--socket-buffer-bytes", c.socket_buffer_bytes, "SO_RCVBUF/SO_SNDBUF requested")
      ->capture_default_str();
  std::string io = "gso";
  app.add_option("--io", io,
                 "socket path: gso (UDP GSO/GRO where the kernel has them), mmsg, or uring "
                 "(io_uring, reflect only; a measurement baseline)")
      ->capture_default_str();
  inca::util::RejectNegativeUnsigned(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "udp-forwarder: " << e.what() << "\n";
    return 2;
  }

  if (io == "uring") return RunUring(c);
  auto mode = inca::net::ParseIoMode(io);
  if (!mode.ok()) {
    std::cerr << "udp-forwarder: " << mode.status().message() << "\n";
    return 2;
  }
  c.io = *mode;
  auto fwd = inca::switchd::UdpForwarder::Create(c);
  if (!fwd.ok()) {
    std::cerr << "udp-forwarder: " << fwd.status().message() << "\n";
    return 2;
  }
  std::cerr << "udp-forwarder: listening on port " << (*fwd)->local_port() << " "
            << (*fwd)->socket().Describe() << "\n";
  g_forwarder.store(fwd->get());
  InstallSignals();

  const absl::Status run = (*fwd)->Run();
  std::cout << (*fwd)->counters().ToJson() << std::endl;
  g_forwarder.store(nullptr);
  if (!run.ok()) {
    std::cerr << "udp-forwarder: " << run.message() << "\n";
    return 1;
  }
  return 0;
}
