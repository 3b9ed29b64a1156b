// inca-ns3: inca's cores inside ns-3 (docs/ns3.md), the adapter's example.
//
//   inca-ns3 olaf scenarios/olaf/a-star.yaml [--set key=value ...]
//       the OLAF evaluation's scenario on ns-3 (OlafQueueDisc at the
//       switches, OlafWorkerApp / OlafPsApp at the hosts): one JSON line,
//       each cluster's AoM at the PS, updates sent, applied and carried;
//       --compare runs inca-sim on the same scenario and adds its figures.
//   inca-ns3 cais [--hosts N] [--link-gbps G] [--size 4M] [--compare]
//       a CAIS all-reduce on ns-3 (CaisRankApp on each host, CaisSwitchApp
//       on the switch): one JSON line, exact or not, its time; --compare
//       adds inca-sim's time for the same star (byte-exact, ns-3's framing).
//   inca-ns3 cbr-star [--switch plain|fifo|olaf] [sim-cbr-star's flags]
//       the constant-rate star on ns-3: one JSON line as sim-cbr-star's.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "inca/ns3/cais_ns3.h"
#include "inca/ns3/olaf_ns3.h"
#include "inca/sim/cais_scenario.h"
#include "inca/util/size.h"
#include "sim/cbr_star_flags.h"
#include "util/cli_flags.h"
#include "util/file.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "inca-ns3: %s\n", message.c_str());
  return 2;
}

std::string OlafJson(const inca::sim::OlafScenario& s, const inca::Ns3OlafResult& r,
                     const inca::sim::OlafResult* sim) {
  std::ostringstream o;
  o << "{\"name\":\"" << s.name << "\",\"simulator\":\"ns-3.37\",\"mean_aom_ms\":" << r.mean_aom_ms
    << ",\"events\":" << r.events << ",\"wall_s\":" << r.wall_s;
  if (sim) {
    o << ",\"inca_sim_mean_aom_ms\":" << sim->mean_aom_ms
      << ",\"aom_ratio\":" << r.mean_aom_ms / sim->mean_aom_ms;
  }
  o << ",\"clusters\":[";
  for (size_t i = 0; i < r.clusters.size(); ++i) {
    const auto& c = r.clusters[i];
    o << (i ? "," : "") << "{\"cluster\":" << c.cluster_id << ",\"mean_aom_ms\":" << c.mean_aom_ms
      << ",\"sent\":" << c.sent << ",\"received\":" << c.received << ",\"carried\":" << c.carried;
    if (sim && i < sim->clusters.size()) {
      o << ",\"inca_sim_mean_aom_ms\":" << sim->clusters[i].mean_aom_ms
        << ",\"inca_sim_received\":" << sim->clusters[i].received;
    }
    o << "}";
  }
  o << "]}";
  return o.str();
}

int RunOlaf(const std::string& path, const std::vector<std::string>& sets, bool compare) {
  const auto text = inca::util::ReadSmallFile(path, inca::util::kMaxConfigFileBytes, "scenario");
  if (!text.ok()) return Fail(std::string(text.status().message()));
  auto s = inca::sim::ParseOlafScenario(*text, path);
  if (!s.ok()) return Fail(std::string(s.status().message()));
  for (const std::string& kv : sets) {
    if (auto st = inca::sim::ApplyOverride(kv, &*s); !st.ok())
      return Fail(std::string(st.message()));
  }
  auto r = inca::RunOlafScenarioOnNs3(*s);
  if (!r.ok()) return Fail(std::string(r.status().message()));
  absl::StatusOr<inca::sim::OlafResult> sim;
  if (compare) {
    sim = inca::sim::RunOlafScenario(*s);
    if (!sim.ok()) return Fail(std::string(sim.status().message()));
  }
  std::printf("%s\n", OlafJson(*s, *r, compare ? &*sim : nullptr).c_str());
  return 0;
}

