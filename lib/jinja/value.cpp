#include "jinja/value.hpp"

#include "jinja/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace braid::jinja {

const Value* DictData::find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

void DictData::set(const std::string& key, Value v) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    items_[it->second].second = std::move(v);
    return;
  }
  index_.emplace(key, items_.size());
  items_.emplace_back(key, std::move(v));
}

std::size_t DictData::size() const { return items_.size(); }

bool DictData::erase(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(it->second));
  index_.clear();
  for (std::size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
  return true;
}

Value Value::list(std::vector<Value> items, bool tuple) {
  auto l = std::make_shared<ListData>();
  l->items = std::move(items);
  l->tuple = tuple;
  return Value(std::move(l));
}

Value Value::dict() { return Value(std::make_shared<DictData>()); }

Value Value::function(std::string name, std::function<Value(Interpreter&, Args&)> call) {
  return Value(std::make_shared<const Function>(Function{std::move(name), std::move(call)}));
}

double Value::to_double() const {
  if (is_float()) return as_float();
  if (is_int()) return static_cast<double>(as_int());
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  throw ValueError(fmt::format("'{}' is not a number", type_name()));
}

std::string Value::type_name() const {
  switch (v_.index()) {
    case 0: return "Undefined";
    case 1: return "NoneType";
    case 2: return "bool";
    case 3: return "int";
    case 4: return "float";
    case 5: return "str";
    case 6: return as_list()->tuple ? "tuple" : "list";
    case 7: return as_dict()->is_namespace ? "Namespace" : "dict";
    default: return "function";
  }
}

bool Value::truthy() const {
  switch (v_.index()) {
    case 0:
    case 1: return false;
    case 2: return as_bool();
    case 3: return as_int() != 0;
    case 4: return as_float() != 0.0;
    case 5: return !as_string().empty();
    case 6: return !as_list()->items.empty();
    case 7: return as_dict()->is_namespace || as_dict()->size() != 0;
    default: return true;
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest digits that read back as d, then Python's layout: positional for
  // exponents -4 .. 15, else d.ddde+XX.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const auto e_at = sci.find('e');
  std::string mant = sci.substr(0, e_at);
  const int exp = std::stoi(sci.substr(e_at + 1));
  const bool neg = mant.front() == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    const int point = exp + 1;  // digits before the decimal point
    if (point <= 0) {
      out += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
    } else if (point >= static_cast<int>(digits.size())) {
      out += digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(point)) + "." + digits.substr(static_cast<std::size_t>(point));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  return out;
}

std::string string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (std::size_t i = 0; i < s.size();) {
    auto [c, n] = text::decode(s, i);
    i += n;
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !text::is_printable(c))) {
      if (c < 0x100) out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
      else if (c < 0x10000) out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
      else out += fmt::format("\\U{:08x}", static_cast<unsigned>(c));
    } else {
      text::append_utf8(out, c);
    }
  }
  out += quote;
  return out;
}

std::string Value::str() const {
  switch (v_.index()) {
    case 0: return "";
    case 5: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (v_.index()) {
    case 0: return "";
    case 1: return "None";
    case 2: return as_bool() ? "True" : "False";
    case 3: return std::to_string(as_int());
    case 4: return float_repr(as_float());
    case 5: return string_repr(as_string());
    case 6: {
      const auto& l = *as_list();
      std::string out = l.tuple ? "(" : "[";
      for (std::size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        out += l.items[i].repr();
      }
      if (l.tuple && l.items.size() == 1) out += ",";
      out += l.tuple ? ")" : "]";
      return out;
    }
    case 7: {
      const auto& d = *as_dict();
      if (d.is_namespace) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : d.items()) {
        if (!first) out += ", ";
        first = false;
        out += string_repr(k) + ": " + v.repr();
      }
      return out + "}";
    }
    default: return "<function " + as_callable()->name + ">";
  }
}

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const auto c = static_cast<unsigned char>(ch);
    if (ensure_ascii && c >= 0x80) {
      auto [cp, n] = text::decode(s, i);
      i += n - 1;
      if (cp >= 0x10000) {
        const char32_t v = cp - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += ch;
    }
  }
  out += '"';
}

