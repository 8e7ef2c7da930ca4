// jinja2's filters and tests, Python's str/dict/list methods, attribute and item access
// as jinja2's sandbox does them, and the globals transformers' environment has.
#include "jinja/interpreter.hpp"
#include "jinja/parse.hpp"
#include "jinja/text.hpp"

#include <fmt/format.h>

#include <unicode/uchar.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

namespace braid::jinja {

namespace {

// The arguments of `fn` matched to its parameters as Python matches them.
std::vector<std::optional<Value>> bind(const std::string& fn, Args& a, std::initializer_list<const char*> params) {
  std::vector<std::optional<Value>> out(params.size());
  if (a.positional.size() > params.size()) {
    throw ValueError(fmt::format("{}() takes at most {} arguments ({} given)", fn, params.size(), a.positional.size()));
  }
  for (std::size_t i = 0; i < a.positional.size(); ++i) out[i] = a.positional[i];
  for (auto& [k, v] : a.keyword) {
    std::size_t i = 0;
    for (const char* p : params) {
      if (k == p) break;
      ++i;
    }
    if (i == params.size()) throw ValueError(fmt::format("{}() got an unexpected keyword argument '{}'", fn, k));
    if (out[i]) throw ValueError(fmt::format("{}() got multiple values for argument '{}'", fn, k));
    out[i] = v;
  }
  return out;
}

Value arg(const std::optional<Value>& v, Value def) { return v ? *v : std::move(def); }

const std::string& need_string(const Value& v, const char* what) {
  if (v.is_undefined()) throw ValueError(v.as_undefined().hint);
  if (!v.is_string()) throw ValueError(fmt::format("{} must be str, not {}", what, v.type_name()));
  return v.as_string();
}

std::int64_t need_int(const Value& v, const char* what) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  if (v.is_undefined()) throw ValueError(v.as_undefined().hint);
  throw ValueError(fmt::format("{} must be an integer, not {}", what, v.type_name()));
}

std::int64_t length_of(const Value& v) {
  if (v.is_string()) return static_cast<std::int64_t>(text::length(v.as_string()));
  if (v.is_list()) return static_cast<std::int64_t>(v.as_list()->items.size());
  if (v.is_dict()) return static_cast<std::int64_t>(v.as_dict()->size());
  if (v.is_undefined()) return 0;
  throw ValueError(fmt::format("object of type '{}' has no len()", v.type_name()));
}

// Python's int(str, base): optional sign, whitespace around, '_' between digits.
std::optional<std::int64_t> parse_int(std::string_view s, int base) {
  std::string t = text::strip(s, nullptr, true, true);
  bool neg = false;
  std::size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  if (base == 16 && t.compare(i, 2, "0x") == 0) i += 2;
  if (i >= t.size()) return std::nullopt;
  std::int64_t v = 0;
  bool prev_digit = false;
  for (; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '_' && prev_digit && i + 1 < t.size()) {
      prev_digit = false;
      continue;
    }
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (std::isalpha(static_cast<unsigned char>(c))) d = std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
    else return std::nullopt;
    if (d >= base) return std::nullopt;
    if (v > (INT64_MAX - d) / base) return std::nullopt;
    v = v * base + d;
    prev_digit = true;
  }
  if (!prev_digit) return std::nullopt;
  return neg ? -v : v;
}

std::optional<double> parse_float(std::string_view s) {
  std::string t = text::strip(s, nullptr, true, true);
  t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
  if (t.empty()) return std::nullopt;
  std::string low = text::lower(t);
  if (low == "nan" || low == "+nan" || low == "-nan") return std::nan("");
  if (low == "inf" || low == "+inf" || low == "infinity" || low == "+infinity") return INFINITY;
  if (low == "-inf" || low == "-infinity") return -INFINITY;
  if (low.find_first_not_of("0123456789+-.e") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return d;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Sort keys the way jinja2's ignore_case postprocess makes them.
Value fold(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return text::lower(v.as_string());
  return v;
}

// The value at a dotted attribute path ("a.b", "0"), as jinja2's make_attrgetter.
Value attribute(Interpreter& in, const Value& item, const std::string& path) {
  Value v = item;
  std::size_t start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      v = in.getitem(v, Value(static_cast<std::int64_t>(std::stoll(part))));
    } else {
      v = in.getitem(v, Value(part));
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

void sort_values(std::vector<Value>& items, const std::function<Value(const Value&)>& key, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (auto& x : items) keyed.emplace_back(key(x), std::move(x));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? compare(b.first, a.first) < 0 : compare(a.first, b.first) < 0;
  });
  items.clear();
  for (auto& kv : keyed) items.push_back(std::move(kv.second));
}

std::string python_strftime(const std::string& format, std::time_t t) {
  std::tm tm{};
  localtime_r(&t, &tm);
  std::string out;
  // Formats one directive at a time, so an empty result is never mistaken for a failure.
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    const std::string directive = format.substr(i, 2);
    ++i;
    if (directive == "%%") {
      out += '%';
      continue;
    }
    char buf[256];
    const std::size_t n = std::strftime(buf, sizeof buf, directive.c_str(), &tm);
    out.append(buf, n);
  }
  return out;
}

