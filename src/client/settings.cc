#include "client/settings.h"

#include <cstdint>
#include <cstdlib>

namespace inca::client {
namespace {

using settings::Setting;
using settings::Spec;
using C = CommunicatorOptions;

template <typename F>
Setting<C> Uint(Spec s, F field) {
  return settings::UintField<C>(std::move(s), field);
}
template <typename F>
Setting<C> Bool(Spec s, F field) {
  return settings::BoolField<C>(std::move(s), field);
}

constexpr double kHourMs = 3.6e6;

settings::Table<C> Transport() {
  return {
      settings::TextField<C>(
          {.key = "io",
           .choices = {"gso", "mmsg"},
           .doc = "the switch socket's I/O path: gso (UDP GSO sends and GRO receives where the "
                  "kernel has them) or mmsg (one datagram per message)",
           .env = "INCA_IO"},
          [](auto& c) -> auto& { return c.io; }),
      Uint(
          {.key = "chunk_size",
           .lo = 4,
           .hi = 65472,
           .multiple_of = 4,
           .unit = "bytes",
           .doc = "tensor payload bytes per packet (the write-up's chunk_size): one UDP "
                  "datagram with the 20-byte CAIS header; 8952 fits a 9000-byte jumbo frame, "
                  "1452 a 1500-byte MTU; must fit the switch's max_payload_bytes"},
          [](auto& c) -> auto& { return c.chunk_size; }),
      Uint(
          {.key = "max_pending_chunks",
           .flag = "--window",
           .lo = 1,
           .hi = 65535,
           .unit = "chunks",
           .doc = "largest congestion window: chunks in flight per rank "
                  "(docs/design/cais-client.md, \"Window\"); cais.configure() calls it "
                  "client_window, as the write-up's max_pending_chunks is the switch's"},
          [](auto& c) -> auto& { return c.max_pending_chunks; }),
      Bool(
          {.key = "competitive",
           .doc = "competitive mode: AIMD on loss while the bottleneck queue belongs to a "
                  "loss-based sender (docs/design/cais-client.md); false keeps delay control "
                  "alone"},
          [](auto& c) -> auto& { return c.competitive; }),
      settings::NumberField<C>(
          {.key = "pacing_gain",
           .lo = 0,
           .hi = 100,
           .doc = "pace new chunks at this multiple of window / smoothed round trip (a bucket "
                  "of pacing_burst chunks); 0 sends a window at once"},
          [](auto& c) -> auto& { return c.pacing_gain; }),
      Uint(
          {.key = "pacing_burst",
           .lo = 1,
           .hi = 64,
           .unit = "chunks",
           .doc = "the pacer's token bucket: chunks that may leave back to back (with "
                  "pacing_gain > 0)"},
          [](auto& c) -> auto& { return c.pacing_burst; }),
      Bool(
          {.key = "yield_to_local_switch",
           .doc = "when the switch runs on this host, the progress thread runs under "
                  "SCHED_BATCH, so that a result waking it does not preempt the switch "
                  "(docs/design/cais-client.md, \"A switch on this host\")",
           .env = "INCA_YIELD_TO_LOCAL_SWITCH"},
          [](auto& c) -> auto& { return c.yield_to_local_switch; }),
      Uint(
          {.key = "window_trace_samples",
           .flag = "--window-trace",
           .lo = 0,
           .hi = 1 << 20,
           .unit = "samples",
           .doc = "keep this many samples of the switch path's congestion window "
                  "(window_trace()); 0 keeps none"},
          [](auto& c) -> auto& { return c.window_trace_samples; }),
  };
}

settings::Table<C> PathsAndTimeouts() {
  return {
      Uint(
          {.key = "group_id",
           .lo = 0,
           .hi = 255,
           .doc = "the switch group; jobs sharing a switch need distinct ids"},
          [](auto& c) -> auto& { return c.group_id; }),
      Bool(
          {.key = "offload",
           .doc = "use the switch when it is there; false: the host path until SetOffload",
           .env = "INCA_OFFLOAD"},
          [](auto& c) -> auto& { return c.offload; }),
      Bool(
          {.key = "require_switch",
           .doc = "fail instead of falling back when the group is not on the switch (an "
                  "operation that leaves it part-way still completes on the host path, then "
                  "fails)",
           .env = "INCA_REQUIRE_SWITCH"},
          [](auto& c) -> auto& { return c.require_switch; }),
      Bool(
          {.key = "check_agreement",
           .doc = "with no switch configured, exchange each operation's description before "
                  "running it on Gloo (one small allgather), so that ranks that disagree on "
                  "count, dtype, op, collective, root or layer get the same error instead of a "
                  "wrong result; with a switch the check is free and always made; false runs "
                  "plain Gloo (baselines)",
           .env = "INCA_CHECK_AGREEMENT"},
          [](auto& c) -> auto& { return c.check_agreement; }),
      Bool(
          {.key = "debug",
           .doc = "one line per operation on the switch path (chunks, retransmissions, round "
                  "trip, window) and per operation that leaves it, through "
                  "CommunicatorOptions::log (standard error unless set)",
           .env = "INCA_DEBUG"},
          [](auto& c) -> auto& { return c.debug; }),
      Uint(
          {.key = "retransmit_timeout_ms",
           .lo = 1,
           .hi = 60000,
           .unit = "ms",
           .doc = "initial retransmission timeout (doubling up to max_retransmit_timeout_ms)"},
          [](auto& c) -> auto& { return c.retransmit_timeout_ms; }),
      Uint(
          {.key = "max_retransmit_timeout_ms",
           .lo = 1,
           .hi = 600000,
           .unit = "ms",
           .doc = "cap of the retransmission backoff; at least retransmit_timeout_ms"},
          [](auto& c) -> auto& { return c.max_retransmit_timeout_ms; }),
      Uint(
          {.key = "switch_timeout_ms",
           .lo = 1,
           .hi = kHourMs,
           .unit = "ms",
           .doc = "an operation that makes no progress through the switch for this long goes "
                  "to the host path (the write-up's 5.5 tip 4)"},
          [](auto& c) -> auto& { return c.switch_timeout_ms; }),
      Uint(
          {.key = "join_timeout_ms",
           .lo = 0,
           .hi = kHourMs,
           .unit = "ms",
           .doc = "how long creation waits for the group to form at the switch before "
                  "starting on the host path"},
          [](auto& c) -> auto& { return c.join_timeout_ms; }),
      Uint(
          {.key = "rejoin_interval_ms",
           .lo = 1,
           .hi = kHourMs,
           .unit = "ms",
           .doc = "while on the host path, how often to try the switch again"},
          [](auto& c) -> auto& { return c.rejoin_interval_ms; }),
      Uint(
          {.key = "host_timeout_ms",
           .lo = 1,
           .hi = 24 * kHourMs,
           .unit = "ms",
           .doc = "Gloo's connection and operation timeout; more than switch_timeout_ms"},
          [](auto& c) -> auto& { return c.host_timeout_ms; }),
      Uint(
          {.key = "recovery_cache_bytes",
           .lo = 0,
           .hi = static_cast<double>(uint64_t{1} << 40),
           .unit = "bytes",
           .doc = "results of the last operation kept (up to this size) to serve a peer that "
                  "lost its end when the switch died"},
          [](auto& c) -> auto& { return c.recovery_cache_bytes; }),
  };
}

}  // namespace

const settings::Table<CommunicatorOptions>& ClientSettings() {
  static const settings::Table<C>* const table = [] {
    auto* t = new settings::Table<C>(Transport());
    for (auto& s : PathsAndTimeouts()) t->push_back(std::move(s));
    return t;
  }();
  return *table;
}

const settings::Setting<CommunicatorOptions>* FindClientSetting(const std::string& key) {
  for (const Setting<C>& s : ClientSettings()) {
    if (s.spec.key == key) return &s;
    for (const std::string& a : s.spec.aliases) {
      if (a == key) return &s;
    }
  }
  return nullptr;
}

absl::Status ApplyClientEnvironment(CommunicatorOptions* o) {
  return settings::ApplyEnvironment(ClientSettings(), o,
                                    [](const char* name) { return std::getenv(name); });
}

absl::Status SetClientSetting(CommunicatorOptions* o, const std::string& key,
                              const SettingValue& v) {
  const Setting<C>* s = FindClientSetting(key);
  if (s == nullptr) return absl::NotFoundError("no client setting '" + key + "'");
  settings::Value value = v;
  if (s->spec.type == settings::Type::kNumber && std::holds_alternative<uint64_t>(v)) {
    value = static_cast<double>(std::get<uint64_t>(v));
  }
  const bool fits = s->spec.type == settings::Type::kUint     ? value.index() == 0
                    : s->spec.type == settings::Type::kNumber ? value.index() == 1
                    : s->spec.type == settings::Type::kBool   ? value.index() == 2
                                                              : value.index() == 3;
  if (!fits) {
    return absl::InvalidArgumentError(key + ": expected " +
                                      (s->spec.type == settings::Type::kUint
                                           ? "a non-negative integer"
                                       : s->spec.type == settings::Type::kNumber ? "a number"
                                       : s->spec.type == settings::Type::kBool   ? "true or false"
                                                                                 : "text"));
  }
  if (absl::Status st = settings::Check(s->spec, value); !st.ok()) {
    return absl::InvalidArgumentError(key + ": " + std::string(st.message()));
  }
  s->set(o, value);
  return absl::OkStatus();
}

std::string ClientSettingsMarkdown() {
  return "# inca client settings\n\n"
         "Generated by `cais-perf --settings-markdown` from `src/client/settings.cc`, the one "
         "place each client setting is declared; a test fails when this page is stale. Each "
         "is a field of `CommunicatorOptions` (`include/inca/client/communicator.h`), "
         "checked by its `Validate()`, a flag of `cais-perf`, and, for `chunk_size`, "
         "`max_pending_chunks` (as `client_window`), `competitive`, `switch_timeout_ms` and "
         "`join_timeout_ms`, a key of `cais.configure()` (docs/python.md). Who a rank is "
         "(rank, world size, addresses) comes from torchrun's variables; the switch's "
         "settings are in docs/settings.md.\n\n" +
         settings::Markdown(ClientSettings(), C{});
}

std::string ClientSettingsJson() {
  return settings::Json(ClientSettings());
}

}  // namespace inca::client