void json_dump(std::string& out, const Value& v, const Value::JsonStyle& st, const std::string& item_sep,
               const std::string& key_sep, int level) {
  auto newline = [&](int lvl) {
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += *st.indent;
  };
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    const double d = v.as_float();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
  } else if (v.is_string()) {
    json_string(out, v.as_string(), st.ensure_ascii);
  } else if (v.is_list()) {
    const auto& items = v.as_list()->items;
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      if (st.indent) newline(level + 1);
      json_dump(out, items[i], st, item_sep, key_sep, level + 1);
    }
    if (st.indent) newline(level);
    out += ']';
  } else if (v.is_dict()) {
    std::vector<const std::pair<std::string, Value>*> items;
    for (const auto& kv : v.as_dict()->items()) items.push_back(&kv);
    if (items.empty()) {
      out += "{}";
      return;
    }
    if (st.sort_keys) {
      std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
    }
    out += '{';
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      if (st.indent) newline(level + 1);
      json_string(out, items[i]->first, st.ensure_ascii);
      out += key_sep;
      json_dump(out, items[i]->second, st, item_sep, key_sep, level + 1);
    }
    if (st.indent) newline(level);
    out += '}';
  } else {
    throw ValueError(fmt::format("Object of type {} is not JSON serializable", v.type_name()));
  }
}

}  // namespace

std::string Value::to_json(const JsonStyle& style) const {
  std::string item_sep = style.indent ? "," : ", ", key_sep = ": ";
  if (style.separators) std::tie(item_sep, key_sep) = *style.separators;
  std::string out;
  json_dump(out, *this, style, item_sep, key_sep, 0);
  return out;
}

namespace {

template <class J>
Value of_json(const J& j) {
  if (j.is_null()) return None{};
  if (j.is_boolean()) return j.template get<bool>();
  if (j.is_number_unsigned()) {
    const auto u = j.template get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(u);
    return static_cast<double>(u);
  }
  if (j.is_number_integer()) return j.template get<std::int64_t>();
  if (j.is_number_float()) return j.template get<double>();
  if (j.is_string()) return j.template get<std::string>();
  if (j.is_array()) {
    std::vector<Value> items;
    items.reserve(j.size());
    for (const auto& x : j) items.push_back(of_json(x));
    return Value::list(std::move(items));
  }
  Value d = Value::dict();
  for (auto it = j.begin(); it != j.end(); ++it) d.as_dict()->set(it.key(), of_json(it.value()));
  return d;
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) { return of_json(j); }
Value Value::from_json(const nlohmann::json& j) { return of_json(j); }

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    auto as_i = [](const Value& v) { return v.is_bool() ? std::int64_t(v.as_bool()) : v.as_int(); };
    return as_i(a) == as_i(b);
  }
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.is_none() && b.is_none()) return true;
  if (a.is_undefined() && b.is_undefined()) return true;
  if (a.is_list() && b.is_list()) {
    const auto& x = a.as_list()->items;
    const auto& y = b.as_list()->items;
    if (a.as_list()->tuple != b.as_list()->tuple || x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!equal(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    const auto& x = *a.as_dict();
    const auto& y = *b.as_dict();
    if (x.size() != y.size()) return false;
    for (const auto& [k, v] : x.items()) {
      const Value* w = y.find(k);
      if (!w || !equal(v, *w)) return false;
    }
    return true;
  }
  if (a.is_namespace() && b.is_namespace()) return a.as_dict() == b.as_dict();
  if (a.is_callable() && b.is_callable()) return a.as_callable() == b.as_callable();
  return false;
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.to_double(), y = b.to_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    auto as_i = [](const Value& v) { return v.is_bool() ? std::int64_t(v.as_bool()) : v.as_int(); };
    const auto x = as_i(a), y = as_i(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
  if (a.is_list() && b.is_list() && a.as_list()->tuple == b.as_list()->tuple) {
    const auto& x = a.as_list()->items;
    const auto& y = b.as_list()->items;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw ValueError(fmt::format("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name()));
}

}  // namespace braid::jinja