// str.format for {} {0} {name} {name.attr} {0[key]} with an empty format spec or !s/!r.
std::string str_format(Interpreter& in, const std::string& fmt_text, Args& a) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < fmt_text.size(); ++i) {
    const char c = fmt_text[i];
    if (c == '}' ) {
      if (i + 1 < fmt_text.size() && fmt_text[i + 1] == '}') ++i;
      else throw ValueError("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt_text.size() && fmt_text[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const auto close = fmt_text.find('}', i);
    if (close == std::string::npos) throw ValueError("Single '{' encountered in format string");
    std::string field = fmt_text.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 0;
    if (const auto colon = field.find(':'); colon != std::string::npos) {
      if (colon + 1 != field.size()) throw ValueError("format specs in str.format are not supported by braid's Jinja engine");
      field.erase(colon);
    }
    if (const auto bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.erase(bang);
    }
    std::size_t end = field.find_first_of(".[");
    const std::string head = field.substr(0, end);
    Value v;
    if (head.empty()) {
      if (auto_index >= a.positional.size()) throw ValueError("Replacement index out of range for positional args tuple");
      v = a.positional[auto_index++];
    } else if (std::all_of(head.begin(), head.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
      const auto k = std::stoul(head);
      if (k >= a.positional.size()) throw ValueError("Replacement index out of range for positional args tuple");
      v = a.positional[k];
    } else {
      bool found = false;
      for (auto& [k, x] : a.keyword) {
        if (k == head) {
          v = x;
          found = true;
        }
      }
      if (!found) throw ValueError("'" + head + "'");
    }
    while (end != std::string::npos && end < field.size()) {
      if (field[end] == '.') {
        const auto next = field.find_first_of(".[", end + 1);
        v = in.getattr(v, field.substr(end + 1, next == std::string::npos ? std::string::npos : next - end - 1));
        end = next;
      } else {
        const auto rb = field.find(']', end);
        if (rb == std::string::npos) throw ValueError("Missing ']' in format string");
        const std::string key = field.substr(end + 1, rb - end - 1);
        const bool digits = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
        v = in.getitem(v, digits ? Value(static_cast<std::int64_t>(std::stoll(key))) : Value(key));
        end = rb + 1 < field.size() ? rb + 1 : std::string::npos;
      }
    }
    out += conversion == 'r' ? v.repr() : v.str();
    in.check_size(out.size());
  }
  return out;
}

Value bound(const std::string& name, std::function<Value(Interpreter&, Args&)> f) { return Value::function(name, std::move(f)); }

Value unsafe(const std::string& attr, const std::string& type) {
  return Undefined{fmt::format("access to attribute '{}' of '{}' object is unsafe.", attr, type)};
}

Value string_method(const std::string& s, const std::string& name) {
  const std::string fn = "str." + name;
  auto chars_arg = [fn](Args& a) -> std::optional<std::u32string> {
    auto p = bind(fn, a, {"chars"});
    if (!p[0] || p[0]->is_none()) return std::nullopt;
    const auto cps = text::code_points(need_string(*p[0], "strip arg"));
    return std::u32string(cps.begin(), cps.end());
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return bound(fn, [s, name, chars_arg](Interpreter&, Args& a) -> Value {
      const auto chars = chars_arg(a);
      return text::strip(s, chars ? &*chars : nullptr, name != "rstrip", name != "lstrip");
    });
  }
  if (name == "split" || name == "rsplit") {
    return bound(fn, [s, name, fn](Interpreter& in, Args& a) -> Value {
      auto p = bind(fn, a, {"sep", "maxsplit"});
      std::optional<std::string> sep;
      if (p[0] && !p[0]->is_none()) {
        sep = need_string(*p[0], "sep");
        if (sep->empty()) throw ValueError("empty separator");
      }
      const std::int64_t maxsplit = p[1] ? need_int(*p[1], "maxsplit") : -1;
      auto parts = name == "split" ? text::split(s, sep ? &*sep : nullptr, maxsplit) : text::rsplit(s, sep ? &*sep : nullptr, maxsplit);
      in.check_items(parts.size());
      std::vector<Value> items(parts.begin(), parts.end());
      return Value::list(std::move(items));
    });
  }
  if (name == "splitlines") {
    return bound(fn, [s, fn](Interpreter&, Args& a) -> Value {
      auto p = bind(fn, a, {"keepends"});
      auto parts = text::splitlines(s, p[0] && p[0]->truthy());
      return Value::list(std::vector<Value>(parts.begin(), parts.end()));
    });
  }
  if (name == "startswith" || name == "endswith") {
    return bound(fn, [s, name, fn](Interpreter&, Args& a) -> Value {
      auto p = bind(fn, a, {"prefix", "start", "end"});
      if (!p[0]) throw ValueError(fn + "() takes at least 1 argument (0 given)");
      if (p[1] || p[2]) throw ValueError(fn + " with start and end is not supported by braid's Jinja engine");
      std::vector<Value> options = p[0]->is_list() && p[0]->as_list()->tuple ? p[0]->as_list()->items : std::vector<Value>{*p[0]};
      for (const auto& o : options) {
        const std::string& x = need_string(o, (name + " first arg").c_str());
        if (name == "startswith" ? s.starts_with(x) : s.ends_with(x)) return true;
      }
      return false;
    });
  }
  if (name == "replace") {
    return bound(fn, [s, fn](Interpreter& in, Args& a) -> Value {
      auto p = bind(fn, a, {"old", "new", "count"});
      if (!p[0] || !p[1]) throw ValueError("replace() takes at least 2 arguments");
      std::string r = text::replace(s, need_string(*p[0], "replace() argument 1"), need_string(*p[1], "replace() argument 2"),
                                    p[2] ? need_int(*p[2], "count") : -1);
      in.check_size(r.size());
      return r;
    });
  }
  if (name == "lower" || name == "upper" || name == "title" || name == "capitalize" || name == "casefold") {
    return bound(fn, [s, name, fn](Interpreter&, Args& a) -> Value {
      bind(fn, a, {});
      if (name == "upper") return text::upper(s);
      if (name == "title") return text::title(s);
      if (name == "capitalize") return text::capitalize(s);
      return text::lower(s);
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return bound(fn, [s, name, fn](Interpreter&, Args& a) -> Value {
      auto p = bind(fn, a, {"sub"});
      if (!p[0]) throw ValueError(fn + "() takes at least 1 argument (0 given)");
      const std::string& sub = need_string(*p[0], "must be str");
      if (name == "count") return text::count(s, sub);
      const auto at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
      if (at == std::string::npos) {
        if (name == "index" || name == "rindex") throw ValueError("substring not found");
        return std::int64_t(-1);
      }
      return static_cast<std::int64_t>(text::length(std::string_view(s).substr(0, at)));
    });
  }
  if (name == "join") {
    return bound(fn, [s, fn](Interpreter& in, Args& a) -> Value {
      auto p = bind(fn, a, {"iterable"});
      if (!p[0]) throw ValueError("join() takes exactly one argument (0 given)");
      std::string out;
      bool first = true;
      for (const auto& x : in.iterate(*p[0])) {
        if (!first) out += s;
        first = false;
        out += need_string(x, "sequence item");
        in.check_size(out.size());
      }
      return out;
    });
  }
  if (name == "format") {
    return bound(fn, [s](Interpreter& in, Args& a) -> Value { return str_format(in, s, a); });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper" || name == "isnumeric" || name == "isdecimal") {
    return bound(fn, [s, name, fn](Interpreter&, Args& a) -> Value {
      bind(fn, a, {});
      const auto cps = text::code_points(s);
      if (name == "islower" || name == "isupper") {
        bool cased = false;
        for (char32_t c : cps) {
          const auto u = static_cast<UChar32>(c);
          if (name == "islower" ? (u_isupper(u) || u_istitle(u)) : (u_islower(u) || u_istitle(u))) return false;
          cased = cased || (name == "islower" ? u_islower(u) : u_isupper(u));
        }
        return cased;
      }
      if (cps.empty()) return false;
      for (char32_t c : cps) {
        const auto u = static_cast<UChar32>(c);
        bool ok = name == "isspace" ? text::is_space(c)
                  : name == "isalpha" ? u_isalpha(u) != 0
                  : name == "isalnum" ? (u_isalpha(u) || u_isdigit(u) || u_hasBinaryProperty(u, UCHAR_NUMERIC_TYPE)) != 0
                  : name == "isdecimal" ? u_charType(u) == U_DECIMAL_DIGIT_NUMBER
                                       : u_getIntPropertyValue(u, UCHAR_NUMERIC_TYPE) != U_NT_NONE &&
                                             (name == "isnumeric" || u_getIntPropertyValue(u, UCHAR_NUMERIC_TYPE) != U_NT_NUMERIC);
        if (!ok) return false;
      }
      return true;
    });
  }
  if (name == "zfill" || name == "center" || name == "ljust" || name == "rjust") {
    return bound(fn, [s, name, fn](Interpreter& in, Args& a) -> Value {
      auto p = bind(fn, a, {"width", "fillchar"});
      if (!p[0]) throw ValueError(fn + "() takes at least 1 argument (0 given)");
      const std::int64_t width = need_int(*p[0], "width");
      const std::string fill = p[1] ? need_string(*p[1], "fillchar") : " ";
      const auto len = static_cast<std::int64_t>(text::length(s));
      if (width <= len) return s;
      in.check_size(static_cast<std::size_t>(width) * fill.size());
      const std::int64_t pad = width - len;
      auto rep = [&](std::int64_t n, const std::string& f) {
        std::string r;
        for (std::int64_t i = 0; i < n; ++i) r += f;
        return r;
      };
      if (name == "ljust") return s + rep(pad, fill);
      if (name == "rjust") return rep(pad, fill) + s;
      if (name == "zfill") {
        if (!s.empty() && (s[0] == '+' || s[0] == '-')) return s.substr(0, 1) + rep(pad, "0") + s.substr(1);
        return rep(pad, "0") + s;
      }
      // Python's center puts the odd extra pad on the left when the width is odd.
      const std::int64_t left = pad / 2 + (pad & width & 1);
      return rep(left, fill) + s + rep(pad - left, fill);
    });
  }
  static const std::set<std::string> others = {"encode", "expandtabs", "format_map", "isascii", "isidentifier",
                                               "isprintable", "istitle", "maketrans", "partition", "removeprefix",
                                               "removesuffix", "rpartition", "swapcase", "translate"};
  if (others.count(name)) {
    return bound(fn, [fn](Interpreter&, Args&) -> Value { throw ValueError(fn + " is not supported by braid's Jinja engine"); });
  }
  return Undefined{fmt::format("'str object' has no attribute '{}'", name)};
}

Value dict_method(const Value& d, const std::string& name) {
  const std::string fn = "dict." + name;
  if (name == "items" || name == "keys" || name == "values") {
    return bound(fn, [d, name, fn](Interpreter&, Args& a) -> Value {
      bind(fn, a, {});
      std::vector<Value> out;
      for (const auto& [k, v] : d.as_dict()->items()) {
        if (name == "items") out.push_back(Value::list({Value(k), v}, true));
        else out.push_back(name == "keys" ? Value(k) : v);
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "get") {
    return bound(fn, [d, fn](Interpreter&, Args& a) -> Value {
      auto p = bind(fn, a, {"key", "default"});
      if (!p[0]) throw ValueError("get expected at least 1 argument, got 0");
      if (p[0]->is_string()) {
        if (const Value* v = d.as_dict()->find(p[0]->as_string())) return *v;
      }
      return arg(p[1], None{});
    });
  }
  if (name == "copy") {
    return bound(fn, [d](Interpreter&, Args&) -> Value { return Value(std::make_shared<DictData>(*d.as_dict())); });
  }
  if (name == "pop" || name == "popitem" || name == "update" || name == "clear" || name == "setdefault") {
    return unsafe(name, "dict");
  }
  return Value();
}

Value list_method(const Value& l, const std::string& name) {
  const std::string fn = "list." + name;
  if (name == "index" || name == "count") {
    return bound(fn, [l, name, fn](Interpreter&, Args& a) -> Value {
      auto p = bind(fn, a, {"value"});
      if (!p[0]) throw ValueError(fn + "() takes exactly one argument (0 given)");
      std::int64_t n = 0;
      const auto& items = l.as_list()->items;
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (!equal(items[i], *p[0])) continue;
        if (name == "index") return static_cast<std::int64_t>(i);
        ++n;
      }
      if (name == "index") throw ValueError(p[0]->repr() + " is not in list");
      return n;
    });
  }
  if (name == "copy") {
    return bound(fn, [l](Interpreter&, Args&) -> Value { return Value::list(l.as_list()->items, l.as_list()->tuple); });
  }
  if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" || name == "reverse" ||
      name == "sort" || name == "clear") {
    return unsafe(name, l.type_name());
  }
  return Undefined{fmt::format("'{} object' has no attribute '{}'", l.type_name(), name)};
}

// Python's slice indices for a sequence of length n.
std::vector<std::size_t> slice_indices(std::int64_t n, const Value& start, const Value& stop, const Value& step) {
  const std::int64_t st = step.is_none() ? 1 : need_int(step, "slice indices");
  if (st == 0) throw ValueError("slice step cannot be zero");
  auto clamp = [&](const Value& v, std::int64_t def, bool is_start) {
    if (v.is_none()) return def;
    std::int64_t i = need_int(v, "slice indices");
    if (i < 0) i += n;
    if (st > 0) return std::clamp<std::int64_t>(i, 0, n);
    (void)is_start;
    return std::clamp<std::int64_t>(i, -1, n - 1);
  };
  const std::int64_t b = clamp(start, st > 0 ? 0 : n - 1, true);
  const std::int64_t e = clamp(stop, st > 0 ? n : -1, false);
  std::vector<std::size_t> out;
  for (std::int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(static_cast<std::size_t>(i));
  return out;
}

}  // namespace

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) throw ValueError(obj.as_undefined().hint);
  if (!name.empty() && name[0] == '_') {
    return Undefined{fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, obj.type_name())};
  }
  if (obj.is_dict()) {
    Value m = dict_method(obj, name);
    if (!m.is_undefined() || !m.as_undefined().hint.empty()) return m;
    if (const Value* v = obj.as_dict()->find(name)) return *v;
    return Undefined{fmt::format("'dict object' has no attribute '{}'", name)};
  }
  if (obj.is_namespace()) {
    if (const Value* v = obj.as_dict()->find(name)) return *v;
    return Undefined{fmt::format("'Namespace object' has no attribute '{}'", name)};
  }
  if (obj.is_string()) return string_method(obj.as_string(), name);
  if (obj.is_list()) return list_method(obj, name);
  return Undefined{fmt::format("'{} object' has no attribute '{}'", obj.type_name(), name)};
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw ValueError(obj.as_undefined().hint);
  if (obj.is_dict() || obj.is_namespace()) {
    if (key.is_string()) {
      if (const Value* v = obj.as_dict()->find(key.as_string())) return *v;
      if (obj.is_namespace()) return Undefined{fmt::format("'Namespace object' has no attribute '{}'", key.as_string())};
      Value m = dict_method(obj, key.as_string());
      if (!m.is_undefined() || !m.as_undefined().hint.empty()) return m;
      return Undefined{fmt::format("'dict object' has no attribute '{}'", key.as_string())};
    }
    return Undefined{fmt::format("dict object has no element {}", key.repr())};
  }
  if (obj.is_list() || obj.is_string()) {
    if (key.is_int() || key.is_bool()) {
      const std::int64_t n = obj.is_list() ? static_cast<std::int64_t>(obj.as_list()->items.size())
                                           : static_cast<std::int64_t>(text::length(obj.as_string()));
      std::int64_t i = key.is_bool() ? key.as_bool() : key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Undefined{fmt::format("{} object has no element {}", obj.type_name(), key.repr())};
      if (obj.is_list()) return obj.as_list()->items[static_cast<std::size_t>(i)];
      const auto cps = text::code_points(obj.as_string());
      return text::from_code_points(cps, static_cast<std::size_t>(i), static_cast<std::size_t>(i) + 1);
    }
    if (key.is_string()) return getattr(obj, key.as_string());
    return Undefined{fmt::format("{} object has no element {}", obj.type_name(), key.repr())};
  }
  if (key.is_string()) return getattr(obj, key.as_string());
  return Undefined{fmt::format("{} object has no element {}", obj.type_name(), key.repr())};
}

Value Interpreter::slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) throw ValueError(obj.as_undefined().hint);
  if (obj.is_list()) {
    const auto& items = obj.as_list()->items;
    std::vector<Value> out;
    for (auto i : slice_indices(static_cast<std::int64_t>(items.size()), start, stop, step)) out.push_back(items[i]);
    return Value::list(std::move(out), obj.as_list()->tuple);
  }
  if (obj.is_string()) {
    const auto cps = text::code_points(obj.as_string());
    std::string out;
    for (auto i : slice_indices(static_cast<std::int64_t>(cps.size()), start, stop, step)) text::append_utf8(out, cps[i]);
    return out;
  }
  return Undefined{fmt::format("{} object has no element slice", obj.type_name())};
}

namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, Args&);

Value f_abs(Interpreter&, const Value& v, Args& a) {
  bind("abs", a, {});
  if (v.is_float()) return std::fabs(v.as_float());
  const std::int64_t i = need_int(v, "bad operand type for abs()");
  if (i == INT64_MIN) throw ValueError("integer result too large (braid's ints are 64-bit)");
  return i < 0 ? -i : i;
}

Value f_attr(Interpreter& in, const Value& v, Args& a) {
  auto p = bind("attr", a, {"name"});
  return in.getattr(v, need_string(arg(p[0], Value()), "attr name"));
}

Value f_capitalize(Interpreter&, const Value& v, Args& a) {
  bind("capitalize", a, {});
  return text::capitalize(v.str());
}

Value f_center(Interpreter& in, const Value& v, Args& a) {
  auto p = bind("center", a, {"width"});
  Args inner;
  inner.positional.push_back(arg(p[0], std::int64_t(80)));
  Value m = string_method(v.str(), "center");
  return in.call(m, inner);
}

Value f_length(Interpreter&, const Value& v, Args& a) {
  bind("length", a, {});
  return length_of(v);
}

Value f_default(Interpreter&, const Value& v, Args& a) {
  auto p = bind("default", a, {"default_value", "boolean"});
  if (v.is_undefined() || (p[1] && p[1]->truthy() && !v.truthy())) return arg(p[0], Value(""));
  return v;
}

