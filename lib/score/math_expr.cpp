#include "score/math_expr.hpp"

#include "core/json.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>

namespace braid::score {
namespace {

// An expression is evaluated at kPoints assignments of its variables at once; without a
// variable the values are all the same.
constexpr std::size_t kPoints = 3;
using Values = std::array<double, kPoints>;

// The value of variable number `id` (a letter's 1..26, a Greek name's after) at point k:
// distinct variables differ, and no value is "nice".
double variable_at(int id, std::size_t k) { return 0.5 + 0.37 * double(k + 1) + 0.113 * double(id) * double(k + 2); }

struct Val {
  std::optional<Rational> exact;
  Values v{};
  bool variable = false;
};

Val constant(double x) {
  Val r;
  r.v.fill(x);
  return r;
}
Val rational(const Rational& q) {
  Val r = constant(double(q.num) / double(q.den));
  r.exact = q;
  return r;
}

// Products of two int64 rationals before they are reduced (a GCC/Clang extension).
__extension__ typedef __int128 Wide;

std::optional<Rational> make_rational(Wide num, Wide den) {
  if (den == 0) return std::nullopt;
  if (den < 0) num = -num, den = -den;
  Wide a = num < 0 ? -num : num, b = den;
  while (b != 0) {
    const Wide t = a % b;
    a = b;
    b = t;
  }
  if (a != 0) num /= a, den /= a;
  constexpr Wide kMax = std::numeric_limits<std::int64_t>::max();
  if (num > kMax || num < -kMax || den > kMax) return std::nullopt;
  return Rational{static_cast<std::int64_t>(num), static_cast<std::int64_t>(den)};
}

enum class Op { add, sub, mul, div, pow };

std::optional<Val> combine(const Val& a, const Val& b, Op op) {
  Val r;
  r.variable = a.variable || b.variable;
  for (std::size_t k = 0; k < kPoints; ++k) {
    const double x = a.v[k], y = b.v[k];
    switch (op) {
      case Op::add: r.v[k] = x + y; break;
      case Op::sub: r.v[k] = x - y; break;
      case Op::mul: r.v[k] = x * y; break;
      case Op::div:
        if (y == 0) return std::nullopt;
        r.v[k] = x / y;
        break;
      case Op::pow: r.v[k] = std::pow(x, y); break;
    }
    if (std::isnan(r.v[k])) return std::nullopt;
  }
  if (a.exact && b.exact) {
    const Wide an = a.exact->num, ad = a.exact->den, bn = b.exact->num, bd = b.exact->den;
    switch (op) {
      case Op::add: r.exact = make_rational(an * bd + bn * ad, ad * bd); break;
      case Op::sub: r.exact = make_rational(an * bd - bn * ad, ad * bd); break;
      case Op::mul: r.exact = make_rational(an * bn, ad * bd); break;
      case Op::div: r.exact = make_rational(an * bd, ad * bn); break;
      case Op::pow:
        if (bd == 1 && bn >= 0 && bn <= 64) {
          Wide num = 1, den = 1;
          bool fits = true;
          for (Wide i = 0; i < bn && fits; ++i) {
            num *= an, den *= ad;
            fits = num < (Wide(1) << 100) && num > -(Wide(1) << 100) && den < (Wide(1) << 100);
          }
          if (fits) r.exact = make_rational(num, den);
        }
        break;
    }
  }
  return r;
}

std::optional<Val> apply(const Val& a, double (*f)(double)) {
  Val r;
  r.variable = a.variable;
  for (std::size_t k = 0; k < kPoints; ++k) {
    r.v[k] = f(a.v[k]);
    if (std::isnan(r.v[k])) return std::nullopt;
  }
  return r;
}

// \text{...}, \mbox{...}, \mathrm{...}, \textbf{...}: a unit (letters only) goes, a value stays.
void unwrap_text(std::string& s) {
  for (std::string_view cmd : {"\\text", "\\mbox", "\\mathrm", "\\textbf", "\\mathbf", "\\textrm"}) {
    for (std::size_t at; (at = s.find(std::string(cmd) + "{")) != std::string::npos;) {
      int depth = 0;
      std::size_t end = at + cmd.size();
      for (; end < s.size(); ++end) {
        if (s[end] == '{') ++depth;
        if (s[end] == '}' && --depth == 0) break;
      }
      if (end >= s.size()) return;
      const std::string inside = s.substr(at + cmd.size() + 1, end - at - cmd.size() - 1);
      const bool unit = std::none_of(inside.begin(), inside.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
      s.replace(at, end + 1 - at, unit ? std::string(" ") : inside);
    }
  }
}

// The decoration a grader ignores, removed (math_expr.hpp).
std::string normalise(std::string_view text) {
  std::string s = unwrap_delimiters(text);
  unwrap_text(s);
  for (std::string_view gone :
       {"\\left", "\\right", "\\displaystyle", "\\!", "\\,", "\\;", "\\:", "\\ ", "\\$", "$", "~"}) {
    replace_all(s, gone, gone == "\\ " || gone == "~" ? " " : "");
  }
  for (std::string_view frac : {"\\dfrac", "\\tfrac"}) replace_all(s, frac, "\\frac");
  for (std::string_view deg : {"^{\\circ}", "^\\circ", "\\circ", "\xc2\xb0"}) replace_all(s, deg, "");
  replace_all(s, "\\%", "");
  replace_all(s, "{,}", ",");
  replace_all(s, "\xe2\x88\x92", "-");  // U+2212 MINUS SIGN
  replace_all(s, "\xcf\x80", "\\pi");   // π
  replace_all(s, "\xe2\x88\x9e", "\\infty");  // ∞
  s = std::string(trim(s));
  while (!s.empty() && (s.back() == '.' || s.back() == '%')) s.pop_back();
  return std::string(trim(s));
}

const char* const kGreek[] = {"alpha", "beta", "gamma", "delta", "theta", "lambda", "mu", "phi", "psi", "omega", "sigma", "tau"};

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  std::optional<MathValue> parse() {
    auto v = value_list();
    skip();
    if (!v || i_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool peek(std::string_view t) {
    skip();
    return s_.substr(i_, t.size()) == t;
  }
  bool eat(std::string_view t) {
    if (!peek(t)) return false;
    i_ += t.size();
    return true;
  }
  // A command name after '\' (letters), not consumed.
  std::string_view command() const {
    std::size_t j = i_ + 1;
    while (j < s_.size() && std::isalpha(static_cast<unsigned char>(s_[j]))) ++j;
    return s_.substr(i_ + 1, j - i_ - 1);
  }

  // A whole answer: a union of intervals/sets, or a bare list "1, 2" (a set), or one item.
  std::optional<MathValue> value_list() {
    auto first = item();
    if (!first) return std::nullopt;
    if (peek("\\cup")) {
      MathValue u{.kind = MathValue::Kind::union_};
      u.items.push_back(*first);
      while (eat("\\cup")) {
        auto next = item();
        if (!next) return std::nullopt;
        u.items.push_back(*next);
      }
      return u;
    }
    if (peek(",")) {
      MathValue set{.kind = MathValue::Kind::set};
      set.items.push_back(*first);
      while (eat(",")) {
        auto next = item();
        if (!next) return std::nullopt;
        set.items.push_back(*next);
      }
      return set;
    }
    return first;
  }

  // A set \{...\}, a bracketed list (an interval or a tuple), or an expression (an
  // equation "x = ..." read as its right side).
  std::optional<MathValue> item() {
    if (eat("\\{")) {
      MathValue set{.kind = MathValue::Kind::set};
      if (eat("\\}")) return set;
      do {
        auto v = item();
        if (!v) return std::nullopt;
        set.items.push_back(*v);
      } while (eat(","));
      if (!eat("\\}")) return std::nullopt;
      return set;
    }
    const std::size_t start = i_;
    if (peek("(") || peek("[")) {
      const char open = s_[i_];
      ++i_;
      std::vector<MathValue> items;
      bool list = true;
      do {
        auto v = item();
        if (!v) {
          list = false;
          break;
        }
        items.push_back(*v);
      } while (eat(","));
      if (list && items.size() >= 2 && (peek(")") || peek("]"))) {
        const char close = s_[i_];
        ++i_;
        if (items.size() == 2 && !(open == '(' && close == ')')) {
          MathValue iv{.kind = MathValue::Kind::interval, .left_closed = open == '[', .right_closed = close == ']'};
          iv.items = std::move(items);
          return iv;
        }
        if (open != '(' || close != ')') return std::nullopt;
        MathValue t{.kind = MathValue::Kind::tuple};
        t.items = std::move(items);
        return t;
      }
      i_ = start;  // not a list: a parenthesised expression
    }
    auto e = expression();
    if (!e) return std::nullopt;
    if (eat("=")) {
      // "x = 5": the value of the lone variable on the left.
      if (!e->variable) return std::nullopt;
      const std::string_view lhs = trim(s_.substr(start, i_ - 1 - start));
      if (lhs.size() != 1) return std::nullopt;
      e = expression();
      if (!e) return std::nullopt;
    }
    return to_value(*e);
  }

  static MathValue to_value(const Val& v) {
    MathValue m;
    if (v.variable) {
      m.kind = MathValue::Kind::function;
      m.at_points.assign(v.v.begin(), v.v.end());
      return m;
    }
    m.exact = v.exact;
    m.value = v.v[0];
    return m;
  }

  std::optional<Val> expression() {
    skip();
    auto left = term();
    while (left) {
      if (eat("+")) {
        auto right = term();
        if (!right) return std::nullopt;
        left = combine(*left, *right, Op::add);
      } else if (peek("-") && !peek("->")) {
        ++i_;
        auto right = term();
        if (!right) return std::nullopt;
        left = combine(*left, *right, Op::sub);
      } else if (eat("\\pm")) {
        return std::nullopt;  // two answers in one: not a value
      } else {
        break;
      }
    }
    return left;
  }

  std::optional<Val> term() {
    auto left = signed_factor();
    while (left) {
      if (eat("\\cdot") || eat("\\times") || eat("*")) {
        auto right = signed_factor();
        if (!right) return std::nullopt;
        left = combine(*left, *right, Op::mul);
      } else if (eat("\\div") || eat("/")) {
        auto right = signed_factor();
        if (!right) return std::nullopt;
        left = combine(*left, *right, Op::div);
      } else if (starts_factor()) {  // implicit: 2\pi, 3\sqrt{2}, 2x, (1)(2)
        auto right = power();
        if (!right) return std::nullopt;
        left = combine(*left, *right, Op::mul);
      } else {
        break;
      }
    }
    return left;
  }

  bool starts_factor() {
    skip();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '(' || c == '.') return true;
    if (std::isalpha(static_cast<unsigned char>(c))) return true;
    if (c == '\\') {
      const auto cmd = command();
      return cmd == "frac" || cmd == "sqrt" || cmd == "pi" || cmd == "infty" || is_function(cmd) || is_greek(cmd);
    }
    return false;
  }

  static bool is_function(std::string_view cmd) {
    return cmd == "sin" || cmd == "cos" || cmd == "tan" || cmd == "ln" || cmd == "log" || cmd == "exp";
  }
  static bool is_greek(std::string_view cmd) {
    return std::find(std::begin(kGreek), std::end(kGreek), cmd) != std::end(kGreek);
  }

  std::optional<Val> signed_factor() {
    if (eat("-")) {
      auto f = signed_factor();
      if (!f) return std::nullopt;
      return combine(rational({0, 1}), *f, Op::sub);
    }
    if (eat("+")) return signed_factor();
    return power();
  }

  std::optional<Val> power() {
    auto base = atom();
    if (!base) return std::nullopt;
    if (eat("^")) {
      auto exponent = peek("{") ? group() : atom_single();
      if (!exponent) return std::nullopt;
      return combine(*base, *exponent, Op::pow);
    }
    return base;
  }

  std::optional<Val> group() {
    if (!eat("{")) return std::nullopt;
    auto e = expression();
    if (!e || !eat("}")) return std::nullopt;
    return e;
  }

  // One character's atom (\frac12, \sqrt2, x^2): a digit or a letter.
  std::optional<Val> atom_single() {
    skip();
    if (i_ >= s_.size()) return std::nullopt;
    const char c = s_[i_];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      ++i_;
      return rational({c - '0', 1});
    }
    if (c == '{') return group();
    return atom();
  }

  std::optional<Val> number() {
    const std::size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ < s_.size() && s_[i_] == '.' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1]))) {
      ++i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    // Scientific notation (1e5, 2.5E-3) is not compared (as parse_number): not e times 5.
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      std::size_t j = i_ + 1;
      if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
      if (j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j]))) return std::nullopt;
    }
    const auto q = parse_number(s_.substr(start, i_ - start));
    if (!q) return std::nullopt;
    return rational(*q);
  }

  std::optional<Val> atom() {
    skip();
    if (i_ >= s_.size()) return std::nullopt;
    const char c = s_[i_];
    if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && i_ + 1 < s_.size())) return number();
    if (c == '(' || c == '[') {
      ++i_;
      auto e = expression();
      if (!e || !(eat(c == '(' ? ")" : "]"))) return std::nullopt;
      return e;
    }
    if (c == '{') return group();
    if (std::isalpha(static_cast<unsigned char>(c))) {
      ++i_;
      // A variable is one letter: a word ("the sum is 12", "apples") is no value.
      if (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) return std::nullopt;
      if (c == 'e') return constant(std::numbers::e);
      return variable(std::tolower(c) - 'a' + 1);
    }
    if (c != '\\') return std::nullopt;
    const std::string_view cmd = command();
    i_ += cmd.size() + 1;
    if (cmd == "pi") return constant(std::numbers::pi);
    if (cmd == "infty") return constant(std::numeric_limits<double>::infinity());
    if (cmd == "frac") {
      auto top = atom_single();
      auto bottom = top ? atom_single() : std::nullopt;
      if (!bottom) return std::nullopt;
      return combine(*top, *bottom, Op::div);
    }
    if (cmd == "sqrt") {
      std::optional<Val> degree = rational({2, 1});
      if (eat("[")) {
        degree = expression();
        if (!degree || !eat("]")) return std::nullopt;
      }
      auto inside = atom_single();
      if (!inside || inside->v[0] < 0) return std::nullopt;
      return root(*inside, *degree);
    }
    if (is_function(cmd)) {
      auto arg = peek("(") || peek("{") ? atom() : power();
      if (!arg) return std::nullopt;
      if (cmd == "sin") return apply(*arg, [](double x) { return std::sin(x); });
      if (cmd == "cos") return apply(*arg, [](double x) { return std::cos(x); });
      if (cmd == "tan") return apply(*arg, [](double x) { return std::tan(x); });
      if (cmd == "exp") return apply(*arg, [](double x) { return std::exp(x); });
      if (cmd == "ln") return apply(*arg, [](double x) { return std::log(x); });
      return apply(*arg, [](double x) { return std::log10(x); });
    }
    if (is_greek(cmd)) return variable(27 + int(std::find(std::begin(kGreek), std::end(kGreek), cmd) - std::begin(kGreek)));
    return std::nullopt;
  }

  static Val variable(int id) {
    Val v;
    v.variable = true;
    for (std::size_t k = 0; k < kPoints; ++k) v.v[k] = variable_at(id, k);
    return v;
  }

  // The n-th root, exact when it is a rational's (\sqrt{9/4} = 3/2).
  static std::optional<Val> root(const Val& x, const Val& n) {
    Val r = x;
    r.exact.reset();
    for (std::size_t k = 0; k < kPoints; ++k) {
      r.v[k] = std::pow(x.v[k], 1.0 / n.v[k]);
      if (std::isnan(r.v[k])) return std::nullopt;
    }
    if (x.exact && n.exact && n.exact->den == 1 && n.exact->num >= 2 && n.exact->num <= 64 && x.exact->num >= 0) {
      const auto exact_root = [&](std::int64_t v) -> std::optional<std::int64_t> {
        const auto c = static_cast<std::int64_t>(std::llround(std::pow(double(v), 1.0 / double(n.exact->num))));
        Wide p = 1;
        for (std::int64_t i = 0; i < n.exact->num; ++i) p *= c;
        return p == v ? std::optional(c) : std::nullopt;
      };
      const auto top = exact_root(x.exact->num), bottom = exact_root(x.exact->den);
      if (top && bottom) r.exact = Rational{*top, *bottom};
    }
    return r;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

bool close(double a, double b) {
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::abs(a - b) <= 1e-6 * std::max({1.0, std::abs(a), std::abs(b)});
}

bool numbers_equal(const MathValue& a, const MathValue& b) {
  if (a.exact && b.exact) return *a.exact == *b.exact;
  return close(a.value, b.value);
}

// Every item of a matched to a distinct item of b.
bool unordered_equal(const std::vector<MathValue>& a, const std::vector<MathValue>& b) {
  if (a.size() != b.size()) return false;
  std::vector<bool> used(b.size(), false);
  for (const MathValue& x : a) {
    bool found = false;
    for (std::size_t j = 0; j < b.size() && !found; ++j) {
      if (!used[j] && math_equal(x, b[j])) used[j] = found = true;
    }
    if (!found) return false;
  }
  return true;
}

std::string number_text(double x, const std::optional<Rational>& exact) {
  if (exact) return to_string(*exact);
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return fmt::format("{:.9g}", x);
}

}  // namespace

