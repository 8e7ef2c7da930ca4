#include "score/math_answer.hpp"

#include "core/json.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cstdint>
#include <cmath>
#include <numeric>
#include <regex>

namespace braid::score {
namespace {

// Past this many significant digits an int64 numerator or denominator may overflow.
constexpr std::size_t kMaxDigits = 18;


bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(s.size() - p.size()) == p; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::optional<Rational> make(std::int64_t num, std::int64_t den) {
  if (den == 0) return std::nullopt;
  if (den < 0) {
    if (num == INT64_MIN || den == INT64_MIN) return std::nullopt;
    num = -num;
    den = -den;
  }
  const std::int64_t g = std::gcd(num, den);
  return Rational{num / g, den / g};
}

// (a.num / a.den) / (b.num / b.den), nullopt on overflow or division by zero.
std::optional<Rational> divide(const Rational& a, const Rational& b) {
  std::int64_t num = 0, den = 0;
  if (__builtin_mul_overflow(a.num, b.den, &num) || __builtin_mul_overflow(a.den, b.num, &den)) return std::nullopt;
  return make(num, den);
}

// Digits, optionally with thousands commas (1,234,567: groups of three), then an
// optional fraction part; or a fraction part alone (".5"). The whole of `s`.
std::optional<Rational> parse_decimal(std::string_view s) {
  if (s.empty()) return std::nullopt;
  const auto dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view{} : s.substr(dot + 1);
  if (dot != std::string_view::npos && frac.empty()) return std::nullopt;  // "5." is normalised before
  if (whole.empty() && frac.empty()) return std::nullopt;
  std::string digits;
  if (whole.find(',') != std::string_view::npos) {
    std::size_t group = 0;
    bool first = true;
    for (std::size_t i = 0; i <= whole.size(); ++i) {
      if (i == whole.size() || whole[i] == ',') {
        if (group == 0 || group > 3 || (!first && group != 3)) return std::nullopt;
        first = false;
        group = 0;
        continue;
      }
      if (!is_digit(whole[i])) return std::nullopt;
      digits += whole[i];
      ++group;
    }
  } else {
    for (char c : whole) {
      if (!is_digit(c)) return std::nullopt;
      digits += c;
    }
  }
  for (char c : frac) {
    if (!is_digit(c)) return std::nullopt;
  }
  while (!frac.empty() && frac.back() == '0') frac.remove_suffix(1);
  digits += frac;
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  if (digits.size() > kMaxDigits || frac.size() > kMaxDigits) return std::nullopt;
  std::int64_t num = 0, den = 1;
  for (char c : digits) num = num * 10 + (c - '0');
  for (std::size_t i = 0; i < frac.size(); ++i) den *= 10;
  return make(num, den);
}

// {A}{B} of \frac at the start of s: the two group texts and the rest.
bool brace_group(std::string_view& s, std::string_view& inside) {
  s = trim(s);
  if (s.empty() || s.front() != '{') return false;
  int depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) {
      inside = s.substr(1, i - 1);
      s.remove_prefix(i + 1);
      return true;
    }
  }
  return false;
}

// The text of one number with the wrapping and decoration a grader ignores removed.
std::string normalised(std::string_view text) {
  std::string s = unwrap_delimiters(text);
  replace_all(s, "{,}", ",");
  for (std::string_view gone : {"\\$", "$", "\\,", "\\!", "\\ ", "\\left", "\\right"}) replace_all(s, gone, "");
  s = std::string(trim(s));
  if (ends_with(s, "\\%")) s.resize(s.size() - 2);
  else if (ends_with(s, "%")) s.pop_back();
  while (!s.empty() && s.back() == '.') s.pop_back();
  return std::string(trim(s));
}

}  // namespace

