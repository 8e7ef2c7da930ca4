// The Makefile braid makefile writes: one rule per step on real files, each step
// depending on exactly what it reads, the generate | score pipe in one recipe.
#define BOOST_TEST_MODULE driver_makefile
#include <boost/test/unit_test.hpp>

#include <sstream>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "driver/makefile.hpp"
#include "tests/driver/run_files.hpp"

using namespace braid;
using namespace braid::driver;
namespace fs = std::filesystem;

namespace {

struct Rule {
  std::string targets, prerequisites;
  std::vector<std::string> recipe;
};

// The rules of a Makefile text: "targets: prerequisites" (or "&:") and the tab-indented lines below.
std::vector<Rule> parse_rules(const std::string& text) {
  std::vector<Rule> rules;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == '.') continue;
    if (line[0] == '\t') {
      if (!rules.empty()) rules.back().recipe.push_back(line.substr(1));
      continue;
    }
    const auto grouped = line.find(" &: ");
    const auto colon = grouped != std::string::npos ? grouped : line.find(": ");
    if (colon == std::string::npos || line.find(":=") != std::string::npos || line.find("?=") != std::string::npos) {
      continue;
    }
    const std::size_t sep = grouped != std::string::npos ? 4 : 2;
    std::string targets = line.substr(0, colon);
    while (!targets.empty() && targets.back() == ' ') targets.pop_back();
    rules.push_back({targets, line.substr(colon + sep), {}});
  }
  return rules;
}

const Rule& rule_for(const std::vector<Rule>& rules, const std::string& targets) {
  for (const auto& r : rules) {
    if (r.targets == targets) return r;
  }
  BOOST_FAIL("no rule for " + targets);
  return rules.front();
}

std::string makefile_for(const fs::path& run, const std::string& out) {
  const RunSpec spec = load_run_file(run);
  const Tools tools{.braid = "/opt/b/braid", .generate = "/opt/b/braid-generate", .score = "/opt/b/braid-score",
                    .train = "/opt/b/braid-train", .mpirun = "mpirun"};
  return makefile_text(spec, Layout(out), {.tools = tools, .command_line = "braid makefile"});
}

// Where a recipe's command starts: after the folder lock.
constexpr std::size_t kLocked = std::string_view("$(BRAID_LOCK) ").size();

}  // namespace

