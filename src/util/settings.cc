#include "util/settings.h"

#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace inca::settings {

namespace {

// 1e+06 reads worse than 1000000 in a range; integers print whole.
std::string Num(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e18) {
    return absl::StrCat(static_cast<int64_t>(x));
  }
  return absl::StrCat(x);
}

std::string OneOf(const std::vector<std::string>& choices) {
  if (choices.empty()) return "";
  if (choices.size() == 1) return choices[0];
  std::vector<std::string> head(choices.begin(), choices.end() - 1);
  return absl::StrCat(absl::StrJoin(head, ", "), " or ", choices.back());
}

const char* TypeName(Type t) {
  switch (t) {
    case Type::kUint: return "integer";
    case Type::kNumber: return "number";
    case Type::kBool: return "bool";
    case Type::kString: return "string";
    case Type::kChoice: return "choice";
  }
  return "?";
}

}  // namespace

std::string FlagName(const Spec& spec) {
  if (!spec.flag.empty()) return spec.flag;
  return absl::StrCat("--", absl::StrReplaceAll(spec.key, {{"_", "-"}}));
}

std::string RangeText(const Spec& spec) {
  switch (spec.type) {
    case Type::kUint: return absl::StrCat("[", Num(spec.lo), ", ", Num(spec.hi), "]");
    case Type::kNumber:
      return absl::StrCat(spec.lo_open ? "(" : "[", Num(spec.lo), ", ", Num(spec.hi), "]");
    case Type::kChoice: return OneOf(spec.choices);
    case Type::kBool:
    case Type::kString: break;
  }
  return "";
}

std::string Format(const Value& v) {
  if (const auto* u = std::get_if<uint64_t>(&v)) return absl::StrCat(*u);
  if (const auto* d = std::get_if<double>(&v)) return Num(*d);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return std::get<std::string>(v);
}

absl::Status Check(const Spec& spec, const Value& v) {
  switch (spec.type) {
    case Type::kUint: {
      const uint64_t* u = std::get_if<uint64_t>(&v);
      if (u == nullptr) return absl::InvalidArgumentError("expected a non-negative integer");
      if (static_cast<double>(*u) < spec.lo || static_cast<double>(*u) > spec.hi) {
        return absl::InvalidArgumentError(
            absl::StrCat("value ", *u, " out of range ", RangeText(spec)));
      }
      if (spec.multiple_of > 1 && *u % spec.multiple_of != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("value ", *u, " must be a multiple of ", spec.multiple_of));
      }
      break;
    }
    case Type::kNumber: {
      const double* d = std::get_if<double>(&v);
      if (d == nullptr || !std::isfinite(*d))
        return absl::InvalidArgumentError("expected a number");
      if ((spec.lo_open ? !(*d > spec.lo) : !(*d >= spec.lo)) || !(*d <= spec.hi)) {
        return absl::InvalidArgumentError(
            absl::StrCat("value ", Num(*d), " out of range ", RangeText(spec)));
      }
      break;
    }
    case Type::kBool:
      if (!std::holds_alternative<bool>(v))
        return absl::InvalidArgumentError("expected true or false");
      break;
    case Type::kString:
    case Type::kChoice: {
      const std::string* s = std::get_if<std::string>(&v);
      if (s == nullptr) return absl::InvalidArgumentError("expected a string");
      if (spec.type == Type::kChoice &&
          std::find(spec.choices.begin(), spec.choices.end(), *s) == spec.choices.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown value '", *s, "'; use ", OneOf(spec.choices)));
      }
      break;
    }
  }
  return spec.check ? spec.check(v) : absl::OkStatus();
}

absl::StatusOr<std::optional<Value>> FromEnvironment(
    const Spec& spec, const std::function<const char*(const char*)>& lookup) {
  if (spec.env.empty()) return std::optional<Value>();
  const char* text = lookup(spec.env.c_str());
  if (text == nullptr || *text == '\0') return std::optional<Value>();
  auto v = Parse(spec, text);
  if (!v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.env, "='", text, "': ", v.status().message()));
  }
  return std::optional<Value>(*v);
}

