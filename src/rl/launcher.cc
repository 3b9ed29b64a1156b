// olaf-train run: the launcher (include/inca/rl/distributed.h). Starts the
// PS, inca-switchd and the workers, on loopback or placed in the network
// namespaces of a testbed (docs/testbed.md, "OLAF on the testbed"), waits,
// stops them and merges their results.
#include <arpa/inet.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "distributed_internal.h"
#include "inca/olaf/send_control.h"
#include "inca/olaf/worker_endpoint.h"
#include "inca/rl/distributed.h"
#include "launch/process.h"
#include "util/flat_json.h"

namespace inca::rl {

namespace fs = std::filesystem;
using drl::Clock;
using drl::Fail;
using drl::g_stop;
using drl::In;
using drl::InstallStopHandlers;
using drl::ValidCommon;

namespace {

// Fixed ports on a testbed, where every namespace has all of its own.
constexpr int kPlacedPsPort = 9600;
constexpr int kPlacedSwitchPort = 9500;
constexpr int kPlacedWorkerPortBase = 9700;  // worker k: base + k

// Where a role runs: a network namespace (empty: this one) and the IPv4
// address it binds.
struct Place {
  std::string ns;
  std::string ip = "127.0.0.1";
};

// "NS@IP" (a namespace `ip netns` knows, an IPv4 address in it).
std::optional<Place> ParsePlace(const std::string& text) {
  const size_t at = text.find('@');
  if (at == std::string::npos || at == 0 || at + 1 >= text.size()) return std::nullopt;
  Place p{text.substr(0, at), text.substr(at + 1)};
  for (char c : p.ns) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return std::nullopt;
    }
  }
  in_addr a{};
  if (inet_pton(AF_INET, p.ip.c_str(), &a) != 1) return std::nullopt;
  return p;
}

// Whether something has bound UDP `ip`:`port` in the network namespace of
// process `pid` (0: ours). Linux /proc/PID/net/udp; looking, not binding,
// so the switch is never raced for its port.
bool UdpBound(pid_t pid, const std::string& ip, int port) {
  in_addr a{};
  if (inet_pton(AF_INET, ip.c_str(), &a) != 1) return false;
  std::ifstream in(pid > 0 ? absl::StrCat("/proc/", pid, "/net/udp") : "/proc/net/udp");
  char want[32];
  // The kernel prints the address as the 32-bit word in host byte order.
  std::snprintf(want, sizeof(want), "%08X:%04X ", a.s_addr, port);
  for (std::string line; std::getline(in, line);) {
    if (line.find(want) != std::string::npos) return true;
  }
  return false;
}

struct Episode {
  int64_t t_ns;
  double ret;
};

std::string ReadAll(const fs::path& p) {
  return util::ReadText(p.string());
}

double JsonNumber(const std::string& json, std::string_view key) {
  return util::FlatJsonNumber(json, key).value_or(0);
}

// What the launcher hands its children: the switch binary, the ports and
// addresses, and the arguments the PS and every worker share.
struct Launch {
  std::string switchd;
  std::string ip_tool;  // `ip`, when roles are placed in namespaces
  Place ps_place, sw_place;
  std::vector<Place> worker_places;  // empty: all on loopback
  std::set<int> taken;               // distinct ports for the PS, the switch and every worker
  int sw_port = 0;
  std::string ps_addr, sw_addr;
  std::vector<int> ports;  // the workers', cluster by cluster
  std::vector<std::string> model_args;
};

// The launcher's children; destroyed (killed if still running) workers
// first, then the switch, then the PS.
struct Children {
  launch::Process ps;
  launch::Process sw;
  std::vector<launch::Process> workers;
};

// Every worker's results, read back from its files.
struct Merged {
  std::vector<Episode> episodes;  // in time order
  double generated = 0, sent = 0, models = 0;
};

