#include "driver/step_identity.hpp"

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include <fmt/format.h>

#include "core/cli.hpp"
#include "core/error.hpp"
#include "io/fingerprint.hpp"
#include "io/weight_shard.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;

fs::path model_after(const RunSpec& spec, const Layout& layout, const std::string& model, int iteration) {
  return model == "actor" ? actor_after(spec, layout, iteration) : critic_after(spec, layout, iteration);
}

std::vector<std::string> digests(const std::vector<fs::path>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(io::content_digest(f));
  return out;
}

std::vector<std::string> recorded_digests(const ordered_json& record, const std::string& role) {
  std::vector<std::string> out;
  const ordered_json inputs = record.value("inputs", ordered_json::object());
  if (!inputs.contains(role) || !inputs[role].is_array()) return out;
  for (const auto& f : inputs[role]) out.push_back(f.value("digest", ""));
  return out;
}

// What is wrong with one model's checkpoint of iteration i, if anything.
std::optional<std::string> foreign(const RunSpec& spec, const Layout& layout, const std::string& model, int i) {
  const fs::path out = layout.checkpoint(i, model);
  const fs::path in = model_after(spec, layout, model, i - 1);
  const auto files = checkpoint_files_of(out);
  const auto in_files = checkpoint_files_of(in);
  if (files.empty() || in_files.empty()) return std::nullopt;   // missing: the step is due anyway
  const io::WeightShardSet set(files);
  const io::WeightShardMeta& meta = set.shards().front().meta();
  const std::int64_t in_step = io::WeightShardReader(in_files.front()).meta().step;
  if (meta.step != in_step + 1) {
    return fmt::format("{} is at step {}, but iteration {} trains {} (step {}) into step {}: it is another "
                       "checkpoint",
                       out.string(), meta.step, i, in.string(), in_step, in_step + 1);
  }
  const auto record = io::parse_made_from(meta.made_from, files.front().string());
  if (!record) {
    // Nothing recorded (an older braid): the heads tell an actor from a critic.
    const bool critic = model == "critic";
    if (critic != set.contains("score.weight")) {
      return fmt::format("{} {} a value head (score.weight): it is not {}", out.string(), critic ? "holds no" : "holds",
                         critic ? "a critic" : "an actor");
    }
    return std::nullopt;
  }
  if (record->value("output", "") != model) {
    return fmt::format("{} was written as braid-train's {}, not its {}", out.string(), record->value("output", "?"),
                       model);
  }
  if (recorded_digests(*record, model) != digests(in_files)) {
    return fmt::format("{} was trained from another {} than {}", out.string(), model, in.string());
  }
  if (recorded_digests(*record, "shards") != digests(scored_shards(layout, i))) {
    return fmt::format("{} was trained on other scored shards than {}'s", out.string(),
                       layout.scored_dir(i).string());
  }
  return std::nullopt;
}

bool is_number(const std::string& w) {
  if (w.empty()) return false;
  char* end = nullptr;
  std::strtod(w.c_str(), &end);
  return end == w.c_str() + w.size();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> command_options(const std::vector<std::string>& argv) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t k = 1; k < argv.size(); ++k) {
    const std::string& w = argv[k];
    if (!w.starts_with("--") || w == "--") continue;
    if (const auto eq = w.find('='); eq != std::string::npos) {
      out.emplace_back(w.substr(0, eq), w.substr(eq + 1));
      continue;
    }
    const bool value = k + 1 < argv.size() && (!argv[k + 1].starts_with("-") || is_number(argv[k + 1]));
    out.emplace_back(w, value ? argv[++k] : "true");
  }
  return out;
}

std::optional<std::string> foreign_checkpoints(const RunSpec& spec, const Layout& layout, const PlanOptions&,
                                               int iteration) {
  for (const std::string model : {"actor", "critic"}) {
    if (model == "critic" && !spec.uses_critic()) continue;
    try {
      if (auto why = foreign(spec, layout, model, iteration)) return why;
    } catch (const InputError&) {
      return std::nullopt;   // unreadable: the damage check names it
    }
  }
  return std::nullopt;
}