BOOST_AUTO_TEST_CASE(rules_and_dependencies_of_a_ppo_run) {
  const fs::path run = test::run_folder("mk_ppo", test::kGoodPpoRun);
  const std::string d = run.parent_path().string();
  const std::string text = makefile_for(run, "out");
  // The pipe must fail when its first command does.
  BOOST_TEST(text.find("SHELL := /bin/bash\n.SHELLFLAGS := -o pipefail -ec\n") != std::string::npos);
  BOOST_TEST(text.find("BRAID_GENERATE ?= /opt/b/braid-generate\n") != std::string::npos);
  // Every recipe but the last (braid run, which works under its make) claims the run folder for its make.
  BOOST_TEST(text.find("BRAID_LOCK = exec 9>>out/.braid-run.lock && $(BRAID) run-lock out --owner $$PPID --fd 9 &&\n") !=
             std::string::npos);

  const auto rules = parse_rules(text);
  BOOST_TEST(rules.size() == 8u);  // all, 2 inits, 2 x (rollout, train), metrics
  BOOST_TEST(rule_for(rules, "all").prerequisites == "out/metrics.jsonl");

  const Rule& actor0 = rule_for(rules, "out/iter-0000/actor.h5");
  BOOST_TEST(actor0.prerequisites == d + "/models/config.json");
  BOOST_TEST(actor0.recipe.back() == "$(BRAID_LOCK) $(BRAID) init --config " + d + "/models/config.json --seed 1 -o out/iter-0000/actor.h5 >/dev/null");
  const Rule& critic0 = rule_for(rules, "out/iter-0000/critic.h5");
  BOOST_TEST(critic0.recipe.back().find("--value-head --no-lm-head") != std::string::npos);

  // Iteration 1 samples with the start actor; the reference model is that same start.
  const Rule& roll1 = rule_for(rules, "out/iter-0001/generate.stats.json out/iter-0001/score.stats.json");
  BOOST_TEST(roll1.prerequisites ==
             "out/iter-0000/actor.h5 " + d + "/prompts.jsonl out/iter-0000/critic.h5");
  const std::string pipe = roll1.recipe.back();
  BOOST_TEST(pipe.find("$(BRAID_GENERATE) --actor out/iter-0000/actor.h5 --prompts " + d +
                       "/prompts.jsonl -o out/iter-0001/samples --tokenizer byte --seed 70001 --stats "
                       "out/iter-0001/generate.stats.json --samples-per-prompt 4 --max-new-tokens 16 "
                       "--temperature 0.9 --threads 2 | $(BRAID_SCORE) - -o out/iter-0001/scored") == kLocked);
  BOOST_TEST(pipe.find("--ref out/iter-0000/actor.h5 --critic out/iter-0000/critic.h5 --reward-rule digits "
                       "--kl-coef 0.02 --threads 2 >/dev/null") != std::string::npos);
  // Samples made from an older actor are removed before the pipe runs again.
  BOOST_TEST(roll1.recipe[1].find("rm -rf out/iter-0001/samples out/iter-0001/scored") != std::string::npos);

  const Rule& train1 = rule_for(rules, "out/iter-0001/actor.h5 out/iter-0001/critic.h5");
  BOOST_TEST(train1.prerequisites == "out/iter-0001/score.stats.json out/iter-0000/actor.h5 out/iter-0000/critic.h5");
  BOOST_TEST(train1.recipe.back().find("$(BRAID_TRAIN) ppo out/iter-0001/scored/scored-*.h5 --actor "
                                       "out/iter-0000/actor.h5 --actor-out out/iter-0001/actor.h5 --critic "
                                       "out/iter-0000/critic.h5 --critic-out out/iter-0001/critic.h5 --seed 70001") ==
             kLocked);

  // Iteration 2 starts from iteration 1's checkpoints; the reference stays the start.
  const Rule& roll2 = rule_for(rules, "out/iter-0002/generate.stats.json out/iter-0002/score.stats.json");
  BOOST_TEST(roll2.prerequisites ==
             "out/iter-0001/actor.h5 " + d + "/prompts.jsonl out/iter-0000/actor.h5 out/iter-0001/critic.h5");
  const Rule& train2 = rule_for(rules, "out/iter-0002/actor.h5 out/iter-0002/critic.h5");
  BOOST_TEST(train2.prerequisites == "out/iter-0002/score.stats.json out/iter-0001/actor.h5 out/iter-0001/critic.h5");

  const Rule& metrics = rule_for(rules, "out/metrics.jsonl");
  BOOST_TEST(metrics.prerequisites == "out/iter-0002/actor.h5 out/iter-0002/critic.h5");
  BOOST_TEST(metrics.recipe.back() == "$(BRAID) run " + run.string() + " -o out --iterations 2");
}

