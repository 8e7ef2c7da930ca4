#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "io/inspect.hpp"

namespace braid::io {
namespace {

constexpr std::size_t kConfigChars = 160;

std::string number(const ordered_json& v) {
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number()) return fmt::format("{:.4g}", v.get<double>());
  return v.dump();
}

std::string one_line(const ordered_json& v, std::size_t max_chars) {
  // Floats at 7 significant digits: a summary, not the binary value (that is in --json).
  std::string s = v.is_string() ? v.get<std::string>()
                  : v.is_number_float() ? fmt::format("{:.7g}", v.get<double>())
                                        : v.dump();
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

std::string dist_line(const std::string& label, const ordered_json& d) {
  if (d.value("count", 0) == 0) return fmt::format("  {:<18} none\n", label);
  return fmt::format("  {:<18} min {}  p50 {}  p90 {}  max {}  mean {}  std {}\n", label, number(d["min"]),
                     number(d["p50"]), number(d["p90"]), number(d["max"]), number(d["mean"]), number(d["std"]));
}

// "made from: braid-train sft (output actor; fingerprint ...)", its options and inputs.
std::string made_from_lines(const ordered_json& s) {
  if (!s.contains("made_from") || s["made_from"].is_null()) return "  made from: not recorded\n";
  const ordered_json& m = s["made_from"];
  if (!m.is_object()) return "  made from: not a record: " + one_line(m, 80) + "\n";
  std::string out = fmt::format("  made from: {}{} (fingerprint {})\n", m.value("tool", ""),
                                m.value("output", "").empty() ? "" : ", output " + m.value("output", ""),
                                m.value("fingerprint", ""));
  std::vector<std::string> options;
  const ordered_json given = m.value("options", ordered_json::object());
  const ordered_json inputs = m.value("inputs", ordered_json::object());
  for (const auto& [k, v] : given.items()) {
    options.push_back(v.get<std::string>().empty() ? k : k + " " + v.get<std::string>());
  }
  if (!options.empty()) out += fmt::format("    options: {}\n", fmt::join(options, ", "));
  for (const auto& [role, in] : inputs.items()) {
    if (!in.is_array()) {
      out += fmt::format("    input {}: {}\n", role, one_line(in, 80));
      continue;
    }
    for (const auto& f : in) {
      out += fmt::format("    input {}: {} ({})\n", role, f.value("file", ""), f.value("digest", ""));
    }
  }
  return out;
}

std::string render_deferred(const ordered_json& s) {
  std::string out = fmt::format("{}: {} v{}, policy step {}, next prompt {}\n", s["file"].get<std::string>(),
                                s["format"].get<std::string>(), number(s["version"]), number(s["policy_step"]),
                                number(s["next_prompt"]));
  if (!s["config"].is_null()) out += "  config: " + one_line(s["config"], kConfigChars) + "\n";
  const auto& waiting = s["finished_waiting_for_group"];
  out += fmt::format("  {} samples carried: {} unfinished, {} finished waiting for their group ({} by a stop token, {} "
                     "by length); {} response tokens\n",
                     number(s["samples"]), number(s["unfinished"]), waiting["stop"].get<std::int64_t>() +
                     waiting["length"].get<std::int64_t>(), number(waiting["stop"]), number(waiting["length"]),
                     number(s["response_tokens"]));
  out += dist_line("prompt length", s["prompt_length"]);
  out += dist_line("response so far", s["response_length"]);
  out += dist_line("steps behind", s["steps_behind"]);
  return out;
}

std::string render_samples(const ordered_json& s) {
  std::string out = fmt::format("{}: {} v{}, policy step {}\n", s["file"].get<std::string>(),
                                s["format"].get<std::string>(), number(s["version"]), number(s["policy_step"]));
  if (!s["created_by"].get<std::string>().empty()) out += "  created by: " + s["created_by"].get<std::string>() + "\n";
  if (!s["config"].is_null()) out += "  config: " + one_line(s["config"], kConfigChars) + "\n";
  out += made_from_lines(s);
  out += fmt::format("  {} sequences, {} tokens\n", number(s["sequences"]), number(s["tokens"]));
  out += dist_line("prompt length", s["prompt_length"]);
  out += dist_line("response length", s["response_length"]);
  if (s.contains("reward")) out += dist_line("reward", s["reward"]);
  for (const auto& [name, d] : s["token_arrays"].items()) out += dist_line(name, d);
  if (!s["other_datasets"].empty()) {
    std::vector<std::string> names = s["other_datasets"].get<std::vector<std::string>>();
    out += fmt::format("  other datasets (ignored by braid): {}\n", fmt::join(names, ", "));
  }
  if (s.contains("decoded_with") && !s["first_samples"].empty()) {
    out += "  decoded with " + s["decoded_with"].get<std::string>() + "\n";
  }
  for (const auto& one : s["first_samples"]) {
    out += fmt::format("  sample {} (id {}, prompt {} tokens, response {}{}):\n", number(one["index"]),
                       number(one["sample_id"]), number(one["prompt_len"]), number(one["response_len"]),
                       one.contains("reward") ? ", reward " + number(one["reward"]) : "");
    out += "    prompt:   \"" + one["prompt"].get<std::string>() + "\"\n";
    out += "    response: \"" + one["response"].get<std::string>() + "\"\n";
    if (one.contains("prompt_line")) {
      out += fmt::format("    from:     prompt line {}, extra fields {}\n", number(one["prompt_line"]), one["extra"].dump());
    }
  }
  return out;
}

std::string shape_text(const ordered_json& shape) {
  std::vector<std::string> dims;
  for (const auto& d : shape) dims.push_back(number(d));
  return "[" + fmt::format("{}", fmt::join(dims, ", ")) + "]";
}

std::string render_weights(const ordered_json& s) {
  std::string out = fmt::format("{}: {} v{} ({}), step {}\n", s["file"].get<std::string>(),
                                s["format"].get<std::string>(), number(s["version"]), s["kind"].get<std::string>(),
                                number(s["step"]));
  out += fmt::format("  decoder layers [{}, {}), embedding {}, head {}, tp rank {} of {}\n", number(s["layer_begin"]),
                     number(s["layer_end"]), s["has_embedding"].get<bool>() ? "yes" : "no",
                     s["has_head"].get<bool>() ? "yes" : "no", number(s["tp_rank"]), number(s["tp_size"]));
  out += fmt::format("  {} tensors, {} parameters\n", number(s["tensor_count"]), number(s["parameters"]));
  if (s.contains("checksums")) {
    out += fmt::format("  checksums: {} verified, {} absent (written before checksums)\n",
                       number(s["checksums"]["verified"]), number(s["checksums"]["absent"]));
  }
  if (!s["created_by"].get<std::string>().empty()) out += "  created by: " + s["created_by"].get<std::string>() + "\n";
  if (!s["model_config"].is_null()) out += "  model config: " + one_line(s["model_config"], kConfigChars) + "\n";
  out += made_from_lines(s);
  if (s.contains("adapter_config")) out += "  adapter config: " + one_line(s["adapter_config"], kConfigChars) + "\n";

  // Layer tensors are listed once per kind with the layers that have it: 32 layers make 9 lines, not 288.
  static const std::regex layer_re(R"(^model\.layers\.(\d+)\.(.+)$)");
  struct PerLayer {
    std::string shape, dtype;
    std::set<long> layers;
  };
  std::map<std::string, PerLayer> per_layer;
  for (const auto& t : s["tensors"]) {
    const std::string name = t["name"].get<std::string>();
    std::smatch m;
    if (std::regex_match(name, m, layer_re)) {
      auto& p = per_layer[m[2].str()];
      p.shape = shape_text(t["shape"]);
      p.dtype = t["dtype"].get<std::string>();
      p.layers.insert(std::stol(m[1].str()));
    } else {
      out += fmt::format("  {:<44} {:<16} {}\n", name, shape_text(t["shape"]), t["dtype"].get<std::string>());
    }
  }
  for (const auto& [suffix, p] : per_layer) {
    out += fmt::format("  model.layers.*.{:<30} {:<16} {}  x{} (layers {}..{})\n", suffix, p.shape, p.dtype,
                       p.layers.size(), *p.layers.begin(), *p.layers.rbegin());
  }
  return out;
}

std::string render_json(const ordered_json& s) {
  std::string out = fmt::format("{}: {} v{}\n", s["file"].get<std::string>(), one_line(s["format"], 80),
                                one_line(s["version"], 20));
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& [k, v] : s["figures"].items()) rows.emplace_back(k, one_line(v, 80));
  for (const auto& [k, v] : s["keys"].items()) {
    if (s["figures"].contains(k)) continue;  // a top-level figure, already shown with its value
    rows.emplace_back(k + ":", one_line(v, 80));
  }
  std::size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  for (const auto& [k, v] : rows) out += fmt::format("  {:<{}} {}\n", k, width, v);
  if (s.contains("made_from")) out += made_from_lines(s);
  return out;
}

}  // namespace

std::string render_inspect_text(const ordered_json& summary) {
  const std::string kind = summary.value("kind", "");
  std::string out = kind == "samples"    ? render_samples(summary)
                    : kind == "deferred" ? render_deferred(summary)
                    : kind == "weights" || kind == "optimizer" || kind == "adapters" ? render_weights(summary)
                                                                                     : render_json(summary);
  for (const auto& p : summary.value("problems", ordered_json::array())) out += "  PROBLEM: " + p.get<std::string>() + "\n";
  return out;
}

}  // namespace braid::io
