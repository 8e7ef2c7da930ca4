// The option audit's run-file half: every key of the run file's stage sections (the ones
// the option schemas give a key) reaches its stage tool as the flag the schema names, and
// that tool's command line takes the flag and its value. A key whose flag a tool does not
// have (as train.sequence_ratio false once became --no-sequence-ratio) fails here.
#define BOOST_TEST_MODULE audit_run_file_keys
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/cli.hpp"
#include "core/error.hpp"
#include "driver/layout.hpp"
#include "driver/plan.hpp"
#include "driver/run_file.hpp"
#include "eval/option_schema.hpp"
#include "generate/option_schema.hpp"
#include "score/options.hpp"
#include "tests/driver/run_files.hpp"
#include "train/option_schema.hpp"

namespace braid::driver {
namespace {

namespace fs = std::filesystem;
using cli::OptionSpec;
using cli::OptionType;

// A value within the spec's bounds or choices, as JSON; a boolean is tried both ways.
std::vector<json> values_for(const OptionSpec& s) {
  if (s.key == "clip_high") return {json(0.5)};   // at least every preset's lower ε
  const double lo = s.bounds.min.value_or(0);
  const double hi = std::min(s.bounds.max.value_or(lo + 8), lo + 8);
  switch (s.type) {
    case OptionType::integer: return {json(static_cast<std::int64_t>(lo) + 1)};
    case OptionType::number: return {json(lo + (hi - lo) / 100)};   // small: a clip_low stays below clip_high
    case OptionType::choice: return {json(s.choices.back())};
    case OptionType::boolean: return {json(true), json(false)};
    default: return {json("x")};
  }
}

std::string run_json(const std::string& algorithm, const std::string& section, const std::string& key, const json& v) {
  json doc = json::parse(R"({"format": "braid.run", "version": 1, "prompts": "prompts.jsonl", "iterations": 2,
                            "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": "digits"}}})");
  doc["algorithm"] = algorithm;
  if (algorithm == "ppo") doc["models"]["critic"] = {{"init", {{"config", "models/config.json"}}}};
  doc[section][key] = v;
  if (key == "min_lr") doc[section]["lr_schedule"] = "cosine";   // a floor needs a decay
  return doc.dump();
}

// The tool's command line with `flag value` added parses (CLI11 refuses an unknown flag
// or a value out of the schema's bounds or choices).
void parses(const std::string& section, const std::string& algorithm, const std::string& flag, const std::string& value) {
  std::vector<std::string> words;
  CLI::App app;
  std::string shards_word;
  std::vector<std::string> shards;
  gen::StageOptions g;
  score::CommandOptions s;
  train::TrainCommandLine t;
  if (section == "generate") {
    cli::add_schema_options(app, g, gen::generate_schema());
    words = {"--actor", "a.h5", "--prompts", "p.jsonl", "-o", "out"};
  } else if (section == "score") {
    app.add_option("shards", shards);
    score::add_score_options(app, s);
    words = {"x.h5", "-o", "out", "--algorithm", algorithm};
  } else {
    train::add_train_commands(app, t);
    words = {algorithm, "x.h5", "--actor", "a.h5", "--actor-out", "b.h5"};
    if (algorithm == "ppo") words.insert(words.end(), {"--critic", "c.h5", "--critic-out", "d.h5"});
  }
  words.push_back(flag);
  if (!value.empty()) words.push_back(value);
  std::reverse(words.begin(), words.end());   // CLI11 parses a reversed vector
  BOOST_TEST_CONTEXT(fmt::format("{} {} {}", section, flag, value)) {
    BOOST_CHECK_NO_THROW(app.parse(words));
  }
}

void check_section(const std::string& section, const std::vector<OptionSpec>& specs) {
  int checked = 0;
  for (const auto& spec : specs) {
    if (spec.key.empty()) continue;
    for (const auto& v : values_for(spec)) {
      bool reached = false;
      for (const std::string algorithm : {"ppo", "grpo", "dapo"}) {
        const auto run = test::run_folder("keys_" + section + "_" + spec.key, run_json(algorithm, section, spec.key, v));
        RunSpec rs;
        try {
          rs = load_run_file(run);
        } catch (const InputError&) {
          continue;   // not a key of this algorithm (critic_lr without ppo, norm_by_std under ppo, ...)
        }
        const ToolFlags& flags = section == "generate" ? rs.generate : section == "score" ? rs.score : rs.train;
        const std::string want = v.is_boolean() && !v.get<bool>() ? spec.negation : spec.name();
        const auto it = std::find_if(flags.begin(), flags.end(), [&](const auto& f) { return f.first == want; });
        BOOST_TEST_CONTEXT(fmt::format("{}.{} = {} under {}", section, spec.key, v.dump(), algorithm)) {
          BOOST_TEST_REQUIRE((it != flags.end()));
          const std::string given = v.is_string() ? v.get<std::string>() : v.dump();
          if (!v.is_boolean()) BOOST_TEST(cli::canonical_value(it->second) == cli::canonical_value(given));
        }
        parses(section, algorithm, it->first, it->second);
        reached = true;
        break;
      }
      BOOST_TEST_CONTEXT(fmt::format("{}.{} = {}", section, spec.key, v.dump())) { BOOST_TEST(reached); }
      ++checked;
    }
  }
  BOOST_TEST(checked > 5);
}

