#include "monitor/prometheus_text_check.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "monitor/str_cat.h"

namespace inca::monitor {
namespace {

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsNameChar(char c) {
  return IsNameStart(c) || (c >= '0' && c <= '9');
}

// Metric names may also hold ':' (reserved for recording rules).
bool IsMetricName(std::string_view s) {
  if (s.empty() || !(IsNameStart(s[0]) || s[0] == ':')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsNameChar(c) || c == ':'; });
}

bool IsLabelName(std::string_view s) {
  if (s.empty() || !IsNameStart(s[0]) || s.starts_with("__")) return false;
  return std::all_of(s.begin(), s.end(), IsNameChar);
}

std::optional<double> ParseValue(std::string_view s) {
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (s == "+Inf") return std::numeric_limits<double>::infinity();
  if (s == "-Inf") return -std::numeric_limits<double>::infinity();
  if (s.empty() || s[0] == '+') return std::nullopt;
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Parses {a="x",b="y"} at the start of `s`; advances `s` past it.
bool ParseLabels(std::string_view& s, std::vector<std::pair<std::string, std::string>>* out,
                 std::string* error) {
  s.remove_prefix(1);  // '{'
  while (true) {
    if (s.empty()) return *error = "unterminated label set", false;
    if (s[0] == '}') {
      s.remove_prefix(1);
      return true;
    }
    if (!out->empty()) {
      if (s[0] != ',') return *error = "expected ',' between labels", false;
      s.remove_prefix(1);
    }
    const size_t eq = s.find('=');
    if (eq == std::string_view::npos) return *error = "label without '='", false;
    const std::string name(s.substr(0, eq));
    if (!IsLabelName(name)) return *error = internal::StrCat("bad label name '", name, "'"), false;
    s.remove_prefix(eq + 1);
    if (s.empty() || s[0] != '"') return *error = "label value not quoted", false;
    s.remove_prefix(1);
    std::string value;
    bool closed = false;
    while (!s.empty()) {
      const char c = s[0];
      s.remove_prefix(1);
      if (c == '"') {
        closed = true;
        break;
      }
      if (c == '\\') {
        if (s.empty() || (s[0] != '\\' && s[0] != '"' && s[0] != 'n')) {
          return *error = "bad escape in label value", false;
        }
        value.push_back(s[0] == 'n' ? '\n' : s[0]);
        s.remove_prefix(1);
        continue;
      }
      value.push_back(c);
    }
    if (!closed) return *error = "unterminated label value", false;
    for (const auto& [n, v] : *out) {
      if (n == name) return *error = internal::StrCat("label '", name, "' repeated"), false;
    }
    out->emplace_back(name, std::move(value));
  }
}

}  // namespace

std::optional<double> PromCheckResult::Value(std::string_view series) const {
  for (const PromSample& s : samples) {
    if (s.series == series) return s.value;
  }
  return std::nullopt;
}

std::string PromCheckResult::Type(std::string_view name) const {
  for (const auto& [n, t] : types) {
    if (n == name) return t;
  }
  return "";
}

PromCheckResult CheckPrometheusText(std::string_view text, std::string_view required_prefix) {
  PromCheckResult result;
  std::set<std::string> helped, seen_series, finished_families;
  std::map<std::string, std::string> typed;
  std::string current_family;
  size_t line_no = 0;
  auto fail = [&](std::string_view what) {
    result.errors.push_back(internal::StrCat("line ", line_no, ": ", what));
  };
  auto check_name = [&](std::string_view name) {
    if (!IsMetricName(name)) fail(internal::StrCat("bad metric name '", name, "'"));
    if (!name.starts_with(required_prefix)) {
      fail(internal::StrCat("'", name, "' lacks prefix ", required_prefix));
    }
  };

  if (!text.empty() && text.back() != '\n') {
    result.errors.push_back("text does not end in a newline");
  }
  size_t pos = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) {
      fail("blank line");
      continue;
    }
    if (line[0] == '#') {
      const bool help = line.starts_with("# HELP ");
      const bool type = line.starts_with("# TYPE ");
      if (!help && !type) {
        fail("comment that is neither HELP nor TYPE");
        continue;
      }
      std::string_view rest = line.substr(7);
      const size_t sp = rest.find(' ');
      const std::string name(rest.substr(0, sp));
      const std::string_view arg = sp == std::string_view::npos ? "" : rest.substr(sp + 1);
      check_name(name);
      if (finished_families.count(name) || (!current_family.empty() && current_family == name)) {
        fail(internal::StrCat(help ? "HELP" : "TYPE", " for '", name, "' after its samples"));
      }
      if (help) {
        if (!helped.insert(name).second) fail(internal::StrCat("second HELP for '", name, "'"));
        if (arg.empty()) fail(internal::StrCat("empty HELP for '", name, "'"));
        for (size_t i = 0; i < arg.size(); ++i) {
          if (arg[i] == '\\' &&
              (i + 1 == arg.size() || (arg[i + 1] != '\\' && arg[i + 1] != 'n'))) {
            fail("bad escape in HELP text");
          }
          if (arg[i] == '\\') ++i;
        }
      } else {
        if (typed.count(name)) fail(internal::StrCat("second TYPE for '", name, "'"));
        if (arg != "counter" && arg != "gauge") {
          fail(internal::StrCat("TYPE '", arg, "' for '", name, "' (counter or gauge expected)"));
        }
        const bool total = name.ends_with("_total");
        if (arg == "counter" && !total) fail(internal::StrCat("counter '", name, "' not *_total"));
        if (arg == "gauge" && total) fail(internal::StrCat("gauge '", name, "' named *_total"));
        typed[name] = std::string(arg);
        result.types.emplace_back(name, std::string(arg));
      }
      continue;
    }