absl::StatusOr<Value> Parse(const Spec& spec, absl::string_view text) {
  Value v;
  switch (spec.type) {
    case Type::kUint: {
      uint64_t u = 0;
      if (!text.empty() && text[0] == '-') {
        return absl::InvalidArgumentError(absl::StrCat("must not be negative, got '", text, "'"));
      }
      if (text.empty() || text.find_first_not_of("0123456789") != absl::string_view::npos ||
          !absl::SimpleAtoi(text, &u)) {
        return absl::InvalidArgumentError(
            absl::StrCat("expected a non-negative integer, got '", text, "'"));
      }
      v = u;
      break;
    }
    case Type::kNumber: {
      double d = 0;
      if (!absl::SimpleAtod(text, &d) || !std::isfinite(d)) {
        return absl::InvalidArgumentError(absl::StrCat("expected a number, got '", text, "'"));
      }
      v = d;
      break;
    }
    case Type::kBool: {
      const std::string s = absl::AsciiStrToLower(text);
      if (s == "true" || s == "yes" || s == "on" || s == "1") {
        v = true;
      } else if (s == "false" || s == "no" || s == "off" || s == "0") {
        v = false;
      } else {
        return absl::InvalidArgumentError(absl::StrCat("expected true or false, got '", text, "'"));
      }
      break;
    }
    case Type::kString:
    case Type::kChoice: v = std::string(text); break;
  }
  if (absl::Status s = Check(spec, v); !s.ok()) return s;
  return v;
}

std::string Where(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return m.line < 0 ? "" : absl::StrCat(" (line ", m.line + 1, ")");
}

absl::string_view KindOf(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Undefined: break;
  }
  return "an undefined value";
}

absl::Status ApplyYamlMap(const YAML::Node& root, absl::string_view source,
                          const std::vector<const Spec*>& specs,
                          const std::function<void(size_t, const Value&)>& set,
                          const std::map<std::string, YamlHandler>& structured,
                          std::vector<std::string>* deprecated) {
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the top level", Where(root),
                                                   ": expected a mapping, got ", KindOf(root)));
  }
  std::map<std::string, size_t> by_name;  // key or alias -> index
  for (size_t i = 0; i < specs.size(); ++i) {
    by_name[specs[i]->key] = i;
    for (const std::string& a : specs[i]->aliases) by_name[a] = i;
  }
  std::set<std::string> seen_keys;
  std::map<size_t, std::string> seen_settings;  // index -> the name it was given under
  for (const auto& kv : root) {
    // Copies: yaml-cpp's iterator hands out proxies that die with the iterator.
    const YAML::Node k = kv.first;
    const YAML::Node n = kv.second;
    if (!k.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": the top level", Where(k), ": keys must be plain names"));
    }
    const std::string name = k.Scalar();
    if (!seen_keys.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": duplicate key '", name, "' in the top level", Where(k)));
    }
    auto key_error = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": key '", name, "'", Where(n), ": ", what));
    };
    if (auto h = structured.find(name); h != structured.end()) {
      if (absl::Status s = h->second(n, name); !s.ok()) return s;
      continue;
    }
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      std::vector<std::string> known;
      for (const Spec* s : specs) known.push_back(s->key);
      for (const auto& [key, unused] : structured) known.push_back(key);
      std::sort(known.begin(), known.end());
      return absl::InvalidArgumentError(absl::StrCat(source, ": unknown key '", name,
                                                     "' in the top level", Where(k),
                                                     "; known keys: ", absl::StrJoin(known, ", ")));
    }
    const Spec& spec = *specs[it->second];
    if (auto [prev, fresh] = seen_settings.emplace(it->second, name); !fresh) {
      return key_error(
          absl::StrCat("'", prev->second, "' and '", name, "' are the same setting; give one"));
    }
    if (!n.IsScalar()) {
      const char* want = spec.type == Type::kUint     ? "a non-negative integer"
                         : spec.type == Type::kNumber ? "a number"
                         : spec.type == Type::kBool   ? "true or false"
                                                      : "a string";
      return key_error(absl::StrCat("expected ", want, ", got ", KindOf(n)));
    }
    auto v = Parse(spec, n.Scalar());
    if (!v.ok()) return key_error(v.status().message());
    set(it->second, *v);
    if (name != spec.key && deprecated != nullptr) {
      deprecated->push_back(absl::StrCat(name, " -> ", spec.key));
    }
  }
  return absl::OkStatus();
}

