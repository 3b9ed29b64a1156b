// inca-sim: runs a scenario (YAML, docs/sim.md) on the discrete-event
// simulator. An OLAF scenario writes <out>/<name>.json (summary,
// per-cluster AoM and loss) and <out>/<name>.csv (AoM and queue time
// series); a CAIS scenario (`system: cais`) writes the all-reduce times of
// inca and the ring, against their closed forms, to the same two files; a
// tensor-parallel one (`system: cais-tp`), step times per TP degree, link
// rate and backend. A scenario with `sweep:` (or --sweep KEY=V1,V2) runs once per value, named
// <name>-<V> (--jobs N: N processes at once), and <name>-sweep.csv and
// .json merge the runs' results.
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#include "absl/strings/str_split.h"
#include "inca/sim/cais_scenario.h"
#include "inca/sim/dp_scenario.h"
#include "inca/sim/olaf_scenario.h"
#include "inca/sim/tp_scenario.h"
#include "util/cli_flags.h"
#include "util/file.h"

namespace {

// Runs `run(progress)` with a progress line on stderr; on success writes
// <out>/<name>.json and .csv (from `json` and `csv` of the result) and
// returns the result, else prints the error and returns nullopt.
template <typename Run, typename Json, typename Csv>
auto RunAndWrite(const std::string& name, const std::string& out_dir, bool progress, Run run,
                 Json json, Csv csv) -> std::optional<typename decltype(run(nullptr))::value_type> {
  auto r = run([&](double f) {
    if (progress) std::fprintf(stderr, "\r%s: %3.0f%%", name.c_str(), 100 * f);
  });
  if (progress) std::fprintf(stderr, "\n");
  if (!r.ok()) {
    std::cerr << "inca-sim: " << r.status().message() << "\n";
    return std::nullopt;
  }
  for (const auto& [ext, text] :
       {std::pair{".json", json(*r) + "\n"}, std::pair{".csv", csv(*r)}}) {
    const std::filesystem::path file = std::filesystem::path(out_dir) / (name + ext);
    std::ofstream f(file);
    f << text;
    f.close();
    if (!f) {
      std::cerr << "inca-sim: cannot write " << file.string() << "\n";
      return std::nullopt;
    }
  }
  return *std::move(r);
}

// Makes --out a directory that can be written before anything runs: a path
// that cannot be created (/proc/nope) or that names a regular file was an
// uncaught std::filesystem_error (abort) after the run. "" or the error.
std::string PrepareOutDir(const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec || !std::filesystem::is_directory(out_dir, ec)) {
    return "--out " + out_dir + " is not a directory that can be created (" +
           (ec ? ec.message() : std::string("it exists and is not a directory")) + ")";
  }
  if (access(out_dir.c_str(), W_OK | X_OK) != 0) {
    return "--out " + out_dir + " is a directory this process cannot write to";
  }
  return "";
}

// RunAndWrite for a scenario kind with a run (scenario, progress), a JSON
// (scenario, result) and a CSV (result) function.
template <typename Scenario, typename Result>
std::optional<Result> RunAndWrite(const Scenario& s, const std::string& out_dir, bool progress,
                                  absl::StatusOr<Result> (*run)(const Scenario&,
                                                                const inca::sim::Progress&),
                                  std::string (*json)(const Scenario&, const Result&),
                                  std::string (*csv)(const Result&)) {
  return RunAndWrite(
      s.name, out_dir, progress, [&](const std::function<void(double)>& p) { return run(s, p); },
      [&](const Result& x) { return json(s, x); }, csv);
}

// A CAIS kind's last line (its events and wall time) and exit code: 1 if
// any row has wrong elements.
template <typename Result>
int Finish(const Result& r) {
  std::printf("  %lu events in %.2f s\n", static_cast<unsigned long>(r.events), r.wall_s);
  for (const auto& x : r.rows) {
    if (x.wrong != 0) return 1;
  }
  return 0;
}

int RunOne(const inca::sim::OlafScenario& s, const std::string& out_dir, bool progress) {
  namespace sim = inca::sim;
  auto r = RunAndWrite(
      s.name, out_dir, progress,
      [&](const std::function<void(double)>& p) { return sim::RunOlafScenario(s, p); },
      [](const sim::OlafResult& x) { return sim::ResultJson(x); },
      [](const sim::OlafResult& x) { return sim::SeriesCsv(x); });
  if (!r) return 1;
  std::printf(
      "%-28s mean AoM %9.1f ms  loss %5.1f%%  received %7lu (carrying %7lu)  Jain %.3f  "
      "%lu events in %.2f s\n",
      s.name.c_str(), r->mean_aom_ms, 100 * r->loss, static_cast<unsigned long>(r->received),
      static_cast<unsigned long>(r->carried), r->jain_aom, static_cast<unsigned long>(r->events),
      r->wall_s);
  return 0;
}

