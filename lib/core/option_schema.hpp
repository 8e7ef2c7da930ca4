// A tool's options, declared once: per option its flag, its key in the run file (when the
// run file may set it), its type, bounds or choices, and help. From one schema come the
// CLI11 options (add_schema_options), the run file's checks (lib/driver/run_file.cpp reads
// the keys, types, bounds and choices) and the docs' option tables (`braid options`).
// An option with a key and no flag is a setting of a JSON block alone (braid-schedgen's
// knobs, a spec's "anneal" block: read_keyed), never a command-line option.
//
//   const OptionSchema<Opts>& schema() {
//     static const OptionSchema<Opts> s = {
//         field<Opts>(&Opts::epochs, {.flag = "--epochs", .type = OptionType::integer, .help = "Passes",
//                                    .key = "epochs", .bounds = {.min = 1, .max = 1000}}),
//     };
//     return s;
//   }
//   add_schema_options(app, opts, schema());
#pragma once

#include "core/json.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace braid::cli {

enum class OptionType { integer, number, numbers, integers, choice, boolean, text, path };  // numbers, integers: lists
std::string_view type_name(OptionType t);

// The types by their names alone, for the schemas' tables (`using namespace cli::option_types;`).
namespace option_types {
inline constexpr auto integer = OptionType::integer;
inline constexpr auto number = OptionType::number;
inline constexpr auto numbers = OptionType::numbers;
inline constexpr auto integers = OptionType::integers;
inline constexpr auto choice = OptionType::choice;
inline constexpr auto boolean = OptionType::boolean;
inline constexpr auto text = OptionType::text;
inline constexpr auto path = OptionType::path;
}  // namespace option_types

// The largest count or length a stage tool's integers hold (2^31 - 1).
inline constexpr double kMaxCount = 2147483647.0;

// A CLI11 check of a number against `b` (and finite: CLI11's own validators let nan
// through), named in --help as CLI11's are (NONNEGATIVE, POSITIVE, [a - b]); for options
// declared outside a schema.
CLI::Validator bounds_validator(const Bounds& b, OptionType type);

struct OptionSpec {
  std::string flag;                  // "--lr", "-o,--output"; a positional's name ("shards"); "": a key alone
  OptionType type = OptionType::text;
  std::string help;                  // as --help shows it
  std::string key = {};              // its key in the run file's section (or the JSON block the tool reads); "" when none sets it
  Bounds bounds = {};                // integer, number(s): a value outside is refused (exit 2), here and in the run file
  std::vector<std::string> choices = {};  // choice: the values taken
  std::string negation = {};         // boolean: the flag that sets it false ("--no-filter-groups")
  bool required = false;
  bool show_default = true;          // --help (and the docs) show the default value
  std::string doc = {};              // the docs' table says this instead of help: more than --help has room for
  // The run file's bounds where they guard more tightly than the tool's (a typo guard: a
  // learning rate above 10); else `bounds`.
  std::optional<Bounds> run_file_bounds = {};

  // The long flag ("--output" of "-o,--output"); a positional's name.
  std::string name() const;
};

// One entry: the spec and how it binds to a field of Opts.
template <typename Opts>
struct SchemaEntry {
  OptionSpec spec;
  std::function<CLI::Option*(CLI::App&, Opts&)> bind;
  // The default the docs show where --help shows none: a flag's ("on" or "off"), one made
  // from a mode's preset; null for the others (the docs show --help's).
  std::function<std::string(Opts&)> docs_default = {};
  // The field as a JSON value, and set from one already checked (read_keyed; the record of
  // the settings a run used). `field` makes both for numbers, flags, text and lists of
  // numbers; null where an entry bound by hand has none.
  std::function<json(Opts&)> get = {};
  std::function<void(Opts&, const json&)> set = {};
};
template <typename Opts>
using OptionSchema = std::vector<SchemaEntry<Opts>>;

// The checks and defaults the spec asks for, on an option already added.
CLI::Option* decorate(CLI::Option* opt, const OptionSpec& spec);

// The field types a JSON value reads into as it is: numbers, flags, text, lists of numbers.
template <typename T>
inline constexpr bool kJsonField = std::is_arithmetic_v<T> || std::is_same_v<T, std::string> ||
                                   std::is_same_v<T, std::vector<double>> || std::is_same_v<T, std::vector<int>>;

// The field `get` selects (a member pointer, or a function Opts& -> T&), bound by its type:
// a bool is a flag (with spec.negation its off switch), anything else a value option.
template <typename Opts, typename Get>
SchemaEntry<Opts> field(Get get, OptionSpec spec) {
  using T = std::remove_reference_t<std::invoke_result_t<Get, Opts&>>;
  SchemaEntry<Opts> e{std::move(spec), {}};
  if constexpr (kJsonField<T>) {
    e.get = [get](Opts& o) { return json(std::invoke(get, o)); };
    e.set = [get](Opts& o, const json& v) { std::invoke(get, o) = v.get<T>(); };
  }
  e.bind = [get, s = e.spec](CLI::App& app, Opts& o) -> CLI::Option* {
    auto& target = std::invoke(get, o);
    if constexpr (std::is_same_v<T, bool>) {
      return decorate(app.add_flag(s.negation.empty() ? s.flag : s.flag + ",!" + s.negation, target, s.help), s);
    } else {
      return decorate(app.add_option(s.flag, target, s.help), s);
    }
  };
  if constexpr (std::is_same_v<T, bool>) {
    e.docs_default = [get](Opts& o) { return std::string(std::invoke(get, o) ? "on" : "off"); };
  }
  return e;
}

