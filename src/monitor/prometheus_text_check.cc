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

namespace {

// The state of one exposition being checked, line by line.
class PromChecker {
 public:
  explicit PromChecker(std::string_view required_prefix) : prefix_(required_prefix) {}

  void Line(std::string_view line) {
    ++line_no_;
    if (line.empty()) {
      Fail("blank line");
    } else if (line[0] == '#') {
      Comment(line);
    } else {
      Sample(line);
    }
  }
  PromCheckResult& result() { return result_; }

 private:
  void Fail(std::string_view what) {
    result_.errors.push_back(internal::StrCat("line ", line_no_, ": ", what));
  }
  void CheckName(std::string_view name) {
    if (!IsMetricName(name)) Fail(internal::StrCat("bad metric name '", name, "'"));
    if (!name.starts_with(prefix_)) Fail(internal::StrCat("'", name, "' lacks prefix ", prefix_));
  }

  // "# HELP name text" or "# TYPE name counter|gauge".
  void Comment(std::string_view line) {
    const bool help = line.starts_with("# HELP ");
    const bool type = line.starts_with("# TYPE ");
    if (!help && !type) {
      Fail("comment that is neither HELP nor TYPE");
      return;
    }
    std::string_view rest = line.substr(7);
    const size_t sp = rest.find(' ');
    const std::string name(rest.substr(0, sp));
    const std::string_view arg = sp == std::string_view::npos ? "" : rest.substr(sp + 1);
    CheckName(name);
    if (finished_families_.count(name) || (!current_family_.empty() && current_family_ == name)) {
      Fail(internal::StrCat(help ? "HELP" : "TYPE", " for '", name, "' after its samples"));
    }
    if (help) {
      Help(name, arg);
    } else {
      Type(name, arg);
    }
  }
  void Help(const std::string& name, std::string_view arg) {
    if (!helped_.insert(name).second) Fail(internal::StrCat("second HELP for '", name, "'"));
    if (arg.empty()) Fail(internal::StrCat("empty HELP for '", name, "'"));
    for (size_t i = 0; i < arg.size(); ++i) {
      if (arg[i] == '\\' && (i + 1 == arg.size() || (arg[i + 1] != '\\' && arg[i + 1] != 'n'))) {
        Fail("bad escape in HELP text");
      }
      if (arg[i] == '\\') ++i;
    }
  }
  void Type(const std::string& name, std::string_view arg) {
    if (typed_.count(name)) Fail(internal::StrCat("second TYPE for '", name, "'"));
    if (arg != "counter" && arg != "gauge") {
      Fail(internal::StrCat("TYPE '", arg, "' for '", name, "' (counter or gauge expected)"));
    }
    const bool total = name.ends_with("_total");
    if (arg == "counter" && !total) Fail(internal::StrCat("counter '", name, "' not *_total"));
    if (arg == "gauge" && total) Fail(internal::StrCat("gauge '", name, "' named *_total"));
    typed_[name] = std::string(arg);
    result_.types.emplace_back(name, std::string(arg));
  }

  // A sample: name[{labels}] value
  void Sample(std::string_view line) {
    PromSample sample;
    size_t n = 0;
    while (n < line.size() && line[n] != '{' && line[n] != ' ') ++n;
    sample.name = std::string(line.substr(0, n));
    CheckName(sample.name);
    std::string_view rest = line.substr(n);
    if (!rest.empty() && rest[0] == '{') {
      std::string error;
      if (!ParseLabels(rest, &sample.labels, &error)) {
        Fail(error);
        return;
      }
    }
    if (rest.empty() || rest[0] != ' ') {
      Fail("no space before the value");
      return;
    }
    rest.remove_prefix(1);
    if (rest.find(' ') != std::string_view::npos) {
      Fail("trailing fields after the value (timestamps are not used)");
      return;
    }
    const std::optional<double> value = ParseValue(rest);
    if (!value) {
      Fail(internal::StrCat("value '", rest, "' is not a number"));
      return;
    }
    sample.value = *value;
    Family(sample, rest);
    sample.series = SeriesKey(sample);
    if (!seen_series_.insert(sample.series).second) {
      Fail(internal::StrCat("duplicate series ", sample.series));
    }
    result_.samples.push_back(std::move(sample));
  }
  // A sample's family: declared (HELP, TYPE), a counter's value, and its
  // samples contiguous.
  void Family(const PromSample& sample, std::string_view value_text) {
    if (!helped_.count(sample.name)) {
      Fail(internal::StrCat("sample of '", sample.name, "' without HELP"));
    }
    const auto t = typed_.find(sample.name);
    if (t == typed_.end()) {
      Fail(internal::StrCat("sample of '", sample.name, "' without TYPE"));
    } else if (t->second == "counter" && !(std::isfinite(sample.value) && sample.value >= 0)) {
      Fail(internal::StrCat("counter '", sample.name, "' has value ", value_text));
    }
    if (sample.name != current_family_) {
      if (finished_families_.count(sample.name)) {
        Fail(internal::StrCat("samples of '", sample.name, "' not contiguous"));
      }
      if (!current_family_.empty()) finished_families_.insert(current_family_);
      current_family_ = sample.name;
    }
  }
  // name{a="x",b="y"} with the labels sorted.
  static std::string SeriesKey(const PromSample& sample) {
    auto sorted = sample.labels;
    std::sort(sorted.begin(), sorted.end());
    std::string series = sample.name;
    if (!sorted.empty()) {
      series += "{";
      for (size_t i = 0; i < sorted.size(); ++i) {
        internal::StrAppend(&series, i ? "," : "", sorted[i].first, "=\"", sorted[i].second, "\"");
      }
      series += "}";
    }
    return series;
  }

  std::string_view prefix_;
  PromCheckResult result_;
  std::set<std::string> helped_, seen_series_, finished_families_;
  std::map<std::string, std::string> typed_;
  std::string current_family_;
  size_t line_no_ = 0;
};

}  // namespace

PromCheckResult CheckPrometheusText(std::string_view text, std::string_view required_prefix) {
  PromChecker checker(required_prefix);
  if (!text.empty() && text.back() != '\n') {
    checker.result().errors.push_back("text does not end in a newline");
  }
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    checker.Line(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return std::move(checker.result());
}

}  // namespace inca::monitor