// Starts `exe args` in `where`'s namespace (ip netns exec, which execs in
// place: the child keeps its pid and its parent-death signal).
launch::Process SpawnIn(const Launch& l, const Place& where, const std::string& exe,
                        std::vector<std::string> args, const std::string& log) {
  if (where.ns.empty()) return launch::Process::SpawnToFile(exe, args, log);
  args.insert(args.begin(), {"netns", "exec", where.ns, exe});
  return launch::Process::SpawnToFile(l.ip_tool, args, log);
}

// A loopback UDP port not handed out before in this run (0: none found).
int FreshPort(std::set<int>* taken) {
  for (int i = 0; i < 100; ++i) {
    const int p = launch::FreeLoopbackPort(true);
    if (p > 0 && taken->insert(p).second) return p;
  }
  return 0;
}

// Parses --place-*: all three or none; 0 or the exit code.
int CheckPlacement(const DistributedOptions& o, Launch* l) {
  const bool any = !o.place_ps.empty() || !o.place_switch.empty() || !o.place_workers.empty();
  if (!any) return 0;
  if (o.place_ps.empty() || o.place_switch.empty() || o.place_workers.empty()) {
    return Fail("run", "--place-ps, --place-switch and --place-workers go together", 2);
  }
  auto ps = ParsePlace(o.place_ps);
  auto sw = ParsePlace(o.place_switch);
  if (!ps || !sw) return Fail("run", "--place-ps/--place-switch must be NAMESPACE@IPv4", 2);
  l->ps_place = *ps;
  l->sw_place = *sw;
  for (const std::string& w : o.place_workers) {
    auto p = ParsePlace(w);
    if (!p) return Fail("run", absl::StrCat("--place-workers: ", w, " is not NAMESPACE@IPv4"), 2);
    l->worker_places.push_back(*p);
  }
  if (geteuid() != 0) return Fail("run", "--place-* needs root (ip netns exec)", 2);
  for (const char* ip : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(ip, X_OK) == 0) {
      l->ip_tool = ip;
      return 0;
    }
  }
  return Fail("run", "--place-* needs the ip tool (apt-get install iproute2)", 2);
}

// Checks the launcher's options and finds inca-switchd; 0 or the exit code.
int CheckRunOptions(const DistributedOptions& o, const std::string& self, Launch* l) {
  std::string* switchd = &l->switchd;
  if (!ValidCommon(o, "run")) return 2;
  if (o.program != "olaf" && o.program != "fifo") {
    return Fail("run", "--program must be olaf or fifo", 2);
  }
  if (!olaf::ParseSendControlMode(o.send_control)) {
    return Fail("run", "--send-control must be off, priority or fairness", 2);
  }
  if (o.clusters < 1 || o.clusters > 60 || o.workers_per_cluster < 1 ||
      uint64_t{o.clusters} * o.workers_per_cluster > 60) {
    return Fail("run", "--clusters x --workers-per-cluster must be 1..60 workers", 2);
  }
  if (!(o.egress_mbps == 0 || In(o.egress_mbps, 1e-3, 1e7)) || !In(o.slow_factor, 1e-3, 1e3) ||
      !In(o.cycle_ms, 1e-3, 1e6) || !In(o.tau_ms, 1e-3, 1e6)) {
    return Fail(
        "run",
        "--egress-mbps 0 (unpaced) or (0, 1e7], --slow-factor (0, 1000], --cycle-ms (0, 1e6] and "
        "--tau-ms (0, 1e6] please",
        2);
  }
  if (o.queue_depth < 1 || o.queue_depth > 65536) {
    return Fail("run", "--depth must be 1..65536", 2);
  }
  if (o.fast_clusters > o.clusters) {  // was silently "every cluster fast"
    return Fail("run",
                absl::StrCat("--fast-clusters ", o.fast_clusters, " is more than the ", o.clusters,
                             " clusters (--clusters)"),
                2);
  }
  if (o.clock != "ps" && o.clock != "local") return Fail("run", "--clock must be ps or local", 2);
  if (!(o.clock_skew_s >= 0 && o.clock_skew_s <= 3600)) {
    return Fail("run", "--clock-skew-s must be in [0, 3600]", 2);
  }
  if (o.clock_skew_s > 0 && geteuid() != 0) {
    return Fail("run", "--clock-skew-s needs root (it runs workers in time namespaces)", 2);
  }
  if (const int rc = CheckPlacement(o, l); rc != 0) return rc;
  *switchd = o.switchd;
  if (switchd->empty()) *switchd = (fs::path(self).parent_path() / "inca-switchd").string();
  if (access(switchd->c_str(), X_OK) != 0) {
    return Fail("run", absl::StrCat("inca-switchd not found at ", *switchd, " (--switchd)"), 2);
  }
  return 0;
}

