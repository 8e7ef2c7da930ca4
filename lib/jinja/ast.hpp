// The syntax tree of a parsed template (parse.cpp builds it, render.cpp runs it).
#pragma once

#include "jinja/value.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace braid::jinja {

struct Where {
  int line = 1, column = 1;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Kind {
    literal,   // value
    variable,  // name
    list,      // items
    tuple,     // items
    dict,      // items: key, value, key, value, ...
    getattr,   // a.name
    getitem,   // a[b]
    slice,     // a, b, c: start, stop, step (each may be null); only as a getitem index
    call,      // a(items..., kwargs..., *dyn_args, **dyn_kwargs)
    filter,    // a | name(items..., kwargs...); a is null in {% filter %} and {% set x | f %}
    test,      // a is [not] name(items..., kwargs...)
    not_,      // not a
    neg,       // -a
    pos,       // +a
    binary,    // a name b: and or + - * / // % ** ~ in "not in"
    compare,   // items[0] ops[0] items[1] ops[1] items[2] ...
    cond,      // b if a else c
  };
  Kind kind;
  Where at;
  Value value;
  std::string name;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  ExprPtr a, b, c, dyn_args, dyn_kwargs;
  bool negated = false;
};

// What {% set %} and {% for %} assign to: a name, several names (a, b), or ns.attr.
struct Target {
  std::vector<std::string> names;
  std::string attr;  // set ns.attr = ...: names[0] is the namespace
  bool tuple = false;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum Kind {
    data,          // text
    print,         // {{ expr }}
    for_,          // for target in expr [if cond] body [else else_body]
    if_,           // branches, else_body
    set,           // set target = expr
    set_block,     // set target [| filters] body endset
    macro,         // macro name(params) body
    call_block,    // call[(params)] expr body: body is the caller
    filter_block,  // filter filters body
    break_,
    continue_,
    generation,    // transformers' {% generation %}: the assistant's text
    with,          // with params body
  };
  Kind kind;
  Where at;
  std::string text;     // text; macro name
  ExprPtr expr;
  ExprPtr cond;
  Target target;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<ExprPtr> filters;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro, call and with: name [= default]
  bool recursive = false;
};

}  // namespace braid::jinja
