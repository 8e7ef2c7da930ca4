#include "core/json.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"

namespace braid {
namespace {

// Line and column of a byte offset, for parse error messages.
std::pair<std::size_t, std::size_t> line_col(std::string_view text, std::size_t byte) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_null()) return "null";
  return v.type_name();
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Whole numbers below 2^53 exactly ("2147483647", not "2.14748e+09"), others shortest.
std::string format_number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    return fmt::format("{}", static_cast<long long>(v));
  }
  return fmt::format("{:g}", v);
}

// The offset of the bracket that first nests deeper than kMaxJsonDepth, or npos. Brackets
// inside strings do not count; unbalanced text is left to the parser to name.
std::size_t too_deep_at(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\') ++i;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

template <class Json>
Json parse_checked(std::string_view text, const std::string& origin) {
  check_json_depth(text, origin);
  try {
    return Json::parse(text);
  } catch (const json::parse_error& e) {
    auto [line, col] = line_col(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    // nlohmann's message is "[json.exception.parse_error.101] parse error at line L, column C: ..."
    auto colon = what.find(": ");
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    throw InputError(origin, fmt::format("line {}, column {}", line, col), "not valid JSON: " + detail);
  } catch (const json::exception& e) {
    // out_of_range.406: a number beyond double's range ("1e309"); nlohmann gives no position.
    std::string what = e.what();
    auto bracket = what.find("] ");
    throw InputError(origin, "", "not valid JSON: " + (bracket == std::string::npos ? what : what.substr(bracket + 2)));
  }
}

}  // namespace

std::optional<std::string> json_depth_problem(std::string_view text) {
  const std::size_t at = too_deep_at(text);
  if (at == std::string_view::npos) return std::nullopt;
  auto [line, col] = line_col(text, at);
  return fmt::format("line {}, column {}: JSON nested deeper than {} levels of arrays and objects", line, col,
                     kMaxJsonDepth);
}

void check_json_depth(std::string_view text, const std::string& origin) {
  if (auto problem = json_depth_problem(text)) throw InputError(origin, std::vector<std::string>{*problem});
}

json parse_json_text(std::string_view text, const std::string& origin) { return parse_checked<json>(text, origin); }

ordered_json parse_ordered_json_text(std::string_view text, const std::string& origin) {
  return parse_checked<ordered_json>(text, origin);
}

json parse_json_or_discarded(std::string_view text) {
  if (too_deep_at(text) != std::string_view::npos) return json::value_t::discarded;
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

json load_json_file(const std::string& path) {
  return parse_json_text(read_text_file(path), is_std_stream(path) ? "<stdin>" : path);
}

Checker::Checker(std::string file) : file_(std::move(file)) {}

std::string Checker::path(std::string_view where, std::string_view key) {
  if (where.empty()) return std::string(key);
  if (key.empty()) return std::string(where);
  return std::string(where) + "." + std::string(key);
}

void Checker::fail(std::string_view field, std::string_view problem) {
  problems_.push_back(field.empty() ? std::string(problem) : fmt::format("{}: {}", field, problem));
}

void Checker::check() const {
  if (!problems_.empty()) throw InputError(file_, problems_);
}

void Checker::format(const json& obj, std::string_view expected_format, int max_version, std::string_view where) {
  if (!obj.is_object()) {
    fail(where, where.empty() ? "expected a JSON object at the top level, found " + type_name(obj)
                              : "expected an object, found " + type_name(obj));
    return;
  }
  auto fmt_name = string(obj, where, "format");
  if (fmt_name && *fmt_name != expected_format) {
    fail(path(where, "format"), fmt::format("is \"{}\", expected \"{}\"", *fmt_name, expected_format));
  }
  auto version = integer(obj, where, "version", {.min = 1});
  if (version && *version > max_version) {
    fail(path(where, "version"), fmt::format("is {}, this braid reads versions up to {}", *version, max_version));
  }
}

const json* Checker::find(const json& obj, std::string_view where, std::string_view key, bool required) {
  if (!obj.is_object()) {
    fail(where, "expected an object, found " + type_name(obj));
    return nullptr;
  }
  auto it = obj.find(std::string(key));
  if (it == obj.end()) {
    if (required) fail(path(where, key), "missing (required)");
    return nullptr;
  }
  return &*it;
}

bool Checker::in_bounds(double v, std::string_view field, const Bounds& b) {
  if (!std::isfinite(v)) {
    fail(field, "must be a finite number");
    return false;
  }
  if (b.min) {
    if (b.exclusive_min ? !(v > *b.min) : !(v >= *b.min)) {
      fail(field, fmt::format("is {}, must be {} {}", format_number(v), b.exclusive_min ? ">" : ">=",
                              format_number(*b.min)));
      return false;
    }
  }
  if (b.max && !(v <= *b.max)) {
    fail(field, fmt::format("is {}, must be <= {}", format_number(v), format_number(*b.max)));
    return false;
  }
  return true;
}

std::optional<std::int64_t> Checker::integer(const json& obj, std::string_view where, std::string_view key,
                                             Bounds b, std::optional<std::int64_t> dflt) {
  const json* v = find(obj, where, key, !dflt.has_value());
  if (v == nullptr) return dflt;
  const std::string field = path(where, key);
  std::int64_t value;
  if (v->is_number_integer()) {
    value = v->get<std::int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
             std::abs(v->get<double>()) < 9e15) {
    value = static_cast<std::int64_t>(v->get<double>());
  } else {
    fail(field, "expected an integer, found " + type_name(*v));
    return std::nullopt;
  }
  if (!in_bounds(static_cast<double>(value), field, b)) return std::nullopt;
  return value;
}

std::optional<double> Checker::number(const json& obj, std::string_view where, std::string_view key, Bounds b,
                                      std::optional<double> dflt) {
  const json* v = find(obj, where, key, !dflt.has_value());
  if (v == nullptr) return dflt;
  const std::string field = path(where, key);
  if (!v->is_number()) {
    fail(field, "expected a number, found " + type_name(*v));
    return std::nullopt;
  }
  const double value = v->get<double>();
  if (!in_bounds(value, field, b)) return std::nullopt;
  return value;
}

std::optional<bool> Checker::boolean(const json& obj, std::string_view where, std::string_view key,
                                     std::optional<bool> dflt) {
  const json* v = find(obj, where, key, !dflt.has_value());
  if (v == nullptr) return dflt;
  if (!v->is_boolean()) {
    fail(path(where, key), "expected true or false, found " + type_name(*v));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> Checker::string(const json& obj, std::string_view where, std::string_view key,
                                           std::vector<std::string> allowed, std::optional<std::string> dflt) {
  const json* v = find(obj, where, key, !dflt.has_value());
  if (v == nullptr) return dflt;
  const std::string field = path(where, key);
  if (!v->is_string()) {
    fail(field, "expected a string, found " + type_name(*v));
    return std::nullopt;
  }
  auto s = v->get<std::string>();
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    fail(field, fmt::format("is \"{}\", expected one of: {}", s, fmt::join(allowed, ", ")));
    return std::nullopt;
  }
  return s;
}

std::optional<std::vector<double>> Checker::number_or_list(const json& obj, std::string_view where,
                                                           std::string_view key, std::size_t count, Bounds b) {
  const json* v = find(obj, where, key, true);
  if (v == nullptr) return std::nullopt;
  const std::string field = path(where, key);
  if (v->is_number()) {
    if (!in_bounds(v->get<double>(), field, b)) return std::nullopt;
    return std::vector<double>(count, v->get<double>());
  }
  if (!v->is_array()) {
    fail(field, "expected a number or an array of numbers, found " + type_name(*v));
    return std::nullopt;
  }
  if (v->size() != count) {
    fail(field, fmt::format("has {} values, expected {} (one per stage)", v->size(), count));
    return std::nullopt;
  }
  std::vector<double> out;
  bool good = true;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const std::string item = fmt::format("{}[{}]", field, i);
    if (!(*v)[i].is_number()) {
      fail(item, "expected a number, found " + type_name((*v)[i]));
      good = false;
      continue;
    }
    good = in_bounds((*v)[i].get<double>(), item, b) && good;
    out.push_back((*v)[i].get<double>());
  }
  if (!good) return std::nullopt;
  return out;
}

std::vector<std::pair<std::string, const json*>> Checker::array_items(const json& obj, std::string_view where,
                                                                      std::string_view key,
                                                                      std::size_t min_items) {
  std::vector<std::pair<std::string, const json*>> items;
  const json* v = find(obj, where, key, true);
  if (v == nullptr) return items;
  const std::string field = path(where, key);
  if (!v->is_array()) {
    fail(field, "expected an array, found " + type_name(*v));
    return items;
  }
  if (v->size() < min_items) {
    fail(field, fmt::format("has {} items, expected at least {}", v->size(), min_items));
  }
  for (std::size_t i = 0; i < v->size(); ++i) items.emplace_back(fmt::format("{}[{}]", field, i), &(*v)[i]);
  return items;
}

const json& Checker::object(const json& obj, std::string_view where, std::string_view key) {
  static const json empty = json::object();
  const json* v = find(obj, where, key, true);
  if (v == nullptr) return empty;
  if (!v->is_object()) {
    fail(path(where, key), "expected an object, found " + type_name(*v));
    return empty;
  }
  return *v;
}

void Checker::no_unknown_keys(const json& obj, std::string_view where, const std::vector<std::string>& known) {
  if (!obj.is_object()) return;
  for (const auto& [k, _] : obj.items()) {
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    std::string hint;
    std::size_t best = 3;
    for (const auto& cand : known) {
      const std::size_t d = edit_distance(k, cand);
      if (d < best) {
        best = d;
        hint = cand;
      }
    }
    fail(path(where, k), hint.empty() ? "unknown key" : fmt::format("unknown key (did you mean \"{}\"?)", hint));
  }
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view blanks = " \t\r\n";
  const auto b = s.find_first_not_of(blanks);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(blanks) - b + 1);
}

void for_each_jsonl_line(std::string_view text, std::int64_t limit,
                         const std::function<void(std::int64_t, std::string_view)>& fn) {
  std::int64_t seen = 0, line_no = 0;
  for (std::size_t pos = 0; pos < text.size() && (limit <= 0 || seen < limit);) {
    const std::size_t nl = std::min(text.find('\n', pos), text.size());
    const std::string_view line = trim(text.substr(pos, nl - pos));
    pos = nl + 1;
    ++line_no;
    if (line.empty()) continue;
    ++seen;
    fn(line_no, line);
  }
}

}  // namespace braid
