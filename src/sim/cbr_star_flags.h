// The constant-rate star's flags (inca/sim/cbr_star.h), shared by
// sim-cbr-star (inca-sim) and inca-ns3 cbr-star (ns-3).
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "inca/sim/cbr_star.h"

namespace inca::sim {

inline void AddCbrStarFlags(CLI::App& app, CbrStarConfig& c) {
  const std::map<std::string, CbrSwitch> switches = {
      {"plain", CbrSwitch::kPlain}, {"fifo", CbrSwitch::kFifo}, {"olaf", CbrSwitch::kOlaf}};
  app.add_option("--switch", c.sw,
                 "plain: a drop-tail queue of --queue; fifo, olaf: inca's OLAF switch program "
                 "with that policy and depth --queue, the sources OLAF workers")
      ->transform(CLI::CheckedTransformer(switches))
      ->default_str("plain");
  app.add_option("--sources", c.sources, "senders")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--rate-gbps", c.rate_gbps, "each sender's rate, UDP payload bits")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1000.0));
  app.add_option("--source-link-gbps", c.source_link_gbps, "each sender's link")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 10000.0));
  app.add_option("--bottleneck-gbps", c.bottleneck_gbps, "the switch -> sink link")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 10000.0));
  app.add_option("--payload", c.payload, "UDP payload bytes")
      ->capture_default_str()
      ->check(CLI::Range(16, 65000));
  app.add_option("--queue", c.queue, "packets that may wait at the bottleneck (drop-tail)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--framing", c.framing,
                 "bytes on the wire per datagram beyond its payload (ns-3's point-to-point "
                 "link: UDP 8 + IPv4 20 + PPP 2)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("--delay-us", c.delay_us, "every link's propagation delay")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--duration-s", c.duration_s, "simulated time")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1000.0));
}

}  // namespace inca::sim