// The run file's device reaches every stage tool, as --device.
BOOST_AUTO_TEST_CASE(device_goes_to_every_stage_tool) {
  std::string run_json = test::kGoodPpoRun;
  run_json.replace(run_json.find("\"threads\": 2,"), 13, "\"threads\": 2, \"device\": \"cuda:1\",");
  const fs::path run = test::run_folder("mk_device", run_json);
  const auto rules = parse_rules(makefile_for(run, "out"));
  const std::string pipe = rule_for(rules, "out/iter-0001/generate.stats.json out/iter-0001/score.stats.json").recipe.back();
  BOOST_TEST(pipe.find("--threads 2 --device cuda:1 | $(BRAID_SCORE)") != std::string::npos);
  BOOST_TEST(pipe.find("--kl-coef 0.02 --threads 2 --device cuda:1 >/dev/null") != std::string::npos);
  const std::string train = rule_for(rules, "out/iter-0001/actor.h5 out/iter-0001/critic.h5").recipe.back();
  BOOST_TEST(train.find("--device cuda:1") != std::string::npos);
  // Models are initialised by braid init, which has no device.
  BOOST_TEST(rule_for(rules, "out/iter-0000/actor.h5").recipe.back().find("--device") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(shell_words_are_quoted_and_dollars_doubled) {
  const fs::path run = test::run_folder("mk_quote", R"({"format": "braid.run", "version": 1, "algorithm": "grpo",
    "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": "regex:^[0-9]+ $"}},
    "prompts": "prompts.jsonl", "iterations": 1})");
  const std::string text = makefile_for(run, "out");
  BOOST_TEST(text.find("--reward-rule 'regex:^[0-9]+ $$'") != std::string::npos);
  // GRPO: no critic anywhere.
  BOOST_TEST(text.find("critic") == std::string::npos);
  BOOST_TEST(text.find("\nout/iter-0001/actor.h5: out/iter-0001/score.stats.json out/iter-0000/actor.h5\n") !=
             std::string::npos);
}

