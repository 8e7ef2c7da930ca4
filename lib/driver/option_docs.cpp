#include "driver/option_docs.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "checkpoint/option_schema.hpp"
#include "core/error.hpp"
#include "data/option_schema.hpp"
#include "driver/option_schema.hpp"
#include "driver/run_file.hpp"
#include "eval/option_schema.hpp"
#include "generate/option_schema.hpp"
#include "hf/option_schema.hpp"
#include "io/option_schema.hpp"
#include "plan/meshplan_command.hpp"
#include "plan/profile_command.hpp"
#include "rl/algorithms.hpp"
#include "sched/option_schema.hpp"
#include "score/options.hpp"
#include "train/commands.hpp"
#include "train/option_schema.hpp"

namespace braid::driver {
namespace {

using cli::OptionSpec;

// One mode's options: each spec with its help and default as the mode's CLI11 app holds them.
struct Mode {
  std::string name;
  std::vector<OptionRow> options;   // .defaults: this mode's
};

template <typename Opts>
Mode mode_of(std::string name, const cli::OptionSchema<Opts>& schema, Opts& o, const CLI::App& app) {
  Mode m{std::move(name), {}};
  for (const auto& entry : schema) {
    // A key alone has no command-line option: its default is the field's value.
    const CLI::Option* opt = entry.spec.flag.empty() ? nullptr : app.get_option_no_throw(entry.spec.name());
    std::string help = entry.spec.help.empty() && opt != nullptr ? opt->get_description() : entry.spec.help;
    std::string value = entry.spec.flag.empty() && entry.get ? cli::flag_value(entry.get(o))
                        : entry.docs_default                  ? entry.docs_default(o)
                        : opt != nullptr                      ? opt->get_default_str()
                                                              : "";
    m.options.push_back({entry.spec, std::move(help), std::move(value), ""});
  }
  return m;
}

// Rows of the options that `keep` selects, over the modes: an option's default, the most
// common over the modes first and the others named by their modes.
std::vector<OptionRow> rows_over(const std::vector<Mode>& modes, const std::function<bool(const OptionSpec&)>& keep) {
  std::vector<OptionRow> rows;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> defaults;  // option -> (mode, default)
  // An option by its flag, a key alone by its key.
  const auto id = [](const OptionSpec& s) { return s.flag.empty() ? "=" + s.key : s.flag; };
  for (const auto& mode : modes) {
    for (const auto& option : mode.options) {
      if (!keep(option.spec)) continue;
      auto& seen = defaults[id(option.spec)];
      if (seen.empty()) rows.push_back(option);
      seen.emplace_back(mode.name, option.defaults);
    }
  }
  for (auto& row : rows) {
    const auto& seen = defaults[id(row.spec)];
    std::map<std::string, int> count;
    for (const auto& [m, v] : seen) ++count[v];
    const auto common = std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) {
                          return a.second < b.second;
                        })->first;
    row.defaults = common;
    for (const auto& [m, v] : seen) {
      if (v != common) row.defaults += fmt::format("; {} {}", m, v.empty() ? "none" : v);
    }
    if (seen.size() < modes.size()) {
      std::vector<std::string> names;
      for (const auto& [m, v] : seen) names.push_back(m);
      row.modes = fmt::format("{}", fmt::join(names, ", "));
    }
  }
  return rows;
}

bool in_common(const OptionSpec& spec) {
  const auto& common = train::common_schema();
  return std::any_of(common.begin(), common.end(), [&](const auto& e) { return e.spec.flag == spec.flag; });
}

std::vector<OptionRow> train_rows(const std::string& table) {
  CLI::App app;
  train::TrainCommandLine cl;
  train::add_train_commands(app, cl);
  std::vector<Mode> modes;
  if (table != "braid-train-text") {
    for (auto& [sub, o] : cl.rl_modes) modes.push_back(mode_of(sub->get_name(), train::rl_schema(train::trains_critic(o)), o, *sub));
  }
  if (table != "braid-train-policy") {
    modes.push_back(mode_of("sft", train::text_schema("sft"), cl.sft, *cl.sft_cmd));
    modes.push_back(mode_of("rm", train::text_schema("rm"), cl.rm, *cl.rm_cmd));
    modes.push_back(mode_of("dpo", train::dpo_schema(), cl.dpo, *cl.dpo_cmd));
  }
  const bool common = table == "braid-train-common";
  return rows_over(modes, [&](const OptionSpec& s) { return in_common(s) == common; });
}

