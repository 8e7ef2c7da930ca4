// JSON files and their validation. A Checker walks a document, reading typed
// fields and collecting every problem it meets; check() then throws one
// InputError that lists them all, so a user fixes a config in one go.
//
//   auto doc = load_json_file(path);
//   Checker c(path);
//   c.format(doc, "braid.schedspec", 1);
//   int devices = c.integer(doc, "devices", {.min = 1}).value_or(1);
//   for (auto [i, m] : c.array_items(doc, "models")) { ... c.number(m, "fwd", ...) ... }
//   c.check();   // throws if any problem was recorded
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace braid {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// How deep arrays and objects may nest in any JSON braid reads. nlohmann's parser takes any
// depth, but copying, comparing or printing a document recurses once per level: a line
// nested 100,000 deep ended a tool by a stack overflow (SIGSEGV). No file braid reads
// nests past a dozen levels.
inline constexpr int kMaxJsonDepth = 512;

// Parses a JSON file ("-": stdin). Syntax errors become InputError with line and column.
json load_json_file(const std::string& path);
// Parses text that came from `origin` (a file name, used in messages). Syntax errors, a
// number beyond double's range and nesting deeper than kMaxJsonDepth are InputErrors.
json parse_json_text(std::string_view text, const std::string& origin);
ordered_json parse_ordered_json_text(std::string_view text, const std::string& origin);
// nlohmann's json::parse(text, nullptr, false) for text from outside (a shard's stored
// config, a scorer's answer): a discarded value when the text is not JSON or nests deeper
// than kMaxJsonDepth.
json parse_json_or_discarded(std::string_view text);
// "line L, column C: JSON nested deeper than ..." when text nests deeper than
// kMaxJsonDepth, nullopt otherwise; check_json_depth throws it as an InputError naming origin.
std::optional<std::string> json_depth_problem(std::string_view text);
void check_json_depth(std::string_view text, const std::string& origin);

struct Bounds {
  std::optional<double> min;          // inclusive
  std::optional<double> max;          // inclusive
  bool exclusive_min = false;         // min is exclusive (e.g. > 0)
};

class Checker {
 public:
  explicit Checker(std::string file);

  // Records a problem at `field` ("models[1].fwd").
  void fail(std::string_view field, std::string_view problem);
  bool ok() const noexcept { return problems_.empty(); }
  const std::string& file() const noexcept { return file_; }
  const std::vector<std::string>& problems() const noexcept { return problems_; }
  // Throws InputError(file, every problem) when there are any.
  void check() const;

  // Checks "format" and "version" keys: the right name, a version this build reads
  // (`where`: the path of obj, for a document inside another).
  void format(const json& obj, std::string_view expected_format, int max_version, std::string_view where = "");

  // Typed reads of obj[key]. A missing key is a problem only when required
  // (no default given); a wrong type or a value out of bounds always is.
  // `where` is the path of obj itself ("" for the root, "models[1]").
  std::optional<std::int64_t> integer(const json& obj, std::string_view where, std::string_view key,
                                      Bounds b = {}, std::optional<std::int64_t> dflt = std::nullopt);
  std::optional<double> number(const json& obj, std::string_view where, std::string_view key,
                               Bounds b = {}, std::optional<double> dflt = std::nullopt);
  std::optional<bool> boolean(const json& obj, std::string_view where, std::string_view key,
                              std::optional<bool> dflt = std::nullopt);
  std::optional<std::string> string(const json& obj, std::string_view where, std::string_view key,
                                    std::vector<std::string> allowed = {},
                                    std::optional<std::string> dflt = std::nullopt);
  // A number, or an array of `count` numbers (one per stage, say); returns `count` values.
  std::optional<std::vector<double>> number_or_list(const json& obj, std::string_view where,
                                                    std::string_view key, std::size_t count,
                                                    Bounds b = {});
  // The array at obj[key] with each item's path ("models[0]", ...); a problem if absent/not an array.
  std::vector<std::pair<std::string, const json*>> array_items(const json& obj, std::string_view where,
                                                               std::string_view key,
                                                               std::size_t min_items = 0);
  // The object at obj[key]; a problem (and an empty object back) when absent or not an object,
  // so reading can go on and report everything below it too.
  const json& object(const json& obj, std::string_view where, std::string_view key);
  // Flags keys of obj not in `known` (typos), naming the nearest known key.
  void no_unknown_keys(const json& obj, std::string_view where, const std::vector<std::string>& known);

  static std::string path(std::string_view where, std::string_view key);

 private:
  const json* find(const json& obj, std::string_view where, std::string_view key, bool required);
  bool in_bounds(double v, std::string_view field, const Bounds& b);

  std::string file_;
  std::vector<std::string> problems_;
};

// `s` without leading and trailing blanks (spaces, tabs, CR, LF).
std::string_view trim(std::string_view s);

// Calls fn(line number from 1, line) for each non-blank line of a JSON Lines text, trimmed,
// stopping after `limit` of them when limit > 0.
void for_each_jsonl_line(std::string_view text, std::int64_t limit,
                         const std::function<void(std::int64_t, std::string_view)>& fn);

}  // namespace braid