Value f_dictsort(Interpreter&, const Value& v, Args& a) {
  auto p = bind("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) throw ValueError("dictsort needs a mapping");
  const bool cs = p[0] && p[0]->truthy();
  const std::string by = p[1] ? need_string(*p[1], "by") : "key";
  if (by != "key" && by != "value") throw ValueError("You can only sort by either \"key\" or \"value\"");
  std::vector<Value> items;
  for (const auto& [k, x] : v.as_dict()->items()) items.push_back(Value::list({Value(k), x}, true));
  sort_values(items, [&](const Value& it) { return fold(it.as_list()->items[by == "key" ? 0 : 1], cs); },
              p[2] && p[2]->truthy());
  return Value::list(std::move(items));
}

Value f_escape(Interpreter&, const Value& v, Args& a) {
  bind("escape", a, {});
  return html_escape(v.is_none() ? "None" : v.str());
}

Value f_first(Interpreter& in, const Value& v, Args& a) {
  bind("first", a, {});
  auto items = in.iterate(v);
  if (items.empty()) return Undefined{"No first item, sequence was empty."};
  return items.front();
}

Value f_last(Interpreter& in, const Value& v, Args& a) {
  bind("last", a, {});
  auto items = in.iterate(v);
  if (items.empty()) return Undefined{"No last item, sequence was empty."};
  return items.back();
}

Value f_float(Interpreter&, const Value& v, Args& a) {
  auto p = bind("float", a, {"default"});
  if (v.is_float()) return v;
  if (v.is_int() || v.is_bool()) return v.to_double();
  if (v.is_string()) {
    if (auto d = parse_float(v.as_string())) return *d;
  }
  return arg(p[0], 0.0);
}

Value f_int(Interpreter&, const Value& v, Args& a) {
  auto p = bind("int", a, {"default", "base"});
  const Value def = arg(p[0], std::int64_t(0));
  const std::int64_t base = p[1] ? need_int(*p[1], "base") : 10;
  if (v.is_int()) return v;
  if (v.is_bool()) return std::int64_t(v.as_bool());
  if (v.is_float()) {
    const double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return def;
    return static_cast<std::int64_t>(d);
  }
  if (v.is_string()) {
    if (base >= 2 && base <= 36) {
      if (auto i = parse_int(v.as_string(), static_cast<int>(base))) return *i;
    }
    if (auto d = parse_float(v.as_string())) {
      if (std::isfinite(*d) && std::fabs(*d) < 9.2e18) return static_cast<std::int64_t>(*d);
    }
  }
  return def;
}

Value f_format(Interpreter& in, const Value& v, Args& a) {
  if (!a.keyword.empty() && !a.positional.empty()) throw ValueError("can't handle positional and keyword arguments at the same time");
  Value args;
  if (!a.keyword.empty()) {
    args = Value::dict();
    for (auto& [k, x] : a.keyword) args.as_dict()->set(k, x);
  } else {
    args = Value::list(a.positional, true);
  }
  return percent_format(in, v.str(), args);
}

Value f_indent(Interpreter& in, const Value& v, Args& a) {
  auto p = bind("indent", a, {"width", "first", "blank"});
  const Value w = arg(p[0], std::int64_t(4));
  std::string indention;
  if (w.is_string()) {
    indention = w.as_string();
  } else {
    const auto n = need_int(w, "width");
    in.check_size(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
    indention = std::string(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)), ' ');
  }
  const std::string s = v.str() + "\n";
  const auto lines = text::splitlines(s);
  std::string rv;
  if (p[2] && p[2]->truthy()) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i];
      in.check_size(rv.size());
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
      in.check_size(rv.size());
    }
  }
  if (p[1] && p[1]->truthy()) rv = indention + rv;
  return rv;
}