template <typename Opts>
std::vector<OptionRow> tool_rows(const std::string& name, const cli::OptionSchema<Opts>& schema) {
  CLI::App app;
  Opts o;
  cli::add_schema_options(app, o, schema);
  return rows_over({mode_of(name, schema, o, app)}, [](const OptionSpec&) { return true; });
}

// braid-profile's options over its verbs (the "modes" of its table).
std::vector<OptionRow> profile_rows() {
  std::vector<Mode> verbs;
  for (const auto& verb : plan::profile_verbs()) {
    CLI::App app;
    plan::ProfileOptions o;
    cli::add_schema_options(app, o, verb.schema);
    verbs.push_back(mode_of(verb.name, verb.schema, o, app));
  }
  return rows_over(verbs, [](const OptionSpec&) { return true; });
}

// The value an option takes; the run file's table (run_file) shows the run file's bounds.
std::string value_of(const OptionSpec& s, bool run_file = false) {
  std::string bounds;
  const auto& b = run_file ? s.run_file_bounds.value_or(s.bounds) : s.bounds;
  const bool open_top = !b.max || *b.max >= cli::kMaxCount;
  if (b.min && open_top) bounds = fmt::format(" {} {}", b.exclusive_min ? ">" : "≥", *b.min);
  if (b.min && !open_top) bounds = fmt::format(" in {}{}, {}]", b.exclusive_min ? "(" : "[", *b.min, *b.max);
  if (!b.min && b.max) bounds = fmt::format(" ≤ {}", *b.max);
  switch (s.type) {
    case cli::OptionType::choice: return fmt::format("{}", fmt::join(s.choices, " | "));
    case cli::OptionType::boolean: return s.flag.empty() ? "true | false" : "flag";
    default: return std::string(cli::type_name(s.type)) + bounds;
  }
}

std::string cell(std::string text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|') out += "\\|";
    else if (ch == '\n') out += ' ';
    else out += ch;
  }
  return out;
}

std::string flags_of(const OptionSpec& s) {
  std::string flags = fmt::format("`{}`", s.flag);
  if (!s.negation.empty()) flags += fmt::format(" / `{}`", s.negation);
  return flags;
}

}  // namespace

std::vector<std::string> option_table_names() {
  return {"braid-train-common", "braid-train-policy", "braid-train-text", "braid-generate", "braid-score",
          "braid-schedgen",     "braid-schedgen-presets", "run-file", "braid-profile", "braid-meshplan",
          // the driver's verbs
          "braid-eval", "braid-synth", "braid-data", "braid-init", "braid-import", "braid-export", "braid-reshard",
          "braid-run", "braid-makefile", "braid-tokenize", "braid-inspect"};
}