void FlagSet::AddOne(CLI::App& app, const Spec& spec, const std::string& default_text) {
  auto e = std::make_unique<Entry>();
  e->spec = &spec;
  std::string help = spec.doc;
  if (!spec.unit.empty()) absl::StrAppend(&help, " (", spec.unit, ")");
  if (const std::string r = RangeText(spec); !r.empty()) absl::StrAppend(&help, "; ", r);
  // Apply reads the variable when the flag is not given.
  if (!spec.env.empty()) absl::StrAppend(&help, "; env ", spec.env);
  if (spec.type == Type::kBool && spec.bare_flag) {
    e->option = app.add_flag(FlagName(spec), e->flag, help);
  } else {
    const char* type = spec.type == Type::kUint     ? "UINT"
                       : spec.type == Type::kNumber ? "FLOAT"
                       : spec.type == Type::kBool   ? "BOOL"
                                                    : "TEXT";
    e->option = app.add_option(FlagName(spec), e->text, help)
                    ->default_str(default_text)
                    ->type_name(spec.type == Type::kChoice
                                    ? absl::StrCat("{", absl::StrJoin(spec.choices, ","), "}")
                                    : std::string(type));
  }
  entries_.push_back(std::move(e));
}

absl::StatusOr<std::optional<Value>> FlagSet::Given(size_t i) const {
  const Entry& e = *entries_[i];
  if (e.option == nullptr || e.option->count() == 0) return std::optional<Value>();
  if (e.spec->type == Type::kBool && e.spec->bare_flag) return std::optional<Value>(e.flag);
  auto v = Parse(*e.spec, e.text);
  if (!v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(FlagName(*e.spec), " ", e.text, ": ", v.status().message()));
  }
  return std::optional<Value>(*v);
}

std::string JsonObject(const Spec& spec) {
  // Keys, type names and units are identifiers and short unit words: no
  // character needs escaping (a test checks that the output parses).
  std::string out =
      absl::StrCat("{\"key\":\"", spec.key, "\",\"type\":\"", TypeName(spec.type), "\",\"unit\":\"",
                   spec.unit, "\",\"runtime\":", spec.runtime ? "true" : "false");
  if (spec.type == Type::kUint || spec.type == Type::kNumber) {
    absl::StrAppend(&out, ",\"lo\":", absl::StrFormat("%.17g", spec.lo),
                    ",\"hi\":", absl::StrFormat("%.17g", spec.hi),
                    ",\"lo_open\":", spec.lo_open ? "true" : "false");
  }
  if (spec.multiple_of > 0) absl::StrAppend(&out, ",\"multiple_of\":", spec.multiple_of);
  if (spec.type == Type::kChoice) {
    absl::StrAppend(&out, ",\"choices\":[\"", absl::StrJoin(spec.choices, "\",\""), "\"]");
  }
  if (!spec.env.empty()) absl::StrAppend(&out, ",\"env\":\"", spec.env, "\"");
  absl::StrAppend(&out, ",\"aliases\":[",
                  spec.aliases.empty() ? "" : "\"" + absl::StrJoin(spec.aliases, "\",\"") + "\"",
                  "]");
  return out + "}";
}

std::string MarkdownHeader() {
  return "| key | flag | type | range | unit | default | run time | what it does |\n"
         "|---|---|---|---|---|---|---|---|\n";
}

std::string MarkdownRow(const Spec& spec, const std::string& default_text) {
  auto cell = [](std::string s) { return absl::StrReplaceAll(s, {{"|", "\\|"}, {"\n", " "}}); };
  std::string doc = spec.doc;
  if (!spec.aliases.empty()) {
    if (!doc.empty() && doc.back() != '.') doc += '.';
    absl::StrAppend(&doc, " Deprecated YAML name: `", absl::StrJoin(spec.aliases, "`, `"), "`.");
  }
  const std::string flag = spec.env.empty()
                               ? absl::StrCat("`", FlagName(spec), "`")
                               : absl::StrCat("`", FlagName(spec), "`, env `", spec.env, "`");
  return absl::StrCat("| `", spec.key, "` | ", flag, " | ", TypeName(spec.type), " | ",
                      cell(RangeText(spec)), " | ", spec.unit, " | `",
                      default_text.empty() ? "\"\"" : cell(default_text), "` | ",
                      spec.runtime ? "yes" : "", " | ", cell(doc), " |\n");
}

}  // namespace inca::settings