namespace {

// The record's options against a command line's: a value that differs, or one given there
// and left to the tool's default now.
std::vector<std::string> option_differences(const ordered_json& record,
                                            const std::vector<std::pair<std::string, std::string>>& planned) {
  std::vector<std::string> out;
  const ordered_json options = record.value("options", ordered_json::object());
  const ordered_json given = record.value("given", ordered_json::array());
  for (const auto& [name, value] : options.items()) {
    const std::string& key = name;  // a lambda may not capture a structured binding before clang 16
    const auto it = std::find_if(planned.begin(), planned.end(), [&](const auto& p) { return p.first == key; });
    const std::string then = value.is_string() ? value.get<std::string>() : value.dump();
    if (it != planned.end()) {
      const std::string now = cli::canonical_value(it->second);
      if (now != then) out.push_back(fmt::format("{}: {} there, {} now", name, then, now));
    } else if (std::find(given.begin(), given.end(), ordered_json(name)) != given.end()) {
      out.push_back(fmt::format("{}: {} there, not given now (the tool's default)", name, then));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> changed_train_options(const RunSpec& spec, const Layout& layout, const PlanOptions& opt,
                                               int iteration) {
  const auto files = checkpoint_files_of(layout.checkpoint(iteration, "actor"));
  if (files.empty()) return {};
  std::optional<ordered_json> record;
  try {
    record = io::parse_made_from(io::WeightShardReader(files.front()).meta().made_from, files.front().string());
  } catch (const InputError&) {
    return {};   // unreadable: the damage check names it
  }
  if (!record) return {};
  const Step step = train_step(spec, layout, opt, iteration);
  const std::vector<std::string>& argv = step.pipeline.front().argv;
  const auto tool = std::find(argv.begin(), argv.end(), opt.tools.train);
  if (tool == argv.end()) return {};
  auto planned = command_options({tool, argv.end()});
  // A negated flag ("--no-filter-groups") is its flag set false, as braid-train records it.
  for (auto& [name, value] : planned) {
    if (name.starts_with("--no-") && value == "true" && !record->value("options", ordered_json::object()).contains(name)) {
      name = "--" + name.substr(5);
      value = "false";
    }
  }
  return option_differences(*record, planned);
}

std::vector<std::string> output_record_differences(const ordered_json& record, const std::string& tool,
                                                   const std::vector<std::string>& argv,
                                                   const std::vector<std::pair<std::string, std::string>>& inputs) {
  std::vector<std::string> out;
  if (record.value("tool", "") != tool) {
    out.push_back(fmt::format("tool: {} there, {} now", record.value("tool", "none"), tool));
    return out;
  }
  // Repeated options ("--fix a --fix b") as the tool records them: their values in order.
  std::vector<std::pair<std::string, std::string>> planned;
  for (const auto& [name, value] : command_options(argv)) {
    const std::string& key = name;
    const auto it = std::find_if(planned.begin(), planned.end(), [&](const auto& p) { return p.first == key; });
    if (it == planned.end()) {
      planned.emplace_back(name, value);
    } else {
      it->second += " " + value;
    }
  }
  out = option_differences(record, planned);
  const ordered_json recorded = record.value("inputs", ordered_json::object());
  for (const auto& [role, given] : inputs) {
    const ordered_json there = recorded.contains(role) ? recorded[role] : ordered_json();
    const bool same = there.is_string() ? there.get<std::string>() == given
                                        : there.is_array() && there.size() == 1 &&
                                              fs::path(there[0].value("file", "")).lexically_normal() ==
                                                  fs::path(given).lexically_normal();
    if (!same) {
      const std::string then = there.is_string() ? there.get<std::string>()
                               : there.is_array() && !there.empty() ? there[0].value("file", "?")
                                                                    : std::string("none");
      out.push_back(fmt::format("input {}: {} there, {} now", role, then, given));
    }
  }
  for (const auto& [role, files] : recorded.items()) {
    if (!files.is_array()) continue;   // a value (a hardware preset), or standard input: compared above, if at all
    for (const auto& f : files) {
      const std::string file = f.value("file", ""), digest = f.value("digest", "");
      std::string now;
      try {
        now = io::content_digest(file);
      } catch (const InputError&) {
        now = "unreadable";
      }
      if (now != digest) out.push_back(fmt::format("input {}: {} changed since ({} there, {} now)", role, file, digest, now));
    }
  }
  return out;
}

}  // namespace braid::driver
