// Math answers beyond plain numbers, compared by value and structure as math-verify
// (Hugging Face) and the MATH graders do: a LaTeX answer is parsed into a value and two
// answers are equal when their values are.
//
//   numbers and expressions  \frac{1}{2} = 0.5 = 1/2;  \sqrt{2} = \sqrt2 = 2^{1/2};  2\pi = 2π;
//                            \frac{\sqrt{3}}{2};  3\sqrt{2} = \sqrt{18};  x + 1 = 1 + x (a
//                            variable: equal at every point tried)
//   intervals                (0, 1], [2, \infty), (-\infty, 3) \cup (4, 5] (brackets must match)
//   sets                     \{1, 2, 3\} = \{3, 2, 1\} (order ignored)
//   tuples                   (1, 2) ≠ (2, 1) (order kept; "(a, b)" also reads as the open interval)
//   equations                "x = 5" is its right side when the left is a lone variable
//
// Decoration graders ignore goes first: $...$, \( \), \left/\right, \displaystyle, spacing
// (\, \! \; \ ), \dfrac/\tfrac (= \frac), units as \text{..}/\mbox{..}/\mathrm{..} after a
// value, degrees (^\circ, °), a trailing % or "." . Rational arithmetic stays exact; anything
// else compares within 1e-6 relative.
#pragma once

#include "core/json.hpp"
#include "score/math_answer.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braid::score {

struct MathValue {
  enum class Kind {
    number,    // a constant: exact when rational, else its double
    function,  // an expression of variables (x, y, ...): compared at fixed points
    interval,  // items: the two endpoints
    set,       // items, order ignored
    tuple,     // items, in order
    union_,    // items: intervals (or sets), order ignored
  };
  Kind kind = Kind::number;
  std::optional<Rational> exact;
  double value = 0;                  // number
  std::vector<double> at_points;     // function: its values at the fixed points
  bool left_closed = false, right_closed = false;  // interval
  std::vector<MathValue> items;
};

// The value of an answer's text; nullopt when it is not math braid can read.
std::optional<MathValue> parse_math(std::string_view text);

// Equal by value and structure (above).
bool math_equal(const MathValue& a, const MathValue& b);

// "1/2", "(0, 1]", "{1, 2}" ... for messages and majority votes: equal values give equal text
// (numbers as exact fractions or to 9 significant digits).
std::string canonical(const MathValue& v);

// A prompt line's "answer" among its extra fields: a JSON number, or a string holding a
// value ("42", "1,234", "\\frac{3}{4}", "(0, 1]", "\\sqrt{2}") or a worked solution ending
// in "#### 42" or holding a \\boxed{...} (GSM8K's and MATH's own fields). nullopt with
// *problem set ("is missing ...", "is \"why?\", not a value ...") otherwise.
std::optional<MathValue> expected_answer(const json& extra, std::string* problem);

// 1 when the response's final answer (math_answer.hpp: after "####", in the last \\boxed{},
// else the last number) equals `expected` by value and structure, else 0. A final answer
// that is not a value as a whole ("#### 12 apples") is taken by its last number when the
// expected answer is a number.
double math_reward(std::string_view response, const MathValue& expected);

// The response's final answer as a majority vote counts it: its value's canonical text, or
// the answer's own text when it is no value; nullopt when there is none.
std::optional<std::string> answer_key(std::string_view response);

}  // namespace braid::score