int RunOne(const inca::sim::CaisSimScenario& s, const std::string& out_dir, bool progress) {
  namespace sim = inca::sim;
  auto r = RunAndWrite(s, out_dir, progress, sim::RunCaisSimScenario, sim::CaisResultJson,
                       sim::CaisResultCsv);
  if (!r) return 1;
  std::printf("%-24s %d hosts x %g Gbit/s, %g us each way, %s mode\n", s.name.c_str(), s.hosts,
              s.link_gbps, s.link_delay_us, s.mode.c_str());
  if (s.fat_tree_k > 0) {
    std::printf("%-24s a k=%d fat-tree, %g Gbit/s between switches, placement %s\n", "",
                s.fat_tree_k, s.UplinkGbps(), s.placement.c_str());
  } else if (s.racks > 0) {
    std::printf("%-24s %d racks of %d, %d spine%s, uplinks %g Gbit/s, placement %s\n", "", s.racks,
                s.hosts / s.racks, s.spines, s.spines > 1 ? "s" : "", s.UplinkGbps(),
                s.placement.c_str());
  }
  if (s.jobs > 1) {
    std::printf("%-24s %d jobs of %d ranks at once (mean: until the last job's ends)\n", "", s.jobs,
                s.JobRanks());
  }
  std::printf("  %-5s %12s %12s %12s %9s %8s %8s %8s%s\n", "", "bytes", "mean (us)", "closed (us)",
              "of closed", "resent", "to host", "wrong", s.jobs > 1 ? "  jobs' means (us)" : "");
  for (const auto& x : r->rows) {
    std::printf("  %-5s %12lu %12.1f %12.1f %9.3f %8lu %8lu %8lu", x.backend.c_str(),
                static_cast<unsigned long>(x.bytes), x.mean_us, x.closed_form_us, x.of_closed_form,
                static_cast<unsigned long>(x.retransmitted),
                static_cast<unsigned long>(x.fallback_chunks), static_cast<unsigned long>(x.wrong));
    if (!x.job_mean_us.empty()) {
      const auto [lo, hi] = std::minmax_element(x.job_mean_us.begin(), x.job_mean_us.end());
      std::printf("  %.1f-%.1f", *lo, *hi);
    }
    std::printf("\n");
  }
  return Finish(*r);
}

int RunOne(const inca::sim::TpScenario& s, const std::string& out_dir, bool progress) {
  namespace sim = inca::sim;
  auto r =
      RunAndWrite(s, out_dir, progress, sim::RunTpScenario, sim::TpResultJson, sim::TpResultCsv);
  if (!r) return 1;
  const sim::TpModel& m = s.model;
  std::printf("%-24s %s: h %d, s %d, %d layers, micro-batch %d; all-reduce %lu B; %d steps\n",
              s.name.c_str(), m.model.c_str(), m.hidden, m.seq, m.layers, m.micro_batch,
              static_cast<unsigned long>(sim::AllReduceBytes(m)), s.steps);
  std::printf("  %4s %7s %-5s %10s %10s %10s %10s %8s %8s %6s\n", "tp", "Gbit/s", "", "AR (us)",
              "AR p99", "step (ms)", "p99 (ms)", "p99/avg", "comm", "wrong");
  bool to_host = false;
  for (const auto& x : r->rows) {
    std::printf("  %4d %7g %-5s %10.1f %10.1f %10.2f %10.2f %8.3f %7.1f%% %6lu\n", x.tp,
                x.link_gbps, x.backend.c_str(), x.ar_mean_us, x.ar_p99_us, x.step.mean_ms,
                x.step.p99_ms, x.step.p99_over_mean, 100 * x.step.comm_share,
                static_cast<unsigned long>(x.wrong));
    to_host |= x.fallback_chunks != 0;
  }
  if (to_host) {
    std::printf(
        "  some chunks went to the host path, which is not simulated: see fallback_chunks\n");
  }
  return Finish(*r);
}

