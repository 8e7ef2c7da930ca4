// The run file: a good one gives the settings and paths the stage tools get; a
// bad one is refused with every problem named by its field.
#define BOOST_TEST_MODULE driver_run_file
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "driver/plan.hpp"
#include "driver/prediction.hpp"
#include "plan/analytic_profile.hpp"
#include "driver/run_file.hpp"
#include "driver/step_identity.hpp"
#include "io/fingerprint.hpp"
#include "tests/common/input_error.hpp"
#include "tests/driver/run_files.hpp"

using namespace braid;
using namespace braid::driver;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> problems_of(const fs::path& run) {
  return test::problems_of([&] { load_run_file(run); }, run.string());
}

// The problem about `field` (it starts with the field's path), or "".
std::string problem_at(const std::vector<std::string>& problems, const std::string& field) {
  for (const auto& p : problems) {
    if (p.rfind(field + ":", 0) == 0) return p;
  }
  return "";
}

std::string flag(const ToolFlags& flags, const std::string& name) {
  for (const auto& [f, v] : flags) {
    if (f == name) return v;
  }
  return "<absent>";
}

}  // namespace

BOOST_AUTO_TEST_CASE(good_ppo_run_file) {
  const fs::path run = test::run_folder("good_ppo", test::kGoodPpoRun);
  const RunSpec spec = load_run_file(run);
  BOOST_TEST(spec.algorithm == "ppo");
  BOOST_TEST(spec.iterations == 2);
  BOOST_TEST(spec.seed == 7u);
  BOOST_TEST(spec.threads.value_or(0) == 2);
  BOOST_TEST(!spec.device.has_value());  // the tools' default, cpu
  BOOST_TEST(spec.tokenizer == "byte");
  // Paths are the run file's folder's.
  BOOST_TEST(spec.prompts == (run.parent_path() / "prompts.jsonl").lexically_normal());
  BOOST_TEST((spec.actor.kind == ModelSource::Kind::init));
  BOOST_TEST(spec.actor.path == (run.parent_path() / "models/config.json").lexically_normal());
  BOOST_TEST(spec.actor.seed == 1u);
  BOOST_TEST(spec.critic.seed == 2u);
  BOOST_TEST((spec.ref.kind == ModelSource::Kind::initial_actor));
  BOOST_TEST((spec.reward.kind == ModelSource::Kind::rule));
  BOOST_TEST(spec.reward.rule == "digits");
  // Only what the file sets reaches the tools, under the tools' flag names.
  BOOST_TEST(spec.generate.size() == 3u);
  BOOST_TEST(flag(spec.generate, "--samples-per-prompt") == "4");
  BOOST_TEST(flag(spec.generate, "--max-new-tokens") == "16");
  BOOST_TEST(flag(spec.generate, "--temperature") == "0.9");
  BOOST_TEST(flag(spec.generate, "--top-p") == "<absent>");
  BOOST_TEST(flag(spec.score, "--kl-coef") == "0.02");
  BOOST_TEST(flag(spec.train, "--lr") == "0.001");
  BOOST_TEST(flag(spec.train, "--critic-lr") == "0.002");
  BOOST_TEST(flag(spec.train, "--epochs") == "2");
  BOOST_TEST(!spec.schedule.has_value());
}

BOOST_AUTO_TEST_CASE(checkpoints_and_grpo) {
  const fs::path run = test::run_folder("grpo", R"({
    "format": "braid.run", "version": 1, "algorithm": "grpo",
    "models": {"actor": "ckpt/policy.h5", "ref": {"checkpoint": "ckpt/policy.h5"}, "reward": "ckpt/rm.h5"},
    "prompts": "prompts.jsonl", "iterations": 3,
    "train": {"kl_coef": 0.04}
  })");
  // A checkpoint is a file, or the stage files of one split.
  test::write_file(run.parent_path() / "ckpt/policy.h5", "x");
  test::write_file(run.parent_path() / "ckpt/rm.stage0-of-2.h5", "x");
  test::write_file(run.parent_path() / "ckpt/rm.stage1-of-2.h5", "x");
  const RunSpec spec = load_run_file(run);
  BOOST_TEST(!spec.uses_critic());
  BOOST_TEST((spec.actor.kind == ModelSource::Kind::checkpoint));
  BOOST_TEST((spec.ref.kind == ModelSource::Kind::checkpoint));
  BOOST_TEST((spec.reward.kind == ModelSource::Kind::checkpoint));
  BOOST_TEST(spec.reward.path == (run.parent_path() / "ckpt/rm.h5").lexically_normal());
  BOOST_TEST(flag(spec.train, "--kl-coef") == "0.04");

  // One stage file of two missing: no checkpoint.
  fs::remove(run.parent_path() / "ckpt/rm.stage1-of-2.h5");
  const auto problems = problems_of(run);
  BOOST_TEST(problems.size() == 1u);
  BOOST_TEST(problem_at(problems, "models.reward").find("no checkpoint") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(every_bad_field_is_named) {
  const fs::path run = test::run_folder("bad", R"({
    "format": "braid.run", "version": 2,
    "algorithm": "ppo",
    "models": {
      "actor": {"init": {"config": "models/missing.json", "sede": 3}},
      "reward": {"rule": "digit"},
      "refs": "x.h5"
    },
    "prompts": "nothing.jsonl",
    "iterations": 0,
    "threads": "many",
    "device": "gpu",
    "dtype": "f16",
    "generate": {"samples_per_prompt": 0, "temprature": 1.0, "top_p": 1.5},
    "score": {"gamma": 2},
    "train": {"lr": -1, "kl_coef": -0.1, "ranks": 2},
    "evaluate": {}
  })");
  const auto problems = problems_of(run);
  for (const char* field : {"version", "models.actor.init.config", "models.actor.init.sede", "models.reward.rule",
                            "models.refs", "models.critic", "prompts", "iterations", "threads", "device", "dtype",
                            "generate.samples_per_prompt", "generate.temprature", "generate.top_p", "score.gamma",
                            "train.lr", "train.kl_coef", "train.ranks", "evaluate"}) {
    BOOST_TEST_CONTEXT(field) { BOOST_TEST(!problem_at(problems, field).empty()); }
  }
  BOOST_TEST(problems.size() == 19u);
  BOOST_TEST(problem_at(problems, "device").find("'gpu' is not a device (cpu or cuda[:N])") != std::string::npos);
  // Typos come with the key that was meant.
  BOOST_TEST(problem_at(problems, "generate.temprature").find("did you mean \"temperature\"") != std::string::npos);
  BOOST_TEST(problem_at(problems, "models.refs").find("did you mean \"ref\"") != std::string::npos);
  BOOST_TEST(problem_at(problems, "models.actor.init.sede").find("did you mean \"seed\"") != std::string::npos);
  // Every policy algorithm takes a KL term in its loss; this one is out of bounds.
  BOOST_TEST(problem_at(problems, "train.kl_coef").find(">= 0") != std::string::npos);
  BOOST_TEST(problem_at(problems, "models.critic").find("required by ppo") != std::string::npos);
}

