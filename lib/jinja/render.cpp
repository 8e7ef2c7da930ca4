// Running a template: statements, scopes and expressions with jinja2's semantics.
#include "jinja/interpreter.hpp"
#include "jinja/parse.hpp"
#include "jinja/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace braid::jinja {

Error::Error(Kind kind, std::string origin, int line, int column, std::string construct, std::string message)
    : std::runtime_error(fmt::format("{}:{}:{}: {}{}", origin, line, column, message,
                                     construct.empty() ? "" : " (in " + construct + ")")),
      kind_(kind),
      origin_(std::move(origin)),
      line_(line),
      column_(column),
      construct_(std::move(construct)),
      message_(std::move(message)) {}

namespace {

// The object a dict or list value is (its identity), else null.
const void* identity(const Value& v) {
  if (v.is_list()) return v.as_list().get();
  if (v.is_dict() || v.is_namespace()) return v.as_dict().get();
  return nullptr;
}

bool any_generation(const Body& body) {
  for (const auto& s : body) {
    if (s->kind == Stmt::generation || any_generation(s->body) || any_generation(s->else_body)) return true;
    for (const auto& b : s->branches) {
      if (any_generation(b.second)) return true;
    }
  }
  return false;
}

}  // namespace

Template Template::parse(std::string_view source, std::string origin, const Limits& limits) {
  Template t;
  t.origin_ = std::move(origin);
  t.body_ = std::make_shared<const Body>(jinja::parse(source, t.origin_, limits.max_depth));
  t.has_generation_ = any_generation(*t.body_);
  return t;
}

Rendered Template::render(const Value& variables, const RenderOptions& options) const {
  Interpreter in(origin_, options);
  return in.run(*body_, variables);
}

std::string describe(const Expr& e) {
  switch (e.kind) {
    case Expr::variable: return "'" + e.name + "'";
    case Expr::getattr: return "attribute '" + e.name + "'";
    case Expr::getitem: return "subscript";
    case Expr::call:
      if (e.a->kind == Expr::variable || e.a->kind == Expr::getattr) return "call of '" + e.a->name + "'";
      return "call";
    case Expr::filter: return "filter '" + e.name + "'";
    case Expr::test: return "test '" + e.name + "'";
    case Expr::binary: return "'" + e.name + "'";
    case Expr::compare: return "'" + e.ops.front() + "'";
    case Expr::neg: return "'-'";
    case Expr::not_: return "'not'";
    default: return "expression";
  }
}

namespace {

const char* stmt_name(const Stmt& s) {
  switch (s.kind) {
    case Stmt::for_: return "{% for %}";
    case Stmt::if_: return "{% if %}";
    case Stmt::set: return "{% set %}";
    case Stmt::set_block: return "{% set %}";
    case Stmt::macro: return "{% macro %}";
    case Stmt::call_block: return "{% call %}";
    case Stmt::filter_block: return "{% filter %}";
    case Stmt::with: return "{% with %}";
    case Stmt::generation: return "{% generation %}";
    default: return "{{ }}";
  }
}

// How deeply a value nests (bounded: stops counting at `limit`).
int nesting(const Value& v, int limit) {
  if (limit <= 0) return 1;
  int d = 0;
  if (v.is_list()) {
    for (const auto& x : v.as_list()->items) d = std::max(d, nesting(x, limit - 1));
    return d + 1;
  }
  if (v.is_dict() || v.is_namespace()) {
    for (const auto& kv : v.as_dict()->items()) d = std::max(d, nesting(kv.second, limit - 1));
    return d + 1;
  }
  return 0;
}

bool contains(const Value& v, const DictData* ns, int limit) {
  if (limit <= 0) return false;
  if (v.is_list()) {
    for (const auto& x : v.as_list()->items) {
      if (contains(x, ns, limit - 1)) return true;
    }
  } else if (v.is_dict() || v.is_namespace()) {
    if (v.as_dict().get() == ns) return true;
    for (const auto& kv : v.as_dict()->items()) {
      if (contains(kv.second, ns, limit - 1)) return true;
    }
  }
  return false;
}

template <class Op>
std::int64_t checked(Op op, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (op(a, b, &r)) throw ValueError("integer result too large (braid's ints are 64-bit)");
  return r;
}
bool add(std::int64_t a, std::int64_t b, std::int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub(std::int64_t a, std::int64_t b, std::int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul(std::int64_t a, std::int64_t b, std::int64_t* r) { return __builtin_mul_overflow(a, b, r); }

std::int64_t int_of(const Value& v) { return v.is_bool() ? std::int64_t(v.as_bool()) : v.as_int(); }

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) throw ValueError(a.as_undefined().hint);
  if (b.is_undefined()) throw ValueError(b.as_undefined().hint);
  if (op == "+" && a.is_string()) throw ValueError(fmt::format("can only concatenate str (not \"{}\") to str", b.type_name()));
  throw ValueError(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op == "**" ? "** or pow()" : op,
                               a.type_name(), b.type_name()));
}

}  // namespace

