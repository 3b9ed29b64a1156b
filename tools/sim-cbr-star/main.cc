// sim-cbr-star: inca-sim's engine on the workload of its ns-3 comparison
// (docs/sim.md, "Against ns-3"; inca/sim/cbr_star.h): `sources` hosts send
// UDP datagrams of `payload` bytes at a constant rate through one switch to
// one sink over a bottleneck, the switch a drop-tail queue (--switch plain)
// or inca's OLAF switch program (fifo, olaf). inca-ns3 cbr-star is the same
// on ns-3; scripts/bench-sim-vs-ns3.sh runs both and compares. Prints one
// JSON line: offered, delivered, dropped and merged datagrams, events and
// wall time.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "sim/cbr_star_flags.h"
#include "util/cli_flags.h"

int main(int argc, char** argv) {
  CLI::App app{"sim-cbr-star: the ns-3 comparison's workload on inca-sim's engine"};
  inca::sim::CbrStarConfig c;
  inca::sim::AddCbrStarFlags(app, c);
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "sim-cbr-star"); rc >= 0)
    return rc;
  auto r = inca::sim::RunCbrStar(c);
  if (!r.ok()) {
    std::fprintf(stderr, "sim-cbr-star: %s\n", std::string(r.status().message()).c_str());
    return 2;
  }
  std::printf("%s\n", inca::sim::ToJson(*r).c_str());
  return 0;
}