// Removes an earlier run's results from --out; 0 or the exit code.
int RemoveOldResults(const DistributedOptions& o) {
  std::error_code ec;
  for (fs::directory_iterator it(o.out_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind("worker-", 0) == 0 || n.rfind("ps.", 0) == 0 || n == "summary.json" ||
        n == "curve.csv" || n == "switchd.json") {
      std::error_code rm;
      fs::remove(it->path(), rm);
      if (rm) return Fail("run", absl::StrCat("cannot remove old ", it->path().string()));
    }
  }
  if (ec) return Fail("run", absl::StrCat("cannot list ", o.out_dir, ": ", ec.message()));
  return 0;
}

// Picks the PS's and the switch's ports and starts the PS; 0 or the exit code.
int StartPs(const DistributedOptions& o, const std::string& self, Launch* l, Children* ch) {
  const bool placed = !l->worker_places.empty();
  const int ps_port = placed ? kPlacedPsPort : FreshPort(&l->taken);
  l->sw_port = placed ? kPlacedSwitchPort : FreshPort(&l->taken);
  l->ps_addr = absl::StrCat(l->ps_place.ip, ":", ps_port);
  l->sw_addr = absl::StrCat(l->sw_place.ip, ":", l->sw_port);
  l->model_args = {"--seed",       absl::StrCat(o.seed),
                   "--out",        o.out_dir,
                   "--hidden",     absl::StrCat(o.worker.model.hidden),
                   "--lr",         absl::StrCat(o.worker.model.learning_rate),
                   "--delta-t-ms", absl::StrCat(o.delta_t_ms)};
  // The PS serves until told to stop; its --duration is only a hard cap.
  std::vector<std::string> ps_args = {
      "ps",
      "--bind",
      l->ps_addr,
      "--duration",
      absl::StrCat(o.duration_s + 60),
      "--clusters",
      absl::StrCat(o.clusters),
      "--eval-episodes",
      absl::StrCat(o.eval_episodes),
      "--lr-anneal-s",
      absl::StrCat(o.lr_anneal_s < 0 ? o.duration_s : o.lr_anneal_s)};
  ps_args.insert(ps_args.end(), l->model_args.begin(), l->model_args.end());
  ch->ps = SpawnIn(*l, l->ps_place, self, ps_args, (fs::path(o.out_dir) / "ps.log").string());
  if (!ch->ps.running()) return Fail("run", "cannot start the PS");
  return 0;
}