// inca-sim's time for the same all-reduce: one switch, byte-exact, the
// links' framing ns-3's (UDP 8 + IPv4 20 + PPP 2).
absl::StatusOr<double> IncaSimMs(const inca::CaisNs3Config& c) {
  inca::sim::CaisSimScenario s;
  s.name = "ns3-compare";
  s.seed = c.seed;
  s.backends = {"inca"};
  s.hosts = c.hosts;
  s.link_gbps = c.link_gbps;
  s.link_delay_us = c.delay_us;
  s.overhead_bytes = 30;
  s.chunk_size = c.chunk_size;
  s.sizes = {c.bytes};
  s.ops = 1;
  auto r = inca::sim::RunCaisSimScenario(s);
  if (!r.ok()) return r.status();
  if (r->rows.empty() || r->rows[0].wrong != 0) return absl::InternalError("inca-sim: not exact");
  return r->rows[0].mean_us / 1e3;
}

int RunCais(const inca::CaisNs3Config& c, bool compare) {
  auto r = inca::RunCaisAllReduceOnNs3(c);
  if (!r.ok()) return Fail(std::string(r.status().message()));
  std::ostringstream o;
  o << "{\"simulator\":\"ns-3.37\",\"hosts\":" << c.hosts << ",\"bytes\":" << c.bytes
    << ",\"exact\":" << (r->exact ? "true" : "false") << ",\"completed\":" << r->completed
    << ",\"time_ms\":" << r->time_ms << ",\"resent\":" << r->resent << ",\"events\":" << r->events
    << ",\"wall_s\":" << r->wall_s;
  if (compare) {
    auto ms = IncaSimMs(c);
    if (!ms.ok()) return Fail(std::string(ms.status().message()));
    o << ",\"inca_sim_time_ms\":" << *ms << ",\"time_ratio\":" << r->time_ms / *ms;
  }
  std::printf("%s}\n", o.str().c_str());
  return r->exact ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"inca-ns3: inca's OLAF switch, workers and PS inside ns-3 (docs/ns3.md)"};
  app.require_subcommand(1);
  CLI::App* olaf = app.add_subcommand("olaf", "an OLAF scenario (YAML, docs/sim.md) on ns-3");
  std::string path;
  std::vector<std::string> sets;
  bool compare = false;
  olaf->add_option("scenario", path, "scenario file")->required()->check(CLI::ExistingFile);
  olaf->add_option("--set", sets, "override one key (key=value), as inca-sim's --set");
  olaf->add_flag("--compare", compare, "also run inca-sim on the scenario and report both");
  CLI::App* cais = app.add_subcommand("cais", "a CAIS all-reduce on ns-3");
  inca::CaisNs3Config cc;
  std::string size = "4M";
  bool cais_compare = false;
  cais->add_option("--hosts", cc.hosts, "ranks, one per host")->capture_default_str();
  cais->add_option("--link-gbps", cc.link_gbps, "every host link")->capture_default_str();
  cais->add_option("--delay-us", cc.delay_us, "every link's propagation delay")
      ->capture_default_str();
  cais->add_option("--size", size, "bytes of f32 each rank all-reduces (4M, 1G...)")
      ->capture_default_str();
  cais->add_option("--chunk-size", cc.chunk_size, "payload bytes per chunk")->capture_default_str();
  cais->add_option("--seed", cc.seed, "the job id and the switch's first sequence base")
      ->capture_default_str();
  cais->add_flag("--compare", cais_compare, "also run inca-sim on the same star");
  CLI::App* cbr = app.add_subcommand("cbr-star", "the constant-rate star on ns-3");
  inca::sim::CbrStarConfig c;
  inca::sim::AddCbrStarFlags(*cbr, c);
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "inca-ns3"); rc >= 0) return rc;
  if (olaf->parsed()) return RunOlaf(path, sets, compare);
  if (cais->parsed()) {
    auto bytes = inca::util::ParseSize(size);
    if (!bytes.ok()) return Fail(std::string(bytes.status().message()));
    cc.bytes = *bytes;
    return RunCais(cc, cais_compare);
  }
  auto r = inca::RunCbrStarOnNs3(c);
  if (!r.ok()) return Fail(std::string(r.status().message()));
  std::printf("%s\n", inca::sim::ToJson(*r).c_str());
  return 0;
}