int RunOne(const inca::sim::DpScenario& s, const std::string& out_dir, bool progress) {
  namespace sim = inca::sim;
  auto r =
      RunAndWrite(s, out_dir, progress, sim::RunDpScenario, sim::DpResultJson, sim::DpResultCsv);
  if (!r) return 1;
  const sim::DpModel& m = s.model;
  std::printf("%-24s %s over tp %d: %lu B of gradients a step in %lu B buckets; compute %.1f ms\n",
              s.name.c_str(), m.model.c_str(), m.tp,
              static_cast<unsigned long>(sim::GradientBytes(m)),
              static_cast<unsigned long>(m.bucket_bytes),
              1e3 * m.accumulation * (sim::ForwardSeconds(m) + sim::BackwardSeconds(m)));
  std::printf("  %5s %-5s %12s %12s %10s %10s %7s %6s\n", "dp", "", "bucket (us)", "closed (us)",
              "comm (ms)", "step (ms)", "comm", "wrong");
  for (const auto& x : r->rows) {
    std::printf("  %5d %-5s %12.1f %12.1f %10.2f %10.2f %6.1f%% %6lu\n", x.dp, x.backend.c_str(),
                x.bucket_us, x.bucket_closed_form_us, x.step.comm_ms, x.step.step_ms,
                100 * x.step.comm_share, static_cast<unsigned long>(x.wrong));
  }
  return Finish(*r);
}

// Parses, applies --set and --sweep, and runs each resulting scenario.
int Fail(const std::string& message) {
  std::cerr << "inca-sim: " << message << "\n";
  return 2;
}

// Runs each scenario (a sweep's values), `jobs` processes at a time (1: in
// this one), each child's stdout printed whole and in the runs' order.
// The exit code: 0 when every run's is.
template <typename Scenario>
int RunAll(const std::vector<Scenario>& runs, const std::string& out_dir, bool progress, int jobs) {
  int rc = 0;
  if (jobs <= 1) {
    for (const Scenario& one : runs) rc |= RunOne(one, out_dir, progress);
    return rc;
  }
  struct Child {
    pid_t pid = -1;
    int out = -1;
  };
  std::vector<Child> children(runs.size());
  size_t started = 0;
  auto start = [&](size_t i) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      return false;
    }
    if (pid == 0) {  // the child: one run, its report into the pipe
      close(fds[0]);
      dup2(fds[1], STDOUT_FILENO);
      const int code = RunOne(runs[i], out_dir, false);
      std::fflush(stdout);
      _exit(code);
    }
    close(fds[1]);
    children[i] = {pid, fds[0]};
    return true;
  };
  for (; started < runs.size() && started < static_cast<size_t>(jobs); ++started) {
    if (!start(started)) return Fail("cannot start a process for " + runs[started].name);
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string report;
    char buf[4096];
    for (ssize_t n; (n = read(children[i].out, buf, sizeof buf)) > 0;) report.append(buf, n);
    close(children[i].out);
    int status = 0;
    waitpid(children[i].pid, &status, 0);
    std::fputs(report.c_str(), stdout);
    rc |= WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (started < runs.size() && !start(started++)) {
      return Fail("cannot start a process for " + runs[started - 1].name);
    }
  }
  return rc;
}

// A sweep's results in one place: <out>/<name>-sweep.csv, each run's CSV
// rows behind a first column of the swept key's value, and
// <out>/<name>-sweep.json, {"sweep_key", "runs": [{"value", "result"}]}.
// "" or what could not be read or written.
std::string MergeSweep(const std::string& out_dir, const std::string& name, const std::string& key,
                       const std::vector<std::string>& values) {
  const std::filesystem::path dir(out_dir);
  std::string csv, json = "{\"sweep_key\": \"" + key + "\", \"runs\": [";
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string one = name + "-" + values[i];
    std::string header, line, body;
    std::ifstream c(dir / (one + ".csv")), j(dir / (one + ".json"));
    if (!c || !j) return "cannot read " + (dir / one).string() + ".csv or .json";
    std::getline(c, header);
    if (i == 0) csv = key + "," + header + "\n";
    while (std::getline(c, line)) csv += values[i] + "," + line + "\n";
    body.assign(std::istreambuf_iterator<char>(j), std::istreambuf_iterator<char>());
    while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) body.pop_back();
    json +=
        std::string(i ? ", " : "") + "{\"value\": \"" + values[i] + "\", \"result\": " + body + "}";
  }
  json += "]}\n";
  for (const auto& [ext, text] : {std::pair{".csv", csv}, std::pair{".json", json}}) {
    std::ofstream f(dir / (name + "-sweep" + ext));
    f << text;
    f.close();
    if (!f) return "cannot write " + (dir / (name + "-sweep" + ext)).string();
  }
  return "";
}

