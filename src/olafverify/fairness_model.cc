// Validation, the two questions, the control-plane hook and the report
// formats. The Z3 encoding itself lives in smt_encoding.cc.
#include "olafverify/fairness_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "olafverify/smt_encoding.h"

namespace inca::olafverify {
namespace {

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' ||
           ch == '.';
  });
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(ch));
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  return absl::StrFormat("%.6f", v);
}

std::string JsonStats(const SolveStats& s) {
  return absl::StrFormat(
      "{\"solve_ms\":%s,\"core_ms\":%s,\"encode_ms\":%s,\"encoded_updates\":%d,"
      "\"tracked_constraints\":%d,\"rounds\":%d}",
      JsonNumber(s.solve_ms), JsonNumber(s.core_ms), JsonNumber(s.encode_ms), s.encoded_updates,
      s.tracked_constraints, s.rounds);
}

std::string JsonSchedule(const Schedule& s) {
  std::vector<std::string> clusters;
  for (const ClusterTrace& t : s.clusters) {
    std::vector<std::string> ups;
    for (const UpdateRecord& r : t.updates) {
      ups.push_back(absl::StrCat(
          "{\"n\":", r.index, ",\"A_ms\":", JsonNumber(r.generated_ms),
          ",\"E_ms\":", JsonNumber(r.arrived_ms.value_or(r.generated_ms)),
          ",\"D_ms\":", r.delivered_ms ? JsonNumber(*r.delivered_ms) : "null",
          ",\"fate\":", JsonString(UpdateFateName(r.fate)),
          ",\"merged_into\":", r.merged_into >= 0 ? absl::StrCat(r.merged_into) : "null",
          ",\"Q\":", r.queue_occupancy, ",\"peak_aom_ms\":", JsonNumber(r.peak_aom_ms), "}"));
    }
    clusters.push_back(absl::StrCat("{\"name\":", JsonString(t.name),
                                    ",\"avg_peak_aom_ms\":", JsonNumber(t.avg_peak_aom_ms),
                                    ",\"updates\":[", absl::StrJoin(ups, ","), "]}"));
  }
  std::vector<std::string> gaps;
  for (const PairGap& g : s.gaps) {
    gaps.push_back(absl::StrCat("{\"u\":", JsonString(g.u), ",\"v\":", JsonString(g.v),
                                ",\"gap_ms\":", JsonNumber(g.gap_ms),
                                ",\"bound_ms\":", JsonNumber(g.bound_ms),
                                ",\"fair\":", g.fair() ? "true" : "false", "}"));
  }
  return absl::StrCat("{\"clusters\":[", absl::StrJoin(clusters, ","), "],\"gaps\":[",
                      absl::StrJoin(gaps, ","), "]}");
}

}  // namespace

double CapacityFromLink(double link_gbps, double update_bytes) {
  // bits per ms = gbps * 1e6.
  return link_gbps * 1e6 / (update_bytes * 8);
}