// An external scorer reaches braid-score with the run file's folder as its working directory.
BOOST_AUTO_TEST_CASE(a_scorer_command_reaches_braid_score) {
  const fs::path run = test::run_folder("mk_command", R"({"format": "braid.run", "version": 1, "algorithm": "grpo",
    "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"command": "python3 s.py", "timeout": 9}},
    "prompts": "prompts.jsonl", "iterations": 1})");
  const std::string text = makefile_for(run, "out");
  BOOST_TEST(text.find("--reward-cmd 'python3 s.py' --reward-cmd-dir " + run.parent_path().string() +
                       " --reward-cmd-timeout 9") != std::string::npos);
  BOOST_TEST(text.find("--reward-rule") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(names_make_cannot_hold_are_refused) {
  const fs::path run = test::run_folder("mk_space", test::kGoodPpoRun);
  try {
    makefile_for(run, "my out");
    BOOST_FAIL("a folder with a space was accepted");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("my out/metrics.jsonl: cannot be named in a Makefile") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(a_fused_pipeline_writes_stage_files) {
  const fs::path run = test::scheduled_run_folder("mk_schedule", 2, R"({"devices": 2,
      "models": [{"name": "actor", "stages": 2}, {"name": "critic", "stages": 1, "replicas": 2}]})");
  const auto rules = parse_rules(makefile_for(run, "out"));
  // Each model's files as the pipeline writes them; the tools are given the checkpoint's stem.
  const Rule& train1 = rule_for(rules, "out/iter-0001/actor.stage0-of-2.h5 out/iter-0001/actor.stage1-of-2.h5 "
                                       "out/iter-0001/critic.h5");
  BOOST_TEST(train1.recipe.back().find("$(MPIRUN) -np 2 $(BRAID_TRAIN) ppo out/iter-0001/scored/scored-*.h5 --actor "
                                       "out/iter-0000/actor.h5 --actor-out out/iter-0001/actor.h5 ") == kLocked);
  BOOST_TEST(train1.recipe.back().find("--schedule " + run.parent_path().string() + "/schedule.json") !=
             std::string::npos);
  const Rule& roll2 = rule_for(rules, "out/iter-0002/generate.stats.json out/iter-0002/score.stats.json");
  BOOST_TEST(roll2.prerequisites.find("out/iter-0001/actor.stage0-of-2.h5 out/iter-0001/actor.stage1-of-2.h5 ") == 0);
  BOOST_TEST(rule_for(rules, "out/metrics.jsonl").prerequisites ==
             "out/iter-0002/actor.stage0-of-2.h5 out/iter-0002/actor.stage1-of-2.h5 out/iter-0002/critic.h5");
}

// "dtype" is passed as --dtype to every stage tool; without it, no tool is given one.
BOOST_AUTO_TEST_CASE(the_run_files_dtype_reaches_every_stage_tool) {
  std::string with = test::kGoodPpoRun;
  const std::string key = R"("threads": 2,)";
  BOOST_TEST_REQUIRE(with.find(key) != std::string::npos);
  with.replace(with.find(key), key.size(), key + R"( "dtype": "bf16",)");
  const auto rules = parse_rules(makefile_for(test::run_folder("mk_dtype", with), "out"));
  const std::string pipe = rule_for(rules, "out/iter-0001/generate.stats.json out/iter-0001/score.stats.json").recipe.back();
  const auto bar = pipe.find(" | ");
  BOOST_TEST(pipe.substr(0, bar).find("--threads 2 --dtype bf16") != std::string::npos);   // braid-generate
  BOOST_TEST(pipe.substr(bar).find("--threads 2 --dtype bf16") != std::string::npos);      // braid-score
  BOOST_TEST(rule_for(rules, "out/iter-0001/actor.h5 out/iter-0001/critic.h5").recipe.back().find("--dtype bf16") !=
             std::string::npos);
  const auto plain = parse_rules(makefile_for(test::run_folder("mk_no_dtype", test::kGoodPpoRun), "out"));
  for (const Rule& r : plain)
    for (const auto& line : r.recipe) BOOST_TEST(line.find("--dtype") == std::string::npos);
}

// generate.ranks > 1: the rollout under mpirun (the run file's mpirun options before -np),
// fused by default: one command, braid-score's options after "--"; with fuse off, a pipe.
BOOST_AUTO_TEST_CASE(a_rollout_on_ranks_runs_under_mpirun_fused) {
  std::string text = test::kGoodPpoRun;
  const std::string key = R"("generate": {)";
  BOOST_TEST_REQUIRE(text.find(key) != std::string::npos);
  text.replace(text.find(key), key.size(),
               R"("mpirun": {"options": ["--oversubscribe"]}, "generate": {"ranks": 2, "migrate_threshold": 0.25, "migrate_to": 1, )");
  const auto rules = parse_rules(makefile_for(test::run_folder("mk_ranks", text), "out"));
  const std::string roll = rule_for(rules, "out/iter-0001/generate.stats.json out/iter-0001/score.stats.json").recipe.back();
  BOOST_TEST(roll.find("$(MPIRUN) --oversubscribe -np 2 $(BRAID_GENERATE) --actor out/iter-0000/actor.h5 ") == kLocked);
  BOOST_TEST(roll.find("--migrate-threshold 0.25 --migrate-to 1 --threads 2 -- -o out/iter-0001/scored ") !=
             std::string::npos);
  BOOST_TEST(roll.find(" | ") == std::string::npos);
  BOOST_TEST(roll.find("BRAID_SCORE") == std::string::npos);
  BOOST_TEST(roll.find("--critic out/iter-0000/critic.h5 --reward-rule digits --kl-coef 0.02 --threads 2") !=
             std::string::npos);

  const std::string key2 = R"("migrate_to": 1, )";
  text.replace(text.find(key2), key2.size(), key2 + R"("fuse": false, )");
  const auto piped = parse_rules(makefile_for(test::run_folder("mk_ranks_pipe", text), "out"));
  const std::string pipe = rule_for(piped, "out/iter-0001/generate.stats.json out/iter-0001/score.stats.json").recipe.back();
  BOOST_TEST(pipe.find("$(MPIRUN) --oversubscribe -np 2 $(BRAID_GENERATE) ") == kLocked);
  BOOST_TEST(pipe.find(" | $(BRAID_SCORE) - -o out/iter-0001/scored ") != std::string::npos);
  BOOST_TEST(pipe.find(" -- ") == std::string::npos);
}

// Async: iteration i's rollout reads the actor (and critic) of i-2, so that make -j2 runs
// it beside iteration i-1's training; training bounds the staleness at one step.
BOOST_AUTO_TEST_CASE(async_rollouts_read_the_actor_one_step_older) {
  std::string run_json = test::kGoodPpoRun;
  run_json.replace(run_json.find("\"iterations\": 2"), 15, "\"iterations\": 3, \"async\": true");
  const fs::path run = test::run_folder("mk_async", run_json);
  const std::string d = run.parent_path().string();
  const auto rules = parse_rules(makefile_for(run, "out"));
  const Rule& roll2 = rule_for(rules, "out/iter-0002/generate.stats.json out/iter-0002/score.stats.json");
  BOOST_TEST(roll2.prerequisites ==
             "out/iter-0000/actor.h5 " + d + "/prompts.jsonl out/iter-0000/critic.h5");
  BOOST_TEST(roll2.recipe.back().find("--actor out/iter-0000/actor.h5 ") != std::string::npos);
  BOOST_TEST(roll2.recipe.back().find("--critic out/iter-0000/critic.h5 ") != std::string::npos);
  const Rule& roll3 = rule_for(rules, "out/iter-0003/generate.stats.json out/iter-0003/score.stats.json");
  BOOST_TEST(roll3.prerequisites.find("out/iter-0001/actor.h5 ") == 0u);
  // Training still starts from the previous iteration's actor and refuses staler samples.
  const Rule& train2 = rule_for(rules, "out/iter-0002/actor.h5 out/iter-0002/critic.h5");
  BOOST_TEST(train2.prerequisites == "out/iter-0002/score.stats.json out/iter-0001/actor.h5 out/iter-0001/critic.h5");
  BOOST_TEST(train2.recipe.back().find("--actor out/iter-0001/actor.h5 ") != std::string::npos);
  BOOST_TEST(train2.recipe.back().find("--max-staleness 1") != std::string::npos);
}

// Overcommit: one seed for the run, each rollout resumes the previous one's deferred file
// and writes its own, and is made again whole (never continued from a partial attempt).
BOOST_AUTO_TEST_CASE(overcommit_chains_the_deferred_files) {
  std::string run_json = test::kGoodPpoRun;
  run_json.replace(run_json.find("\"samples_per_prompt\": 4"), 23, "\"samples_per_prompt\": 4, \"overcommit\": 2");
  const fs::path run = test::run_folder("mk_overcommit", run_json);
  const auto rules = parse_rules(makefile_for(run, "out"));
  const std::string roll1_targets =
      "out/iter-0001/generate.stats.json out/iter-0001/score.stats.json out/iter-0001/deferred.h5";
  const Rule& roll1 = rule_for(rules, roll1_targets);
  BOOST_TEST(roll1.recipe.back().find("--seed 70000 ") != std::string::npos);
  BOOST_TEST(roll1.recipe.back().find("--overcommit 2 --deferred-out out/iter-0001/deferred.h5 ") != std::string::npos);
  BOOST_TEST(roll1.recipe.back().find("--resume-deferred") == std::string::npos);
  BOOST_TEST(roll1.recipe[1].find("rm -rf out/iter-0001/samples out/iter-0001/scored") != std::string::npos);
  BOOST_TEST(roll1.recipe[1].find(" -ot ") == std::string::npos);
  const Rule& roll2 = rule_for(rules, "out/iter-0002/generate.stats.json out/iter-0002/score.stats.json "
                                      "out/iter-0002/deferred.h5");
  BOOST_TEST(roll2.prerequisites.find("out/iter-0001/deferred.h5") != std::string::npos);
  BOOST_TEST(roll2.recipe.back().find("--seed 70000 ") != std::string::npos);
  BOOST_TEST(roll2.recipe.back().find("--resume-deferred out/iter-0001/deferred.h5") != std::string::npos);
}