Interpreter::Interpreter(const std::string& origin, const RenderOptions& options)
    : origin_(origin), opt_(options), item_spans_(options.tracked_items.size()) {}

void Interpreter::fail(Where at, const std::string& construct, Error::Kind kind, const std::string& message) const {
  throw Error(kind, origin_, at.line, at.column, construct, message);
}

void Interpreter::check_size(std::size_t bytes) const {
  if (bytes > opt_.limits.max_output) {
    throw LimitPassed{fmt::format("a string of {} bytes would pass the limit of {} bytes", bytes, opt_.limits.max_output)};
  }
}

void Interpreter::check_items(std::size_t n) const {
  if (n > opt_.limits.max_items) {
    throw LimitPassed{fmt::format("a list of {} items would pass the limit of {} items", n, opt_.limits.max_items)};
  }
}

void Interpreter::step(std::int64_t n) {
  steps_ += n;
  if (steps_ > opt_.limits.max_steps) {
    throw LimitPassed{fmt::format("the template did more than {} steps of work", opt_.limits.max_steps)};
  }
}

std::time_t Interpreter::now() const { return opt_.now ? opt_.now() : std::time(nullptr); }

void Interpreter::write(std::string_view s) {
  check_size(target_->size() + s.size());
  target_->append(s);
}

Rendered Interpreter::run(const Body& body, const Value& variables) {
  auto root = std::make_shared<Scope>();
  add_globals(*root);
  if (variables.is_dict()) {
    for (const auto& [k, v] : variables.as_dict()->items()) root->vars[k] = v;
  }
  try {
    exec(body, root);
  } catch (const LimitPassed& e) {
    throw Error(Error::limit, origin_, 0, 0, "", e.message);
  }
  return {std::move(out_), std::move(generation_), std::move(item_spans_)};
}