std::vector<OptionRow> option_rows(const std::string& table) {
  if (table.rfind("braid-train-", 0) == 0) return train_rows(table);
  if (table == "braid-generate") return tool_rows("braid-generate", gen::generate_schema());
  if (table == "braid-score") return tool_rows("braid-score", score::score_schema());
  if (table == "braid-schedgen") return tool_rows("braid-schedgen", sched::schedgen_schema());
  if (table == "braid-profile") return profile_rows();
  if (table == "braid-meshplan") return tool_rows("braid-meshplan", plan::meshplan_schema());
  if (table == "braid-eval") return tool_rows(table, eval::eval_schema());
  if (table == "braid-synth") return tool_rows(table, eval::synth_schema());
  if (table == "braid-data") return tool_rows(table, data::data_schema());
  if (table == "braid-init") return tool_rows(table, checkpoint::init_schema());
  if (table == "braid-import") return tool_rows(table, hf::import_schema());
  if (table == "braid-export") return tool_rows(table, hf::export_schema());
  if (table == "braid-reshard") return tool_rows(table, checkpoint::reshard_schema());
  if (table == "braid-run") return tool_rows(table, run_schema());
  if (table == "braid-makefile") return tool_rows(table, makefile_schema());
  if (table == "braid-tokenize") return tool_rows(table, gen::tokenize_schema());
  if (table == "braid-inspect") return tool_rows(table, io::inspect_schema());
  if (table == "run-file") {
    std::vector<OptionRow> rows;
    for (const auto& [section, specs] :
         {std::pair{"generate", cli::specs_of(gen::generate_schema())}, std::pair{"score", cli::specs_of(score::score_schema())},
          std::pair{"train", cli::specs_of(train::rl_schema(true))}, std::pair{"eval", cli::specs_of(eval_section_schema())}}) {
      for (const auto& s : specs) {
        if (s.key.empty()) continue;
        OptionRow row{s, "", "", section};
        rows.push_back(std::move(row));
      }
    }
    return rows;
  }
  throw UsageError(fmt::format("no option table '{}' (tables: {})", table, fmt::join(option_table_names(), ", ")));
}

std::string option_table_markdown(const std::string& table) {
  std::string out;
  if (table == "braid-schedgen-presets") {
    out = "| preset | for | knobs |\n|---|---|---|\n";
    for (const auto& p : sched::anneal_presets()) {
      std::string knobs;
      for (const auto& [key, value] : p.knobs.items()) knobs += fmt::format("{}`{}`: {}", knobs.empty() ? "" : ", ", key, cli::flag_value(value));
      out += fmt::format("| `{}` | {} | {} |\n", p.name, cell(p.use), knobs.empty() ? "none changed" : knobs);
    }
    return out;
  }
  const auto rows = option_rows(table);
  if (table == "run-file") {
    out = "| key | value | sets | only under |\n|---|---|---|---|\n";
    for (const auto& r : rows) {
      const bool critic = r.spec.key == "critic_lr" || r.spec.key == "value_clip";
      out += fmt::format("| `{}.{}` | {} | {} | {} |\n", r.modes, r.spec.key, cell(value_of(r.spec, true)),
                         r.spec.flag.empty() ? "" : flags_of(r.spec),
                         critic ? "ppo" : "");
    }
    return out;
  }
  // The columns: the keys' for the tools a run file sets (braid-schedgen's keys are those of a
  // spec's "anneal" block, where a key alone is set), not for braid-profile and braid-meshplan;
  // the modes' (braid-profile's verbs) where the table is over modes.
  const bool by_verb = table == "braid-profile";
  const bool by_mode = table == "braid-train-policy" || table == "braid-train-text" || by_verb;
  const bool keyed = !by_verb && table != "braid-meshplan";
  const std::string block = table == "braid-schedgen" ? "anneal" : "";
  std::vector<std::string> heads = {"option", "value", "default"};
  if (keyed) heads.push_back(block.empty() ? "run file" : fmt::format("`{}` key", block));
  if (by_mode) heads.push_back(by_verb ? "verbs" : "modes");
  heads.push_back("meaning");
  out = fmt::format("| {} |\n|", fmt::join(heads, " | "));
  for (std::size_t i = 0; i < heads.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& r : rows) {
    const std::string option = r.spec.flag.empty() ? fmt::format("`{}.{}`", block, r.spec.key) : flags_of(r.spec);
    std::vector<std::string> cells = {option, cell(value_of(r.spec)), cell(r.spec.required ? "required" : r.defaults)};
    if (keyed) cells.push_back(r.spec.key.empty() ? "" : fmt::format("`{}`", r.spec.key));
    if (by_mode) cells.push_back(r.modes.empty() ? "all" : r.modes);
    cells.push_back(cell(r.spec.doc.empty() ? r.help : r.spec.doc));
    out += fmt::format("| {} |\n", fmt::join(cells, " | "));
  }
  return out;
}

}  // namespace braid::driver