std::optional<MathValue> parse_math(std::string_view text) {
  const std::string s = normalise(text);
  if (s.empty()) return std::nullopt;
  if (const auto q = parse_number(s)) {  // a plain number, thousands commas and all
    MathValue m;
    m.exact = q;
    m.value = double(q->num) / double(q->den);
    return m;
  }
  return Parser(s).parse();
}

bool math_equal(const MathValue& a, const MathValue& b) {
  using K = MathValue::Kind;
  // "(a, b)" is a pair or the open interval.
  const auto open_pair = [](const MathValue& t, const MathValue& iv) {
    return t.kind == K::tuple && iv.kind == K::interval && !iv.left_closed && !iv.right_closed && t.items.size() == 2 &&
           math_equal(t.items[0], iv.items[0]) && math_equal(t.items[1], iv.items[1]);
  };
  if (open_pair(a, b) || open_pair(b, a)) return true;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::number: return numbers_equal(a, b);
    case K::function:
      for (std::size_t k = 0; k < a.at_points.size(); ++k) {
        if (!close(a.at_points[k], b.at_points[k])) return false;
      }
      return true;
    case K::interval:
      return a.left_closed == b.left_closed && a.right_closed == b.right_closed && math_equal(a.items[0], b.items[0]) &&
             math_equal(a.items[1], b.items[1]);
    case K::tuple:
      if (a.items.size() != b.items.size()) return false;
      for (std::size_t k = 0; k < a.items.size(); ++k) {
        if (!math_equal(a.items[k], b.items[k])) return false;
      }
      return true;
    case K::set:
    case K::union_: return unordered_equal(a.items, b.items);
  }
  return false;
}