// Values far past any useful one (1e300) are refused, naming the field and the bound.
BOOST_AUTO_TEST_CASE(huge_values_are_refused) {
  const fs::path run = test::run_folder("huge", R"({
    "format": "braid.run", "version": 1,
    "models": {"actor": {"init": {"config": "models/config.json"}},
               "critic": {"init": {"config": "models/config.json"}},
               "reward": {"rule": "digits"}},
    "prompts": "prompts.jsonl", "iterations": 1,
    "generate": {"temperature": 1e300, "max_new_tokens": 1e12},
    "score": {"kl_coef": 1e300},
    "train": {"lr": 1e300, "critic_lr": 11, "epochs": 100000}
  })");
  const auto problems = problems_of(run);
  BOOST_TEST(problems.size() == 6u);
  BOOST_TEST(problem_at(problems, "generate.temperature").find("must be <= 100") != std::string::npos);
  BOOST_TEST(problem_at(problems, "generate.max_new_tokens").find("must be <= 2147483647") != std::string::npos);
  BOOST_TEST(problem_at(problems, "score.kl_coef").find("must be <= 100") != std::string::npos);
  BOOST_TEST(problem_at(problems, "train.lr").find("is 1e+300, must be <= 10") != std::string::npos);
  BOOST_TEST(problem_at(problems, "train.critic_lr").find("must be <= 10") != std::string::npos);
  BOOST_TEST(problem_at(problems, "train.epochs").find("must be <= 1000") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(critic_under_grpo_and_bad_rules) {
  const fs::path run = test::run_folder("grpo_critic", R"({
    "format": "braid.run", "version": 1, "algorithm": "grpo",
    "models": {"actor": {"init": {"config": "models/config.json"}},
               "critic": {"init": {"config": "models/config.json"}},
               "reward": {"rule": "length:abc", "init": {"config": "models/config.json"}}},
    "prompts": "prompts.jsonl", "iterations": 1,
    "train": {"critic_lr": 0.1}
  })");
  const auto problems = problems_of(run);
  BOOST_TEST(problem_at(problems, "models.critic").find("not used by grpo") != std::string::npos);
  BOOST_TEST(problem_at(problems, "models.reward").find("exactly one of") != std::string::npos);
  BOOST_TEST(problem_at(problems, "train.critic_lr").find("unknown key") != std::string::npos);
  BOOST_TEST(problems.size() == 3u);
}

BOOST_AUTO_TEST_CASE(reward_rules) {
  for (const auto& [rule, good] : std::vector<std::pair<std::string, bool>>{
           {"digits", true}, {"chars:abc", true}, {"length:12", true}, {"regex:^[0-9]+$", true}, {"math", true},
           {"maths", false}, {"math:1", false}, {"chars:", false}, {"length:0", false}, {"length:-3", false}, {"regex:", false}, {"digit", false}}) {
    const fs::path run = test::run_folder("rule", R"({"format": "braid.run", "version": 1, "algorithm": "grpo",
      "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": )" +
                                                      json(rule).dump() + R"(}},
      "prompts": "prompts.jsonl", "iterations": 1})");
    test::write_file(run.parent_path() / "prompts.jsonl", "{\"text\": \"1 2 3\", \"answer\": 6}\n");
    BOOST_TEST_CONTEXT(rule) {
      if (good) {
        BOOST_TEST(load_run_file(run).reward.rule == rule);
      } else {
        BOOST_TEST(!problem_at(problems_of(run), "models.reward.rule").empty());
      }
    }
  }
}

// The math rule needs every prompt line's "answer": the run file is refused before
// anything runs, naming the prompt file, the line and the field.
BOOST_AUTO_TEST_CASE(math_rule_checks_the_prompts_answers) {
  const std::string run_json = R"({"format": "braid.run", "version": 1, "algorithm": "grpo",
    "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": "math"}},
    "prompts": "prompts.jsonl", "iterations": 1, "generate": {"limit": LIMIT}})";
  auto with_limit = [&](const std::string& name, int limit) {
    std::string text = run_json;
    text.replace(text.find("LIMIT"), 5, std::to_string(limit));
    return test::run_folder(name, text);
  };
  fs::path run = with_limit("math_ok", 3);
  const fs::path prompts = run.parent_path() / "prompts.jsonl";
  test::write_file(prompts, "{\"prompt\": \"1+1=\", \"answer\": 2}\n\n{\"prompt\": \"a\", \"answer\": \"3/4\"}\n"
                            "{\"prompt\": \"b\", \"answer\": \"#### 1,000\"}\n");
  BOOST_TEST(load_run_file(run).reward.rule == "math");

  const std::string bad_prompts =
      "{\"prompt\": \"1+1=\", \"answer\": 2}\n{\"prompt\": \"a\"}\n\n{\"prompt\": \"b\", \"answer\": \"many\"}\n"
      "{\"prompt\": \"c\", \"answer\": [1]}\n{\"prompt\": \"past the limit\"}\n";
  run = with_limit("math_bad", 4);
  test::write_file(run.parent_path() / "prompts.jsonl", bad_prompts);
  const auto problems = problems_of(run);
  const std::string file = (run.parent_path() / "prompts.jsonl").string();
  BOOST_TEST_REQUIRE(problems.size() == 3u);
  BOOST_TEST(problems[0].find("prompts: " + file + ":2: answer: is missing") == 0u);
  BOOST_TEST(problems[1].find("prompts: " + file + ":4: answer: is \"many\", not a value") == 0u);
  BOOST_TEST(problems[2].find("prompts: " + file + ":5: answer: is [1] (array)") == 0u);

  // The limit stops the check where braid-generate stops reading.
  run = with_limit("math_limit", 1);
  test::write_file(run.parent_path() / "prompts.jsonl", bad_prompts);
  BOOST_TEST(load_run_file(run).reward.rule == "math");
}

BOOST_AUTO_TEST_CASE(an_external_scorer_command) {
  const fs::path run = test::run_folder("command", R"({"format": "braid.run", "version": 1, "algorithm": "grpo",
    "models": {"actor": {"init": {"config": "models/config.json"}},
               "reward": {"command": "python3 scorer.py --strict", "timeout": 30}},
    "prompts": "prompts.jsonl", "iterations": 1})");
  const RunSpec spec = load_run_file(run);
  BOOST_TEST((spec.reward.kind == ModelSource::Kind::command));
  BOOST_TEST(spec.reward.command == "python3 scorer.py --strict");
  BOOST_TEST(spec.reward.command_dir == run.parent_path());  // it runs beside the run file
  BOOST_TEST(spec.reward.command_timeout.value_or(0) == 30.0);

  const fs::path bad = test::run_folder("bad_command", R"({"format": "braid.run", "version": 1, "algorithm": "grpo",
    "models": {"actor": {"init": {"config": "models/config.json", "timeout": 3}},
               "reward": {"command": " ", "timeout": 0}},
    "prompts": "prompts.jsonl", "iterations": 1})");
  const auto problems = problems_of(bad);
  BOOST_TEST(problem_at(problems, "models.reward.command").find("is empty") != std::string::npos);
  BOOST_TEST(problem_at(problems, "models.reward.timeout").find("must be > 0") != std::string::npos);
  BOOST_TEST(problem_at(problems, "models.actor.init.timeout").find("unknown key") != std::string::npos);

  const fs::path stray = test::run_folder("stray_timeout", R"({"format": "braid.run", "version": 1, "algorithm": "grpo",
    "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": "math", "timeout": 3}},
    "prompts": "prompts.jsonl", "iterations": 1})");
  const auto stray_problems = problems_of(stray);
  BOOST_TEST(problem_at(stray_problems, "models.reward.timeout").find("only with \"command\"") != std::string::npos);
  // The default prompt file has no answers: the math rule says so too.
  BOOST_TEST(problem_at(stray_problems, "prompts").find(":1: answer: is missing") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(schedule_gives_the_rank_count) {
  const fs::path run = test::scheduled_run_folder("schedule", 1, R"({"devices": 4,
      "models": [{"name": "actor", "stages": 4}, {"name": "critic", "stages": 2, "replicas": 2}]})");
  const RunSpec spec = load_run_file(run);
  BOOST_TEST(spec.schedule.value_or("") == (run.parent_path() / "schedule.json").lexically_normal());
  BOOST_TEST(spec.ranks == 4);
  BOOST_TEST(spec.actor_stages == 4);
  BOOST_TEST(spec.critic_stages == 2);
}

