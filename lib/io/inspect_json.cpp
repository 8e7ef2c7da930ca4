#include <algorithm>
#include <array>
#include <string_view>

#include "io/inspect_kinds.hpp"

namespace braid::io::detail {
namespace {

constexpr std::size_t kShortString = 60;

// Keys whose values are the figures a reader of a schedule or plan looks for first.
bool is_key_figure(std::string_view key) {
  static constexpr std::array<std::string_view, 10> kFigures = {
      "makespan", "lower_bound", "peak_memory", "iteration_time", "throughput", "energy",
      "iteration_s", "serial_s", "fused_s", "speedup"};
  for (auto f : kFigures) {
    if (key.find(f) != std::string_view::npos) return true;
  }
  return false;
}

ordered_json describe(const json& v) {
  if (v.is_array()) return "array of " + std::to_string(v.size());
  if (v.is_object()) return "object with " + std::to_string(v.size()) + " keys";
  if (v.is_string() && v.get_ref<const std::string&>().size() > kShortString) {
    return "string of " + std::to_string(v.get_ref<const std::string&>().size()) + " characters";
  }
  return v;
}

// Numbers (or short arrays of numbers) under key-figure names, two levels deep.
void collect_figures(const json& obj, const std::string& where, int depth, ordered_json& out) {
  if (!obj.is_object() || depth > 2) return;
  for (const auto& [k, v] : obj.items()) {
    const std::string path = where.empty() ? k : where + "." + k;
    const bool numeric = v.is_number() || (v.is_array() && v.size() <= 16 && !v.empty() &&
                                           std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); }));
    if (numeric && is_key_figure(k)) out[path] = v;
    if (v.is_object()) collect_figures(v, path, depth + 1, out);
  }
}

}  // namespace

ordered_json summarize_json(const std::string& path, const json& doc) {
  ordered_json s;
  s["file"] = path;
  s["kind"] = "json";
  s["format"] = doc.at("format");
  s["version"] = doc.at("version");
  // What made it: the record of the outputs braid writes (plans, schedules, profiles), shown
  // as a weight or sample file's is; null where such a file records nothing (an older braid).
  static constexpr std::array<std::string_view, 3> kRecorded = {"braid.plan", "braid.schedule", "braid.profile"};
  const bool recorded = std::find(kRecorded.begin(), kRecorded.end(), doc.value("format", "")) != kRecorded.end();
  if (recorded || doc.contains("made_from")) s["made_from"] = doc.value("made_from", json());
  ordered_json keys = ordered_json::object();
  for (const auto& [k, v] : doc.items()) {
    if (k != "format" && k != "version" && k != "made_from") keys[k] = describe(v);
  }
  s["keys"] = keys;
  ordered_json figures = ordered_json::object();
  collect_figures(doc, "", 0, figures);
  s["figures"] = figures;
  return s;
}

}  // namespace braid::io::detail