Value f_items(Interpreter&, const Value& v, Args& a) {
  bind("items", a, {});
  if (v.is_undefined()) return Value::list();
  if (!v.is_dict()) throw ValueError("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.as_dict()->items()) out.push_back(Value::list({Value(k), x}, true));
  return Value::list(std::move(out));
}

Value f_join(Interpreter& in, const Value& v, Args& a) {
  auto p = bind("join", a, {"d", "attribute"});
  const std::string sep = p[0] ? p[0]->str() : "";
  std::string out;
  bool first = true;
  for (const auto& x : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += p[1] && !p[1]->is_none() ? attribute(in, x, p[1]->str()).str() : x.str();
    in.check_size(out.size());
  }
  return out;
}

Value f_list(Interpreter& in, const Value& v, Args& a) {
  bind("list", a, {});
  return Value::list(in.iterate(v));
}

Value f_lower(Interpreter&, const Value& v, Args& a) {
  bind("lower", a, {});
  return text::lower(v.str());
}

Value f_upper(Interpreter&, const Value& v, Args& a) {
  bind("upper", a, {});
  return text::upper(v.str());
}

Value f_map(Interpreter& in, const Value& v, Args& a) {
  std::vector<Value> out;
  std::optional<std::string> attr;
  Value def;
  bool has_def = false;
  for (auto& [k, x] : a.keyword) {
    if (k == "attribute") attr = x.str();
    else if (k == "default") {
      def = x;
      has_def = true;
    }
  }
  if (attr) {
    for (const auto& x : in.iterate(v)) {
      Value r = attribute(in, x, *attr);
      out.push_back(r.is_undefined() && has_def ? def : r);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty()) throw ValueError("map requires a filter argument");
  const std::string name = need_string(a.positional.front(), "map filter name");
  if (!known_filter(name)) throw ValueError(fmt::format("No filter named '{}'.", name));
  Args rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const auto& x : in.iterate(v)) {
    Args each = rest;
    out.push_back(in.filter(name, x, each));
  }
  return Value::list(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, Args& a, bool max, const char* fn) {
  auto p = bind(fn, a, {"case_sensitive", "attribute"});
  const bool cs = p[0] && p[0]->truthy();
  auto items = in.iterate(v);
  if (items.empty()) return Undefined{fmt::format("No aggregated item, sequence was empty.")};
  auto key = [&](const Value& x) { return fold(p[1] && !p[1]->is_none() ? attribute(in, x, p[1]->str()) : x, cs); };
  Value best = items.front();
  Value best_key = key(best);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (max ? compare(k, best_key) > 0 : compare(k, best_key) < 0) {
      best = items[i];
      best_key = k;
    }
  }
  return best;
}

Value f_max(Interpreter& in, const Value& v, Args& a) { return min_max(in, v, a, true, "max"); }
Value f_min(Interpreter& in, const Value& v, Args& a) { return min_max(in, v, a, false, "min"); }

// select/reject(test, args...) and selectattr/rejectattr(attr, test, args...).
Value select(Interpreter& in, const Value& v, Args& a, bool keep, bool by_attr) {
  std::size_t at = 0;
  std::optional<std::string> attr;
  if (by_attr) {
    if (a.positional.empty()) throw ValueError("Missing parameter for attribute name");
    attr = a.positional[at++].str();
  }
  std::optional<std::string> test_name;
  if (at < a.positional.size()) test_name = need_string(a.positional[at++], "test name");
  if (test_name && !known_test(*test_name)) throw ValueError(fmt::format("No test named '{}'.", *test_name));
  Args rest;
  rest.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(std::min(at, a.positional.size())), a.positional.end());
  rest.keyword = a.keyword;
  std::vector<Value> out;
  for (const auto& x : in.iterate(v)) {
    const Value probe = attr ? attribute(in, x, *attr) : x;
    bool ok;
    if (test_name) {
      Args each = rest;
      ok = in.test(*test_name, probe, each);
    } else {
      ok = probe.truthy();
    }
    if (ok == keep) out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, Args& a) { return select(in, v, a, true, false); }
Value f_reject(Interpreter& in, const Value& v, Args& a) { return select(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, Args& a) { return select(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, Args& a) { return select(in, v, a, false, true); }

Value f_replace(Interpreter& in, const Value& v, Args& a) {
  auto p = bind("replace", a, {"old", "new", "count"});
  if (!p[0] || !p[1]) throw ValueError("replace() missing required arguments");
  std::string r = text::replace(v.str(), p[0]->str(), p[1]->str(), p[2] && !p[2]->is_none() ? need_int(*p[2], "count") : -1);
  in.check_size(r.size());
  return r;
}

Value f_reverse(Interpreter& in, const Value& v, Args& a) {
  bind("reverse", a, {});
  if (v.is_string()) {
    auto cps = text::code_points(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return text::from_code_points(cps, 0, cps.size());
  }
  auto items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_round(Interpreter&, const Value& v, Args& a) {
  auto p = bind("round", a, {"precision", "method"});
  const std::int64_t prec = p[0] ? need_int(*p[0], "precision") : 0;
  const std::string method = p[1] ? need_string(*p[1], "method") : "common";
  const double x = v.to_double();
  const double scale = std::pow(10.0, static_cast<double>(prec));
  if (method == "ceil") return std::ceil(x * scale) / scale;
  if (method == "floor") return std::floor(x * scale) / scale;
  if (method != "common") throw ValueError("method must be common, ceil or floor");
  if (v.is_int() || v.is_bool()) return v.to_double();
  return std::nearbyint(x * scale) / scale;  // Python rounds halves to even
}

Value f_safe(Interpreter&, const Value& v, Args& a) {
  bind("safe", a, {});
  return v.str();
}

Value f_sort(Interpreter& in, const Value& v, Args& a) {
  auto p = bind("sort", a, {"reverse", "case_sensitive", "attribute"});
  auto items = in.iterate(v);
  const bool cs = p[1] && p[1]->truthy();
  sort_values(items, [&](const Value& x) { return fold(p[2] && !p[2]->is_none() ? attribute(in, x, p[2]->str()) : x, cs); },
              p[0] && p[0]->truthy());
  return Value::list(std::move(items));
}

Value f_string(Interpreter&, const Value& v, Args& a) {
  bind("string", a, {});
  return v.str();
}

Value f_sum(Interpreter& in, const Value& v, Args& a) {
  auto p = bind("sum", a, {"attribute", "start"});
  Value total = arg(p[1], std::int64_t(0));
  for (const auto& x : in.iterate(v)) {
    const Value item = p[0] && !p[0]->is_none() ? attribute(in, x, p[0]->str()) : x;
    if (total.is_number() && item.is_number()) {
      if (total.is_float() || item.is_float()) {
        total = total.to_double() + item.to_double();
      } else {
        auto as_i = [](const Value& n) { return n.is_bool() ? std::int64_t(n.as_bool()) : n.as_int(); };
        std::int64_t r = 0;
        if (__builtin_add_overflow(as_i(total), as_i(item), &r)) throw ValueError("integer result too large (braid's ints are 64-bit)");
        total = r;
      }
    } else {
      throw ValueError(fmt::format("unsupported operand type(s) for +: '{}' and '{}'", total.type_name(), item.type_name()));
    }
  }
  return total;
}

Value f_title(Interpreter&, const Value& v, Args& a) {
  bind("title", a, {});
  // jinja2: words begin after runs of whitespace, '-', '(', '{', '[' or '<'.
  const auto cps = text::code_points(v.str());
  std::string out;
  bool word_start = true;
  for (char32_t c : cps) {
    const bool sep = text::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    std::string ch;
    text::append_utf8(ch, c);
    if (sep) out += ch;
    else out += word_start ? text::upper(ch) : text::lower(ch);
    word_start = sep;
  }
  return out;
}

Value f_tojson(Interpreter& in, const Value& v, Args& a) {
  auto p = bind("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  Value::JsonStyle st;
  st.ensure_ascii = p[0] && p[0]->truthy();
  if (p[1] && !p[1]->is_none()) {
    if (p[1]->is_string()) st.indent = p[1]->as_string();
    else st.indent = std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(need_int(*p[1], "indent"), 0, 1024)), ' ');
  }
  if (p[2] && !p[2]->is_none()) {
    const auto seps = in.iterate(*p[2]);
    if (seps.size() != 2) throw ValueError("separators must be a pair of strings");
    st.separators = std::pair{need_string(seps[0], "separator"), need_string(seps[1], "separator")};
  }
  st.sort_keys = p[3] && p[3]->truthy();
  std::string out = v.to_json(st);
  in.check_size(out.size());
  return out;
}

Value f_trim(Interpreter&, const Value& v, Args& a) {
  auto p = bind("trim", a, {"chars"});
  if (p[0] && !p[0]->is_none()) {
    const auto cps = text::code_points(p[0]->str());
    const std::u32string chars(cps.begin(), cps.end());
    return text::strip(v.str(), &chars, true, true);
  }
  return text::strip(v.str(), nullptr, true, true);
}

Value f_unique(Interpreter& in, const Value& v, Args& a) {
  auto p = bind("unique", a, {"case_sensitive", "attribute"});
  const bool cs = p[0] && p[0]->truthy();
  std::vector<Value> out, seen;
  for (const auto& x : in.iterate(v)) {
    const Value key = fold(p[1] && !p[1]->is_none() ? attribute(in, x, p[1]->str()) : x, cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) {
      seen.push_back(key);
      out.push_back(x);
    }
  }
  return Value::list(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, Args& a) {
  bind("wordcount", a, {});
  std::int64_t n = 0;
  bool in_word = false;
  for (char32_t c : text::code_points(v.str())) {
    const auto u = static_cast<UChar32>(c);
    const bool w = u_isalnum(u) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return n;
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> f = {
      {"abs", f_abs},           {"attr", f_attr},           {"capitalize", f_capitalize}, {"center", f_center},
      {"count", f_length},      {"d", f_default},           {"default", f_default},       {"dictsort", f_dictsort},
      {"e", f_escape},          {"escape", f_escape},       {"first", f_first},           {"float", f_float},
      {"forceescape", f_escape}, {"format", f_format},      {"indent", f_indent},         {"int", f_int},
      {"items", f_items},       {"join", f_join},           {"last", f_last},             {"length", f_length},
      {"list", f_list},         {"lower", f_lower},         {"map", f_map},               {"max", f_max},
      {"min", f_min},           {"reject", f_reject},       {"rejectattr", f_rejectattr}, {"replace", f_replace},
      {"reverse", f_reverse},   {"round", f_round},         {"safe", f_safe},             {"select", f_select},
      {"selectattr", f_selectattr}, {"sort", f_sort},       {"string", f_string},         {"sum", f_sum},
      {"title", f_title},       {"tojson", f_tojson},       {"trim", f_trim},             {"unique", f_unique},
      {"upper", f_upper},       {"wordcount", f_wordcount},
  };
  return f;
}

bool is_iterable(const Value& v) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }

bool contained(const Value& item, const Value& seq) {
  if (seq.is_string()) {
    if (!item.is_string()) throw ValueError(fmt::format("'in <string>' requires string as left operand, not {}", item.type_name()));
    return seq.as_string().find(item.as_string()) != std::string::npos;
  }
  if (seq.is_list()) {
    return std::any_of(seq.as_list()->items.begin(), seq.as_list()->items.end(), [&](const Value& x) { return equal(x, item); });
  }
  if (seq.is_dict()) return item.is_string() && seq.as_dict()->find(item.as_string()) != nullptr;
  if (seq.is_undefined()) return false;
  throw ValueError(fmt::format("argument of type '{}' is not iterable", seq.type_name()));
}

}  // namespace

bool known_filter(const std::string& name) { return filters().count(name) != 0; }

Value Interpreter::filter(const std::string& name, const Value& input, Args& args) {
  auto it = filters().find(name);
  if (it == filters().end()) throw ValueError(fmt::format("No filter named '{}'.", name));
  return it->second(*this, input, args);
}

bool known_test(const std::string& name) {
  static const std::set<std::string> tests = {
      "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "escaped", "even", "false", "filter",
      "float", "ge", ">=", "gt", "greaterthan", ">", "in", "integer", "iterable", "le", "<=", "lower", "lt", "lessthan",
      "<", "mapping", "ne", "!=", "none", "number", "odd", "sameas", "sequence", "string", "test", "true", "undefined",
      "upper"};
  return tests.count(name) != 0;
}

bool Interpreter::test(const std::string& name, const Value& v, Args& a) {
  auto one = [&](const char* fn) {
    auto p = bind(fn, a, {"other"});
    if (!p[0]) throw ValueError(fmt::format("{}() missing 1 required positional argument", fn));
    return *p[0];
  };
  auto none = [&](const char* fn) { bind(fn, a, {}); };
  if (name == "defined") return none("defined"), !v.is_undefined();
  if (name == "undefined") return none("undefined"), v.is_undefined();
  if (name == "none") return none("none"), v.is_none();
  if (name == "boolean") return none("boolean"), v.is_bool();
  if (name == "true") return none("true"), v.is_bool() && v.as_bool();
  if (name == "false") return none("false"), v.is_bool() && !v.as_bool();
  if (name == "integer") return none("integer"), v.is_int();
  if (name == "float") return none("float"), v.is_float();
  if (name == "number") return none("number"), v.is_number();
  if (name == "string") return none("string"), v.is_string();
  if (name == "mapping") return none("mapping"), v.is_dict();
  if (name == "iterable") return none("iterable"), is_iterable(v);
  if (name == "sequence") return none("sequence"), v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "callable") return none("callable"), v.is_callable() || v.is_undefined();
  if (name == "escaped") return none("escaped"), false;
  if (name == "lower" || name == "upper") {
    none(name.c_str());
    Value m = string_method(v.str(), name == "lower" ? "islower" : "isupper");
    Args no;
    return call(m, no).truthy();
  }
  if (name == "odd" || name == "even") {
    none(name.c_str());
    const std::int64_t i = need_int(v, "value");
    return (((i % 2) + 2) % 2 == 1) == (name == "odd");
  }
  if (name == "divisibleby") {
    const std::int64_t d = need_int(one("divisibleby"), "num");
    if (d == 0) throw ValueError("integer division or modulo by zero");
    return need_int(v, "value") % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, one("eq"));
  if (name == "ne" || name == "!=") return !equal(v, one("ne"));
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, one("lt")) < 0;
  if (name == "le" || name == "<=") return compare(v, one("le")) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, one("gt")) > 0;
  if (name == "ge" || name == ">=") return compare(v, one("ge")) >= 0;
  if (name == "in") return contained(v, one("in"));
  if (name == "sameas") {
    const Value o = one("sameas");
    if (v.is_list() && o.is_list()) return v.as_list() == o.as_list();
    if ((v.is_dict() || v.is_namespace()) && (o.is_dict() || o.is_namespace())) return v.as_dict() == o.as_dict();
    if (v.is_none() || o.is_none() || v.is_bool() || o.is_bool()) return v.type_name() == o.type_name() && equal(v, o);
    return v.type_name() == o.type_name() && equal(v, o);
  }
  if (name == "filter") return none("filter"), v.is_string() && known_filter(v.as_string());
  if (name == "test") return none("test"), v.is_string() && known_test(v.as_string());
  throw ValueError(fmt::format("No test named '{}'.", name));
}

std::string percent_format(Interpreter& in, const std::string& format, const Value& args) {
  std::vector<Value> items = args.is_list() && args.as_list()->tuple ? args.as_list()->items : std::vector<Value>{args};
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) throw ValueError("incomplete format");
    Value v;
    if (format[i] == '(') {
      const auto close = format.find(')', i);
      if (close == std::string::npos || !args.is_dict()) throw ValueError("format requires a mapping");
      const Value* x = args.as_dict()->find(format.substr(i + 1, close - i - 1));
      if (!x) throw ValueError("'" + format.substr(i + 1, close - i - 1) + "'");
      v = *x;
      i = close + 1;
      if (i >= format.size()) throw ValueError("incomplete format");
    }
    const char c = format[i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (v.is_undefined() && !args.is_dict()) {
      if (next >= items.size()) throw ValueError("not enough arguments for format string");
      v = items[next++];
    }
    switch (c) {
      case 's': out += v.str(); break;
      case 'r': out += v.repr(); break;
      case 'd':
      case 'i':
        if (v.is_float()) out += std::to_string(static_cast<std::int64_t>(v.as_float()));
        else out += std::to_string(need_int(v, "%d format"));
        break;
      case 'f': out += fmt::format("{:.6f}", v.to_double()); break;
      default: throw ValueError(fmt::format("the format %{} is not supported by braid's Jinja engine", c));
    }
    in.check_size(out.size());
  }
  if (!args.is_dict() && next < items.size() && !(items.size() == 1 && next == 0)) {
    throw ValueError("not all arguments converted during string formatting");
  }
  return out;
}