// The last number in text (a \frac, a fraction a/b or a decimal, with its sign), as written.
std::optional<std::string> last_number(std::string_view text) {
  static const std::regex number(
      R"((\\[dt]?frac\s*\{[^{}]*\}\s*\{[^{}]*\})|([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?))");
  std::optional<std::string> last;
  const std::string s(text);
  for (auto it = std::sregex_iterator(s.begin(), s.end(), number); it != std::sregex_iterator(); ++it) {
    std::string m = it->str();
    const auto at = static_cast<std::size_t>(it->position());
    // "10-3": the '-' is an operator, not the sign of 3.
    if ((m.front() == '-' || m.front() == '+') && at > 0) {
      const char before = s[at - 1];
      if (std::isalnum(static_cast<unsigned char>(before)) || before == ')' || before == '}') m.erase(0, 1);
    }
    last = std::move(m);
  }
  return last;
}

// The answer marked by "####" (the rest of its line) or by the last \boxed{...}.
std::optional<std::string> marked_answer(std::string_view response) {
  if (const auto hashes = response.rfind("####"); hashes != std::string_view::npos) {
    std::string_view rest = response.substr(hashes + 4);
    rest = trim(rest.substr(0, rest.find('\n')));
    if (!rest.empty()) return std::string(rest);
  }
  for (std::string_view box : {"\\boxed", "\\fbox"}) {
    const auto at = response.rfind(box);
    if (at == std::string_view::npos) continue;
    std::string_view rest = response.substr(at + box.size()), inside;
    if (brace_group(rest, inside) && !trim(inside).empty()) return std::string(trim(inside));
  }
  return std::nullopt;
}

std::string unwrap_delimiters(std::string_view text) {
  std::string s(trim(text));
  for (bool changed = true; changed;) {
    changed = false;
    const std::string_view v = s;
    for (auto [open, close] : std::array<std::pair<std::string_view, std::string_view>, 3>{
             {{"\\(", "\\)"}, {"\\[", "\\]"}, {"$", "$"}}}) {
      if (v.size() >= open.size() + close.size() && starts_with(v, open) && ends_with(v, close)) {
        s = std::string(trim(v.substr(open.size(), v.size() - open.size() - close.size())));
        changed = true;
        break;
      }
    }
  }
  return s;
}

std::string to_string(const Rational& r) {
  return r.den == 1 ? std::to_string(r.num) : fmt::format("{}/{}", r.num, r.den);
}

std::optional<Rational> parse_number(std::string_view text) {
  const std::string n = normalised(text);
  std::string_view s = n;
  bool negative = false;
  if (starts_with(s, "\xe2\x88\x92")) {  // U+2212 MINUS SIGN
    negative = true;
    s.remove_prefix(3);
  } else if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  s = trim(s);
  std::optional<Rational> value;
  for (std::string_view frac : {"\\frac", "\\dfrac", "\\tfrac"}) {
    if (!starts_with(s, frac)) continue;
    std::string_view rest = s.substr(frac.size()), a, b;
    if (!brace_group(rest, a) || !brace_group(rest, b) || !trim(rest).empty()) return std::nullopt;
    const auto top = parse_number(a), bottom = parse_number(b);
    if (!top || !bottom) return std::nullopt;
    value = divide(*top, *bottom);
    break;
  }
  if (!value && !starts_with(s, "\\")) {
    const auto slash = s.find('/');
    if (slash == std::string_view::npos) {
      value = parse_decimal(s);
    } else {
      const auto top = parse_decimal(trim(s.substr(0, slash)));
      const auto bottom = parse_decimal(trim(s.substr(slash + 1)));
      if (top && bottom) value = divide(*top, *bottom);
    }
  }
  if (value && negative) value->num = -value->num;
  return value;
}

std::optional<std::string> final_answer(std::string_view response) {
  if (auto marked = marked_answer(response)) return marked;
  return last_number(response);
}

std::optional<Rational> final_answer_value(std::string_view response) {
  const auto answer = final_answer(response);
  if (!answer) return std::nullopt;
  if (auto v = parse_number(*answer)) return v;
  if (auto inner = last_number(*answer)) return parse_number(*inner);
  return std::nullopt;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
}

}  // namespace braid::score
