// The values a Jinja template computes with, and the Python behaviour they copy.
//
// Chat templates are rendered by Python's jinja2, so every value here behaves as its
// Python counterpart does under jinja2: None, bool, int, float, str, list (and tuple),
// dict (insertion-ordered), jinja2's Undefined, namespace objects and callables.
// Strings are UTF-8 and are indexed, sliced and measured in code points, as Python's
// str is. str() and repr() print as Python prints, floats included; to_json() is
// Python's json.dumps as transformers' tojson filter calls it (ensure_ascii=False,
// keys in insertion order unless sort_keys).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace braid::jinja {

class Value;
class Interpreter;

struct Undefined {
  std::string hint;  // "'foo' is undefined", "'dict object' has no attribute 'x'"
};
struct None {};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;  // printed as (a, b); otherwise a list
};

// A dict, or a namespace() object (attributes settable with {% set ns.x = ... %}).
class DictData {
 public:
  bool is_namespace = false;

  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
  bool erase(const std::string& key);
  std::size_t size() const;
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, Value>> items_;
  std::unordered_map<std::string, std::size_t> index_;
};

// Arguments of a call: positional, then keyword in the order written.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Function {
  std::string name;  // for messages: "range", "macro 'render_tool'", "str.split"
  std::function<Value(Interpreter&, Args&)> call;
};

using List = std::shared_ptr<ListData>;
using Dict = std::shared_ptr<DictData>;
using Callable = std::shared_ptr<const Function>;

// A problem with an operation on values ("unsupported operand type(s) for +: 'int' and
// 'str'"); the interpreter adds where in the template it happened.
class ValueError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Value {
 public:
  Value() : v_(Undefined{}) {}
  Value(Undefined u) : v_(std::move(u)) {}
  Value(None) : v_(None{}) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(static_cast<std::int64_t>(i)) {}
  Value(std::int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(List l) : v_(std::move(l)) {}
  Value(Dict d) : v_(std::move(d)) {}
  Value(Callable c) : v_(std::move(c)) {}

  static Value list(std::vector<Value> items = {}, bool tuple = false);
  static Value dict();
  static Value function(std::string name, std::function<Value(Interpreter&, Args&)> call);

  bool is_undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool is_none() const { return std::holds_alternative<None>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<std::int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python's numbers.Number
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_list() const { return std::holds_alternative<List>(v_); }
  bool is_dict() const { return std::holds_alternative<Dict>(v_) && !as_dict()->is_namespace; }
  bool is_namespace() const { return std::holds_alternative<Dict>(v_) && as_dict()->is_namespace; }
  bool is_callable() const { return std::holds_alternative<Callable>(v_); }

  bool as_bool() const { return std::get<bool>(v_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return std::get<List>(v_); }
  const Dict& as_dict() const { return std::get<Dict>(v_); }
  const Callable& as_callable() const { return std::get<Callable>(v_); }
  const Undefined& as_undefined() const { return std::get<Undefined>(v_); }

  // int or bool as a Python int; a float as a double (numbers only).
  double to_double() const;

  // Python's type name: "str", "int", "dict", "Undefined", ...
  std::string type_name() const;

  bool truthy() const;         // Python's bool()
  std::string str() const;     // Python's str(), as {{ x }} prints it (Undefined: "")
  std::string repr() const;    // Python's repr()

  // Python's json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...).
  // indent: none (one line), or the text each level is indented by. ValueError on what
  // JSON cannot hold (Undefined, a function, a namespace).
  struct JsonStyle {
    std::optional<std::string> indent;
    std::optional<std::pair<std::string, std::string>> separators;  // item, key
    bool sort_keys = false;
    bool ensure_ascii = false;
  };
  std::string to_json(const JsonStyle& style) const;
  std::string to_json() const { return to_json(JsonStyle()); }

  // Conversions to and from JSON documents (objects keep their key order).
  static Value from_json(const nlohmann::ordered_json& j);
  static Value from_json(const nlohmann::json& j);

 private:
  std::variant<Undefined, None, bool, std::int64_t, double, std::string, List, Dict, Callable> v_;
};

// Python ==, and the ordering of <, <= ... (ValueError for types Python refuses to order).
bool equal(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);

// Python's repr() of a float ("1.0", "1e+16", "0.30000000000000004").
std::string float_repr(double d);
// Python's repr() of a str ('a\n' with the quote Python picks).
std::string string_repr(std::string_view s);

}  // namespace braid::jinja