// The rollout's ranks, migration and fusion, and mpirun's options.
BOOST_AUTO_TEST_CASE(rollout_ranks_migration_fusion_and_mpirun_options) {
  const std::string head = R"({"format": "braid.run", "version": 1,
    "models": {"actor": {"init": {"config": "models/config.json"}}, "critic": {"init": {"config": "models/config.json"}},
               "reward": {"rule": "digits"}},
    "prompts": "prompts.jsonl", "iterations": 1, )";
  {
    const fs::path run = test::run_folder("ranks", head + R"("generate": {"ranks": 3, "migrate_threshold": 0.5,
        "migrate_to": 2}, "mpirun": {"options": ["--oversubscribe", "--bind-to", "none"], "hostfile": "hosts"}})");
    test::write_file(run.parent_path() / "hosts", "localhost slots=3\n");
    const RunSpec spec = load_run_file(run);
    BOOST_TEST(spec.rollout_ranks == 3);
    BOOST_TEST(spec.migrate_threshold.value_or("") == "0.5");
    BOOST_TEST(spec.migrate_to.value_or(0) == 2);
    BOOST_TEST(spec.fuse);  // on by default with several ranks
    const std::vector<std::string> want = {"--oversubscribe", "--bind-to", "none", "--hostfile",
                                           (run.parent_path() / "hosts").lexically_normal().string()};
    BOOST_TEST(spec.mpirun_options == want, boost::test_tools::per_element());
  }
  {
    // A count stays a count, a fraction of 1 stays a fraction; fusion can be turned off.
    const RunSpec count = load_run_file(test::run_folder("ranks_count", head + R"("generate": {"ranks": 2,
        "migrate_threshold": 12, "fuse": false}})"));
    BOOST_TEST(count.migrate_threshold.value_or("") == "12");
    BOOST_TEST(!count.fuse);
    const RunSpec all = load_run_file(test::run_folder("ranks_all", head + R"("generate": {"ranks": 2,
        "migrate_threshold": 1.0}})"));
    BOOST_TEST(all.migrate_threshold.value_or("") == "1.0");
    const RunSpec one = load_run_file(test::run_folder("ranks_one", head + R"("generate": {}})"));
    BOOST_TEST(one.rollout_ranks == 1);
    BOOST_TEST(!one.fuse);
    BOOST_TEST(one.mpirun_options.empty());
  }
  const auto problems = problems_of(test::run_folder("ranks_bad", head + R"("generate": {"ranks": 2,
      "migrate_threshold": 1.5, "migrate_to": 2}, "mpirun": {"options": ["", 3], "hostfile": "nothere", "np": 2}})"));
  BOOST_TEST(problem_at(problems, "generate.migrate_threshold").find("must be <= 1") != std::string::npos);
  BOOST_TEST(problem_at(problems, "generate.migrate_to").find("must be below generate.ranks (2)") != std::string::npos);
  BOOST_TEST(problem_at(problems, "mpirun.options[0]").find("non-empty string") != std::string::npos);
  BOOST_TEST(problem_at(problems, "mpirun.options[1]").find("non-empty string") != std::string::npos);
  BOOST_TEST(problem_at(problems, "mpirun.hostfile").find("no file") != std::string::npos);
  BOOST_TEST(problem_at(problems, "mpirun.np").find("unknown key") != std::string::npos);
  const auto single = problems_of(test::run_folder("ranks_single", head + R"("generate": {"migrate_threshold": 4,
      "fuse": true}})"));
  BOOST_TEST(problem_at(single, "generate.migrate_threshold").find("only with generate.ranks > 1") != std::string::npos);
  BOOST_TEST(problem_at(single, "generate.fuse").find("only with generate.ranks > 1") != std::string::npos);
}

namespace {

// A run of 4 prompts x 4 samples on the tiny model's shape, a plan file and the
// experiment it was made for (16 samples, one mini-batch, prompts and responses of 8 tokens).
constexpr const char* kTinyConfig = R"({"hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
  "num_key_value_heads": 2, "intermediate_size": 344, "vocab_size": 259})";

std::string experiment_json(int global, int mini, const std::string& algorithm = "ppo", int layers = 4) {
  const std::string cfg = R"({"hidden_size": 128, "num_hidden_layers": )" + std::to_string(layers) +
                          R"(, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 344, "vocab_size": 259})";
  return R"({"format": "braid.experiment", "version": 1, "algorithm": ")" + algorithm + R"(",
    "models": {"actor": {"config": )" + cfg + R"(}, "ref": {"config": )" + cfg + R"(},
               )" + (algorithm == "ppo" ? R"("critic": {"config": )" + cfg + "}, " : "") + R"("reward": {"config": )" + cfg + R"(}},
    "batch": {"global": )" + std::to_string(global) + R"(, "mini": )" + std::to_string(mini) + R"(},
    "prompt_len": {"dist": "fixed", "value": 8}, "response_len": {"dist": "fixed", "value": 8}})";
}

std::string call_json(const std::string& name, int first, int dp, int tp, int pp, int micro, double t) {
  return "{\"name\": \"" + name + "\", \"mesh\": {\"first_device\": " + std::to_string(first) +
         ", \"devices\": " + std::to_string(dp * tp * pp) + ", \"where\": \"node0\"}, \"strategy\": {\"dp\": " +
         std::to_string(dp) + ", \"tp\": " + std::to_string(tp) + ", \"pp\": " + std::to_string(pp) +
         ", \"micro_batches\": " + std::to_string(micro) + "}, \"time_s\": " + std::to_string(t) + "}";
}

// Calls: generation on 4 devices (2 micro-batches); the reference on devices 0-1 and the
// critic's inference on 2-3 with tp 2; the actor's training d4 (2 micro-batches), the
// critic's d2t2. No fusion unless `fusion` says.
std::string plan_json(const std::string& gen = call_json("actor_gen", 0, 4, 1, 1, 2, 1.5),
                      const std::string& fusion = R"({"inter_stage": {"used": false}, "intra_stage": {"used": false}})") {
  return R"({"format": "braid.plan", "version": 1, "inputs": {"experiment": "experiment.json"},
    "calls": [)" + gen + ", " + call_json("ref_inf", 0, 2, 1, 1, 1, 0.5) + ", " +
         call_json("reward_inf", 2, 2, 1, 1, 1, 0.5) + ", " + call_json("critic_inf", 2, 1, 2, 1, 2, 0.6) + ", " +
         call_json("actor_train", 0, 4, 1, 1, 2, 2.0) + ", " + call_json("critic_train", 0, 2, 2, 1, 1, 2.5) + R"(],
    "memory": {"oom": false}, "predicted": {"iteration_s": 6.5, "serial_s": 7.0},
    "fusion": )" + fusion + "}";
}

fs::path plan_run(const std::string& name, const std::string& generate, const std::string& train = "{}",
                  const std::string& plan = plan_json(), const std::string& experiment = experiment_json(16, 16)) {
  const fs::path run = test::run_folder(name, R"({"format": "braid.run", "version": 1,
    "models": {"actor": {"init": {"config": "models/config.json"}}, "critic": {"init": {"config": "models/config.json"}},
               "reward": {"rule": "digits"}},
    "prompts": "prompts.jsonl", "iterations": 1, "plan": "plan.json", "generate": )" + generate +
                                               R"(, "train": )" + train + "}");
  test::write_file(run.parent_path() / "models" / "config.json", kTinyConfig);
  test::write_file(run.parent_path() / "prompts.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": \"c\"}\n{\"text\": \"d\"}\n");
  test::write_file(run.parent_path() / "plan.json", plan);
  test::write_file(run.parent_path() / "experiment.json", experiment);
  return run;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

bool has_note(const std::vector<std::string>& notes, const std::string& text) {
  return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

}  // namespace

