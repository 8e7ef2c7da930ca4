// Running a parsed template (render.cpp), and what the builtins (builtins.cpp) ask of it.
#pragma once

#include "jinja/ast.hpp"
#include "jinja/template.hpp"

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace braid::jinja {

// raise_exception(message) from a template.
struct Raised {
  std::string message;
};
// A bound of Limits passed.
struct LimitPassed {
  std::string message;
};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};

class Interpreter {
 public:
  Interpreter(const std::string& origin, const RenderOptions& options);

  Rendered run(const Body& body, const Value& variables);

  // For builtins.
  const Limits& limits() const { return opt_.limits; }
  void check_size(std::size_t bytes) const;   // a string about to be built
  void check_items(std::size_t n) const;      // a list about to be built
  void step(std::int64_t n = 1);  // n steps of work done (items built, iterations)
  std::time_t now() const;
  Value call(const Value& fn, Args& args);
  Value filter(const std::string& name, const Value& input, Args& args);
  bool test(const std::string& name, const Value& input, Args& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
  // Items of a value iterated over (for, |list, ...): a list's items, a dict's keys, a
  // string's characters; Undefined: none. ValueError for what Python cannot iterate.
  std::vector<Value> iterate(const Value& v);

 private:
  enum class Flow { normal, break_, continue_ };

  Flow exec(const Body& body, const std::shared_ptr<Scope>& scope);
  Flow exec(const Stmt& s, const std::shared_ptr<Scope>& scope);
  void exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope);
  std::string capture(const Body& body, const std::shared_ptr<Scope>& scope);
  // A {% set %} or {% filter %} block's text through its filters.
  Value filtered_body(const Stmt& s, const std::shared_ptr<Scope>& scope);
  void assign(const Target& t, const Value& v, Scope& scope, Where at);
  Value eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope);
  Args eval_args(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value lookup(const std::string& name, const Scope& scope) const;
  Value binary(const std::string& op, const Value& a, const Value& b);
  Value macro(const Stmt& s, const std::shared_ptr<Scope>& scope, const std::string& name);
  void write(std::string_view s);

  [[noreturn]] void fail(Where at, const std::string& construct, Error::Kind kind, const std::string& message) const;

  std::string origin_;
  RenderOptions opt_;
  std::string out_;
  std::string* target_ = &out_;  // the text being written: out_, or a capture
  std::vector<Span> generation_;
  std::vector<std::optional<Span>> item_spans_;  // one per opt_.tracked_items
  std::int64_t steps_ = 0;
  int depth_ = 0;
};

// range, namespace, dict, raise_exception and strftime_now.
void add_globals(Scope& root);

// The construct an expression is, for messages: "filter 'tojson'", "'+'", ...
std::string describe(const Expr& e);

// Python's str % args for the formats templates use (%s %d %i %f %r %%, and %(name)s).
std::string percent_format(Interpreter& in, const std::string& format, const Value& args);

}  // namespace braid::jinja
