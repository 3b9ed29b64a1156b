// What cais-cli and olaf-cli share: exit codes, the options that reach a
// switch's control API, the device address default and turning a
// control-API status into one error line.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "inca/control/control_plane.h"
#include "util/cli_flags.h"

namespace inca::cli {

inline constexpr int kOk = 0, kRefused = 1, kUsage = 2, kUnreachable = 3;

// A CLI11 check of a control token (flag or environment variable) by
// control::ValidateControlToken: a bad one is a usage error, one line.
inline CLI::Validator ControlTokenCheck() {
  return CLI::Validator(
      [](std::string& token) -> std::string {
        const absl::Status s = control::ValidateControlToken(token, "the value");
        return s.ok() ? std::string() : std::string(s.message());
      },
      "TOKEN", "ControlToken");
}

// One verb per call; --device, --token (or INCA_TOKEN), --json and
// --timeout-ms, the options every verb of both tools takes.
inline void AddConnectionOptions(CLI::App& app, std::string* device, std::string* token, bool* json,
                                 int* timeout_ms) {
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--device", *device, "switch control API, HOST[:PORT] (default port 50051)");
  app.add_option("--token", *token, "bearer token, if the switch requires one")
      ->envname("INCA_TOKEN")
      ->check(ControlTokenCheck());
  app.add_flag("--json", *json, "machine-readable output");
  app.add_option("--timeout-ms", *timeout_ms, "per-request deadline")
      ->check(CLI::Range(1, 3600000));
}

// Parses the command line into `app` (negative unsigned values refused):
// -1 to go on; kOk after --help (printed on `out`); kUsage after one line
// "<tool>: <error>" on `err`.
inline int ParseArgs(CLI::App& app, int argc, const char* const* argv, std::string_view tool,
                     std::ostream& out, std::ostream& err) {
  util::RejectNegativeUnsigned(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      out << app.help();
      return kOk;
    }
    err << tool << ": " << e.what() << "\n";
    return kUsage;
  }
  return -1;
}

// "HOST" -> "HOST:50051" (the control API's default port).
inline std::string Device(std::string d) {
  if (d.find(':') == std::string::npos) d += ":50051";
  return d;
}

// OK -> kOk; otherwise one line "<tool>: <message>" on `err` and kUnreachable
// (switch not answering) or kRefused (the switch said no).
inline int Report(std::string_view tool, const absl::Status& s, std::ostream& err) {
  if (s.ok()) return kOk;
  err << tool << ": " << s.message() << "\n";
  return (s.code() == absl::StatusCode::kUnavailable ||
          s.code() == absl::StatusCode::kDeadlineExceeded)
             ? kUnreachable
             : kRefused;
}

// `ports list`: the switch's ports, one line each.
inline int ListPorts(std::string_view tool, control::ControlClient& cp, std::ostream& out,
                     std::ostream& err) {
  auto ports = cp.ListPorts();
  if (!ports.ok()) return Report(tool, ports.status(), err);
  for (const auto& p : *ports) {
    out << "port " << p.port << " -> " << p.endpoint << (p.is_static ? " (static)" : "") << "\n";
  }
  return kOk;
}

// configure's "key=value" words as a map. The first word that is not
// key=value goes to *bad (left empty when all are).
inline std::map<std::string, std::string> ParseSettings(const std::vector<std::string>& words,
                                                        std::string* bad) {
  std::map<std::string, std::string> values;
  for (const std::string& kv : words) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      *bad = kv;
      return {};
    }
    values[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return values;
}

// configure: sets `values` (all or nothing; none: only shows), then prints
// the switch's configuration as "key = value" lines or one JSON object.
// kOk, or `tool`'s one-line error and its exit code.
inline int SetAndPrintConfig(std::string_view tool,
                             const std::map<std::string, std::string>& values, bool json,
                             control::ControlPlane& cp, std::ostream& out, std::ostream& err) {
  if (!values.empty()) {
    if (absl::Status s = cp.SetConfig(values); !s.ok()) return Report(tool, s, err);
  }
  auto c = cp.GetConfig();
  if (!c.ok()) return Report(tool, c.status(), err);
  if (json) {
    std::vector<std::string> items;
    for (const auto& [k, v] : *c) items.push_back(absl::StrCat("\"", k, "\":\"", v, "\""));
    out << "{" << absl::StrJoin(items, ",") << "}\n";
  } else {
    for (const auto& [k, v] : *c) out << k << " = " << v << "\n";
  }
  return kOk;
}

}  // namespace inca::cli