// A plan lays out every call: generation's ranks and --max-batch, one braid-score on the
// union of the inference calls' devices with their largest tp, one data-parallel braid-train
// likewise, each with --micro-tokens from its planned micro-batches.
BOOST_AUTO_TEST_CASE(a_plan_lays_out_every_call) {
  const fs::path run = plan_run("plan_layout", R"({"samples_per_prompt": 4, "max_new_tokens": 8})");
  const RunSpec spec = load_run_file(run);
  BOOST_REQUIRE(spec.run_plan.has_value());
  const RunPlan& plan = *spec.run_plan;
  BOOST_TEST(plan.applied);
  BOOST_TEST(plan.file == (run.parent_path() / "plan.json").lexically_normal());
  // Generation: 4 replicas, 16 samples in 2 micro-batches each -> 2 sequences decoding at once.
  BOOST_TEST(spec.rollout_ranks == 4);
  BOOST_TEST(spec.rollout_tp == 1);
  BOOST_TEST(flag(spec.generate, "--max-batch") == "2");
  BOOST_TEST(!spec.fuse);  // the plan does not fuse generation and inference
  BOOST_TEST(!spec.migrate_threshold.has_value());
  // Inference: ref on devices 0-1, critic on 2-3 with tp 2 (reward is a rule): 4 ranks, tp 2;
  // micro-batches of 8 sequences (ref: 16/2 in 1; critic: 16/1 in 2) of 16 tokens.
  BOOST_TEST(spec.score_ranks == 4);
  BOOST_TEST(spec.score_tp == 2);
  BOOST_TEST(flag(spec.score, "--micro-tokens") == "128");
  BOOST_TEST(has_note(plan.score.notes, "union of their devices"));
  BOOST_TEST(has_note(plan.score.notes, "reward_inf"));  // not run: the reward is a rule
  // Training: actor d4 x2 (2 sequences a micro-batch), critic d2t2 x1 (8): 4 ranks, tp 2, 32 tokens.
  BOOST_TEST(spec.ranks == 4);
  BOOST_TEST(spec.train_tp == 2);
  BOOST_TEST(flag(spec.train, "--micro-tokens") == "32");
  BOOST_TEST(!spec.schedule.has_value());
  BOOST_TEST(plan.conflicts.empty());

  // The commands: mpirun -np and --tp as planned; braid-score under mpirun after generation.
  const Layout layout(run.parent_path() / "out");
  const PlanOptions opt;
  const Step rollout = rollout_step(spec, layout, opt, 1);
  BOOST_REQUIRE(rollout.pipeline.size() == 1u);
  const std::string gen = joined(rollout.pipeline[0].argv);
  BOOST_TEST(gen.rfind("mpirun -np 4 braid-generate ", 0) == 0);
  BOOST_TEST(gen.find("--max-batch 2") != std::string::npos);
  BOOST_TEST(gen.find("--tp") == std::string::npos);
  BOOST_REQUIRE(rollout.then.size() == 1u);
  const std::string score = joined(rollout.then[0].argv);
  BOOST_TEST(score.rfind("mpirun -np 4 braid-score ", 0) == 0);
  BOOST_TEST(score.find(" - ") == std::string::npos);  // the shards are listed, not piped
  BOOST_TEST(score.find("--micro-tokens 128") != std::string::npos);
  BOOST_TEST(score.find("--tp 2") != std::string::npos);
  BOOST_TEST(rollout.then[0].shards_pattern == "gen-*.h5");
  BOOST_TEST(has_note(rollout.notes, "# actor_gen: planned d4t1p1 x2"));
  const Step train = train_step(spec, layout, opt, 1);
  const std::string tr = joined(train.pipeline[0].argv);
  BOOST_TEST(tr.rfind("mpirun -np 4 braid-train ppo ", 0) == 0);
  BOOST_TEST(tr.find("--micro-tokens 32") != std::string::npos);
  BOOST_TEST(tr.find("--tp 2") != std::string::npos);
  BOOST_TEST(has_note(train.notes, "# critic_train: planned d2t2p1 x1"));
}

// What the run file sets wins over the plan, and each such conflict is recorded.
BOOST_AUTO_TEST_CASE(run_file_keys_win_over_the_plan) {
  const fs::path run = plan_run("plan_override", R"({"samples_per_prompt": 4, "ranks": 2, "max_batch": 5})",
                                R"({"micro_tokens": 64})");
  const RunSpec spec = load_run_file(run);
  BOOST_TEST(spec.rollout_ranks == 2);
  BOOST_TEST(flag(spec.generate, "--max-batch") == "5");
  BOOST_TEST(flag(spec.train, "--micro-tokens") == "64");
  const auto& conflicts = spec.run_plan->conflicts;
  BOOST_TEST(conflicts.size() == 3u);
  BOOST_TEST(has_note(conflicts, "generate.ranks 2 (the run file's) wins over the plan's 4 ranks"));
  BOOST_TEST(has_note(conflicts, "generate.max_batch 5"));
  BOOST_TEST(has_note(conflicts, "train.micro_tokens 64"));
  BOOST_TEST(has_note(spec.run_plan->summary(), "run file wins: generate.ranks 2"));
}

// Inter-stage fusion in the plan: migration at its R_t to m replicas, inference inside the
// fused rollout; ranks = replicas x tp. The fused rollout runs at tp 1 only: at tp 2 the
// generation keeps its migration and braid-score follows, the note saying why.
BOOST_AUTO_TEST_CASE(a_plan_fuses_generation_and_inference) {
  const std::string fusion = R"({"inter_stage": {"used": true, "replicas": 2, "r_t": 6, "r_t_fraction": 0.375, "m": 1},
                                 "intra_stage": {"used": false}})";
  const fs::path run = plan_run("plan_inter", R"({"samples_per_prompt": 4})", "{}",
                                plan_json(call_json("actor_gen", 0, 2, 1, 1, 1, 1.5), fusion));
  const RunSpec spec = load_run_file(run);
  BOOST_TEST(spec.rollout_ranks == 2);
  BOOST_TEST(spec.rollout_tp == 1);
  BOOST_TEST(spec.migrate_threshold.value_or("") == "0.375");
  BOOST_TEST(spec.migrate_to.value_or(0) == 1);
  BOOST_TEST(spec.fuse);
  BOOST_TEST(flag(spec.generate, "--max-batch") == "8");
  BOOST_TEST(has_note(spec.run_plan->score.notes, "inside the fused rollout"));
  const Step rollout = rollout_step(spec, Layout(run.parent_path() / "out"), PlanOptions{}, 1);
  const std::string gen = joined(rollout.pipeline.at(0).argv);
  BOOST_TEST(gen.rfind("mpirun -np 2 braid-generate ", 0) == 0);
  BOOST_TEST(gen.find("--migrate-threshold 0.375 --migrate-to 1") != std::string::npos);
  BOOST_TEST(gen.find(" -- ") != std::string::npos);  // braid-score's options after "--"
  BOOST_TEST(gen.find("--micro-tokens") != std::string::npos);

  const fs::path run_tp = plan_run("plan_inter_tp", R"({"samples_per_prompt": 4})", "{}",
                                   plan_json(call_json("actor_gen", 0, 2, 2, 1, 1, 1.5), fusion));
  const RunSpec tp = load_run_file(run_tp);
  BOOST_TEST(tp.rollout_ranks == 4);
  BOOST_TEST(tp.rollout_tp == 2);
  BOOST_TEST(!tp.fuse);
  BOOST_TEST(tp.migrate_threshold.value_or("") == "0.375");
  BOOST_TEST(has_note(tp.run_plan->generate.notes, "the fused rollout runs at tp 1 only"));
  const Step piped = rollout_step(tp, Layout(run_tp.parent_path() / "out"), PlanOptions{}, 1);
  BOOST_TEST(joined(piped.pipeline.at(0).argv).find(" -- ") == std::string::npos);
}

// Intra-stage fusion: the fused schedule made from the plan's schedspec, one group's, run once per group.
BOOST_AUTO_TEST_CASE(a_plan_fuses_the_training) {
  const std::string fusion = R"({"inter_stage": {"used": false}, "intra_stage": {"used": true, "groups": 2,
    "schedspec": {"format": "braid.schedspec", "version": 1, "devices": 2, "models": [
      {"name": "actor", "stages": 2, "replicas": 1, "micro_batches": 4, "tp": 1, "fwd": [1, 1], "bwd": [2, 2], "act_mem": [0.1, 0.1]},
      {"name": "critic", "stages": 2, "replicas": 1, "micro_batches": 8, "tp": 1, "fwd": [1, 1], "bwd": [2, 2], "act_mem": [0.1, 0.1]}]}}})";
  const fs::path run = plan_run("plan_intra", R"({"samples_per_prompt": 4})", "{}", plan_json(call_json("actor_gen", 0, 4, 1, 1, 2, 1.5), fusion));
  const RunSpec spec = load_run_file(run);
  BOOST_TEST(spec.plan_schedule);
  BOOST_TEST(spec.ranks == 4);  // 2 devices x 2 groups
  // The activation slots sized for the schedule's largest micro-batch: the actor's, 16 samples over
  // 2 groups x 4 micro-batches (the critic cuts them into 8), 2 sequences of at most 8 + 8 + 1 tokens.
  BOOST_TEST(flag(spec.train, "--micro-tokens") == "34");
  BOOST_TEST(spec.run_plan->schedspec["devices"].get<int>() == 2);  // one group's: schedgen refuses replicas sharing a factor
  BOOST_TEST(has_note(spec.run_plan->train.notes, "2 identical fused groups: one group's schedule, run 2 times"));
}

