// What every command-line tool of inca applies to its CLI11 parser before
// parsing: one place, so that no tool accepts what the others refuse.
#pragma once

#include <CLI/CLI.hpp>
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

}  // namespace inca::util
