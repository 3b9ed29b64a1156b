#include "cli/cais_cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iomanip>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/cli_common.h"
#include "inca/control/control_plane.h"
#include "inca/control/offload_controller.h"
#include "inca/dataplane/program.h"
#include "util/cli_flags.h"

namespace inca::cli {

namespace {

struct UsageError {
  std::string message;
};

std::vector<uint16_t> ParsePorts(const std::string& s, const char* flag) {
  std::vector<uint16_t> out;
  if (s.empty()) throw UsageError{absl::StrCat(flag, " needs at least one port")};
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    if (part.empty()) {  // "1,,2" or "1,": a port left out, not nothing
      throw UsageError{absl::StrCat(flag, ": '", s, "' has an empty entry (use e.g. 1,2,3,4)")};
    }
    uint32_t p = 0;
    if (!absl::SimpleAtoi(part, &p) || p >= dp::kMaxPorts) {
      throw UsageError{absl::StrCat(flag, ": '", std::string(part), "' is not a port number 0..",
                                    dp::kMaxPorts - 1, " (use e.g. 1,2,3,4)")};
    }
    if (std::find(out.begin(), out.end(), static_cast<uint16_t>(p)) != out.end()) {
      throw UsageError{absl::StrCat(flag, ": port ", p, " is listed twice")};
    }
    out.push_back(static_cast<uint16_t>(p));
  }
  if (out.empty()) throw UsageError{absl::StrCat(flag, " needs at least one port")};
  return out;
}

std::optional<uint16_t> ParseIdOrWildcard(const std::string& s, const char* flag) {
  if (s == "*" || s == "any" || s.empty()) return std::nullopt;
  uint32_t v = 0;
  if (!absl::SimpleAtoi(s, &v) || v > 65535) {
    throw UsageError{absl::StrCat(flag, ": '", s, "' must be 0..65535 or * (wildcard)")};
  }
  return static_cast<uint16_t>(v);
}

std::optional<wire::CaisOp> ParseOp(const std::string& s) {
  if (s == "allreduce") return wire::CaisOp::kAllReduce;
  if (s == "allgather") return wire::CaisOp::kAllGather;
  if (s == "broadcast") return wire::CaisOp::kBroadcast;
  if (s == "reducescatter") return wire::CaisOp::kReduceScatter;
  if (s == "any") return std::nullopt;
  throw UsageError{absl::StrCat("--op-type '", s,
                                "' must be allreduce, allgather, broadcast, reducescatter or any")};
}

std::string OpName(const std::optional<wire::CaisOp>& op) {
  return op ? std::string(wire::ToString(*op)) : "any";
}

std::string Id(const std::optional<uint16_t>& v) {
  return v ? absl::StrCat(*v) : "*";
}

std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

int Report(const absl::Status& s, std::ostream& err) {
  return cli::Report("cais-cli", s, err);
}

// Every flag of every verb, as parsed.
struct Args {
  std::string device = "127.0.0.1:50051";
  bool json = false;
  std::string group = "0", layer = "*", chunk = "*", in_ports, out_ports, op = "allreduce";
  std::string uplink;
  bool host_path = false;
  std::vector<std::string> settings;
  std::string gaction = "list", gports;
  std::string paction = "list", endpoint, port_s;
};

uint8_t GroupId(const std::string& group) {
  uint32_t g = 0;
  if (!absl::SimpleAtoi(group, &g) || g > 255) {
    throw UsageError{absl::StrCat("--group-id '", group, "' must be 0..255")};
  }
  return static_cast<uint8_t>(g);
}

// One function per verb: the switch's answer on `out`, or a one-line error
// on `err`; the exit code (kOk, 1 refused, 3 unreachable). UsageError for
// bad flags.
int AddRule(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  cais::Rule r;
  r.key = {GroupId(a.group), ParseIdOrWildcard(a.layer, "--layer-id"),
           ParseIdOrWildcard(a.chunk, "--chunk-id")};
  r.host_path = a.host_path;
  if (!a.host_path && a.in_ports.empty()) {
    throw UsageError{"add-rule needs --input-ports (or --host-path for a policy rule)"};
  }
  if (!a.in_ports.empty()) {
    for (uint16_t p : ParsePorts(a.in_ports, "--input-ports")) r.input_ports.add(p);
  }
  if (!a.out_ports.empty()) {
    for (uint16_t p : ParsePorts(a.out_ports, "--output-ports")) r.output_ports.add(p);
  } else {
    r.output_ports = r.input_ports;
  }
  r.op = ParseOp(a.op);
  if (!a.uplink.empty()) r.uplink = ParsePorts(a.uplink, "--uplink").at(0);
  const absl::Status s = cp.AddRule(r);
  if (s.ok()) out << (a.json ? "{\"ok\":true}" : "added rule " + r.key.ToString()) << "\n";
  return Report(s, err);
}

int DelRule(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  const cais::RuleKey k{GroupId(a.group), ParseIdOrWildcard(a.layer, "--layer-id"),
                        ParseIdOrWildcard(a.chunk, "--chunk-id")};
  const absl::Status s = cp.DeleteRule(k);
  if (s.ok()) out << (a.json ? "{\"ok\":true}" : "deleted rule " + k.ToString()) << "\n";
  return Report(s, err);
}

int DumpRules(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  auto rules = cp.DumpRules();
  if (!rules.ok()) return Report(rules.status(), err);
  if (a.json) {
    std::vector<std::string> items;
    for (const auto& r : *rules) {
      items.push_back(absl::StrCat(
          "{\"group_id\":", r.key.group_id, ",\"layer_id\":\"", Id(r.key.layer_id),
          "\",\"chunk_id\":\"", Id(r.key.chunk_id), "\",\"input_ports\":[",
          r.input_ports.ToString(), "],\"output_ports\":[", r.output_ports.ToString(),
          "],\"op_type\":\"", OpName(r.op), "\",\"host_path\":", r.host_path ? "true" : "false",
          ",\"uplink\":", r.uplink ? absl::StrCat(*r.uplink) : "null", ",\"rank_ports\":[",
          absl::StrJoin(r.rank_ports, ","), "]}"));
    }
    out << "[" << absl::StrJoin(items, ",") << "]\n";
  } else {
    out << "group  layer  chunk  input-ports       output-ports      op-type  path    uplink\n";
    for (const auto& r : *rules) {
      out << std::left << std::setw(7) << static_cast<int>(r.key.group_id) << std::setw(7)
          << Id(r.key.layer_id) << std::setw(7) << Id(r.key.chunk_id) << std::setw(18)
          << r.input_ports.ToString() << std::setw(18) << r.output_ports.ToString() << std::setw(9)
          << OpName(r.op) << " " << std::setw(8) << (r.host_path ? "host" : "switch")
          << (r.uplink ? absl::StrCat(*r.uplink) : "-") << "\n";
    }
    out << rules->size() << " rule(s)\n";
  }
  return kOk;
}

int ShowStats(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  auto st = cp.GetStats();
  if (!st.ok()) return Report(st.status(), err);
  // The controller's windowed figures, when one has spoken (else the
  // since-start ones alone).
  auto policy = cp.GetOffloadPolicy();
  const bool windowed = policy.ok() && policy->updated_unix_ms != 0;
  const double fallback = windowed ? policy->fallback_ratio : st->fallback_ratio;
  if (a.json) {
    std::vector<std::string> drops;
    for (const auto& [k, v] : st->drops) drops.push_back(absl::StrCat("\"", k, "\":", v));
    out << "{\"device\":\"" << JsonEscape(Device(a.device))
        << "\",\"sram_usage\":" << st->sram_usage
        << ",\"sram_pending_usage\":" << st->sram_pending_usage
        << ",\"reduce_throughput_ops_per_s\":" << st->reductions_per_s
        << ",\"reduced_bytes_per_s\":" << st->reduced_bytes_per_s
        << ",\"avg_queue_delay_us\":" << st->ingress_queue_delay_us
        << ",\"slot_holding_avg_us\":" << st->slot_holding_avg_us
        << ",\"slot_holding_p50_us\":" << st->slot_holding_p50_us
        << ",\"slot_holding_p99_us\":" << st->slot_holding_p99_us
        << ",\"fallback_ratio\":" << st->fallback_ratio << ",\"fallback_ratio_window\":"
        << (windowed ? absl::StrCat(policy->fallback_ratio) : std::string("null"))
        << ",\"fallback_alarm\":" << (fallback > 0.10 ? "true" : "false")
        << ",\"completed_chunks\":" << st->counters.cais.completed_chunks
        << ",\"timeouts\":" << st->counters.cais.timeouts
        << ",\"uplink_partials\":" << st->counters.cais.uplink_partials
        << ",\"uplink_requests\":" << st->counters.cais.uplink_requests
        << ",\"uplink_resent\":" << st->counters.cais.uplink_resent
        << ",\"parent_results\":" << st->counters.cais.parent_results
        << ",\"mgmt_reports\":" << st->counters.mgmt_reports
        << ",\"mgmt_reports_forwarded\":" << st->counters.mgmt_reports_forwarded
        << ",\"rx_packets\":" << st->counters.reducer.rx_packets
        << ",\"tx_packets\":" << st->counters.reducer.tx_packets
        << ",\"conserved\":" << (st->conserved ? "true" : "false") << ",\"drops\":{"
        << absl::StrJoin(drops, ",") << "}}\n";
  } else {
    auto rate = [](double v) {
      std::ostringstream o;
      o << std::fixed << std::setprecision(1);
      if (v >= 1e6) {
        o << v / 1e6 << "M";
      } else if (v >= 1e3) {
        o << v / 1e3 << "K";
      } else {
        o << v;
      }
      return o.str();
    };
    out << std::fixed << std::setprecision(1) << "Device: " << Device(a.device) << "\n"
        << "SRAM Usage: " << 100 * st->sram_usage << "% (pending " << 100 * st->sram_pending_usage
        << "% of " << st->sram_bytes / 1024 << " KiB)\n"
        << "Reduce Throughput: " << rate(st->reductions_per_s) << " ops/sec ("
        << rate(st->reduced_bytes_per_s) << "B/s)\n"
        << "Avg Queue Delay: " << st->ingress_queue_delay_us
        << "us (in the switch: kernel receive to pipeline)\n"
        << "Slot Holding: " << st->slot_holding_avg_us << "us avg, p50 " << st->slot_holding_p50_us
        << ", p99 " << st->slot_holding_p99_us
        << "us (first contribution to completion: the wait for the other ranks)\n"
        << "Fallback Ratio: " << 100 * fallback << "%"
        << (windowed
                ? absl::StrCat(
                      " over the last ",
                      control::OffloadControllerConfig{}.fallback_window_ns / 1'000'000'000,
                      " s (since start ", absl::StrFormat("%.1f", 100 * st->fallback_ratio), "%)")
                : std::string(" since start"))
        << (fallback > 0.10 ? "  (ALERT: above 10%, check links and loss)" : "") << "\n"
        << "Packets: rx " << st->counters.reducer.rx_packets << ", tx "
        << st->counters.reducer.tx_packets << ", completed " << st->counters.cais.completed_chunks
        << " chunks, " << st->counters.cais.timeouts << " timeouts"
        << (st->conserved ? "" : "  (counters do not add up!)") << "\n";
    if (const auto& c = st->counters.cais; c.uplink_partials > 0 || c.parent_results > 0) {
      out << "Tree: " << c.uplink_partials << " partials up (" << c.uplink_resent << " resent, "
          << c.uplink_requests << " requests), " << c.parent_results << " parent results down\n";
    }
    for (const auto& [k, v] : st->drops) out << "Dropped " << k << ": " << v << "\n";
  }
  return kOk;
}

int Configure(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  if (!a.settings.empty()) {
    std::string bad;
    const std::map<std::string, std::string> values = ParseSettings(a.settings, &bad);
    if (!bad.empty()) {
      throw UsageError{absl::StrCat("'", bad, "' must be key=value, e.g. timeout_ms=80")};
    }
    return SetAndPrintConfig("cais-cli", values, a.json, cp, out, err);
  }
  return SetAndPrintConfig("cais-cli", {}, a.json, cp, out, err);
}

// This switch's place in group G's tree (docs/design/tree.md): its rule's
// members and uplink with their endpoints, and the group's figures here.
int ShowTree(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  const uint8_t g = GroupId(a.group);
  auto rules = cp.DumpRules();
  if (!rules.ok()) return Report(rules.status(), err);
  auto ports = cp.ListPorts();
  if (!ports.ok()) return Report(ports.status(), err);
  auto st = cp.GetStats();
  if (!st.ok()) return Report(st.status(), err);
  const cais::Rule* rule = nullptr;
  for (const cais::Rule& r : *rules) {
    if (r.key.group_id == g && !r.key.layer_id && !r.key.chunk_id && !r.host_path) rule = &r;
  }
  if (rule == nullptr) {
    err << "cais-cli: group " << static_cast<int>(g)
        << " has no group-wide reduction rule on this switch (see dump-rules)\n";
    return 1;
  }
  auto endpoint = [&](uint16_t port) -> std::string {
    for (const control::PortInfo& p : *ports) {
      if (p.port == port) return p.endpoint;
    }
    return "unbound";
  };
  control::GroupStats gs;
  for (const control::GroupStats& s : st->groups) {
    if (s.group_id == g) gs = s;
  }
  const cais::GroupCounters& c = gs.counters;
  const std::string parent = rule->uplink ? endpoint(*rule->uplink) : "";
  if (a.json) {
    std::vector<std::string> members;
    rule->input_ports.ForEach([&](dp::PortId p) {
      members.push_back(
          absl::StrCat("{\"port\":", p, ",\"endpoint\":\"", JsonEscape(endpoint(p)), "\"}"));
    });
    out << "{\"group_id\":" << static_cast<int>(g) << ",\"role\":\""
        << (rule->uplink ? "child" : "root")
        << "\",\"uplink_port\":" << (rule->uplink ? absl::StrCat(*rule->uplink) : "null")
        << ",\"parent\":" << (rule->uplink ? absl::StrCat("\"", JsonEscape(parent), "\"") : "null")
        << ",\"members\":[" << absl::StrJoin(members, ",")
        << "],\"completed_chunks\":" << c.completed_chunks
        << ",\"uplink_partials\":" << c.uplink_partials
        << ",\"uplink_requests\":" << c.uplink_requests << ",\"uplink_resent\":" << c.uplink_resent
        << ",\"parent_results\":" << c.parent_results << ",\"timeouts\":" << c.timeouts
        << ",\"slot_holding_p50_us\":" << gs.slot_holding_p50_us
        << ",\"slot_holding_p99_us\":" << gs.slot_holding_p99_us << "}\n";
    return kOk;
  }
  out << "group " << static_cast<int>(g) << " at " << Device(a.device) << ": "
      << (rule->uplink ? absl::StrCat("below a parent, uplink port ", *rule->uplink, " -> ", parent)
                       : std::string("root (no uplink)"))
      << "\nmembers (reduction order):";
  rule->input_ports.ForEach([&](dp::PortId p) { out << " " << p << "=" << endpoint(p); });
  out << std::fixed << std::setprecision(1) << "\nchunks completed " << c.completed_chunks
      << ", partials up " << c.uplink_partials << " (" << c.uplink_resent << " resent, "
      << c.uplink_requests << " requests), parent results " << c.parent_results << ", timeouts "
      << c.timeouts << "\nslot holding here p50 " << gs.slot_holding_p50_us << " us, p99 "
      << gs.slot_holding_p99_us << " us\n";
  return kOk;
}

int Groups(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  if (a.gaction == "create") {
    auto g = cp.CreateGroup(GroupId(a.group), ParsePorts(a.gports, "--ports"));
    if (!g.ok()) return Report(g.status(), err);
    out << "created group " << static_cast<int>(g->group_id) << " over ports "
        << absl::StrJoin(g->rank_ports, ",") << "\n";
    return kOk;
  }
  if (a.gaction == "destroy") {
    const absl::Status s = cp.DestroyGroup(GroupId(a.group));
    if (s.ok()) out << "destroyed group " << a.group << "\n";
    return Report(s, err);
  }
  if (a.gaction != "list") throw UsageError{"groups action must be list, create or destroy"};
  auto gs = cp.ListGroups();
  if (!gs.ok()) return Report(gs.status(), err);
  for (const auto& g : *gs) {
    if (a.json) {
      std::vector<std::string> ts;
      for (const auto& t : g.timings) {
        ts.push_back(absl::StrCat(
            "{\"bin\":", t.bin, ",\"switch_us\":", t.switch_path.mean_us, ",\"switch_samples\":",
            t.switch_path.samples, ",\"switch_age_ms\":", t.switch_path.age_ms,
            ",\"switch_best_us_per_byte\":", t.switch_path.best_us_per_byte,
            ",\"host_us\":", t.host_path.mean_us, ",\"host_samples\":", t.host_path.samples,
            ",\"host_age_ms\":", t.host_path.age_ms,
            ",\"host_best_us_per_byte\":", t.host_path.best_us_per_byte, "}"));
      }
      out << "{\"group_id\":" << static_cast<int>(g.group_id) << ",\"world_size\":" << g.world_size
          << ",\"formed\":" << (g.formed ? "true" : "false") << ",\"source\":\"" << g.source
          << "\",\"contended\":" << (g.contended ? "true" : "false")
          << ",\"window_chunks\":" << g.window_chunks << ",\"rank_ports\":["
          << absl::StrJoin(g.rank_ports, ",") << "],\"timings\":[" << absl::StrJoin(ts, ",")
          << "]}\n";
    } else {
      out << "group " << static_cast<int>(g.group_id) << ": " << g.world_size << " ranks, "
          << (g.formed ? "formed" : "forming") << " (" << g.source << "), ports "
          << absl::StrJoin(g.rank_ports, ",")
          << (g.window_chunks != 0 ? absl::StrCat(", window ", g.window_chunks, " chunks") : "")
          << (g.contended ? " (sharing hosts with another group's traffic)" : "") << "\n";
      for (const auto& t : g.timings) {
        auto path = [](const control::PathTiming& p) {
          // best: the least time per byte of the last 4 samples, at the mean size
          return p.measured()
                     ? absl::StrFormat("%.0f us (best %.0f, %d samples, %d ms ago)", p.mean_us,
                                       p.best_us_per_byte * p.mean_bytes, p.samples, p.age_ms)
                     : std::string("not measured");
        };
        out << "  sizes 2^" << t.bin << " B: switch " << path(t.switch_path) << ", host "
            << path(t.host_path) << "\n";
      }
    }
  }
  return kOk;
}

int Ports(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  if (a.paction == "register" || a.paction == "release") {
    uint32_t p = 0;
    if (!absl::SimpleAtoi(a.port_s, &p) || p >= dp::kMaxPorts) {
      throw UsageError{absl::StrCat("--port must be 0..", dp::kMaxPorts - 1)};
    }
    if (a.paction == "release") {
      auto n = cp.ReleasePort(static_cast<uint16_t>(p));
      if (!n.ok()) return Report(n.status(), err);
      out << "released port " << p << " (" << *n << " group(s) dissolved)\n";
      return kOk;
    }
    const absl::Status s = cp.RegisterPort(static_cast<uint16_t>(p), a.endpoint);
    if (s.ok()) out << "port " << p << " -> " << a.endpoint << "\n";
    return Report(s, err);
  }
  if (a.paction != "list") throw UsageError{"ports action must be list, register or release"};
  return ListPorts("cais-cli", cp, out, err);
}

int Offload(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  auto p = cp.GetOffloadPolicy();
  if (!p.ok()) return Report(p.status(), err);
  auto bytes = [](uint64_t b) { return b == UINT64_MAX ? std::string("inf") : absl::StrCat(b); };
  if (a.json) {
    std::vector<std::string> gs;
    for (const auto& g : p->groups) {
      gs.push_back(absl::StrCat(
          "{\"group\":", g.group_id, ",\"participants\":", g.participants,
          ",\"offload\":", g.min_bytes <= g.max_bytes ? "true" : "false",
          ",\"min_bytes\":", g.min_bytes, ",\"max_bytes\":", g.max_bytes,
          ",\"measured_bins\":", g.measured_bins, ",\"offload_bins\":", g.offload_bins,
          ",\"borrowed_bins\":", g.borrowed_bins, ",\"fallback_ratio\":", g.fallback_ratio,
          ",\"fallback_hold\":", g.fallback_hold ? "true" : "false", "}"));
    }
    out << "{\"device\":\"" << JsonEscape(Device(a.device)) << "\",\"controller\":\""
        << JsonEscape(p->controller) << "\",\"updated_unix_ms\":" << p->updated_unix_ms
        << ",\"threshold\":" << p->threshold
        << ",\"fallback_alarm\":" << (p->fallback_alarm ? "true" : "false")
        << ",\"fallback_ratio\":" << p->fallback_ratio
        << ",\"queue_delay_us\":" << p->queue_delay_us
        << ",\"port_utilisation\":" << p->port_utilisation << ",\"sram_usage\":" << p->sram_usage
        << ",\"groups\":[" << absl::StrJoin(gs, ",") << "]}\n";
    return kOk;
  }
  if (p->updated_unix_ms == 0) {
    out << "No offload decisions yet: every operation goes to the switch "
           "(start inca-switchd with --offload-controller embedded, or run inca-controller)\n";
    return kOk;
  }
  out << std::fixed << std::setprecision(2) << "Controller: " << p->controller << "\n"
      << "Threshold: " << p->threshold << (p->fallback_alarm ? "  (fallback ALERT)" : "") << "\n"
      << "Queue Delay: " << p->queue_delay_us << "us, SRAM pressure: " << 100 * p->sram_usage
      << "%, port utilisation: " << 100 * p->port_utilisation << "%\n";
  for (const auto& g : p->groups) {
    out << "group " << unsigned{g.group_id} << " (" << g.participants << " ranks): "
        << (g.fallback_hold
                ? absl::StrFormat("OFF (host path): fallback hold, %.1f%% of its chunks fell "
                                  "back in the window",
                                  100 * g.fallback_ratio)
            : g.min_bytes > g.max_bytes
                ? std::string("OFF (host path)")
                : absl::StrCat("offload ", bytes(g.min_bytes), "..", bytes(g.max_bytes), " bytes"))
        << "\n";
    // Per size class, with the reason names cais.stats()'s host_reasons and
    // cais-perf's path column use (wire::DeclineReason).
    for (int b = 0; b < 64; ++b) {
      if ((g.measured_bins >> b & 1) != 0) {
        out << "  sizes 2^" << b << " B: " << ((g.offload_bins >> b & 1) ? "switch" : "host path")
            << ((g.borrowed_bins >> b & 1)
                    ? " (measured, as a nearby size measured on both paths)\n"
                    : " (measured)\n");
      } else if ((g.explore_bins >> b & 1) != 0) {
        out << "  sizes 2^" << b << " B: host path for its next operation (explore)\n";
      }
    }
  }
  return kOk;
}

int Health(const Args& a, control::ControlClient& cp, std::ostream& out, std::ostream& err) {
  const absl::Status s = cp.Health();
  if (s.ok()) out << (a.json ? "{\"status\":\"serving\"}" : "serving") << "\n";
  return Report(s, err);
}

}  // namespace

int RunCaisCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"cais-cli: manage an inca CAIS switch through its control API"};
  Args a;
  std::string token;
  int timeout_ms = 3000;
  AddConnectionOptions(app, &a.device, &token, &a.json, &timeout_ms);
  app.get_option("--device")
      ->description(
          "switch control API, HOST[:PORT] (default port 50051); a comma-separated list runs the "
          "command on each, in order (the switches a job stripes over)");

  auto* add = app.add_subcommand("add-rule", "install a reduction rule (or a --host-path policy)");
  add->add_option("--group-id", a.group, "tensor-parallel group (0..255)")->required();
  add->add_option("--layer-id", a.layer, "layer (0..65535 or *)");
  add->add_option("--chunk-id", a.chunk, "chunk (0..65535 or *)");
  add->add_option("--input-ports", a.in_ports,
                  "ports that contribute, e.g. 1,2,3,4 (required unless --host-path)");
  add->add_option("--output-ports", a.out_ports,
                  "ports that receive results (default: the inputs)");
  add->add_option("--op-type", a.op, "allreduce | allgather | broadcast | reducescatter | any");
  add->add_flag("--host-path", a.host_path,
                "matching operations run on the host path: the switch declines them");
  add->add_option("--uplink", a.uplink,
                  "the port toward this switch's parent in a tree: each chunk's reduction goes "
                  "there and the parent's result comes back (docs/design/tree.md)");
  auto* del = app.add_subcommand("del-rule", "remove the rule with exactly this key");
  del->add_option("--group-id", a.group)->required();
  del->add_option("--layer-id", a.layer);
  del->add_option("--chunk-id", a.chunk);
  auto* dump = app.add_subcommand("dump-rules", "list installed rules");
  auto* stats = app.add_subcommand("show-stats", "SRAM usage, throughput, queue delay, fallbacks");
  auto* conf = app.add_subcommand("configure", "show or set configuration (key=value ...)");
  conf->add_option("settings", a.settings, "e.g. timeout_ms=80 offload_threshold=0.3");
  auto* groups = app.add_subcommand("groups", "list, create or destroy groups");
  groups->add_option("action", a.gaction, "list | create | destroy");
  groups->add_option("--group-id", a.group);
  groups->add_option("--ports", a.gports, "create: ports in rank order");
  auto* ports = app.add_subcommand("ports", "list ports, register one or release one");
  ports->add_option("action", a.paction, "list | register | release");
  ports->add_option("--port", a.port_s);
  ports->add_option("--endpoint", a.endpoint, "register: host IP:PORT");
  auto* tree = app.add_subcommand(
      "show-tree", "this switch's place in a group's tree: members, uplink, figures");
  tree->add_option("--group-id", a.group)->required();
  auto* health = app.add_subcommand("health", "check the switch answers");
  auto* offload =
      app.add_subcommand("offload", "the offload controller's decisions (CAIS write-up 3.3)");

  if (const int rc = ParseArgs(app, argc, argv, "cais-cli", out, err); rc >= 0) return rc;

  try {
    using Verb = int (*)(const Args&, control::ControlClient&, std::ostream&, std::ostream&);
    const std::pair<CLI::App*, Verb> verbs[] = {
        {add, AddRule},   {del, DelRule}, {dump, DumpRules},  {stats, ShowStats}, {conf, Configure},
        {groups, Groups}, {ports, Ports}, {offload, Offload}, {health, Health},   {tree, ShowTree}};
    Verb verb = nullptr;
    for (const auto& [command, v] : verbs) {
      if (*command) verb = v;
    }
    if (verb == nullptr) return kUsage;
    // Switches a client stripes over (--device a,b): the command on each,
    // in order; the first failure's exit code.
    std::vector<std::string> devices = absl::StrSplit(a.device, ',', absl::SkipEmpty());
    if (devices.empty()) devices.push_back(a.device);
    int rc = kOk;
    for (const std::string& d : devices) {
      Args one = a;
      one.device = d;
      auto plane = control::ConnectControl(Device(d), token, timeout_ms);
      if (!plane.ok()) {
        err << "cais-cli: " << plane.status().message() << "\n";
        return kUsage;
      }
      if (devices.size() > 1 && !a.json) out << "== " << Device(d) << "\n";
      const int r = verb(one, **plane, out, err);
      if (rc == kOk) rc = r;
    }
    return rc;
  } catch (const UsageError& e) {
    err << "cais-cli: " << e.message << "\n";
    return kUsage;
  }
  return kUsage;
}

}  // namespace inca::cli
