// Settings declared once (issue 17), in the spirit of ns-3's attributes:
// each setting is one table entry with its key, type, range or choices,
// unit, whether it can change at run time, and its doc, bound to a field of
// a configuration struct. From that one entry follow
//   - the YAML key (with line-numbered type and range errors, and its
//     deprecated aliases),
//   - the command-line flag (CLI11; --key with '_' as '-', unless named),
//   - the environment variable, where the setting has one (`env`: read by
//     the flag as its default, by ApplyEnvironment, and by the Python
//     package from the JSON form),
//   - the check of a value set in code (ValidateAll),
//   - the control API's text form of the value (Format),
//   - and the row of the generated settings reference (Markdown).
// inca-switchd's table is switchd/settings.cc; docs/settings.md is its
// output (`inca-switchd --settings-markdown`).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

// Declared only: the parsers stay in the files that parse (settings.cc, the
// tools' main.cc), so the many files that read a settings table do not
// compile CLI11 and yaml-cpp (CLI11 alone is about 6 s per file).
namespace CLI {
class App;
class Option;
}  // namespace CLI
namespace YAML {
class Node;
}  // namespace YAML

namespace inca::settings {

enum class Type {
  kUint,    // a non-negative integer in [lo, hi]
  kNumber,  // a finite number in [lo, hi] (or (lo, hi] with lo_open)
  kBool,    // true/false (yes/no, on/off)
  kString,  // free text; `check` may constrain it
  kChoice,  // one of `choices`
};

using Value = std::variant<uint64_t, double, bool, std::string>;

// What a setting is, apart from where it is stored.
struct Spec {
  std::string key{};   // YAML key and control-API key, snake_case
  std::string flag{};  // "--name"; empty: "--" + key with '_' as '-'
  Type type = Type::kString;
  double lo = 0, hi = 0;               // kUint, kNumber
  bool lo_open = false;                // kNumber: lo itself is out of range
  uint64_t multiple_of = 0;            // kUint: the value must be a multiple of this
  std::vector<std::string> choices{};  // kChoice
  std::string unit{};                  // "ms", "bytes", "Gbit/s", ... ("" for none)
  bool runtime = false;                // changeable through the control API's SetConfig
  std::string doc{};                   // one sentence or two, for --help and the reference
  std::vector<std::string> aliases{};  // deprecated YAML keys for this setting
  bool bare_flag = false;              // kBool: a flag without a value (--deterministic)
  std::string env{};  // environment variable that sets it (clients: INCA_IO); "" none
  // An extra check of a value that passed the type's (an address that must
  // parse, say); the message without the key.
  std::function<absl::Status(const Value&)> check{};
};

// A Spec bound to a field of `Config` (get returns it, set stores a value
// that passed Check).
template <typename Config>
struct Setting {
  Spec spec;
  std::function<Value(const Config&)> get;
  std::function<void(Config*, const Value&)> set;
};

template <typename Config>
using Table = std::vector<Setting<Config>>;

// Binding a Spec to a field: `field` is a generic lambda returning a
// reference to the field in a Config (`[](auto& c) -> auto& { return c.x; }`).
// An unsigned setting on any integer field (the range keeps it in the type).
template <typename Config, typename F>
Setting<Config> UintField(Spec s, F field) {
  s.type = Type::kUint;
  return {std::move(s), [field](const Config& c) { return Value(static_cast<uint64_t>(field(c))); },
          [field](Config* c, const Value& v) {
            using T = std::remove_reference_t<decltype(field(*c))>;
            field(*c) = static_cast<T>(std::get<uint64_t>(v));
          }};
}
template <typename Config, typename F>
Setting<Config> NumberField(Spec s, F field) {
  s.type = Type::kNumber;
  return {std::move(s), [field](const Config& c) { return Value(static_cast<double>(field(c))); },
          [field](Config* c, const Value& v) { field(*c) = std::get<double>(v); }};
}
template <typename Config, typename F>
Setting<Config> BoolField(Spec s, F field) {
  s.type = Type::kBool;
  return {std::move(s), [field](const Config& c) { return Value(static_cast<bool>(field(c))); },
          [field](Config* c, const Value& v) { field(*c) = std::get<bool>(v); }};
}
// kString, or kChoice when the spec lists choices.
template <typename Config, typename F>
Setting<Config> TextField(Spec s, F field) {
  s.type = s.choices.empty() ? Type::kString : Type::kChoice;
  return {std::move(s), [field](const Config& c) { return Value(std::string(field(c))); },
          [field](Config* c, const Value& v) { field(*c) = std::get<std::string>(v); }};
}

// The flag's name: spec.flag, or "--" + key with '_' as '-'.
std::string FlagName(const Spec& spec);
// "[1, 1024]", "(0, 1]", "a, b or c"; "" for kBool and kString.
std::string RangeText(const Spec& spec);
// A value as the YAML file, the flag and the control API write it.
std::string Format(const Value& v);
// Type, range, multiple and `check`. InvalidArgument without the key:
// "value 5000 out of range [1, 1024]", "unknown value 'x'; use a or b".
absl::Status Check(const Spec& spec, const Value& v);
// Text (a YAML scalar, a flag's argument, a SetConfig value) to a checked
// value. InvalidArgument without the key: "expected a number, got 'soon'".
absl::StatusOr<Value> Parse(const Spec& spec, absl::string_view text);

// The value environment variable spec.env gives (absent or empty: none),
// from `lookup` (std::getenv in programs). InvalidArgument naming the
// variable: "INCA_IO='fast': unknown value 'fast'; use gso or mmsg".
absl::StatusOr<std::optional<Value>> FromEnvironment(
    const Spec& spec, const std::function<const char*(const char*)>& lookup);

// Every setting with an environment variable that is set, into `c`; the
// first bad value as FromEnvironment's error, `c` then unchanged.
template <typename Config>
absl::Status ApplyEnvironment(const Table<Config>& table, Config* c,
                              const std::function<const char*(const char*)>& lookup) {
  Config out = *c;
  for (const Setting<Config>& s : table) {
    auto v = FromEnvironment(s.spec, lookup);
    if (!v.ok()) return v.status();
    if (v->has_value()) s.set(&out, **v);
  }
  *c = std::move(out);
  return absl::OkStatus();
}

// Every setting's current value in `c` against its spec: the first failure
// as InvalidArgument "key: message".
template <typename Config>
absl::Status ValidateAll(const Table<Config>& table, const Config& c) {
  for (const Setting<Config>& s : table) {
    if (absl::Status st = Check(s.spec, s.get(c)); !st.ok()) {
      return absl::InvalidArgumentError(s.spec.key + ": " + std::string(st.message()));
    }
  }
  return absl::OkStatus();
}

// Where a YAML node came from, for error messages: " (line N)" or "".
std::string Where(const YAML::Node& n);
// "nothing", "a scalar", "a list", "a mapping".
absl::string_view KindOf(const YAML::Node& n);

// A YAML key that is not a setting (a list, a nested map): its handler gets
// the node and the key as written.
using YamlHandler = std::function<absl::Status(const YAML::Node&, const std::string&)>;

// Applies a YAML mapping: settings (and their aliases) by the table, other
// keys by `structured`. Errors name `source`, the key and its line; unknown
// keys list the known ones; a key given twice, or a setting given under two
// of its names, is an error. Keys absent keep their values in `*c`.
// `deprecated` (may be null) receives "alias -> key" for each alias used.
absl::Status ApplyYamlMap(const YAML::Node& root, absl::string_view source,
                          const std::vector<const Spec*>& specs,
                          const std::function<void(size_t, const Value&)>& set,
                          const std::map<std::string, YamlHandler>& structured,
                          std::vector<std::string>* deprecated);

template <typename Config>
absl::Status ApplyYaml(const Table<Config>& table, const YAML::Node& root, absl::string_view source,
                       Config* c, const std::map<std::string, YamlHandler>& structured = {},
                       std::vector<std::string>* deprecated = nullptr) {
  std::vector<const Spec*> specs;
  for (const Setting<Config>& s : table) specs.push_back(&s.spec);
  return ApplyYamlMap(
      root, source, specs, [&](size_t i, const Value& v) { table[i].set(c, v); }, structured,
      deprecated);
}

// The command-line side: one CLI11 option per setting, its default shown
// from `defaults`; after parsing, Apply() stores the flags given (so they
// win over a config file applied before) with the same checks as YAML.
class FlagSet {
 public:
  FlagSet() = default;
  FlagSet(const FlagSet&) = delete;
  FlagSet& operator=(const FlagSet&) = delete;