void add_globals(Scope& root) {
  root.vars["range"] = Value::function("range", [](Interpreter& in, Args& a) -> Value {
    if (!a.keyword.empty()) throw ValueError("range() takes no keyword arguments");
    if (a.positional.empty() || a.positional.size() > 3) throw ValueError("range expected 1 to 3 arguments");
    std::int64_t start = 0, stop, step = 1;
    if (a.positional.size() == 1) {
      stop = need_int(a.positional[0], "range() argument");
    } else {
      start = need_int(a.positional[0], "range() argument");
      stop = need_int(a.positional[1], "range() argument");
      if (a.positional.size() == 3) step = need_int(a.positional[2], "range() argument");
    }
    if (step == 0) throw ValueError("range() arg 3 must not be zero");
    const double count = std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
    if (count > static_cast<double>(in.limits().max_range)) {
      throw ValueError(fmt::format("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", in.limits().max_range));
    }
    in.step(static_cast<std::int64_t>(count));
    std::vector<Value> out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
    return Value::list(std::move(out));
  });
  // namespace() and dict(): the items of mappings given, then the keyword arguments.
  for (const char* name : {"namespace", "dict"}) {
    const bool ns = std::string(name) == "namespace";
    root.vars[name] = Value::function(name, [ns, name](Interpreter&, Args& a) -> Value {
      Value d = Value::dict();
      d.as_dict()->is_namespace = ns;
      for (const auto& p : a.positional) {
        if (!p.is_dict()) throw ValueError(fmt::format("{}() takes mappings as positional arguments", name));
        for (const auto& [k, v] : p.as_dict()->items()) d.as_dict()->set(k, v);
      }
      for (auto& [k, v] : a.keyword) d.as_dict()->set(k, v);
      return d;
    });
  }
  root.vars["raise_exception"] = Value::function("raise_exception", [](Interpreter&, Args& a) -> Value {
    auto p = bind("raise_exception", a, {"message"});
    throw Raised{p[0] ? p[0]->str() : ""};
  });
  root.vars["strftime_now"] = Value::function("strftime_now", [](Interpreter& in, Args& a) -> Value {
    auto p = bind("strftime_now", a, {"format"});
    if (!p[0]) throw ValueError("strftime_now() missing 1 required positional argument: 'format'");
    return python_strftime(need_string(*p[0], "format"), in.now());
  });
}

}  // namespace braid::jinja