BOOST_AUTO_TEST_CASE(every_generate_key_reaches_braid_generate) {
  check_section("generate", cli::specs_of(gen::generate_schema()));
}

BOOST_AUTO_TEST_CASE(every_score_key_reaches_braid_score) {
  check_section("score", cli::specs_of(score::score_schema()));
}

BOOST_AUTO_TEST_CASE(every_train_key_reaches_braid_train) {
  check_section("train", cli::specs_of(train::rl_schema(true)));
}

// Every key of the "eval" section but `every` (which iterations evaluate: test_run_file's
// evaluated_iterations) reaches braid eval's command line as the flag braid eval's schema
// names, with its value, and braid eval takes the command line.
BOOST_AUTO_TEST_CASE(every_eval_key_reaches_braid_eval) {
  int checked = 0;
  for (const auto& entry : eval_section_schema()) {
    const OptionSpec& s = entry.spec;
    if (s.flag.empty()) continue;
    const json v = s.key == "k"                    ? json::array({1})
                   : s.key == "command"            ? json("python3 s.py")
                   : s.key == "rule" || s.key == "by" ? json("digits")
                   : s.type == OptionType::path    ? json("prompts.jsonl")
                                                   : values_for(s).front();
    json doc = json::parse(run_json("grpo", "eval", s.key, v));
    if (s.key != "prompts") doc["eval"]["prompts"] = "prompts.jsonl";
    if (s.key == "timeout") doc["eval"]["command"] = "python3 s.py";
    const auto run = test::run_folder("eval_key_" + s.key, doc.dump());
    BOOST_TEST_CONTEXT(fmt::format("eval.{} = {}", s.key, v.dump())) {
      const RunSpec rs = load_run_file(run);
      const auto argv = eval_step(rs, Layout(run.parent_path() / "out"), {}, 1).pipeline.front().argv;
      const auto it = std::find(argv.begin(), argv.end(), s.name());
      BOOST_TEST_REQUIRE((it != argv.end() && it + 1 != argv.end()));
      const std::string want = s.key == "prompts" ? (run.parent_path() / "prompts.jsonl").string() : cli::flag_value(v);
      BOOST_TEST(cli::canonical_value(*(it + 1)) == cli::canonical_value(want));
      CLI::App app;
      eval::EvalOptions o;
      cli::add_schema_options(app, o, eval::eval_schema());
      std::vector<std::string> words(argv.rbegin(), argv.rend() - 2);   // reversed, past "braid eval"
      BOOST_CHECK_NO_THROW(app.parse(words));
    }
    ++checked;
  }
  BOOST_TEST(checked == 9);
}

// A key set where its tool would not read it is refused in the run file, naming it.
BOOST_AUTO_TEST_CASE(keys_that_cannot_act_are_refused) {
  for (const auto& [algorithm, section, key, v] :
       {std::tuple{"grpo", "score", "lambda", json(0.9)}, std::tuple{"grpo", "score", "gamma", json(0.9)},
        std::tuple{"grpo", "score", "overlong_penalty", json(2)}, std::tuple{"grpo", "train", "min_lr", json(0)},
        std::tuple{"grpo", "score", "kl_estimator", json("k3")}, std::tuple{"ppo", "generate", "top_p", json(0.9)},
        std::tuple{"ppo", "generate", "top_k", json(5)}}) {
    json doc = json::parse(run_json(algorithm, section, key, v));
    if (std::string(key) == "min_lr") doc["train"].erase("lr_schedule");
    if (std::string(section) == "generate") doc["generate"]["temperature"] = 0;   // greedy: nothing drawn to shape
    const auto run = test::run_folder(std::string("refused_") + key, doc.dump());
    const std::string field = fmt::format("{}.{}", section, key);
    BOOST_TEST_CONTEXT(field) {
      try {
        load_run_file(run);
        BOOST_TEST(false, "accepted");
      } catch (const InputError& e) {
        BOOST_TEST(std::string(e.what()).find(field) != std::string::npos, e.what());
      }
    }
  }
}

}  // namespace
}  // namespace braid::driver