// An option bound by hand (a callback, a help text made from the options' presets, a shared
// helper as backend::add_device_option): `add` adds it, given the spec.
template <typename Opts>
SchemaEntry<Opts> custom(std::function<CLI::Option*(CLI::App&, Opts&, const OptionSpec&)> add, OptionSpec spec,
                         std::function<std::string(Opts&)> docs_default = {}) {
  SchemaEntry<Opts> e{std::move(spec), {}, std::move(docs_default)};
  e.bind = [add = std::move(add), s = e.spec](CLI::App& app, Opts& o) { return add(app, o, s); };
  return e;
}

// Another schema's entries, bound to the part of Opts that `get` selects (braid-train's
// common options inside each mode's).
template <typename Opts, typename Part, typename Get>
OptionSchema<Opts> nested(const OptionSchema<Part>& part, Get get) {
  OptionSchema<Opts> out;
  for (const auto& entry : part) {
    SchemaEntry<Opts> e{entry.spec, [get, b = entry.bind](CLI::App& app, Opts& o) { return b(app, std::invoke(get, o)); }};
    if (entry.docs_default) e.docs_default = [get, f = entry.docs_default](Opts& o) { return f(std::invoke(get, o)); };
    if (entry.get) e.get = [get, f = entry.get](Opts& o) { return f(std::invoke(get, o)); };
    if (entry.set) e.set = [get, f = entry.set](Opts& o, const json& v) { f(std::invoke(get, o), v); };
    out.push_back(std::move(e));
  }
  return out;
}

// The entries with a flag (a key alone is no command-line option).
template <typename Opts>
void add_schema_options(CLI::App& app, Opts& o, const OptionSchema<Opts>& schema) {
  for (const auto& entry : schema) {
    if (!entry.spec.flag.empty()) entry.bind(app, o);
  }
}

// The specs alone, for the run file's checks and the docs.
template <typename Opts>
std::vector<OptionSpec> specs_of(const OptionSchema<Opts>& schema) {
  std::vector<OptionSpec> out;
  for (const auto& entry : schema) out.push_back(entry.spec);
  return out;
}

// obj[spec.key] checked by the spec's type, the bounds b and its choices, as JSON of that
// type (an integer, a number, a bool, text, a list of numbers or integers: one number is a
// list of one); nullopt, with the problem in c naming where.key, when it is not.
std::optional<json> checked_setting(Checker& c, const json& obj, std::string_view where, const OptionSpec& spec,
                                    const Bounds& b);

// Sets the fields of o that obj (a JSON object of key: value) names by the schema's keys,
// each value checked by checked_setting (the spec's own bounds; with run_file, the run
// file's); a key no entry has is a problem too (with the nearest key named). Every problem
// goes to c; the fields read without one are set.
template <typename Opts>
void read_keyed(Checker& c, const json& obj, std::string_view where, const OptionSchema<Opts>& schema, Opts& o,
                bool run_file = false) {
  std::vector<std::string> keys;
  for (const auto& entry : schema) {
    if (!entry.spec.key.empty() && entry.set) keys.push_back(entry.spec.key);
  }
  c.no_unknown_keys(obj, where, keys);
  for (const auto& entry : schema) {
    if (entry.spec.key.empty() || !entry.set || !obj.contains(entry.spec.key)) continue;
    const Bounds& b = run_file ? entry.spec.run_file_bounds.value_or(entry.spec.bounds) : entry.spec.bounds;
    if (auto v = checked_setting(c, obj, where, entry.spec, b)) entry.set(o, *v);
  }
}

// A setting as its flag takes it: text as it is, a number the shortest way ("0.5", "16"),
// a list joined by commas.
std::string flag_value(const json& v);

// The command line that gives the tool the keyed fields of o (the settings a run file
// made): `flag value` each, a boolean as its flag (true) or its negation (false); an
// unset value, empty text or an empty list left out.
template <typename Opts>
std::vector<std::string> keyed_argv(const OptionSchema<Opts>& schema, Opts& o) {
  std::vector<std::string> argv;
  for (const auto& entry : schema) {
    if (entry.spec.key.empty() || entry.spec.flag.empty() || !entry.get) continue;
    const json v = entry.get(o);
    if (v.is_null() || ((v.is_string() || v.is_array()) && v.empty())) continue;
    if (v.is_boolean()) {
      if (v.get<bool>() || !entry.spec.negation.empty()) argv.push_back(v.get<bool>() ? entry.spec.name() : entry.spec.negation);
      continue;
    }
    argv.push_back(entry.spec.name());
    argv.push_back(flag_value(v));
  }
  return argv;
}

// Every keyed field of o by its key, in the schema's order (the record of a run's settings).
template <typename Opts>
ordered_json keyed_values(const OptionSchema<Opts>& schema, Opts& o) {
  ordered_json out = ordered_json::object();
  for (const auto& entry : schema) {
    if (!entry.spec.key.empty() && entry.get) out[entry.spec.key] = ordered_json::parse(entry.get(o).dump());
  }
  return out;
}

}  // namespace braid::cli
