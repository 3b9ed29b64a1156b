// What every command-line tool of inca applies to its CLI11 parser before
// parsing: one place, so that no tool accepts what the others refuse.
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

namespace inca::util {

// CLI11 (2.3) converts "-5" into a 64-bit unsigned option by wrapping it to
// 18446744073709551611; narrower unsigned types refuse it. Every option of
// `app` and its subcommands whose type is UINT refuses a leading '-' with
// one line naming the flag.
inline void RejectNegativeUnsigned(CLI::App& app) {
  static const CLI::Validator kNonNegative(
      [](std::string& v) -> std::string {
        const size_t at = v.find_first_not_of(" \t");
        if (at != std::string::npos && v[at] == '-') return "must not be negative, got " + v;
        return {};
      },
      "", "NON-NEGATIVE");
  for (CLI::Option* o : app.get_options()) {
    if (o->get_type_name().rfind("UINT", 0) == 0) o->check(kNonNegative);
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    RejectNegativeUnsigned(*sub);
  }
}

// Parses `argv` into `app` (after RejectNegativeUnsigned). Returns -1 to go
// on, or the exit code to return: 0 after --help, 2 after one line
// "<tool>: <error>" on stderr. Every tool's main parses through this.
// (CLI11_PARSE prints two lines and exits with CLI11's own codes, 105, 109,
// 114, ...; inca's tools exit 2 for every usage error.)
inline int ParseCommandLine(CLI::App& app, int argc, const char* const* argv,
                            const std::string& tool) {
  RejectNegativeUnsigned(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << tool << ": " << e.what() << "\n";
    return 2;
  }
  return -1;
}

}  // namespace inca::util