absl::Status Validate(const FairnessConfig& cfg) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (!std::isfinite(cfg.aom_threshold_ms) || cfg.aom_threshold_ms <= 0) {
    return bad("aom_threshold_ms (ΔT) must be a finite number > 0 ms (got ", cfg.aom_threshold_ms,
               ")");
  }
  if (cfg.clusters.size() < 2) {
    return bad("clusters: fairness compares clusters, give at least two (got ", cfg.clusters.size(),
               ")");
  }
  if (cfg.clusters.size() > kMaxClusters) {
    return bad("clusters: at most ", kMaxClusters, " supported (got ", cfg.clusters.size(), ")");
  }
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < cfg.clusters.size(); ++i) {
    const ClusterSpec& c = cfg.clusters[i];
    if (!ValidName(c.name)) {
      return bad("clusters[", i, "]: name '", c.name,
                 "' must be 1-64 characters from [A-Za-z0-9_.-]");
    }
    if (!names.insert(c.name).second) {
      return bad("clusters[", i, "]: duplicate cluster name '", c.name, "'");
    }
    if (!std::isfinite(c.update_period_ms) || c.update_period_ms <= 0) {
      return bad("clusters[", i, "] (", c.name, "): update_period_ms must be > 0 (got ",
                 c.update_period_ms, ")");
    }
    if (!std::isfinite(c.jitter_ms) || c.jitter_ms < 0 || c.jitter_ms >= c.update_period_ms) {
      return bad("clusters[", i, "] (", c.name,
                 "): jitter_ms must be in [0, update_period_ms = ", c.update_period_ms, ") (got ",
                 c.jitter_ms, ")");
    }
  }
  if (!std::isfinite(cfg.capacity_updates_per_ms) || cfg.capacity_updates_per_ms <= 0 ||
      cfg.capacity_updates_per_ms > 1e6) {
    return bad(
        "capacity_updates_per_ms (C) must be in (0, 1e6], a service time of at least 1 ns "
        "(got ",
        cfg.capacity_updates_per_ms, ")");
  }
  if (cfg.queue_size < 1) {
    return bad("queue_size must be >= 1 update (got ", cfg.queue_size, ")");
  }
  if (!(cfg.epsilon >= 0 && cfg.epsilon <= 1)) {
    return bad("epsilon must be in [0, 1] (got ", cfg.epsilon, ")");
  }
  if (cfg.horizon < 1 || cfg.horizon > kMaxHorizon) {
    return bad("horizon must be in [1, ", kMaxHorizon, "] updates of the slowest cluster (got ",
               cfg.horizon, ")");
  }
  if (!std::isfinite(cfg.max_transit_ms) || cfg.max_transit_ms < 0 ||
      cfg.max_transit_ms >= cfg.aom_threshold_ms) {
    return bad("max_transit_ms must be in [0, ΔT = ", cfg.aom_threshold_ms, ") (got ",
               cfg.max_transit_ms, ")");
  }
  if (cfg.solver_timeout_ms < 0) {
    return bad("solver_timeout_ms must be >= 0, 0 = no limit (got ", cfg.solver_timeout_ms, ")");
  }
  // Counted in double so that absurd period ratios cannot overflow.
  double pmax = 0;
  for (const ClusterSpec& c : cfg.clusters) pmax = std::max(pmax, c.update_period_ms);
  double total = 0, most = 0;
  size_t most_at = 0;
  for (size_t i = 0; i < cfg.clusters.size(); ++i) {
    const double n = std::ceil(cfg.horizon * pmax / cfg.clusters[i].update_period_ms - 1e-9);
    total += n;
    if (n > most) most = n, most_at = i;
  }
  if (total > kMaxEncodedUpdates) {
    return bad("horizon ", cfg.horizon, " encodes ", total, " updates (cluster '",
               cfg.clusters[most_at].name, "' alone has ", most, "); at most ", kMaxEncodedUpdates,
               ": lower the horizon");
  }
  return absl::OkStatus();
}

std::vector<int> UpdatesPerCluster(const FairnessConfig& cfg) {
  double pmax = 0;
  for (const ClusterSpec& c : cfg.clusters) pmax = std::max(pmax, c.update_period_ms);
  std::vector<int> out;
  for (const ClusterSpec& c : cfg.clusters) {
    const double n = std::ceil(cfg.horizon * pmax / c.update_period_ms - 1e-9);
    // Clamp before converting so absurd ratios cannot overflow an int;
    // Validate rejects them through the total.
    out.push_back(static_cast<int>(std::min(n, double{kMaxEncodedUpdates + 1})));
  }
  return out;
}