std::string canonical(const MathValue& v) {
  using K = MathValue::Kind;
  const auto list = [](const std::vector<MathValue>& items, bool sorted) {
    std::vector<std::string> parts;
    for (const MathValue& x : items) parts.push_back(canonical(x));
    if (sorted) std::sort(parts.begin(), parts.end());
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  switch (v.kind) {
    case K::number: return number_text(v.value, v.exact);
    case K::function: {
      std::vector<std::string> at;
      for (double x : v.at_points) at.push_back(number_text(x, std::nullopt));
      return fmt::format("f({})", fmt::join(at, ", "));
    }
    case K::interval:
      return fmt::format("{}{}{}", v.left_closed ? '[' : '(', list(v.items, false), v.right_closed ? ']' : ')');
    case K::tuple: return fmt::format("({})", list(v.items, false));
    case K::set: return fmt::format("{{{}}}", list(v.items, true));
    case K::union_: return fmt::format("U({})", list(v.items, true));
  }
  return "?";
}

std::optional<MathValue> expected_answer(const json& extra, std::string* problem) {
  const auto fail = [&](std::string why) -> std::optional<MathValue> {
    if (problem) *problem = std::move(why);
    return std::nullopt;
  };
  constexpr const char* kForms =
      "a number, or a string holding a value (\"42\", \"3/4\", \"\\\\frac{3}{4}\", \"\\\\sqrt{2}\", \"(0, 1]\") or a "
      "solution ending in \"#### 42\" or holding a \\\\boxed{...}";
  if (!extra.is_object() || !extra.contains("answer")) {
    return fail("is missing: --reward-rule math compares each response's final answer with it");
  }
  const json& a = extra["answer"];
  if (a.is_number_integer()) {
    if (a.is_number_unsigned() && a.get<std::uint64_t>() > std::uint64_t(INT64_MAX)) {
      return fail(fmt::format("is {}, too large to compare exactly", a.dump()));
    }
    return parse_math(a.dump());
  }
  if (a.is_number_float()) {
    if (auto v = parse_math(a.dump())) return v;
    return fail(fmt::format("is {}, a number the math rule cannot compare exactly (give it as a string, e.g. \"0.25\")",
                            a.dump()));
  }
  if (a.is_string()) {
    const auto& s = a.get_ref<const std::string&>();
    if (auto marked = marked_answer(s)) {
      if (auto v = parse_math(*marked)) return v;
    }
    if (auto v = parse_math(s)) return v;
    const std::string shown = s.size() > 40 ? s.substr(0, 40) + "..." : s;
    return fail(fmt::format("is {}, not a value the math rule can read: expected {}", json(shown).dump(), kForms));
  }
  return fail(fmt::format("is {} ({}), expected {}", a.dump(), a.is_null() ? "null" : a.type_name(), kForms));
}

double math_reward(std::string_view response, const MathValue& expected) {
  const auto answer = final_answer(response);
  if (!answer) return 0.0;
  if (const auto got = parse_math(*answer); got && math_equal(*got, expected)) return 1.0;
  if (expected.kind != MathValue::Kind::number) return 0.0;
  const auto inner = last_number(*answer);
  const auto got = inner ? parse_math(*inner) : std::nullopt;
  return got && math_equal(*got, expected) ? 1.0 : 0.0;
}

std::optional<std::string> answer_key(std::string_view response) {
  const auto answer = final_answer(response);
  if (!answer) return std::nullopt;
  if (const auto v = parse_math(*answer)) return canonical(*v);
  return std::string(trim(*answer));
}

}  // namespace braid::score
