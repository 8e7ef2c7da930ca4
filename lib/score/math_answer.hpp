// The math verifier's text work (--reward-rule math): finding a response's final
// answer and comparing numbers the way graders of GSM8K and MATH do.
//
//   final_answer("... so she pays 3*4 = 12.\n#### 12")   -> "12"
//   final_answer("The answer is $\boxed{\frac{3}{4}}$.")  -> "\frac{3}{4}"
//   final_answer("We get 7 apples, then 9.")              -> "9"    (the last number)
//   parse_number("1,234.50") == parse_number("+2469/2")   (both 2469/2)
//
// The final answer is, in this order of preference: the rest of the line after the
// last "####"; else the contents of the last \boxed{...} (braces balanced); else the
// last number in the text. A number is normalised before comparing: surrounding
// spaces, `$`, `\$`, `\(`/`\)`, a trailing `.` or `%` and LaTeX spacing (`\,` `\!`
// `{,}`) go; a leading `+` goes; thousands commas (1,234,567 — groups of three) go;
// trailing zeros of a decimal go (2.50 = 2.5, 3.0 = 3); `a/b` and `\frac{a}{b}`
// (also \dfrac, \tfrac) are fractions. Values are exact rationals, so 0.5 = 1/2 =
// \frac{2}{4}. A number with more than 18 significant digits is not compared (no
// number). When the #### or \boxed answer is not a number as a whole ("#### 12
// apples", "\boxed{x = 5}"), its last number is taken.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace braid::score {

// An exact number: num/den in lowest terms, den > 0.
struct Rational {
  std::int64_t num = 0;
  std::int64_t den = 1;
  bool operator==(const Rational&) const = default;
};
std::string to_string(const Rational& r);  // "12", "-3/4"

// text without the math delimiters around it ($...$, \\(...\\), \\[...\\], nested), trimmed.
std::string unwrap_delimiters(std::string_view text);

// The value of text that is one number (after the normalisation above); nullopt otherwise.
std::optional<Rational> parse_number(std::string_view text);

// The response's final answer as written (trimmed); nullopt when it has none.
std::optional<std::string> final_answer(std::string_view response);

// The value of the final answer; nullopt when there is none or it holds no number.
std::optional<Rational> final_answer_value(std::string_view response);

// The answer marked by "####" (the rest of its line) or by the last \boxed{...} (braces
// balanced, nested ones too); nullopt when neither is there.
std::optional<std::string> marked_answer(std::string_view text);

// The last number in text (a \frac, a fraction a/b or a decimal, with its sign), as written.
std::optional<std::string> last_number(std::string_view text);

// Every `from` in s replaced by `to`, left to right (what a replacement makes is not searched again).
void replace_all(std::string& s, std::string_view from, std::string_view to);

// Comparing answers that are not plain numbers (LaTeX values, intervals, sets, ...), the
// prompt line's expected answer and the reward: score/math_expr.hpp.

}  // namespace braid::score
