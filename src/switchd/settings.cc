#include "switchd/settings.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "inca/counters/switch_counters.h"
#include "inca/dataplane/drop_reason.h"
#include "inca/util/counters.h"
#include "membership/group_manager.h"
#include "net/endpoint.h"

namespace inca::switchd {

namespace {

using settings::Setting;
using settings::Spec;
using settings::Type;
using settings::Value;
using C = SwitchdConfig;

template <typename F>
Setting<C> Uint(Spec s, F field) {
  return settings::UintField<C>(std::move(s), field);
}
template <typename F>
Setting<C> Number(Spec s, F field) {
  return settings::NumberField<C>(std::move(s), field);
}

// Milliseconds in the file and on the command line, nanoseconds in the core.
template <typename F>
Setting<C> Millis(Spec s, F field_ns) {
  s.type = Type::kNumber;
  s.unit = "ms";
  return {std::move(s),
          [field_ns](const C& c) { return Value(static_cast<double>(field_ns(c)) / 1e6); },
          [field_ns](C* c, const Value& v) {
            field_ns(*c) = static_cast<dp::TimeNs>(std::llround(std::get<double>(v) * 1e6));
          }};
}

template <typename F>
Setting<C> Bool(Spec s, F field) {
  return settings::BoolField<C>(std::move(s), field);
}
template <typename F>
Setting<C> Text(Spec s, F field) {
  return settings::TextField<C>(std::move(s), field);
}

absl::Status HostPort(const Value& v) {
  auto hp = net::SplitHostPort(std::get<std::string>(v));
  return hp.ok() ? absl::OkStatus() : hp.status();
}

// A listener's address: HOST:PORT (port 0: any free) or off (or empty).
// Checked with the rest of the settings, before anything starts: garbage
// reached gRPC (its own log line and "port in use?"), and a bad HTTP port
// was refused only after the control API had started.
absl::Status ListenOrOff(const Value& v) {
  const auto& text = std::get<std::string>(v);
  if (text.empty() || text == "off") return absl::OkStatus();
  return HostPort(v);
}

constexpr double kMaxMs = 3.6e6;  // an hour

settings::Table<C> Cais() {
  return {
      Text(
          {.key = "listen",
           .doc = "HOST:PORT (or [IPV6]:PORT) the data plane listens on; port 0 picks one",
           .check = HostPort},
          [](auto& c) -> auto& { return c.listen; }),
      Uint(
          {.key = "sram_bytes",
           .lo = 1,
           .hi = static_cast<double>(uint64_t{1} << 40),
           .unit = "bytes",
           .doc = "slot memory for chunks being reduced and results kept for resends"},
          [](auto& c) -> auto& { return c.cais.sram_bytes; }),
      Number(
          {.key = "sram_usage_limit",
           .lo = 0,
           .hi = 1,
           .lo_open = true,
           .runtime = true,
           .doc = "admission stops when pending slot memory reaches this fraction"},
          [](auto& c) -> auto& { return c.cais.sram_usage_limit; }),
      Number(
          {.key = "group_share",
           .lo = 0,
           .hi = 1,
           .runtime = true,
           .doc = "fraction of pending chunks and slot memory reserved, in equal parts, for "
                  "the groups with rules"},
          [](auto& c) -> auto& { return c.cais.group_share; }),
      Bool(
          {.key = "advise_window",
           .runtime = true,
           .doc = "advise each group's members a window of its fair share of the pending "
                  "chunks (JOIN_REPLY, PONG), so that groups together fit the slots"},
          [](auto& c) -> auto& { return c.cais.advise_window; }),
      Uint(
          {.key = "max_pending_chunks",
           .lo = 1,
           .hi = static_cast<double>(uint32_t{1} << 24),
           .unit = "chunks",
           .runtime = true,
           .doc = "chunks aggregating at once, all groups together"},
          [](auto& c) -> auto& { return c.cais.max_pending_chunks; }),
      Uint(
          {.key = "chunk_size",
           .lo = 4,
           .hi = 65487,
           .multiple_of = 4,
           .unit = "bytes",
           .doc = "largest CAIS payload a datagram may carry (a multiple of 4)",
           .aliases = {"max_payload_bytes"}},
          [](auto& c) -> auto& { return c.cais.max_payload_bytes; }),
      Millis(
          {.key = "timeout_ms",
           .lo = 0.001,
           .hi = kMaxMs,
           .runtime = true,
           .doc = "a chunk that has not completed this long after its first contribution is "
                  "handed back to the hosts (a fallback notice)"},
          [](auto& c) -> auto& { return c.cais.timeout_ns; }),
      Millis(
          {.key = "result_hold_ms",
           .lo = 0,
           .hi = kMaxMs,
           .runtime = true,
           .doc = "how long a completed chunk's result is kept to answer resends"},
          [](auto& c) -> auto& { return c.cais.result_hold_ns; }),
      Millis(
          {.key = "uplink_rto_ms",
           .lo = 0,
           .hi = 10'000,
           .runtime = true,
           .doc = "a switch in a tree asks its parent about a partial unanswered this long, "
                  "doubling per unanswered ask (0: only when its inputs ask)"},
          [](auto& c) -> auto& { return c.cais.uplink_rto_ns; }),
      Bool(
          {.key = "deterministic",
           .doc = "reduce in rank order, so results are bitwise reproducible",
           .bare_flag = true},
          [](auto& c) -> auto& { return c.cais.deterministic; }),
      Uint(
          {.key = "lease_ms",
           .lo = membership::kMinLeaseMs,
           .hi = membership::kMaxLeaseMs,
           .unit = "ms",
           .runtime = true,
           .doc = "a group member silent this long (no JOIN, PING, REPORT or data) loses its "
                  "group; hosts PING every lease/4. OLAF: a peer silent this long loses its "
                  "port"},
          [](auto& c) -> auto& { return c.lease_ms; }),
  };
}

settings::Table<C> Io() {
  return {
      Uint(
          {.key = "socket_buffer_bytes",
           .lo = 0,
           .hi = static_cast<double>(size_t{1} << 30),
           .unit = "bytes",
           .doc = "SO_RCVBUF and SO_SNDBUF asked for (best effort; 0: the kernel's default); "
                  "the sizes granted are logged"},
          [](auto& c) -> auto& { return c.socket_buffer_bytes; }),
      Uint(
          {.key = "batch_size",
           .lo = 1,
           .hi = 1024,
           .unit = "datagrams",
           .doc = "datagrams per recvmmsg/sendmmsg call"},
          [](auto& c) -> auto& { return c.batch_size; }),
      Uint(
          {.key = "threads",
           .lo = 1,
           .hi = 64,
           .unit = "threads",
           .doc = "CAIS data-plane shards, one thread each, on UDP ports listen..listen+N-1; "
                  "each holds sram_bytes/N; hosts stripe every operation over all of them"},
          [](auto& c) -> auto& { return c.threads; }),
      Text(
          {.key = "io",
           .choices = {"gso", "mmsg"},
           .doc = "socket path: gso (UDP GSO sends and GRO receives where the kernel has them) "
                  "or mmsg (one datagram per message)"},
          [](auto& c) -> auto& { return c.io; }),
      Number(
          {.key = "ingress_loss",
           .lo = 0,
           .hi = 1,
           .doc = "probability that a CAIS data datagram is dropped on the way in (testing)"},
          [](auto& c) -> auto& { return c.ingress_loss; }),
      Number(
          {.key = "egress_loss",
           .lo = 0,
           .hi = 1,
           .doc = "probability that a CAIS data datagram is dropped on the way out (testing)"},
          [](auto& c) -> auto& { return c.egress_loss; }),
      Uint(
          {.key = "loss_seed",
           .lo = 0,
           .hi = static_cast<double>(UINT64_MAX),
           .doc = "seed of the loss injection (the same seed drops the same datagrams)"},
          [](auto& c) -> auto& { return c.loss_seed; }),
      Text(
          {.key = "log_level",
           .choices = {"trace", "debug", "info", "warn", "error", "critical", "off"},
           .doc = "least severe log line written to stderr"},
          [](auto& c) -> auto& { return c.log_level; }),
      Number(
          {.key = "stats_interval_s",
           .lo = 0,
           .hi = 86400,
           .unit = "s",
           .doc = "seconds between stats log lines; 0: none"},
          [](auto& c) -> auto& { return c.stats_interval_s; }),
  };
}

settings::Table<C> Control() {
  return {
      Text(
          {.key = "control_listen",
           .doc = "gRPC control API HOST:PORT (port 0: any free), or off",
           .check = ListenOrOff},
          [](auto& c) -> auto& { return c.control_listen; }),
      Text(
          {.key = "http_listen",
           .doc = "HOST:PORT of /metrics, /stats.json and the dashboard, or off",
           .check = ListenOrOff},
          [](auto& c) -> auto& { return c.http_listen; }),
      Text(
          {.key = "offload_controller",
           .choices = {"embedded", "external", "off"},
           .doc = "who decides what to offload: embedded (this process, every 100 ms), "
                  "external (an inca-controller pushes decisions) or off (offload all)"},
          [](auto& c) -> auto& { return c.offload_controller; }),
      Number(
          {.key = "offload_host_gbps",
           .lo = 0,
           .hi = 1e6,
           .lo_open = true,
           .unit = "Gbit/s",
           .doc = "host path bandwidth the controller's model assumes"},
          [](auto& c) -> auto& { return c.offload_host_gbps; }),
      Number(
          {.key = "offload_host_latency_us",
           .lo = 0,
           .hi = 1e7,
           .unit = "us",
           .doc = "fixed cost of one host collective the controller's model assumes"},
          [](auto& c) -> auto& { return c.offload_host_latency_us; }),
      Number(
          {.key = "offload_switch_gbps",
           .lo = 0,
           .hi = 1e6,
           .lo_open = true,
           .unit = "Gbit/s",
           .doc = "reduction rate the controller's model assumes"},
          [](auto& c) -> auto& { return c.offload_switch_gbps; }),
      Bool(
          {.key = "offload_measured",
           .doc = "judge from the operation times hosts report (true) or from the model alone"},
          [](auto& c) -> auto& { return c.offload_measured; }),
      Number(
          {.key = "offload_explore_ms",
           .lo = 1,
           .hi = 86400e3,
           .unit = "ms",
           .doc = "the unused path of a measured size class is measured again this often"},
          [](auto& c) -> auto& { return c.offload_explore_ms; }),
  };
}

settings::Table<C> Olaf() {
  return {
      Text(
          {.key = "program",
           .choices = {"cais", "olaf", "fifo"},
           .doc = "data-plane program: cais (in-switch reduction), olaf (AoM-aware queue for "
                  "async DRL) or fifo (OLAF's baseline)"},
          [](auto& c) -> auto& { return c.program; }),
      Text(
          {.key = "olaf_ps", .flag = "--ps", .doc = "OLAF: the parameter server's HOST:PORT"},
          [](auto& c) -> auto& { return c.olaf.ps; }),
      Uint(
          {.key = "olaf_depth",
           .flag = "--depth",
           .lo = 1,
           .hi = 1 << 16,
           .unit = "updates",
           .runtime = true,
           .doc = "OLAF: queue depth (at run time: olaf-cli configure depth, at most the depth "
                  "at start)"},
          [](auto& c) -> auto& { return c.olaf.depth; }),
      Number(
          {.key = "olaf_delta_t_ms",
           .flag = "--delta-t-ms",
           .lo = 0,
           .hi = kMaxMs,
           .lo_open = true,
           .unit = "ms",
           .runtime = true,
           .doc = "OLAF: the AoM threshold ΔT (at run time: olaf-cli configure delta_t_ms, "
                  "gated by the verifier)"},
          [](auto& c) -> auto& { return c.olaf.delta_t_ms; }),
      Number(
          {.key = "olaf_tau_ms",
           .flag = "--tau-ms",
           .lo = 0,
           .hi = kMaxMs,
           .lo_open = true,
           .unit = "ms",
           .runtime = true,
           .doc = "OLAF: the merge decay constant τ (at run time: olaf-cli configure tau_ms)"},
          [](auto& c) -> auto& { return c.olaf.tau_ms; }),
      Number(
          {.key = "olaf_egress_mbps",
           .flag = "--egress-mbps",
           .lo = 0,
           .hi = 1e7,
           .unit = "Mbit/s",
           .doc = "OLAF: the PS-facing line rate the queue is paced at; 0: unpaced"},
          [](auto& c) -> auto& { return c.olaf.egress_mbps; }),
  };
}

}  // namespace

const settings::Table<SwitchdConfig>& SwitchdSettings() {
  static const settings::Table<SwitchdConfig>* const table = [] {
    auto* t = new settings::Table<SwitchdConfig>();
    for (auto part : {Cais(), Io(), Control(), Olaf()}) {
      for (auto& s : part) t->push_back(std::move(s));
    }
    return t;
  }();
  return *table;
}

const settings::Setting<SwitchdConfig>* FindSetting(const std::string& key) {
  for (const auto& s : SwitchdSettings()) {
    if (s.spec.key == key) return &s;
  }
  return nullptr;
}

const std::vector<std::pair<std::string, std::string>>& StructuredKeys() {
  static const auto* const keys = new std::vector<std::pair<std::string, std::string>>{
      {"ports", "static ports: a list of {port: 0..1023, endpoint: \"HOST:PORT\"}, never released"},
      {"rules",
       "static rules: a list of {group_id, layer_id, chunk_id (an id or \"*\"), input_ports, "
       "output_ports, op_type, host_path, uplink (the port toward a parent switch in a tree)}; a "
       "group named here cannot be formed by JOIN"},
      {"olaf_clusters",
       "OLAF: the cluster table, a list of {src_port, cluster}; flag --cluster "
       "SRC_PORT=CLUSTER, repeatable"},
  };
  return *keys;
}

std::string SettingsJson() {
  return settings::Json(SwitchdSettings());
}

std::string SettingsMarkdown() {
  std::string out =
      "# inca-switchd settings\n\n"
      "Generated by `inca-switchd --settings-markdown` from `src/switchd/settings.cc`, the "
      "one place each setting is declared; a test fails when this page is stale. Every key "
      "is a YAML key of `--config` (config/switchd.example.yaml) and a flag; a flag given "
      "wins over the file. Out-of-range values are refused with the key and its line. "
      "\"Run time\": changeable while the switch runs (`cais-cli configure`, `olaf-cli "
      "configure`, the control API's SetConfig; docs/control.md). The client's settings are "
      "in docs/client-settings.md.\n\n";
  out += settings::Markdown(SwitchdSettings(), SwitchdConfig{});
  out += "\nLists and tables, YAML only unless a flag is named:\n\n";
  for (const auto& [key, doc] : StructuredKeys()) {
    absl::StrAppend(&out, "- `", key, "`: ", doc, ".\n");
  }
  out +=
      "\nOnly on the command line: `--config FILE` (the YAML above) and `--control-token` "
      "(env `INCA_TOKEN`, the bearer token the control API requires).\n";
  return out;
}

std::string CountersMarkdown() {
  const char* head = "| metric | type | meaning |\n|---|---|---|\n";
  return absl::StrCat(
      "<!-- counters:begin (generated by `inca-switchd --counters-markdown` from the tables in "
      "include/inca/counters/switch_counters.h, dataplane/program.h, olaf/olaf_switch.h and "
      "cais/reducer.h) -->\n\n"
      "Both programs' UDP front end (`HostCounters`, `kHostCounters`):\n\n",
      head, counters::MarkdownRows<counters::HostCounters>(counters::kHostCounters),
      "\nThe CAIS program's front end (`SwitchCounters`, `kSwitchCounters`):\n\n", head,
      counters::MarkdownRows<counters::SwitchCounters>(counters::kSwitchCounters),
      "\nThe OLAF program's front end (`OlafServerCounters`, `kOlafServerCounters`):\n\n", head,
      counters::MarkdownRows<counters::OlafServerCounters>(counters::kOlafServerCounters),
      "\nThe OLAF program's (`OlafCounters`, `olaf::kOlafCounters`):\n\n", head,
      counters::MarkdownRows<olaf::OlafCounters>(olaf::kOlafCounters),
      "\nThe OLAF queue's, per cluster (`QueueCounters`, `olaf::kQueueCounters`), each as "
      "`inca_olaf_cluster_X{cluster}`:\n\n| X | type | meaning |\n|---|---|---|\n",
      counters::MarkdownRows<olaf::QueueCounters>(olaf::kQueueCounters),
      "\nEvery program's packets (`ProgramCounters`, `dp::kProgramCounters`), the CAIS "
      "reducer's as `inca_reducer_X`:\n\n| X | type | meaning |\n|---|---|---|\n",
      counters::MarkdownRows<dp::ProgramCounters>(dp::kProgramCounters),
      "\nThe reduction core's (`GroupCounters`, `cais::kGroupCounters`), each as "
      "`inca_cais_X` (all groups, no labels) and `inca_cais_group_X{group}`:\n\n"
      "| X | type | meaning |\n|---|---|---|\n",
      counters::MarkdownRows<cais::GroupCounters>(cais::kGroupCounters),
      "\nDrop reasons (`dp::DropReason`, declared once in "
      "include/inca/dataplane/drop_reason.h), the `reason` label of every "
      "`*_dropped_packets_total` and the keys of every JSON `drops` object:\n\n",
      dp::DropReasonsMarkdown(), "\n<!-- counters:end -->\n");
}

}  // namespace inca::switchd