absl::StatusOr<ClusterSpec> ParseClusterSpec(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() < 2 || parts.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster '", text, "': expected NAME:PERIOD_MS[:JITTER_MS], e.g. fast:100"));
  }
  ClusterSpec c;
  c.name = parts[0];
  if (!absl::SimpleAtod(parts[1], &c.update_period_ms)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster '", text, "': period '", parts[1], "' is not a number"));
  }
  if (parts.size() == 3 && !absl::SimpleAtod(parts[2], &c.jitter_ms)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster '", text, "': jitter '", parts[2], "' is not a number"));
  }
  return c;
}

const char* UpdateFateName(UpdateFate f) {
  switch (f) {
    case UpdateFate::kDelivered: return "delivered";
    case UpdateFate::kEvicted: return "evicted";
    case UpdateFate::kTailDropped: return "tail-dropped";
    case UpdateFate::kMerged: return "merged";
    case UpdateFate::kDisplaced: return "displaced";
  }
  return "?";
}

absl::StatusOr<FeasibilityResult> CheckFeasible(const FairnessConfig& cfg) {
  if (absl::Status s = Validate(cfg); !s.ok()) return s;
  absl::StatusOr<internal::SolveOutcome> o = internal::Solve(cfg, internal::Question::kFair);
  if (!o.ok()) return o.status();
  FeasibilityResult r;
  r.feasible = o->sat;
  r.witness = std::move(o->schedule);
  r.conflicting_constraints = std::move(o->core);
  r.core_minimized = o->core_minimized;
  r.static_facts = std::move(o->static_facts);
  r.stats = o->stats;
  return r;
}

absl::StatusOr<RobustnessResult> CheckAlwaysFair(const FairnessConfig& cfg) {
  if (absl::Status s = Validate(cfg); !s.ok()) return s;
  absl::StatusOr<internal::SolveOutcome> o = internal::Solve(cfg, internal::Question::kViolation);
  if (!o.ok()) return o.status();
  RobustnessResult r;
  r.always_fair = !o->sat;
  r.counterexample = std::move(o->schedule);
  r.stats = o->stats;
  return r;
}

absl::Status CheckBeforeApply(const FairnessConfig& cfg, bool require_always_fair) {
  absl::StatusOr<FeasibilityResult> f = CheckFeasible(cfg);
  if (!f.ok()) return f.status();
  if (!f->feasible) {
    return absl::FailedPreconditionError(absl::StrCat(
        "OLAF configuration cannot be fair (epsilon ", cfg.epsilon, ", ΔT ", cfg.aom_threshold_ms,
        " ms, horizon ", cfg.horizon, "): conflicting constraints: ",
        f->conflicting_constraints.empty() ? "(core not computed within the solver budget)"
                                           : SummarizeConstraints(f->conflicting_constraints),
        f->static_facts.empty() ? "" : "; given ", absl::StrJoin(f->static_facts, "; ")));
  }
  if (!require_always_fair) return absl::OkStatus();
  absl::StatusOr<RobustnessResult> a = CheckAlwaysFair(cfg);
  if (!a.ok()) return a.status();
  if (!a->always_fair) {
    std::string worst;
    for (const PairGap& g : a->counterexample->gaps) {
      if (!g.fair()) {
        worst =
            absl::StrFormat("%s vs %s differ by %.1f ms > %.1f ms", g.u, g.v, g.gap_ms, g.bound_ms);
        break;
      }
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "OLAF configuration is not always fair: a schedule within the model exists where ", worst));
  }
  return absl::OkStatus();
}

