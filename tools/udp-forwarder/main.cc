// udp-forwarder: the plain UDP forwarding baseline for benchmarks (same
// batched I/O as inca-switchd, no reducer). Every datagram goes to each
// --forward target, or back to its sender without one. Runs until SIGINT or
// SIGTERM, then prints its counters as one JSON line. Logic: src/switchd.
#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>
#include <memory>

#include "reflect/udp_forwarder.h"
#include "reflect/uring_reflector.h"
#include "reflect/xsk_reflector.h"
#include "util/cli_flags.h"
#include "util/stop_signals.h"

namespace {

std::atomic<inca::reflect::UdpForwarder*> g_forwarder{nullptr};
std::atomic<inca::reflect::UringReflector*> g_uring{nullptr};
std::atomic<inca::reflect::XskReflector*> g_xsk{nullptr};

extern "C" void OnSignal(int /*signo*/) {
  if (auto* f = g_forwarder.load()) f->Stop();  // async-signal-safe
  if (auto* f = g_uring.load()) f->Stop();
  if (auto* f = g_xsk.load()) f->Stop();
}

// Runs a created forwarder or reflector until a signal stops it, then
// prints its counters.
template <typename T>
int Serve(const absl::StatusOr<std::unique_ptr<T>>& r, std::atomic<T*>& slot,
          const std::string& what) {
  if (!r.ok()) {
    std::cerr << "udp-forwarder: " << r.status().message() << "\n";
    return 2;
  }
  std::cerr << "udp-forwarder: " << what << "\n";
  slot.store(r->get());
  inca::util::OnStopSignals(OnSignal);
  const absl::Status run = (*r)->Run();
  std::cout << (*r)->counters().ToJson() << std::endl;
  slot.store(nullptr);
  if (!run.ok()) {
    std::cerr << "udp-forwarder: " << run.message() << "\n";
    return 1;
  }
  return 0;
}

// --io xdp: the AF_XDP reflector (src/reflect/xsk_reflector.h) for the
// --listen port on --interface.
int RunXsk(const inca::reflect::UdpForwarderConfig& c, inca::reflect::XskConfig x) {
  if (!c.forward.empty()) {
    std::cerr << "udp-forwarder: --io xdp reflects only; drop --forward\n";
    return 2;
  }
  auto listen = inca::net::Endpoint::Parse(c.listen);
  if (!listen.ok()) {
    std::cerr << "udp-forwarder: " << listen.status().message() << "\n";
    return 2;
  }
  x.port = listen->port();
  auto r = inca::reflect::XskReflector::Create(x);
  const std::string what = r.ok() ? "reflecting UDP port " + std::to_string(x.port) + " on " +
                                        x.interface + " queue " + std::to_string(x.queue) +
                                        " io=xdp mode=" + (*r)->attach_mode()
                                  : "";
  return Serve(r, g_xsk, what);
}

}  // namespace

int main(int argc, char** argv) {
  inca::reflect::UdpForwarderConfig c;
  inca::reflect::XskConfig x;
  CLI::App app{"udp-forwarder: plain UDP forwarder (benchmark baseline for inca-switchd)"};
  app.add_option("--listen", c.listen, "HOST:PORT to listen on (--io xdp: the port reflected)")
      ->capture_default_str();
  app.add_option("--forward", c.forward,
                 "HOST:PORT to send every datagram to (repeatable); none = reflect");
  app.add_option("--batch-size", c.batch_size, "datagrams per recvmmsg/sendmmsg")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--socket-buffer-bytes", c.socket_buffer_bytes, "SO_RCVBUF/SO_SNDBUF requested")
      ->capture_default_str();
  std::string io = "gso";
  app.add_option("--io", io,
                 "path: gso (UDP GSO/GRO where the kernel has them), mmsg, uring (io_uring, "
                 "reflect only) or xdp (AF_XDP on --interface, reflect only; root); uring and "
                 "xdp are measurement baselines")
      ->capture_default_str();
  app.add_option("--interface", x.interface, "--io xdp: the device whose queue it takes over");
  app.add_option("--queue", x.queue, "--io xdp: the device's receive queue")->capture_default_str();
  app.add_option("--xdp-mode", x.mode, "--io xdp: attach libxdp's program natively or as skb")
      ->check(CLI::IsMember({"auto", "native", "skb"}))
      ->capture_default_str();
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "udp-forwarder"); rc >= 0)
    return rc;
  x.batch = c.batch_size;

  if (io == "xdp") return RunXsk(c, x);
  if (io == "uring") {
    auto r = inca::reflect::UringReflector::Create(c);
    const std::string what =
        r.ok() ? "listening on port " + std::to_string((*r)->socket().local.port()) + " io=uring"
               : "";
    return Serve(r, g_uring, what);
  }
  auto mode = inca::net::ParseIoMode(io);
  if (!mode.ok()) {
    std::cerr << "udp-forwarder: " << mode.status().message() << "\n";
    return 2;
  }
  c.io = *mode;
  auto fwd = inca::reflect::UdpForwarder::Create(c);
  const std::string what = fwd.ok() ? "listening on port " + std::to_string((*fwd)->local_port()) +
                                          " " + (*fwd)->socket().Describe()
                                    : "";
  return Serve(fwd, g_forwarder, what);
}