Value Interpreter::lookup(const std::string& name, const Scope& scope) const {
  for (const Scope* s = &scope; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Undefined{fmt::format("'{}' is undefined", name)};
}

Interpreter::Flow Interpreter::exec(const Body& body, const std::shared_ptr<Scope>& scope) {
  for (const auto& s : body) {
    const Flow f = exec(*s, scope);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

std::string Interpreter::capture(const Body& body, const std::shared_ptr<Scope>& scope) {
  std::string buf;
  std::string* saved = target_;
  target_ = &buf;
  try {
    exec(body, scope);
  } catch (...) {
    target_ = saved;
    throw;
  }
  target_ = saved;
  return buf;
}

void Interpreter::assign(const Target& t, const Value& v, Scope& scope, Where at) {
  if (!t.attr.empty()) {
    const Value ns = lookup(t.names.front(), scope);
    if (!ns.is_namespace()) fail(at, "{% set %}", Error::runtime, "cannot assign attribute on non-namespace object");
    if (contains(v, ns.as_dict().get(), opt_.limits.max_depth)) {
      fail(at, "{% set %}", Error::runtime, "a namespace cannot hold itself");
    }
    if (nesting(v, opt_.limits.max_depth + 1) > opt_.limits.max_depth) {
      fail(at, "{% set %}", Error::limit, fmt::format("values nest more than {} levels deep", opt_.limits.max_depth));
    }
    ns.as_dict()->set(t.attr, v);
    return;
  }
  if (!t.tuple) {
    scope.vars[t.names.front()] = v;
    return;
  }
  std::vector<Value> items;
  try {
    items = iterate(v);
  } catch (const ValueError& e) {
    fail(at, "assignment", Error::runtime, e.what());
  }
  if (items.size() != t.names.size()) {
    fail(at, "assignment", Error::runtime,
         items.size() > t.names.size() ? fmt::format("too many values to unpack (expected {})", t.names.size())
                                       : fmt::format("not enough values to unpack (expected {}, got {})", t.names.size(), items.size()));
  }
  for (std::size_t i = 0; i < items.size(); ++i) scope.vars[t.names[i]] = items[i];
}

Value Interpreter::macro(const Stmt& s, const std::shared_ptr<Scope>& scope, const std::string& name) {
  std::weak_ptr<Scope> defined_in = scope;
  const Stmt* def = &s;
  return Value::function(name, [def, defined_in, name](Interpreter& in, Args& args) -> Value {
    if (++in.depth_ > in.opt_.limits.max_depth) {
      --in.depth_;
      throw LimitPassed{fmt::format("macros called each other more than {} deep", in.opt_.limits.max_depth)};
    }
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{in.depth_};
    auto local = std::make_shared<Scope>();
    local->parent = defined_in.lock();
    std::vector<Value> varargs;
    std::size_t i = 0;
    for (; i < args.positional.size(); ++i) {
      if (i < def->params.size()) local->vars[def->params[i].first] = args.positional[i];
      else varargs.push_back(args.positional[i]);
    }
    Value kwargs = Value::dict();
    for (auto& [k, v] : args.keyword) {
      bool param = false;
      for (const auto& p : def->params) param = param || p.first == k;
      if (param) local->vars[k] = v;
      else if (k == "caller") local->vars["caller"] = v;
      else kwargs.as_dict()->set(k, v);
    }
    for (const auto& [pname, def_expr] : def->params) {
      if (local->vars.count(pname)) continue;
      local->vars[pname] = def_expr ? in.eval(*def_expr, local) : Value(Undefined{fmt::format("parameter '{}' was not provided", pname)});
    }
    local->vars["varargs"] = Value::list(std::move(varargs), true);
    local->vars["kwargs"] = kwargs;
    return in.capture(def->body, local);
  });
}

Value Interpreter::filtered_body(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  Value v = capture(s.body, scope);
  for (const auto& f : s.filters) {
    Args a = eval_args(*f, scope);
    v = filter(f->name, v, a);
  }
  return v;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  step();
  try {
    switch (s.kind) {
      case Stmt::data:
        write(s.text);
        break;
      case Stmt::print:
        write(eval(*s.expr, scope).str());
        break;
      case Stmt::if_:
        for (const auto& [cond, body] : s.branches) {
          if (eval(*cond, scope).truthy()) return exec(body, scope);
        }
        return exec(s.else_body, scope);
      case Stmt::for_:
        exec_for(s, scope);
        break;
      case Stmt::set:
        assign(s.target, eval(*s.expr, scope), *scope, s.at);
        break;
      case Stmt::set_block:
        assign(s.target, filtered_body(s, scope), *scope, s.at);
        break;
      case Stmt::macro:
        scope->vars[s.text] = macro(s, scope, "macro '" + s.text + "'");
        break;
      case Stmt::call_block: {
        Value fn = eval(*s.expr->a, scope);
        Args a = eval_args(*s.expr, scope);
        a.keyword.emplace_back("caller", macro(s, scope, "caller"));
        write(call(fn, a).str());
        break;
      }
      case Stmt::filter_block:
        write(filtered_body(s, scope).str());
        break;
      case Stmt::with: {
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        for (const auto& [name, e] : s.params) inner->vars[name] = eval(*e, scope);
        return exec(s.body, inner);
      }
      case Stmt::generation: {
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        const std::string text = capture(s.body, inner);
        const bool top = target_ == &out_;
        const std::size_t begin = target_->size();
        write(text);
        if (top) generation_.push_back({begin, target_->size()});
        break;
      }
      case Stmt::break_:
        return Flow::break_;
      case Stmt::continue_:
        return Flow::continue_;
    }
  } catch (const ValueError& e) {
    fail(s.at, stmt_name(s), Error::runtime, e.what());
  }
  return Flow::normal;
}

void Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  if (s.recursive) fail(s.at, "{% for %}", Error::syntax, "recursive loops are not supported");
  if (++depth_ > opt_.limits.max_depth) {
    throw LimitPassed{fmt::format("blocks nested more than {} deep", opt_.limits.max_depth)};
  }
  struct Leave {
    int& d;
    ~Leave() { --d; }
  } leave{depth_};
  std::vector<Value> items;
  try {
    items = iterate(eval(*s.expr, scope));
  } catch (const ValueError& e) {
    fail(s.expr->at, "{% for %}", Error::runtime, e.what());
  }
  if (s.cond) {
    std::vector<Value> kept;
    for (auto& item : items) {
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      assign(s.target, item, *probe, s.at);
      if (eval(*s.cond, probe).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec(s.else_body, scope);
    return;
  }
  const auto n = static_cast<std::int64_t>(items.size());
  auto cycle_index = std::make_shared<std::int64_t>(0);
  for (std::int64_t i = 0; i < n; ++i) {
    step();
    auto it = std::make_shared<Scope>();
    it->parent = scope;
    assign(s.target, items[static_cast<std::size_t>(i)], *it, s.at);
    Value loop = Value::dict();
    auto& d = *loop.as_dict();
    d.set("index0", i);
    d.set("index", i + 1);
    d.set("revindex0", n - i - 1);
    d.set("revindex", n - i);
    d.set("first", i == 0);
    d.set("last", i == n - 1);
    d.set("length", n);
    d.set("depth", std::int64_t(1));
    d.set("depth0", std::int64_t(0));
    d.set("previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value(Undefined{"there is no previous item"}));
    d.set("nextitem", i + 1 < n ? items[static_cast<std::size_t>(i + 1)] : Value(Undefined{"there is no next item"}));
    d.set("cycle", Value::function("loop.cycle", [i](Interpreter&, Args& a) -> Value {
            if (a.positional.empty()) throw ValueError("no items for cycling given");
            return a.positional[static_cast<std::size_t>(i) % a.positional.size()];
          }));
    it->vars["loop"] = loop;
    const Value& item = items[static_cast<std::size_t>(i)];
    std::size_t tracked = opt_.tracked_items.size();
    if (target_ == &out_ && identity(item)) {
      for (tracked = 0; tracked < opt_.tracked_items.size(); ++tracked) {
        if (identity(opt_.tracked_items[tracked]) == identity(item)) break;
      }
    }
    const std::size_t begin = out_.size();
    const Flow flow = exec(s.body, it);
    if (tracked < item_spans_.size() && out_.size() > begin) {
      auto& span = item_spans_[tracked];
      span = span ? Span{std::min(span->begin, begin), out_.size()} : Span{begin, out_.size()};
    }
    if (flow == Flow::break_) break;
  }
}

std::vector<Value> Interpreter::iterate(const Value& v) {
  if (v.is_list()) {
    step(static_cast<std::int64_t>(v.as_list()->items.size()));
    return v.as_list()->items;
  }
  if (v.is_undefined()) return {};
  if (v.is_dict()) {
    std::vector<Value> keys;
    for (const auto& kv : v.as_dict()->items()) keys.emplace_back(kv.first);
    return keys;
  }
  if (v.is_string()) {
    std::vector<Value> chars;
    const std::string& s = v.as_string();
    for (std::size_t i = 0; i < s.size();) {
      const auto n = text::decode(s, i).second;
      chars.emplace_back(s.substr(i, n));
      i += n;
    }
    return chars;
  }
  throw ValueError(fmt::format("'{}' object is not iterable", v.type_name()));
}

Args Interpreter::eval_args(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Args a;
  for (const auto& x : e.items) a.positional.push_back(eval(*x, scope));
  for (const auto& [k, x] : e.kwargs) a.keyword.emplace_back(k, eval(*x, scope));
  if (e.dyn_args) {
    for (auto& x : iterate(eval(*e.dyn_args, scope))) a.positional.push_back(std::move(x));
  }
  if (e.dyn_kwargs) {
    const Value kw = eval(*e.dyn_kwargs, scope);
    if (!kw.is_dict()) throw ValueError("argument after ** must be a mapping");
    for (const auto& [k, x] : kw.as_dict()->items()) a.keyword.emplace_back(k, x);
  }
  return a;
}

Value Interpreter::call(const Value& fn, Args& args) {
  if (fn.is_undefined()) throw ValueError(fn.as_undefined().hint);
  if (!fn.is_callable()) throw ValueError(fmt::format("'{}' object is not callable", fn.type_name()));
  step();
  return fn.as_callable()->call(*this, args);
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  step();
  try {
    return eval_inner(e, scope);
  } catch (const ValueError& err) {
    fail(e.at, describe(e), Error::runtime, err.what());
  } catch (const Raised& r) {
    fail(e.at, describe(e), Error::raised, r.message);
  } catch (const LimitPassed& l) {
    fail(e.at, describe(e), Error::limit, l.message);
  }
}

Value Interpreter::eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope) {
  switch (e.kind) {
    case Expr::literal: return e.value;
    case Expr::variable: return lookup(e.name, *scope);
    case Expr::list:
    case Expr::tuple: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const auto& x : e.items) items.push_back(eval(*x, scope));
      return Value::list(std::move(items), e.kind == Expr::tuple);
    }
    case Expr::dict: {
      Value d = Value::dict();
      for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
        const Value k = eval(*e.items[i], scope);
        if (!k.is_string()) throw ValueError(fmt::format("dict keys must be strings here, not '{}'", k.type_name()));
        d.as_dict()->set(k.as_string(), eval(*e.items[i + 1], scope));
      }
      return d;
    }
    case Expr::getattr: return getattr(eval(*e.a, scope), e.name);
    case Expr::getitem: {
      const Value obj = eval(*e.a, scope);
      if (e.b->kind == Expr::slice) {
        const Expr& s = *e.b;
        auto part = [&](const ExprPtr& x) { return x ? eval(*x, scope) : Value(None{}); };
        return slice(obj, part(s.a), part(s.b), part(s.c));
      }
      return getitem(obj, eval(*e.b, scope));
    }
    case Expr::slice: throw ValueError("a slice outside of [ ]");
    case Expr::call: {
      const Value fn = eval(*e.a, scope);
      Args a = eval_args(e, scope);
      return call(fn, a);
    }
    case Expr::filter: {
      const Value input = eval(*e.a, scope);
      Args a = eval_args(e, scope);
      return filter(e.name, input, a);
    }
    case Expr::test: {
      const Value input = eval(*e.a, scope);
      Args a = eval_args(e, scope);
      return test(e.name, input, a) != e.negated;
    }
    case Expr::not_: return !eval(*e.a, scope).truthy();
    case Expr::neg:
    case Expr::pos: {
      const Value v = eval(*e.a, scope);
      if (v.is_undefined()) throw ValueError(v.as_undefined().hint);
      if (v.is_float()) return e.kind == Expr::neg ? -v.as_float() : v.as_float();
      if (v.is_int() || v.is_bool()) {
        const std::int64_t i = int_of(v);
        if (e.kind == Expr::pos) return i;
        if (i == INT64_MIN) throw ValueError("integer result too large (braid's ints are 64-bit)");
        return -i;
      }
      throw ValueError(fmt::format("bad operand type for unary {}: '{}'", e.kind == Expr::neg ? "-" : "+", v.type_name()));
    }
    case Expr::binary: {
      if (e.name == "and" || e.name == "or") {
        Value l = eval(*e.a, scope);
        if (l.truthy() == (e.name == "or")) return l;
        return eval(*e.b, scope);
      }
      const Value l = eval(*e.a, scope);
      const Value r = eval(*e.b, scope);
      return binary(e.name, l, r);
    }
    case Expr::compare: {
      Value left = eval(*e.items[0], scope);
      for (std::size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.items[i + 1], scope);
        const std::string& op = e.ops[i];
        bool ok;
        if (op == "==") ok = equal(left, right);
        else if (op == "!=") ok = !equal(left, right);
        else if (op == "in" || op == "not in") {
          Args a;
          a.positional.push_back(right);
          ok = test("in", left, a) == (op == "in");
        } else {
          if (left.is_undefined()) throw ValueError(left.as_undefined().hint);
          if (right.is_undefined()) throw ValueError(right.as_undefined().hint);
          int c;
          try {
            c = compare(left, right);
          } catch (const ValueError&) {
            throw ValueError(fmt::format("'{}' not supported between instances of '{}' and '{}'", op, left.type_name(),
                                         right.type_name()));
          }
          ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!ok) return false;
        left = std::move(right);
      }
      return true;
    }
    case Expr::cond:
      if (eval(*e.a, scope).truthy()) return eval(*e.b, scope);
      if (e.c) return eval(*e.c, scope);
      return Undefined{"the inline if-expression evaluated to false and no else section was defined."};
  }
  return {};
}