// Picks every worker's port, starts inca-switchd and waits until it listens;
// 0 or the exit code.
int StartSwitch(const DistributedOptions& o, Launch* l, Children* ch) {
  std::vector<std::string> sw_args = {"--program",
                                      o.program,
                                      "--ps",
                                      l->ps_addr,
                                      "--listen",
                                      l->sw_addr,
                                      "--egress-mbps",
                                      absl::StrCat(o.egress_mbps),
                                      "--depth",
                                      absl::StrCat(o.queue_depth),
                                      "--delta-t-ms",
                                      absl::StrCat(o.delta_t_ms),
                                      "--tau-ms",
                                      absl::StrCat(o.tau_ms),
                                      "--log-level",
                                      "warn",
                                      "--control-listen",
                                      "off",
                                      "--http-listen",
                                      "off"};
  for (uint32_t c = 0; c < o.clusters; ++c) {
    for (uint32_t w = 0; w < o.workers_per_cluster; ++w) {
      const int k = static_cast<int>(l->ports.size());
      l->ports.push_back(l->worker_places.empty() ? FreshPort(&l->taken)
                                                  : kPlacedWorkerPortBase + k);
      sw_args.push_back("--cluster");
      sw_args.push_back(absl::StrCat(l->ports.back(), "=", c));
    }
  }
  ch->sw = SpawnIn(*l, l->sw_place, l->switchd, sw_args,
                   (fs::path(o.out_dir) / "switchd.json").string());
  if (!ch->sw.running()) return Fail("run", "cannot start inca-switchd");
  for (const auto up_by = Clock::now() + std::chrono::seconds(20);
       !UdpBound(l->sw_place.ns.empty() ? 0 : ch->sw.pid(), l->sw_place.ip, l->sw_port);) {
    if (const int rc = ch->sw.Wait(std::chrono::milliseconds(20)); rc >= 0) {
      return Fail("run", absl::StrCat("inca-switchd exited with ", rc, " at start-up"));
    }
    if (Clock::now() > up_by || g_stop) return Fail("run", "inca-switchd did not come up in 20 s");
  }
  return 0;
}

// Worker k's place: --place-workers round robin, or loopback.
const Place& WorkerPlace(const Launch& l, size_t k) {
  static const Place kLoopback;
  return l.worker_places.empty() ? kLoopback : l.worker_places[k % l.worker_places.size()];
}

// Starts every worker, cluster by cluster; 0 or the exit code.
int StartWorkers(const DistributedOptions& o, const std::string& self, const Launch& l,
                 Children* ch) {
  for (uint32_t c = 0; c < o.clusters; ++c) {
    const double slowdown = c < o.fast_clusters ? 1.0 : o.slow_factor;
    for (uint32_t w = 0; w < o.workers_per_cluster; ++w) {
      std::vector<std::string> args = {
          "worker",
          "--peer",
          l.sw_addr,
          "--bind",
          absl::StrCat(WorkerPlace(l, c * o.workers_per_cluster + w).ip, ":",
                       l.ports[c * o.workers_per_cluster + w]),
          "--cluster",
          absl::StrCat(c),
          "--index",
          absl::StrCat(w),
          "--cycle-ms",
          absl::StrCat(o.cycle_ms),
          "--slowdown",
          absl::StrCat(slowdown),
          "--send-control",
          o.send_control,
          "--duration",
          absl::StrCat(o.duration_s)};
      args.insert(args.end(), l.model_args.begin(), l.model_args.end());
      args.insert(args.end(), {"--clock", o.clock});
      std::string exe = self;
      if (o.clock_skew_s > 0) {  // another "host": its own CLOCK_MONOTONIC
        const int k = static_cast<int>((c * o.workers_per_cluster + w) % 3) - 1;
        args.insert(args.begin(), {"--time", absl::StrCat("--monotonic=", k * o.clock_skew_s),
                                   "--fork", "--kill-child=SIGTERM", self});
        exe = "/usr/bin/unshare";
      }
      ch->workers.push_back(
          SpawnIn(l, WorkerPlace(l, c * o.workers_per_cluster + w), exe, args,
                  (fs::path(o.out_dir) / absl::StrCat("worker-", c, "-", w, ".log")).string()));
      if (!ch->workers.back().running()) return Fail("run", "cannot start a worker");
    }
  }
  return 0;
}