// With the plan's cluster and a profile (here analytic, with host costs), braid run predicts
// the whole iteration every way the run can take and takes the fastest; a fusion the run
// file fixes stays fixed, and only the ways with it are weighed.
BOOST_AUTO_TEST_CASE(the_prediction_chooses_the_fusions) {
  const std::string fusion = R"({"inter_stage": {"used": false}, "intra_stage": {"used": false, "groups": 1,
    "schedspec": {"format": "braid.schedspec", "version": 1, "devices": 2, "models": [
      {"name": "actor", "stages": 2, "replicas": 1, "micro_batches": 2, "tp": 1, "fwd": [1, 1], "bwd": [2, 2], "act_mem": [0.1, 0.1]},
      {"name": "critic", "stages": 2, "replicas": 1, "micro_batches": 2, "tp": 1, "fwd": [1, 1], "bwd": [2, 2], "act_mem": [0.1, 0.1]}]}}})";
  std::string plan = plan_json(call_json("actor_gen", 0, 2, 1, 1, 1, 1.5), fusion);
  plan.replace(plan.find(R"("experiment": "experiment.json")"), 31,
               R"("experiment": "experiment.json", "cluster": "cluster.json", "profile": "profile.json")");
  const fs::path run = plan_run("plan_predicted", R"({"samples_per_prompt": 4})", "{}", plan);
  const fs::path dir = run.parent_path();
  test::write_file(dir / "cluster.json", R"({"format": "braid.cluster", "version": 1, "nodes": 1, "devices_per_node": 2})");
  Checker c("shape");
  plan::ModelShape shape = plan::shape_from_hf_config(json::parse(kTinyConfig), c, "");
  plan::ModelShape value = shape;
  value.value_head = true;
  plan::Profile profile = plan::analytic_profile(plan::hardware_preset("h100"), {shape, value});
  profile.host.cores = 2;
  profile.host.process_start = 0.05;
  profile.host.mpi_start = {{1, 2}, {0.5, 0.6}};
  profile.host.touch_bandwidth = profile.host.write_bandwidth = profile.host.read_bandwidth = 1e9;
  test::write_file(dir / "profile.json", plan::profile_to_json(profile).dump());

  const RunSpec spec = load_run_file(run);
  const RunPlan& p = *spec.run_plan;
  BOOST_TEST_REQUIRE(p.predictions.size() == 4u);  // serial, intra-stage, inter-stage, both
  const auto best = std::min_element(p.predictions.begin(), p.predictions.end(),
                                     [](const Prediction& a, const Prediction& b) { return a.iteration < b.iteration; });
  // The fastest way, unless its lead over serial is under kFusionLead (then serial).
  const auto serial_way = std::find_if(p.predictions.begin(), p.predictions.end(),
                                       [](const Prediction& x) { return x.fusions == Fusions{}; });
  BOOST_TEST_REQUIRE((serial_way != p.predictions.end()));
  const Fusions expected = best->iteration > (1 - kFusionLead) * serial_way->iteration ? Fusions{} : best->fusions;
  BOOST_TEST(fusions_name(p.chosen) == fusions_name(expected));
  BOOST_TEST(fusions_name(fusions_of(spec)) == fusions_name(expected));
  BOOST_TEST(p.choice_reason.find("predicted") != std::string::npos, p.choice_reason);
  for (const auto& pred : p.predictions) {
    BOOST_TEST(pred.host);
    BOOST_TEST(pred.iteration > 0.0);
    BOOST_TEST(pred.call("actor_gen") > 0.0);
    // A step's wall time holds its start-up: 2 ranks start under mpirun.
    BOOST_TEST(pred.steps.front().start >= 0.6 - 1e-12);
  }
  // The plan scores on 2 devices: serial, braid-score is a second MPI job after the
  // generation; the fused rollout scores on generation's ranks and saves its start-up.
  const Prediction* serial = nullptr;
  const Prediction* inter = nullptr;
  for (const auto& pred : p.predictions) {
    if (pred.fusions == Fusions{}) serial = &pred;
    if (pred.fusions == Fusions{true, false}) inter = &pred;
  }
  BOOST_TEST_REQUIRE((serial && inter));
  BOOST_TEST(inter->steps.front().seconds < serial->steps.front().seconds);

  // The run file fixes the rollout: only the ways with a piped rollout are weighed.
  const fs::path fixed = plan_run("plan_predicted_fixed", R"({"samples_per_prompt": 4, "fuse": false})", "{}", plan);
  for (const char* f : {"cluster.json", "profile.json"}) fs::copy_file(dir / f, fixed.parent_path() / f);
  const RunSpec fs_ = load_run_file(fixed);
  BOOST_TEST(fs_.run_plan->predictions.size() == 2u);
  BOOST_TEST(!fs_.fuse);
  BOOST_TEST(fs_.run_plan->choice_reason.find("the run file fixes generate.fuse") != std::string::npos);
}

// The driver takes a fusion for a lead the model can see: the fastest way, but serial when
// the fastest leads it by less than kFusionLead (5%), and the reason says so.
BOOST_AUTO_TEST_CASE(a_fusion_is_chosen_for_a_lead_over_serial_not_for_a_tie) {
  const auto way = [](Fusions f, double seconds) {
    Prediction p;
    p.fusions = f;
    p.iteration = seconds;
    return p;
  };
  const Fusions inter{true, false}, intra{false, true}, both{true, true};
  std::string why;
  BOOST_TEST(fusions_name(choose_fusions({way({}, 3.3), way(inter, 2.9), way(both, 3.0)}, &why)) == "inter-stage");
  BOOST_TEST(why.find("predicted 2.900 s an iteration inter-stage, 3.300 s serial, 3.000 s fused") == 0, why);
  // 1% ahead (larger's intra-stage, measured slower): a tie, serial.
  BOOST_TEST(fusions_name(choose_fusions({way({}, 11.293), way(intra, 11.187)}, &why)) == "serial");
  BOOST_TEST(why.find("a lead under 5% of serial's, so serial") != std::string::npos, why);
  // Just past the lead; serial the fastest; no serial way to fall back on.
  BOOST_TEST(fusions_name(choose_fusions({way({}, 10.0), way(intra, 9.49)}, &why)) == "intra-stage");
  BOOST_TEST(fusions_name(choose_fusions({way({}, 3.0), way(inter, 3.1)}, &why)) == "serial");
  BOOST_TEST(fusions_name(choose_fusions({way(inter, 3.1), way(both, 3.05)}, &why)) == "fused");
}

// A training call the plan recomputes: braid-train gets --recompute (one for both models: the
// most recomputing), unless the run file sets train.recompute; a plan made for LoRA adapters
// (the experiment's train.lora_rank) fits only a run that trains them.
BOOST_AUTO_TEST_CASE(a_plan_recomputes_and_trains_lora_as_the_run_does) {
  std::string plan = plan_json();
  const std::string actor = call_json("actor_train", 0, 4, 1, 1, 2, 2.0);
  std::string recomputing = actor;
  recomputing.replace(recomputing.find("\"strategy\": {") + 13, 0, "\"recompute\": 1, ");
  plan.replace(plan.find(actor), actor.size(), recomputing);
  const std::string gen = R"({"samples_per_prompt": 4})";
  const RunSpec spec = load_run_file(plan_run("plan_recompute", gen, "{}", plan));
  BOOST_TEST(flag(spec.train, "--recompute") == "1");
  BOOST_TEST(has_note(spec.run_plan->train.notes, "critic_train recomputes too (--recompute 1, the plan's 0)"));
  BOOST_TEST(spec.run_plan->conflicts.empty());
  const RunSpec own = load_run_file(plan_run("plan_recompute_own", gen, R"({"recompute": 2})", plan));
  BOOST_TEST(flag(own.train, "--recompute") == "2");
  BOOST_TEST(has_note(own.run_plan->conflicts, "train.recompute 2 (the run file's) wins over the plan's --recompute 1"));
  BOOST_TEST(flag(load_run_file(plan_run("plan_no_recompute", gen)).train, "--recompute") == "<absent>");

  std::string lora = experiment_json(16, 16);
  lora.replace(lora.find("\"batch\""), 0, R"("train": {"lora_rank": 8}, )");
  const auto other = problems_of(plan_run("plan_lora", gen, "{}", plan_json(), lora));
  BOOST_TEST(problem_at(other, "plan").find("train.lora_rank: is 8, but the run's is 0") != std::string::npos);
  BOOST_TEST(load_run_file(plan_run("plan_lora_run", gen, R"({"lora_rank": 8})", plan_json(), lora)).run_plan->applied);
}