std::string SummarizeConstraints(const std::vector<std::string>& names) {
  // "family(cluster,n=K)" grouped per family(cluster); others kept whole.
  std::map<std::string, std::vector<int>> indexed;
  std::vector<std::string> plain;
  for (const std::string& nm : names) {
    const size_t at = nm.rfind(",n=");
    int n = 0;
    if (at != std::string::npos && !nm.empty() && nm.back() == ')' &&
        absl::SimpleAtoi(nm.substr(at + 3, nm.size() - at - 4), &n)) {
      indexed[nm.substr(0, at)].push_back(n);
    } else {
      plain.push_back(nm);
    }
  }
  std::sort(plain.begin(), plain.end());
  std::vector<std::string> out = plain;
  for (auto& [prefix, ns] : indexed) {
    std::sort(ns.begin(), ns.end());
    ns.erase(std::unique(ns.begin(), ns.end()), ns.end());
    std::vector<std::string> runs;
    for (size_t i = 0; i < ns.size();) {
      size_t j = i;
      while (j + 1 < ns.size() && ns[j + 1] == ns[j] + 1) ++j;
      runs.push_back(j == i ? absl::StrCat(ns[i]) : absl::StrCat(ns[i], "..", ns[j]));
      i = j + 1;
    }
    out.push_back(absl::StrCat(prefix, ",n=", absl::StrJoin(runs, ","), ")"));
  }
  return absl::StrJoin(out, "; ");
}

std::string FormatSchedule(const Schedule& s) {
  std::string out;
  for (const ClusterTrace& t : s.clusters) {
    absl::StrAppendFormat(&out, "cluster %s: avg peak AoM %.3f ms over %d updates\n", t.name,
                          t.avg_peak_aom_ms, t.updates.size());
    absl::StrAppendFormat(&out, "  %4s %12s %12s %12s %4s  %-12s %12s\n", "n", "A(n) ms", "E(n) ms",
                          "D(n) ms", "Q(n)", "fate", "peak AoM ms");
    for (const UpdateRecord& r : t.updates) {
      absl::StrAppendFormat(
          &out, "  %4d %12.3f %12.3f %12s %4d  %-12s %12.3f\n", r.index, r.generated_ms,
          r.arrived_ms.value_or(r.generated_ms),
          r.delivered_ms ? absl::StrFormat("%.3f", *r.delivered_ms) : "-", r.queue_occupancy,
          r.merged_into >= 0 ? absl::StrCat(UpdateFateName(r.fate), "->", r.merged_into)
                             : UpdateFateName(r.fate),
          r.peak_aom_ms);
    }
  }
  for (const PairGap& g : s.gaps) {
    absl::StrAppendFormat(&out, "%s vs %s: |avg gap| %.3f ms %s bound %.3f ms (%s)\n", g.u, g.v,
                          g.gap_ms, g.fair() ? "<=" : ">", g.bound_ms,
                          g.fair() ? "fair" : "UNFAIR");
  }
  return out;
}

std::string FormatConfig(const FairnessConfig& cfg) {
  const std::vector<int> counts = UpdatesPerCluster(cfg);
  std::vector<std::string> clusters;
  for (size_t i = 0; i < cfg.clusters.size(); ++i) {
    const ClusterSpec& c = cfg.clusters[i];
    clusters.push_back(absl::StrFormat("%s every %g ms%s (%d updates)", c.name, c.update_period_ms,
                                       c.jitter_ms > 0 ? absl::StrFormat(" ±%g", c.jitter_ms) : "",
                                       counts[i]));
  }
  return absl::StrFormat(
      "ΔT %g ms, C %g updates/ms (service %g ms), queue %d, ε %g (%s), horizon %d, transit <= %g "
      "ms\nclusters: %s\n",
      cfg.aom_threshold_ms, cfg.capacity_updates_per_ms, 1 / cfg.capacity_updates_per_ms,
      cfg.queue_size, cfg.epsilon,
      cfg.norm == FairnessNorm::kPairMean ? "of the pair mean" : "of ΔT", cfg.horizon,
      cfg.max_transit_ms, absl::StrJoin(clusters, ", "));
}

namespace {
std::string FormatStats(const SolveStats& s) {
  std::string out = absl::StrFormat(
      "solve time %.1f ms (encode %.1f ms; %d updates, %d constraints, %d solver rounds)",
      s.solve_ms, s.encode_ms, s.encoded_updates, s.tracked_constraints, s.rounds);
  if (s.core_ms > 0) absl::StrAppendFormat(&out, "; unsat core %.1f ms", s.core_ms);
  return out + "\n";
}
}  // namespace