  template <typename Config>
  void Add(CLI::App& app, const Table<Config>& table, const Config& defaults) {
    for (const Setting<Config>& s : table) AddOne(app, s.spec, Format(s.get(defaults)));
  }
  // The flags given, and for a setting whose flag is not given, its
  // environment variable if it has one and it is set (FromEnvironment).
  // InvalidArgument "--flag value: message" (or "VAR='value': message") for
  // the first bad value.
  template <typename Config>
  absl::Status Apply(const Table<Config>& table, Config* c) const {
    for (size_t i = 0; i < table.size() && i < entries_.size(); ++i) {
      auto v = Given(i);
      if (!v.ok()) return v.status();
      if (!v->has_value()) {
        v = FromEnvironment(table[i].spec, [](const char* name) { return std::getenv(name); });
        if (!v.ok()) return v.status();
      }
      if (v->has_value()) table[i].set(c, **v);
    }
    return absl::OkStatus();
  }

 private:
  struct Entry {
    const Spec* spec = nullptr;
    std::string text;
    bool flag = false;
    CLI::Option* option = nullptr;
  };
  void AddOne(CLI::App& app, const Spec& spec, const std::string& default_text);
  // The value of the i-th flag if it was given.
  absl::StatusOr<std::optional<Value>> Given(size_t i) const;

  std::vector<std::unique_ptr<Entry>> entries_;  // CLI11 keeps pointers into these
};

// The reference table of `specs`, Markdown: key, flag, type and range,
// unit, default, run time, description (and aliases).
template <typename Config>
std::string Markdown(const Table<Config>& table, const Config& defaults);
std::string MarkdownRow(const Spec& spec, const std::string& default_text);
std::string MarkdownHeader();

std::string JsonObject(const Spec& spec);
// The table as a JSON array, for programs outside C++ (the Python package):
// one object per setting with key, type, range (lo, hi, lo_open), unit and
// runtime. Keys and units are plain text; docs are left to the reference.
template <typename Config>
std::string Json(const Table<Config>& table) {
  std::string out = "[";
  for (const Setting<Config>& s : table) out += (out.size() > 1 ? ",\n " : "") + JsonObject(s.spec);
  return out + "]\n";
}

template <typename Config>
std::string Markdown(const Table<Config>& table, const Config& defaults) {
  std::string out = MarkdownHeader();
  for (const Setting<Config>& s : table) out += MarkdownRow(s.spec, Format(s.get(defaults)));
  return out;
}

}  // namespace inca::settings