    // A sample: name[{labels}] value
    PromSample sample;
    size_t n = 0;
    while (n < line.size() && line[n] != '{' && line[n] != ' ') ++n;
    sample.name = std::string(line.substr(0, n));
    check_name(sample.name);
    std::string_view rest = line.substr(n);
    if (!rest.empty() && rest[0] == '{') {
      std::string error;
      if (!ParseLabels(rest, &sample.labels, &error)) {
        fail(error);
        continue;
      }
    }
    if (rest.empty() || rest[0] != ' ') {
      fail("no space before the value");
      continue;
    }
    rest.remove_prefix(1);
    if (rest.find(' ') != std::string_view::npos) {
      fail("trailing fields after the value (timestamps are not used)");
      continue;
    }
    const std::optional<double> value = ParseValue(rest);
    if (!value) {
      fail(internal::StrCat("value '", rest, "' is not a number"));
      continue;
    }
    sample.value = *value;

    if (!helped.count(sample.name))
      fail(internal::StrCat("sample of '", sample.name, "' without HELP"));
    const auto t = typed.find(sample.name);
    if (t == typed.end()) {
      fail(internal::StrCat("sample of '", sample.name, "' without TYPE"));
    } else if (t->second == "counter" && !(std::isfinite(sample.value) && sample.value >= 0)) {
      fail(internal::StrCat("counter '", sample.name, "' has value ", rest));
    }
    if (sample.name != current_family) {
      if (finished_families.count(sample.name)) {
        fail(internal::StrCat("samples of '", sample.name, "' not contiguous"));
      }
      if (!current_family.empty()) finished_families.insert(current_family);
      current_family = sample.name;
    }
    auto sorted = sample.labels;
    std::sort(sorted.begin(), sorted.end());
    sample.series = sample.name;
    if (!sorted.empty()) {
      sample.series += "{";
      for (size_t i = 0; i < sorted.size(); ++i) {
        internal::StrAppend(&sample.series, i ? "," : "", sorted[i].first, "=\"", sorted[i].second,
                            "\"");
      }
      sample.series += "}";
    }
    if (!seen_series.insert(sample.series).second) {
      fail(internal::StrCat("duplicate series ", sample.series));
    }
    result.samples.push_back(std::move(sample));
  }
  return result;
}

}  // namespace inca::monitor
