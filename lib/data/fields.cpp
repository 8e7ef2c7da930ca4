#include "data/fields.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace braid::data {
namespace {

// What is wrong with a mapped value for its braid name, as the readers of prompt lines take
// it: a prompt a non-empty string, messages a non-empty list, an answer a string or a number.
std::optional<std::string> wrong_type(const std::string& name, const json& v) {
  const std::string found = v.is_null() ? "null" : v.type_name();
  if (name == "prompt" && !(v.is_string() && !v.get_ref<const std::string&>().empty())) {
    return v.is_string() ? "is empty, expected the prompt's text" : "is " + found + ", expected the prompt's text (a string)";
  }
  if (name == "messages" && !(v.is_array() && !v.empty())) {
    return v.is_array() ? "is empty, expected the messages" : "is " + found + ", expected a list of messages";
  }
  if (name == "answer" && !v.is_string() && !v.is_number()) return "is " + found + ", expected a string or a number";
  return std::nullopt;
}

}  // namespace

std::string FieldMap::describe() const {
  std::string out;
  for (const auto& [name, key] : source) out += fmt::format("{}{}={}", out.empty() ? "" : ", ", name, key);
  return out;
}

std::optional<std::string> add_field(FieldMap& map, std::string_view item) {
  const auto eq = item.find('=');
  if (eq == std::string_view::npos) return fmt::format("'{}' is not NAME=KEY (e.g. prompt=question)", item);
  const std::string name(item.substr(0, eq)), key(item.substr(eq + 1));
  if (std::find(std::begin(kMappedFields), std::end(kMappedFields), name) == std::end(kMappedFields)) {
    return fmt::format("'{}' is not a field braid maps (prompt, answer, messages)", name);
  }
  if (key.empty()) return fmt::format("{}: the file's key is empty", name);
  if (map.source.contains(name)) return fmt::format("{} is mapped twice", name);
  for (const auto& [other, from] : map.source) {
    if (from == key) return fmt::format("{} is mapped to both {} and {}: a key moves to one name", key, other, name);
  }
  map.source[name] = key;
  return std::nullopt;
}

json map_fields(const json& line, const FieldMap& map, std::vector<std::string>& problems) {
  if (map.empty() || !line.is_object()) return line;
  json out = json::object();
  std::vector<std::string> moved;
  for (const auto& [name, key] : map.source) {
    const auto it = line.find(key);
    if (it == line.end()) {
      problems.push_back(fmt::format("{}: is missing (the {}'s key in the field map)", key, name));
      continue;
    }
    if (key != name && line.contains(name)) {
      problems.push_back(fmt::format("{}: the line has it beside {}, which the field map reads as its {}", name, key,
                                     name));
      continue;
    }
    if (auto wrong = wrong_type(name, *it)) {
      problems.push_back(fmt::format("{}: {} (the {}'s key in the field map)", key, *wrong, name));
      continue;
    }
    out[name] = *it;
    moved.push_back(key);
  }
  for (const auto& [key, value] : line.items()) {
    if (std::find(moved.begin(), moved.end(), key) == moved.end() && !out.contains(key)) out[key] = value;
  }
  return out;
}

std::vector<std::string> map_lines(std::string_view text, const std::string& origin, const FieldMap& map) {
  std::vector<std::string> out, problems;
  for_each_jsonl_line(text, 0, [&](std::int64_t line_no, std::string_view line) {
    json obj;
    if (const auto deep = json_depth_problem(line)) {  // nlohmann recurses: 100,000 deep overflowed the stack
      problems.push_back(fmt::format("{}:{}: {}", origin, line_no, *deep));
      return;
    }
    try {
      obj = json::parse(line);
    } catch (const json::parse_error& e) {
      problems.push_back(fmt::format("{}:{}: not valid JSON: {}", origin, line_no, e.what()));
      return;
    }
    if (!obj.is_object()) {
      problems.push_back(fmt::format("{}:{}: expected a JSON object", origin, line_no));
      return;
    }
    std::vector<std::string> mine;
    json mapped = map_fields(obj, map, mine);
    for (const auto& p : mine) problems.push_back(fmt::format("{}:{}: {}", origin, line_no, p));
    if (mine.empty()) out.push_back(mapped.dump());
  });
  constexpr std::size_t kListed = 20;
  if (!problems.empty()) {
    const std::size_t all = problems.size();
    if (all > kListed) {
      problems.resize(kListed);
      problems.push_back(fmt::format("(the first {} shown; {} in all)", kListed, all));
    }
    throw InputError(origin, std::move(problems));
  }
  if (out.empty()) throw InputError(origin, "", "holds no lines");
  return out;
}

}  // namespace braid::data
