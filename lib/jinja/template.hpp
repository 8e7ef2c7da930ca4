// A Jinja template engine for chat templates, written to render exactly what Python's
// jinja2 renders in the environment Hugging Face transformers sets up for
// apply_chat_template: an ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, the loopcontrols extension ({% break %}, {% continue %}), the
// {% generation %} block of transformers' AssistantTracker, and the globals and filter
// it adds (raise_exception, strftime_now, tojson as json.dumps without key sorting and
// with ensure_ascii=False).
//
// The language: {{ }}, {% %} and {# #} with '-' and '+' whitespace control, raw
// blocks; if/elif/else, for (loop.*, else, an inline if filter), set (also as a block
// and on namespace attributes), macro and call, filter blocks, with, break/continue;
// expressions with Python's operators, literals, slicing, calls with keywords, filters
// and tests; the str, dict and list methods templates use. What is not implemented
// (template inheritance, includes, imports, autoescape) is refused when parsed, naming
// the place; nothing is approximated.
//
// A hostile template cannot hang or crash the caller: output, string and list sizes,
// the work done (steps), macro recursion and nesting depth are bounded (Limits); going
// past a bound is an Error like any other.
#pragma once

#include "jinja/value.hpp"

#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace braid::jinja {

struct Stmt;

// A template that cannot be parsed or rendered. what(): "ORIGIN:LINE:COLUMN: PROBLEM
// (in CONSTRUCT)". A template's own raise_exception(message) is kind raised, with
// message() the template's text as transformers reports it.
class Error : public std::runtime_error {
 public:
  enum Kind { syntax, runtime, raised, limit };
  Error(Kind kind, std::string origin, int line, int column, std::string construct, std::string message);
  Kind kind() const { return kind_; }
  const std::string& origin() const { return origin_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& construct() const { return construct_; }
  const std::string& message() const { return message_; }

 private:
  Kind kind_;
  std::string origin_;
  int line_, column_;
  std::string construct_, message_;
};

struct Limits {
  std::size_t max_output = std::size_t(64) << 20;  // bytes of output, and of any one string built
  std::size_t max_items = 1 << 22;                 // items of any one list built
  std::int64_t max_steps = 10'000'000;             // expressions and statements evaluated
  int max_depth = 128;                             // nested macro calls, blocks and values
  std::int64_t max_range = 100'000;                // items of range(), as jinja2's sandbox
};

// Byte offsets [begin, end) of the text a {% generation %} block wrote.
struct Span {
  std::size_t begin = 0, end = 0;
};

struct RenderOptions {
  Limits limits;
  // The time strftime_now formats (local time, as datetime.now()); unset: now.
  std::function<std::time_t()> now;
  // Items (dicts or lists, such as the messages passed) whose text is wanted: see
  // Rendered::item_spans.
  std::vector<Value> tracked_items;
};

struct Rendered {
  std::string text;
  std::vector<Span> generation;
  // One per RenderOptions::tracked_items: the bytes written into the output (not into a
  // {% set %} block) while a {% for %} loop's current item was that very item (the same
  // object, not an equal one; a slice such as messages[1:] holds the same objects),
  // from the first such byte to the last; nullopt when none was written.
  std::vector<std::optional<Span>> item_spans;
};

class Template {
 public:
  // Parses source; origin names the template in errors (a file, "tokenizer_config.json:
  // chat_template"). Error (kind syntax) when it cannot be parsed.
  static Template parse(std::string_view source, std::string origin, const Limits& limits = {});

  // Renders with the given variables (the globals above are added unless given).
  Rendered render(const Value& variables, const RenderOptions& options = {}) const;

  const std::string& origin() const { return origin_; }
  // Whether the template has {% generation %} blocks (transformers' assistant masks).
  bool has_generation() const { return has_generation_; }

 private:
  std::string origin_;
  bool has_generation_ = false;
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

}  // namespace braid::jinja