// A plan made for another run is refused, naming the experiment's field.
BOOST_AUTO_TEST_CASE(a_plan_for_another_run_is_refused) {
  const std::string gen = R"({"samples_per_prompt": 4})";
  const auto batch = problems_of(plan_run("plan_batch", gen, "{}", plan_json(), experiment_json(32, 32)));
  BOOST_TEST(problem_at(batch, "plan").find("batch.global: is 32, but the run generates 16 samples") != std::string::npos);
  const auto mini = problems_of(plan_run("plan_mini", gen, R"({"mini_batch": 8})"));
  BOOST_TEST(problem_at(mini, "plan").find("batch.mini: is 16, but the run's mini-batch is 8") != std::string::npos);
  const auto model = problems_of(plan_run("plan_model", gen, "{}", plan_json(), experiment_json(16, 16, "ppo", 8)));
  BOOST_TEST(problem_at(model, "plan").find("models.actor.config: the plan is for a model of 8 layers") != std::string::npos);
  const auto algorithm = problems_of(plan_run("plan_algorithm", gen, "{}", plan_json(), experiment_json(16, 16, "grpo")));
  BOOST_TEST(problem_at(algorithm, "plan").find("algorithm: is grpo") != std::string::npos);
  // Its experiment must be found (or named), and the plan must be one.
  const fs::path lost = plan_run("plan_lost", gen);
  fs::remove(lost.parent_path() / "experiment.json");
  BOOST_TEST(problem_at(problems_of(lost), "plan").find("inputs.experiment: not found") != std::string::npos);
  const fs::path bad = plan_run("plan_bad", gen, "{}", R"({"format": "braid.plan", "version": 1, "calls": [{"name": "actor_gen"}]})");
  BOOST_TEST(problem_at(problems_of(bad), "plan").find("calls[0].strategy.dp: missing") != std::string::npos);
  const fs::path missing = plan_run("plan_missing", gen);
  fs::remove(missing.parent_path() / "plan.json");
  BOOST_TEST(problem_at(problems_of(missing), "plan").find("no file") != std::string::npos);
}

// "plan" as an object: a plan with its experiment named, or what braid run makes one from.
BOOST_AUTO_TEST_CASE(a_plan_object) {
  const fs::path run = plan_run("plan_object", R"({"samples_per_prompt": 4})");
  const fs::path dir = run.parent_path();
  fs::rename(dir / "experiment.json", dir / "exp2.json");
  std::string text = read_text_file(run.string());
  const auto at = text.find("\"plan\": \"plan.json\"");
  text.replace(at, std::string("\"plan\": \"plan.json\"").size(), R"("plan": {"file": "plan.json", "experiment": "exp2.json"})");
  test::write_file(run, text);
  BOOST_TEST(load_run_file(run).run_plan->applied);
  test::write_file(dir / "cluster.json", "{}");
  text.replace(text.find(R"({"file": "plan.json", "experiment": "exp2.json"})"),
               std::string(R"({"file": "plan.json", "experiment": "exp2.json"})").size(),
               R"({"experiment": "exp2.json", "cluster": "cluster.json", "hardware": "h100", "options": ["--time-limit", "1"]})");
  test::write_file(run, text);
  const RunSpec spec = load_run_file(run);
  BOOST_REQUIRE(spec.run_plan->request.has_value());
  BOOST_TEST(!spec.run_plan->applied);  // made by braid run (prepare_plan), then applied
  BOOST_TEST(spec.run_plan->request->hardware == "h100");
  BOOST_TEST(spec.run_plan->request->options.size() == 2u);
  text.replace(text.find(R"("hardware": "h100", )"), std::string(R"("hardware": "h100", )").size(), "");
  test::write_file(run, text);
  BOOST_TEST(problem_at(problems_of(run), "plan").find("give one of \"profile\"") != std::string::npos);
}

// A fused GRPO rollout needs whole groups in every shard: refused when the file is read.
BOOST_AUTO_TEST_CASE(a_fused_grpo_rollout_needs_whole_groups_per_shard) {
  const std::string head = R"({"format": "braid.run", "version": 1, "algorithm": "grpo",
    "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": "digits"}},
    "prompts": "prompts.jsonl", "iterations": 1, )";
  const auto bad = problems_of(test::run_folder("grpo_split", head + R"("generate": {"ranks": 2,
      "samples_per_prompt": 4, "shard_size": 6}})"));
  BOOST_TEST(problem_at(bad, "generate.shard_size").find("is 6: a fused rollout with group advantages") !=
             std::string::npos);
  const auto missing = problems_of(test::run_folder("grpo_nosize", head + R"("generate": {"ranks": 2,
      "samples_per_prompt": 4}})"));
  BOOST_TEST(problem_at(missing, "generate.shard_size").find("missing") != std::string::npos);
  BOOST_TEST(load_run_file(test::run_folder("grpo_whole", head + R"("generate": {"ranks": 2,
      "samples_per_prompt": 4, "shard_size": 8}})")).fuse);
  BOOST_TEST(!load_run_file(test::run_folder("grpo_piped", head + R"("generate": {"ranks": 2,
      "samples_per_prompt": 4, "shard_size": 6, "fuse": false}})")).fuse);
}

// A tools file nested 100,000 deep is refused, naming the key (nlohmann's parser recursed
// past the stack: SIGSEGV).
BOOST_AUTO_TEST_CASE(a_tools_file_nested_too_deep_is_refused) {
  const fs::path run = test::run_folder("deep_tools", R"({"format": "braid.run", "version": 1,
    "algorithm": "reinforce++",
    "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": "digits"}},
    "prompts": "prompts.jsonl", "iterations": 1, "tools": "tools.json"})");
  test::write_file(run.parent_path() / "tools.json", std::string(100000, '[') + std::string(100000, ']'));
  BOOST_TEST(problem_at(problems_of(run), "tools").find("array of tool schemas") != std::string::npos);
}

// The overlap keys (docs/overlap.md): overcommit is a count of extra groups, async a
// boolean, and the two do not go together.
BOOST_AUTO_TEST_CASE(overcommit_and_async_keys) {
  auto run_with = [](const std::string& name, const std::string& keys, const std::string& generate) {
    return test::run_folder(name, R"({"format": "braid.run", "version": 1, "algorithm": "grpo",
      "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": "digits"}},
      "prompts": "prompts.jsonl", "iterations": 1, )" + keys + R"( "generate": {"samples_per_prompt": 2)" + generate + "}}");
  };
  const RunSpec plain = load_run_file(run_with("plain", "", ""));
  BOOST_TEST(!plain.overcommit.has_value());
  BOOST_TEST(!plain.async);
  const RunSpec oc = load_run_file(run_with("oc", "", R"(, "overcommit": 3)"));
  BOOST_TEST(oc.overcommit.value_or(-1) == 3);
  BOOST_TEST(flag(oc.generate, "--overcommit") == "<absent>");  // braid run passes it with its files
  BOOST_TEST(load_run_file(run_with("async", R"("async": true,)", "")).async);

  auto problems = problems_of(run_with("both", R"("async": true,)", R"(, "overcommit": 1)"));
  BOOST_TEST(problem_at(problems, "async").find("does not go with generate.overcommit") != std::string::npos);
  problems = problems_of(run_with("bad", R"("async": "yes",)", R"(, "overcommit": -1)"));
  BOOST_TEST(problem_at(problems, "async").find("expected true or false") != std::string::npos);
  BOOST_TEST(!problem_at(problems, "generate.overcommit").empty());
}