Value Interpreter::binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    const std::string l = a.str(), r = b.str();
    check_size(l.size() + r.size());
    return l + r;
  }
  const bool nums = a.is_number() && b.is_number();
  const bool floats = nums && (a.is_float() || b.is_float());
  if (op == "+") {
    if (floats) return a.to_double() + b.to_double();
    if (nums) return checked(add, int_of(a), int_of(b));
    if (a.is_string() && b.is_string()) {
      check_size(a.as_string().size() + b.as_string().size());
      return a.as_string() + b.as_string();
    }
    if (a.is_list() && b.is_list() && a.as_list()->tuple == b.as_list()->tuple) {
      check_items(a.as_list()->items.size() + b.as_list()->items.size());
      std::vector<Value> items = a.as_list()->items;
      items.insert(items.end(), b.as_list()->items.begin(), b.as_list()->items.end());
      return Value::list(std::move(items), a.as_list()->tuple);
    }
    bad_operands(op, a, b);
  }
  if (op == "-") {
    if (floats) return a.to_double() - b.to_double();
    if (nums) return checked(sub, int_of(a), int_of(b));
    bad_operands(op, a, b);
  }
  if (op == "*") {
    if (floats) return a.to_double() * b.to_double();
    if (nums) return checked(mul, int_of(a), int_of(b));
    const Value* seq = (a.is_string() || a.is_list()) ? &a : (b.is_string() || b.is_list()) ? &b : nullptr;
    const Value* times = seq == &a ? &b : &a;
    if (seq && (times->is_int() || times->is_bool())) {
      const std::int64_t n = std::max<std::int64_t>(0, int_of(*times));
      if (seq->is_string()) {
        const auto& s = seq->as_string();
        if (n > 0 && s.size() > opt_.limits.max_output / static_cast<std::size_t>(n)) check_size(opt_.limits.max_output + 1);
        std::string out;
        for (std::int64_t i = 0; i < n; ++i) out += s;
        return out;
      }
      const auto& items = seq->as_list()->items;
      if (n > 0 && items.size() > opt_.limits.max_items / static_cast<std::size_t>(n)) check_items(opt_.limits.max_items + 1);
      std::vector<Value> out;
      for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
      return Value::list(std::move(out), seq->as_list()->tuple);
    }
    bad_operands(op, a, b);
  }
  if (op == "/") {
    if (!nums) bad_operands(op, a, b);
    if (b.to_double() == 0) throw ValueError("division by zero");
    return a.to_double() / b.to_double();
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) return percent_format(*this, a.as_string(), b);
    if (!nums) bad_operands(op, a, b);
    if (b.to_double() == 0) throw ValueError(op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
    if (floats) {
      const double x = a.to_double(), y = b.to_double();
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      if (op == "%") return m == 0 ? std::copysign(0.0, y) : m;
      // Python's float floor division: from (x - mod) / y, rounded to the nearest whole.
      double div = (x - std::fmod(x, y)) / y;
      if (std::fmod(x, y) != 0 && ((y < 0) != (std::fmod(x, y) < 0))) div -= 1.0;
      if (div == 0) return std::copysign(0.0, x / y);
      double fl = std::floor(div);
      if (div - fl > 0.5) fl += 1.0;
      return fl;
    }
    const std::int64_t x = int_of(a), y = int_of(b);
    if (x == INT64_MIN && y == -1) throw ValueError("integer result too large (braid's ints are 64-bit)");
    std::int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      m += y;
      --q;
    }
    return op == "%" ? m : q;
  }
  if (op == "**") {
    if (!nums) bad_operands(op, a, b);
    if (!floats && int_of(b) >= 0) {
      std::int64_t r = 1, base = int_of(a);
      for (std::int64_t e = int_of(b); e > 0; --e) {
        if (__builtin_mul_overflow(r, base, &r)) throw ValueError("integer result too large (braid's ints are 64-bit)");
        if (r == 0 || r == 1) break;
        if (r == -1) {
          if ((e - 1) % 2 == 1) r = -r;
          break;
        }
      }
      return r;
    }
    if (a.to_double() == 0 && b.to_double() < 0) throw ValueError("0.0 cannot be raised to a negative power");
    return std::pow(a.to_double(), b.to_double());
  }
  throw ValueError("unknown operator " + op);
}

}  // namespace braid::jinja