std::string FormatReport(const FeasibilityResult& r) {
  std::string out;
  if (r.feasible) {
    out = "[feasible] YES: a schedule exists under which the clusters are fair. Witness:\n" +
          FormatSchedule(*r.witness);
  } else {
    out = "[feasible] NO: no schedule within the horizon is fair.\n";
    if (r.conflicting_constraints.empty()) {
      out += "conflicting constraints: not computed within the solver budget\n";
    } else {
      absl::StrAppend(&out, "conflicting constraints (unsat core",
                      r.core_minimized ? ", minimal per group" : "", "):\n  ",
                      SummarizeConstraints(r.conflicting_constraints), "\n");
    }
    for (const std::string& f : r.static_facts) absl::StrAppend(&out, "given: ", f, "\n");
  }
  return out + FormatStats(r.stats);
}

std::string FormatReport(const RobustnessResult& r) {
  std::string out = r.always_fair
                        ? "[always] YES: every schedule within the horizon is fair.\n"
                        : "[always] NO: a schedule within the model is unfair. Counterexample:\n" +
                              FormatSchedule(*r.counterexample);
  return out + FormatStats(r.stats);
}

std::string ToJson(const FairnessConfig& cfg) {
  std::vector<std::string> clusters;
  const std::vector<int> counts = UpdatesPerCluster(cfg);
  for (size_t i = 0; i < cfg.clusters.size(); ++i) {
    const ClusterSpec& c = cfg.clusters[i];
    clusters.push_back(absl::StrCat("{\"name\":", JsonString(c.name),
                                    ",\"update_period_ms\":", JsonNumber(c.update_period_ms),
                                    ",\"jitter_ms\":", JsonNumber(c.jitter_ms),
                                    ",\"updates\":", i < counts.size() ? counts[i] : 0, "}"));
  }
  return absl::StrCat(
      "{\"aom_threshold_ms\":", JsonNumber(cfg.aom_threshold_ms), ",\"clusters\":[",
      absl::StrJoin(clusters, ","),
      "],\"capacity_updates_per_ms\":", JsonNumber(cfg.capacity_updates_per_ms),
      ",\"queue_size\":", cfg.queue_size, ",\"epsilon\":", JsonNumber(cfg.epsilon),
      ",\"norm\":", cfg.norm == FairnessNorm::kPairMean ? "\"pair-mean\"" : "\"threshold\"",
      ",\"horizon\":", cfg.horizon, ",\"max_transit_ms\":", JsonNumber(cfg.max_transit_ms),
      ",\"solver_timeout_ms\":", cfg.solver_timeout_ms, "}");
}

std::string ToJson(const FeasibilityResult& r) {
  std::vector<std::string> core;
  for (const std::string& c : r.conflicting_constraints) core.push_back(JsonString(c));
  std::vector<std::string> facts;
  for (const std::string& f : r.static_facts) facts.push_back(JsonString(f));
  return absl::StrCat("{\"question\":\"feasible\",\"feasible\":", r.feasible ? "true" : "false",
                      ",\"witness\":", r.witness ? JsonSchedule(*r.witness) : "null",
                      ",\"conflicting_constraints\":[", absl::StrJoin(core, ","),
                      "],\"core_minimized\":", r.core_minimized ? "true" : "false",
                      ",\"static_facts\":[", absl::StrJoin(facts, ","),
                      "],\"stats\":", JsonStats(r.stats), "}");
}

std::string ToJson(const RobustnessResult& r) {
  return absl::StrCat(
      "{\"question\":\"always\",\"always_fair\":", r.always_fair ? "true" : "false",
      ",\"counterexample\":", r.counterexample ? JsonSchedule(*r.counterexample) : "null",
      ",\"stats\":", JsonStats(r.stats), "}");
}

}  // namespace inca::olafverify