// The "eval" section: its defaults (the run's own rule, generate's max_new_tokens), and
// every bad field named.
BOOST_AUTO_TEST_CASE(the_eval_section) {
  std::string text = test::kGoodPpoRun;
  const auto at = text.rfind('}');
  std::string good = text.substr(0, at) + R"(, "eval": {"prompts": "prompts.jsonl", "every": 3, "samples": 2}})";
  const fs::path run = test::run_folder("eval_good", good);
  const RunSpec spec = load_run_file(run);
  BOOST_REQUIRE(spec.eval.has_value());
  BOOST_TEST(spec.eval->policy.prompts == (run.parent_path() / "prompts.jsonl").lexically_normal().string());
  BOOST_TEST(spec.eval->every == 3);
  BOOST_TEST(spec.eval->policy.samples == 2);
  BOOST_TEST(spec.eval->policy.temperature == 0.0);
  BOOST_TEST(spec.eval->policy.reward_rule == "digits");   // the run's reward
  BOOST_TEST(spec.eval->policy.max_new_tokens == 16);      // generate.max_new_tokens
  BOOST_TEST(!load_run_file(test::run_folder("eval_none", test::kGoodPpoRun)).eval.has_value());

  std::string bad = text.substr(0, at) +
                    R"(, "eval": {"prompts": "nosuch.jsonl", "every": 0, "rule": "math", "command": "x", "sample": 2}})";
  const auto problems = problems_of(test::run_folder("eval_bad", bad));
  BOOST_TEST(problem_at(problems, "eval.prompts").find("no file") != std::string::npos);
  BOOST_TEST(problem_at(problems, "eval.every").find(">= 1") != std::string::npos);
  BOOST_TEST(problem_at(problems, "eval.sample").find("samples") != std::string::npos);  // did you mean
  BOOST_TEST(problem_at(problems, "eval").find("not both") != std::string::npos);

  // math over held-out prompts without an answer.
  std::string math = text.substr(0, at) + R"(, "eval": {"prompts": "prompts.jsonl", "rule": "math"}})";
  const auto math_problems = problems_of(test::run_folder("eval_math", math));
  BOOST_TEST(problem_at(math_problems, "eval.prompts").find("answer") != std::string::npos);
}

// Which iterations a run evaluates: the start, every `every`, and the last.
BOOST_AUTO_TEST_CASE(evaluated_iterations) {
  RunSpec spec;
  spec.iterations = 7;
  BOOST_TEST(!evaluates(spec, 0));  // no eval section
  spec.eval = EvalSpec{.policy = {.prompts = "p.jsonl"}, .every = 3};
  std::vector<int> at;
  for (int i = 0; i <= 7; ++i) {
    if (evaluates(spec, i)) at.push_back(i);
  }
  BOOST_TEST(at == std::vector<int>({0, 3, 6, 7}), boost::test_tools::per_element());
}

// The named algorithms: each is braid-score's --algorithm and braid-train's mode; their
// switches pass on as flags (a boolean as --KEY or --no-KEY, a choice as it is); the
// settings that cannot be are refused naming the key.
BOOST_AUTO_TEST_CASE(algorithms_and_their_switches) {
  const std::string head = R"({"format": "braid.run", "version": 1,
    "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": "digits"}},
    "prompts": "prompts.jsonl", "iterations": 2, )";
  const RunSpec dapo = load_run_file(test::run_folder("algo_dapo", head + R"("algorithm": "dapo",
      "score": {"kl_estimator": "k3", "kl_coef": 0.01, "norm_by_std": false, "overlong_buffer": 4},
      "train": {"clip_high": 0.3, "loss_agg": "seq-mean-token-sum", "kl_coef": 0.01, "normalize_advantages": true,
                "sequence_ratio": false, "tis_cap": 2}})"));
  BOOST_TEST(!dapo.uses_critic());
  BOOST_TEST(flag(dapo.score, "--kl-estimator") == "k3");
  BOOST_TEST(flag(dapo.score, "--no-norm-by-std") == "");
  BOOST_TEST(flag(dapo.score, "--overlong-buffer") == "4");
  BOOST_TEST(flag(dapo.train, "--clip-high") == "0.3");
  BOOST_TEST(flag(dapo.train, "--loss-agg") == "seq-mean-token-sum");
  BOOST_TEST(flag(dapo.train, "--normalize-advantages") == "");
  BOOST_TEST(flag(dapo.train, "--token-ratio") == "");   // braid-train has no --no-sequence-ratio
  BOOST_TEST(flag(dapo.train, "--tis-cap") == "2");
  const Layout layout(test::scratch("algo_dapo") / "out");
  const Step train = train_step(dapo, layout, {}, 1);
  const auto& argv = train.pipeline.front().argv;
  BOOST_TEST(argv[1] == "dapo");
  BOOST_TEST((std::find(argv.begin(), argv.end(), "--normalize-advantages") != argv.end()));
  const Step rollout = rollout_step(dapo, layout, {}, 1);
  const auto& score = rollout.pipeline.back().argv;
  BOOST_TEST((std::find(score.begin(), score.end(), "dapo") != score.end()));

  for (const char* name : {"grpo", "dr-grpo", "gspo", "rloo", "reinforce++", "reinforce++-baseline"}) {
    BOOST_TEST(load_run_file(test::run_folder("algo_ok", head + "\"algorithm\": \"" + name + "\"}")).algorithm == name);
  }
  const auto unknown = problems_of(test::run_folder("algo_bad", head + R"("algorithm": "sppo"})"));
  BOOST_TEST(!problem_at(unknown, "algorithm").empty());
  BOOST_TEST(unknown.size() == 1u);  // not also "models.critic: missing (required by ppo)"
  const auto critic = problems_of(test::run_folder("algo_critic", head + R"("algorithm": "rloo",
      "models": {"actor": {"init": {"config": "models/config.json"}}, "critic": "c.h5", "reward": {"rule": "digits"}}})"));
  BOOST_TEST(problem_at(critic, "models.critic").find("not used by rloo") != std::string::npos);
  // Clip-higher below the floor's ε, by whichever key sets it.
  const auto low = problems_of(test::run_folder("algo_clip", head + R"("algorithm": "dapo", "train": {"clip_low": 0.3}})"));
  BOOST_TEST(problem_at(low, "train.clip_low").find("below its lower") != std::string::npos);
  const auto high = problems_of(test::run_folder("algo_clip2", head + R"("algorithm": "grpo",
      "train": {"clip": 0.3, "clip_high": 0.2}})"));
  BOOST_TEST(!problem_at(high, "train.clip_high").empty());
  const auto agg = problems_of(test::run_folder("algo_agg", head + R"("algorithm": "grpo",
      "train": {"loss_agg": "seq-sum", "kl_estimator": "k4", "normalize_advantages": 1}})"));
  BOOST_TEST(!problem_at(agg, "train.loss_agg").empty());
  BOOST_TEST(!problem_at(agg, "train.kl_estimator").empty());
  BOOST_TEST(!problem_at(agg, "train.normalize_advantages").empty());
  const auto std_of_rloo = problems_of(test::run_folder("algo_std", head + R"("algorithm": "rloo",
      "score": {"norm_by_std": true}})"));
  BOOST_TEST(!problem_at(std_of_rloo, "score.norm_by_std").empty());
  const auto value_clip = problems_of(test::run_folder("algo_vclip", head + R"("algorithm": "gspo",
      "train": {"value_clip": 0.2}})"));
  BOOST_TEST(problem_at(value_clip, "train.value_clip").find("unknown key") != std::string::npos);
}