template <typename Scenario, typename Parse, typename Override>
int Main(const std::string& text, const std::string& path, const std::vector<std::string>& sets,
         const std::string& sweep, const std::string& out_dir, bool progress, int jobs, Parse parse,
         Override apply) {
  auto s = parse(text, path);
  if (!s.ok()) return Fail(std::string(s.status().message()));
  // Every --set first, then the scenario checked as a whole: keys that
  // constrain each other (racks and hosts) may come in any order.
  for (const std::string& kv : sets) {
    if (auto st = apply(kv, &*s, false); !st.ok()) return Fail(std::string(st.message()));
  }
  if (auto st = s->Validate(); !st.ok()) return Fail(std::string(st.message()));
  if (!sweep.empty()) {
    const size_t eq = sweep.find('=');
    if (eq == std::string::npos) return Fail("--sweep '" + sweep + "' must be KEY=V1,V2,...");
    s->sweep_key = sweep.substr(0, eq);
    s->sweep_values = absl::StrSplit(sweep.substr(eq + 1), ',', absl::SkipEmpty());
    if (s->sweep_key.empty() || s->sweep_values.empty()) {
      return Fail("--sweep '" + sweep + "' must be KEY=V1,V2,... with at least one value");
    }
  }
  if (const std::string bad = PrepareOutDir(out_dir); !bad.empty()) return Fail(bad);
  if (s->sweep_key.empty()) return RunOne(*s, out_dir, progress);
  std::vector<Scenario> runs;
  for (const std::string& v : s->sweep_values) {
    Scenario one = *s;
    if (auto st = apply(s->sweep_key + "=" + v, &one, true); !st.ok())
      return Fail(std::string(st.message()));
    one.name = s->name + "-" + v;
    runs.push_back(std::move(one));
  }
  const int rc = RunAll(runs, out_dir, progress, jobs);
  if (rc != 0) return rc;
  if (const std::string bad = MergeSweep(out_dir, s->name, s->sweep_key, s->sweep_values);
      !bad.empty()) {
    return Fail(bad);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"inca-sim: OLAF and CAIS scenarios on the discrete-event simulator (docs/sim.md)"};
  std::string path, out_dir = "sim-out", sweep;
  std::vector<std::string> sets;
  bool progress = false;
  int jobs = 1;
  app.add_option("scenario", path, "scenario YAML file")->required()->check(CLI::ExistingFile);
  app.add_option("--set", sets, "override a key, KEY=VALUE (repeatable)");
  app.add_option("--sweep", sweep, "run once per value: KEY=V1,V2,...");
  app.add_option("--out", out_dir, "output directory")->capture_default_str();
  app.add_flag("--progress", progress, "show progress on stderr");
  app.add_option("--jobs", jobs,
                 "run a sweep's values in this many processes at once (each run writes its own "
                 "files; <name>-sweep.csv and .json merge them)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "inca-sim"); rc >= 0) return rc;
  // Bounded, and a read error is one: /dev/zero (it passes ExistingFile)
  // was read forever.
  const auto read = inca::util::ReadSmallFile(path, inca::util::kMaxConfigFileBytes, "scenario");
  if (!read.ok()) return Fail(std::string(read.status().message()));
  const std::string& text = *read;
  if (inca::sim::IsDpScenario(text)) {
    return Main<inca::sim::DpScenario>(text, path, sets, sweep, out_dir, progress, jobs,
                                       inca::sim::ParseDpScenario, inca::sim::ApplyDpOverride);
  }
  if (inca::sim::IsTpScenario(text)) {
    return Main<inca::sim::TpScenario>(text, path, sets, sweep, out_dir, progress, jobs,
                                       inca::sim::ParseTpScenario, inca::sim::ApplyTpOverride);
  }
  if (inca::sim::IsCaisScenario(text)) {
    return Main<inca::sim::CaisSimScenario>(text, path, sets, sweep, out_dir, progress, jobs,
                                            inca::sim::ParseCaisSimScenario,
                                            inca::sim::ApplyCaisOverride);
  }
  return Main<inca::sim::OlafScenario>(text, path, sets, sweep, out_dir, progress, jobs,
                                       inca::sim::ParseOlafScenario, inca::sim::ApplyOverride);
}
