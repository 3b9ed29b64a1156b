#include "monitor/json_check.h"

#include "monitor/str_cat.h"

namespace inca::monitor {
namespace {

// Recursive descent over the RFC 8259 grammar; depth-limited.
class JsonChecker {
 public:
  explicit JsonChecker(std::string_view s) : s_(s) {}

  std::string Run() {
    Space();
    if (!Value(0)) return Error();
    Space();
    if (i_ != s_.size()) return Error("trailing text");
    return "";
  }

 private:
  bool Value(int depth) {
    if (depth > 64) return Fail("nested too deep");
    if (i_ >= s_.size()) return Fail("value expected");
    switch (s_[i_]) {
      case '{': return Object(depth);
      case '[': return Array(depth);
      case '"': return String();
      case 't': return Word("true");
      case 'f': return Word("false");
      case 'n': return Word("null");
      default: return Number();
    }
  }
  bool Object(int depth) {
    ++i_;
    Space();
    if (Peek('}')) return ++i_, true;
    while (true) {
      Space();
      if (!Peek('"') || !String()) return Fail("member name expected");
      Space();
      if (!Peek(':')) return Fail("':' expected");
      ++i_;
      Space();
      if (!Value(depth + 1)) return false;
      Space();
      if (Peek('}')) return ++i_, true;
      if (!Peek(',')) return Fail("',' or '}' expected");
      ++i_;
    }
  }
  bool Array(int depth) {
    ++i_;
    Space();
    if (Peek(']')) return ++i_, true;
    while (true) {
      Space();
      if (!Value(depth + 1)) return false;
      Space();
      if (Peek(']')) return ++i_, true;
      if (!Peek(',')) return Fail("',' or ']' expected");
      ++i_;
    }
  }
  bool String() {
    ++i_;
    while (i_ < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return Fail("control character in string");
      if (c == '\\') {
        if (i_ >= s_.size()) break;
        const char e = s_[i_++];
        if (e == 'u') {
          for (int k = 0; k < 4; ++k, ++i_) {
            if (i_ >= s_.size() || !IsHex(s_[i_])) return Fail("bad \\u escape");
          }
        } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          return Fail("bad escape");
        }
      }
    }
    return Fail("unterminated string");
  }
  bool Number() {
    const size_t start = i_;
    if (Peek('-')) ++i_;
    if (Peek('0')) {
      ++i_;
    } else if (!Digits()) {
      return Fail("value expected");
    }
    if (Peek('.')) {
      ++i_;
      if (!Digits()) return Fail("digits expected after '.'");
    }
    if (Peek('e') || Peek('E')) {
      ++i_;
      if (Peek('+') || Peek('-')) ++i_;
      if (!Digits()) return Fail("digits expected in exponent");
    }
    if (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') return Fail("leading zero");
    return i_ > start;
  }
  bool Digits() {
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > start;
  }
  bool Word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return Fail("value expected");
    i_ += w.size();
    return true;
  }
  static bool IsHex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }
  bool Peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void Space() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  bool Fail(std::string_view what) {
    if (error_.empty()) error_ = internal::StrCat(what, " at offset ", i_);
    return false;
  }
  std::string Error(std::string_view what = "") {
    if (!what.empty()) Fail(what);
    return error_.empty() ? "invalid" : error_;
  }

  std::string_view s_;
  size_t i_ = 0;
  std::string error_;
};

}  // namespace

std::string CheckJson(std::string_view text) {
  return JsonChecker(text).Run();
}

}  // namespace inca::monitor