// The data section: the stream's batch and shuffle go to braid-generate, each iteration's
// position (i - 1) x batch; a field map or a held-out split adds braid data's step, the
// rollouts read its train.jsonl and the evaluation its heldout.jsonl.
BOOST_AUTO_TEST_CASE(the_data_section) {
  const std::string head = R"({"format": "braid.run", "version": 1, "algorithm": "grpo", "seed": 3,
    "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": "math"}},
    "prompts": "gsm.jsonl", "iterations": 3, "eval": {"every": 1}, )";
  const fs::path run = test::run_folder("data_ok", head + R"("data": {"batch_prompts": 2, "fields": {"prompt": "question"},
      "heldout": 1}})");
  test::write_file(run.parent_path() / "gsm.jsonl",
                   "{\"question\": \"1+1=\", \"answer\": \"#### 2\"}\n{\"question\": \"2+2=\", \"answer\": \"#### 4\"}\n"
                   "{\"question\": \"3+3=\", \"answer\": \"so \\\\boxed{6}\"}\n");
  const RunSpec spec = load_run_file(run);
  BOOST_REQUIRE(spec.data.has_value());
  BOOST_TEST(spec.data->batch_prompts == 2);
  BOOST_TEST(spec.data->seed == 3u);  // the run's
  BOOST_TEST(spec.data->shuffle);
  BOOST_TEST(spec.eval->heldout_split);
  const Layout layout(run.parent_path() / "out");
  const auto init = init_steps(spec, layout, {});
  BOOST_REQUIRE(!init.empty());
  BOOST_TEST(init.front().name == "data");
  const auto& argv = init.front().pipeline.front().argv;
  BOOST_TEST((std::find(argv.begin(), argv.end(), "prompt=question") != argv.end()));
  BOOST_TEST(init.front().outputs.size() == 2u);
  const auto gen3 = rollout_step(spec, layout, {}, 3).pipeline.front().argv;
  const auto at = [&](const std::vector<std::string>& a, const std::string& k) {
    const auto it = std::find(a.begin(), a.end(), k);
    return it == a.end() || it + 1 == a.end() ? std::string("<absent>") : *(it + 1);
  };
  BOOST_TEST(at(gen3, "--first-prompt") == "4");
  BOOST_TEST(at(gen3, "--batch-prompts") == "2");
  BOOST_TEST(at(gen3, "--prompt-seed") == "3");
  BOOST_TEST(at(gen3, "--prompts") == layout.data_file("train").string());
  BOOST_TEST(at(eval_step(spec, layout, {}, 1).pipeline.front().argv, "--prompts") == layout.data_file("heldout").string());

  // The field map's missing keys are found in the prompt file when the run file is read.
  const fs::path bad = test::run_folder("data_bad", head + R"("data": {"batch_prompts": 0, "fields": {"prompt": "q",
      "query": "x"}, "heldout": 1.5, "shuffle": "yes"}})");
  test::write_file(bad.parent_path() / "gsm.jsonl", "{\"question\": \"1+1=\", \"answer\": 2}\n");
  const auto problems = problems_of(bad);
  BOOST_TEST(!problem_at(problems, "data.batch_prompts").empty());
  BOOST_TEST(!problem_at(problems, "data.fields.query").empty());
  BOOST_TEST(!problem_at(problems, "data.heldout").empty());
  BOOST_TEST(!problem_at(problems, "data.shuffle").empty());
  BOOST_TEST(problem_at(problems, "prompts").find("q: is missing") != std::string::npos);

  // A held-out count that leaves no line to train on is refused now, not when braid data runs.
  const fs::path all = test::run_folder("data_all_heldout", head + R"("data": {"batch_prompts": 2, "heldout": 3}})");
  test::write_file(all.parent_path() / "gsm.jsonl", "{\"prompt\": \"1+1=\", \"answer\": 2}\n\n"
                                                    "{\"prompt\": \"2+2=\", \"answer\": 4}\n{\"prompt\": \"3+3=\", \"answer\": 6}\n");
  BOOST_TEST(problem_at(problems_of(all), "data.heldout").find("holding out 3 of 3 lines") != std::string::npos);
}

// Conversations' tools and template keyword arguments for the whole run go to braid-generate
// and braid eval (a line's own win there); a tools file that is no array of schemas is refused.
BOOST_AUTO_TEST_CASE(run_tools_and_template_kwargs_reach_generation_and_eval) {
  const std::string head = R"({"format": "braid.run", "version": 1, "algorithm": "grpo",
    "models": {"actor": {"init": {"config": "models/config.json"}}, "reward": {"rule": "digits"}},
    "prompts": "prompts.jsonl", "iterations": 1, "eval": {"prompts": "prompts.jsonl", "rule": "digits"}, )";
  const fs::path run = test::run_folder("chat_run", head + R"("tools": "tools.json",
    "chat_template_kwargs": {"enable_thinking": false}})");
  test::write_file(run.parent_path() / "tools.json", R"([{"type": "function", "function": {"name": "clock"}}])");
  const RunSpec spec = load_run_file(run);
  BOOST_TEST(spec.tools.value_or("") == run.parent_path() / "tools.json");
  BOOST_TEST(spec.chat_template_kwargs.value_or("") == R"({"enable_thinking":false})");
  const Layout layout(run.parent_path() / "out");
  const PlanOptions opt;
  const Step rollout = rollout_step(spec, layout, opt, 1);
  const std::string gen = joined(rollout.pipeline[0].argv);
  const std::string want = "--tools " + (run.parent_path() / "tools.json").string() +
                           R"( --chat-template-kwargs {"enable_thinking":false})";
  BOOST_TEST(gen.find(want) != std::string::npos, gen);
  BOOST_TEST(std::count(rollout.inputs.begin(), rollout.inputs.end(), run.parent_path() / "tools.json") == 1);
  const std::string ev = joined(eval_step(spec, layout, opt, 1).pipeline[0].argv);
  BOOST_TEST(ev.find(want) != std::string::npos, ev);

  const fs::path bad = test::run_folder("bad_chat_run", head + R"("tools": "prompts.jsonl", "chat_template_kwargs": [1]})");
  const auto problems = problems_of(bad);
  BOOST_TEST(problem_at(problems, "tools").find("array of tool schemas") != std::string::npos);
  BOOST_TEST(!problem_at(problems, "chat_template_kwargs").empty());
}

// A JSON output braid run made (a plan, a schedule) is compared by its record with the command
// that would make it now: an option, an input named otherwise, a file changed since.
BOOST_AUTO_TEST_CASE(a_plan_made_from_other_options_or_inputs_differs_by_its_record) {
  const fs::path dir = test::run_folder("record_differs", "{}").parent_path();
  write_text_file((dir / "exp.json").string(), "{\"x\": 1}\n");
  write_text_file((dir / "cfg.json").string(), "{\"y\": 1}\n");
  io::MadeFrom m("braid-meshplan");
  m.set_options({{"--seed", "1"}, {"--time-limit", "5"}}, {"--seed", "--time-limit"});
  m.add_input("experiment", {dir / "exp.json"});
  m.add_input("model configs", {dir / "cfg.json"});
  m.add_input_value("hardware", "h100");
  const ordered_json record = m.to_json();
  const std::string exp = (dir / "exp.json").string();
  const std::vector<std::pair<std::string, std::string>> inputs = {{"experiment", exp}, {"hardware", "h100"}};
  const std::vector<std::string> same = {"bin/braid-meshplan", exp, "c.json", "--hardware", "h100", "--seed", "1",
                                         "--time-limit", "5.0", "-q", "-o", "out/plan.json"};
  BOOST_TEST(output_record_differences(record, "braid-meshplan", same, inputs).empty());
  auto differs = [&](const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& in,
                     const std::string& want) {
    const auto diff = output_record_differences(record, "braid-meshplan", argv, in);
    BOOST_TEST_REQUIRE(diff.size() == 1u, want);
    BOOST_TEST(diff[0].find(want) != std::string::npos, diff[0]);
  };
  std::vector<std::string> argv = same;
  argv[6] = "2";
  differs(argv, inputs, "--seed: 1 there, 2 now");
  argv = same;
  argv.erase(argv.begin() + 7, argv.begin() + 9);
  differs(argv, inputs, "--time-limit: 5 there, not given now");
  differs(same, {{"experiment", exp}, {"hardware", "h200"}}, "input hardware: h100 there, h200 now");
  differs(same, {{"experiment", (dir / "other.json").string()}, {"hardware", "h100"}}, "input experiment:");
  write_text_file((dir / "cfg.json").string(), "{\"y\": 2}\n");
  differs(same, inputs, "input model configs: " + (dir / "cfg.json").string() + " changed since");
  BOOST_TEST(output_record_differences(record, "braid-schedgen", same, inputs).front().find("tool:") == 0u);
}