// Waits for the workers; past one deadline for all (or on Ctrl-C) they get
// SIGTERM, then SIGKILL, before anything is merged. Returns how many failed.
int WaitForWorkers(const DistributedOptions& o, std::vector<launch::Process>* workers_ptr) {
  std::vector<launch::Process>& workers = *workers_ptr;
  int failures = 0;
  std::vector<int> codes(workers.size(), -1);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(o.duration_s + 30));
  for (size_t done = 0; done < workers.size();) {
    done = 0;
    for (size_t i = 0; i < workers.size(); ++i) {
      if (codes[i] < 0) codes[i] = workers[i].Wait(std::chrono::milliseconds(0));
      if (codes[i] >= 0) ++done;
    }
    if (done == workers.size()) break;
    if (g_stop || Clock::now() > deadline) {
      for (size_t i = 0; i < workers.size(); ++i) {
        if (codes[i] < 0) workers[i].Signal(SIGTERM);
      }
      for (size_t i = 0; i < workers.size(); ++i) {
        if (codes[i] < 0) codes[i] = workers[i].Wait(std::chrono::seconds(5));
        if (codes[i] < 0) {
          workers[i].Signal(SIGKILL);
          codes[i] = workers[i].Wait(std::chrono::seconds(5));  // 137: a failure
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int c : codes) failures += c != 0 ? 1 : 0;
  return failures;
}

// Stops the PS or the switch: SIGTERM, up to `grace` to exit, then SIGKILL.
// Returns 1 if it did not exit with 0, else 0.
int StopServer(launch::Process* p, std::chrono::seconds grace) {
  p->Signal(SIGTERM);
  const int rc = p->Wait(grace);
  if (rc < 0) {
    p->Signal(SIGKILL);
    p->Wait(std::chrono::seconds(5));
  }
  return rc != 0 ? 1 : 0;
}

// Reads back every worker's episodes (sorted by time) and counters.
Merged MergeWorkers(const DistributedOptions& o) {
  Merged m;
  for (uint32_t c = 0; c < o.clusters; ++c) {
    for (uint32_t w = 0; w < o.workers_per_cluster; ++w) {
      const fs::path stem = fs::path(o.out_dir) / absl::StrCat("worker-", c, "-", w);
      std::ifstream in(stem.string() + ".csv");
      std::string line;
      std::getline(in, line);  // header
      while (std::getline(in, line)) {
        std::vector<absl::string_view> f = absl::StrSplit(line, ',');
        Episode e{};
        if (f.size() == 2 && absl::SimpleAtoi(f[0], &e.t_ns) && absl::SimpleAtod(f[1], &e.ret)) {
          m.episodes.push_back(e);
        }
      }
      const std::string j = ReadAll(stem.string() + ".json");
      m.generated += JsonNumber(j, "generated");
      m.sent += JsonNumber(j, "sent");
      m.models += JsonNumber(j, "models");
    }
  }
  std::sort(m.episodes.begin(), m.episodes.end(),
            [](const Episode& a, const Episode& b) { return a.t_ns < b.t_ns; });
  return m;
}

// Writes curve.csv, the training curve over the merged episodes; returns
// the final windowed mean return.
double WriteCurve(const DistributedOptions& o, const std::vector<Episode>& episodes,
                  dp::TimeNs start_ns) {
  std::ofstream curve(fs::path(o.out_dir) / "curve.csv");
  curve << "t_s,episodes,mean_return\n";
  ReturnWindow window;
  double final_return = 0;
  for (size_t i = 0; i < episodes.size(); ++i) {
    window.Add(episodes[i].ret);
    final_return = window.mean();
    curve << static_cast<double>(episodes[i].t_ns - start_ns) / 1e9 << "," << i + 1 << ","
          << final_return << "\n";
  }
  return final_return;
}

// Writes summary.json from the merged results and ps.json, and prints the
// one-line result.
void Report(const DistributedOptions& o, const Merged& m, double final_return, size_t workers,
            int failures) {
  const std::string psj = ReadAll(fs::path(o.out_dir) / "ps.json");
  const double carried = JsonNumber(psj, "worker_fragments_carried") /
                         std::max(1.0, JsonNumber(psj, "fragments_per_update"));
  const double loss = m.sent > 0 ? 1.0 - std::min(1.0, carried / m.sent) : 0.0;
  std::ofstream(fs::path(o.out_dir) / "summary.json")
      << "{\"program\":\"" << o.program << "\",\"send_control\":\"" << o.send_control
      << "\",\"seed\":" << o.seed << ",\"duration_s\":" << o.duration_s
      << ",\"egress_mbps\":" << o.egress_mbps << ",\"workers\":" << workers
      << ",\"generated\":" << m.generated << ",\"sent\":" << m.sent << ",\"loss\":" << loss
      << ",\"models_received\":" << m.models << ",\"episodes\":" << m.episodes.size()
      << ",\"final_return\":" << final_return
      << ",\"eval_return\":" << JsonNumber(psj, "eval_return")
      << ",\"ps_updates\":" << JsonNumber(psj, "ps_updates")
      << ",\"mean_staleness\":" << JsonNumber(psj, "mean_staleness")
      << ",\"mean_aom_ms\":" << JsonNumber(psj, "mean_aom_ms") << ",\"failures\":" << failures
      << "}\n";
  std::printf(
      "%s%s: final return %.1f (eval %.1f), %.0f PS updates, loss %.1f%%, staleness %.1f, AoM "
      "%.1f ms, %zu episodes\n",
      o.program.c_str(), o.send_control == "off" ? "" : ("+" + o.send_control).c_str(),
      final_return, JsonNumber(psj, "eval_return"), JsonNumber(psj, "ps_updates"), 100 * loss,
      JsonNumber(psj, "mean_staleness"), JsonNumber(psj, "mean_aom_ms"), m.episodes.size());
}

}  // namespace

int RunDistributed(const DistributedOptions& o, const std::string& self) {
  Launch l;
  if (const int rc = CheckRunOptions(o, self, &l); rc != 0) return rc;
  // Old results must not mix with this run's.
  if (const int rc = RemoveOldResults(o); rc != 0) return rc;
  InstallStopHandlers();  // Ctrl-C: stop the children, still merge what they wrote

  Children ch;
  if (const int rc = StartPs(o, self, &l, &ch); rc != 0) return rc;
  if (const int rc = StartSwitch(o, &l, &ch); rc != 0) return rc;
  std::fprintf(stderr,
               "olaf-train run: %s, send control %s, %u clusters x %u workers, egress %s, "
               "%.0f s%s; results in %s\n",
               o.program.c_str(), o.send_control.c_str(), o.clusters, o.workers_per_cluster,
               o.egress_mbps > 0 ? absl::StrCat(o.egress_mbps, " Mbit/s").c_str() : "unpaced",
               o.duration_s, l.worker_places.empty() ? "" : ", placed in namespaces",
               o.out_dir.c_str());
  const auto start_ns = olaf::OlafWorkerEndpoint::Now();
  if (const int rc = StartWorkers(o, self, l, &ch); rc != 0) return rc;
  int failures = WaitForWorkers(o, &ch.workers);
  // The PS writes ps.json (and evaluates the model) on the way out.
  failures += StopServer(&ch.ps, std::chrono::seconds(300));
  failures += StopServer(&ch.sw, std::chrono::seconds(10));
  if (failures > 0) {
    Fail("run", absl::StrCat(failures,
                             " process(es) failed or had to be stopped; their stderr is "
                             "above, their stdout in the .log files in ",
                             o.out_dir));
  }

  // Merge: every worker's episodes in time order -> the training curve.
  const Merged merged = MergeWorkers(o);
  const double final_return = WriteCurve(o, merged.episodes, start_ns);
  Report(o, merged, final_return, ch.workers.size(), failures);
  return failures > 0 ? 1 : 0;
}

}  // namespace inca::rl
