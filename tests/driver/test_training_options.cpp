// The run file's training options: an LR schedule that spans the whole run
// (train.lr_schedule, warmup_steps, min_lr: braid-train gets --lr-calls, the iterations
// left) and the adaptive KL coefficient (score.kl_target, kl_horizon: braid-score's
// --kl-coef of each iteration, from the previous iteration's metrics.json).
#define BOOST_TEST_MODULE driver_training_options
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/json.hpp"
#include "driver/kl_control.hpp"
#include "driver/makefile.hpp"
#include "driver/plan.hpp"
#include "driver/run_file.hpp"
#include "tests/common/input_error.hpp"
#include "tests/driver/run_files.hpp"

using namespace braid;
using namespace braid::driver;
namespace fs = std::filesystem;

namespace {

std::string run_json(const std::string& algorithm, const std::string& score, const std::string& train) {
  const std::string critic =
      algorithm == "ppo" ? R"("critic": {"init": {"config": "models/config.json", "seed": 2}},)" : "";
  return R"({"format": "braid.run", "version": 1, "algorithm": ")" + algorithm + R"(",
    "models": {"actor": {"init": {"config": "models/config.json", "seed": 1}}, )" + critic + R"(
               "reward": {"rule": "digits"}},
    "prompts": "prompts.jsonl", "iterations": 3,
    "score": )" + score + R"(, "train": )" + train + "}";
}

std::string value_after(const std::vector<std::string>& argv, const std::string& flag) {
  const auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "<absent>" : *(it + 1);
}

std::vector<std::string> problems_of(const fs::path& run) {
  return test::problems_of([&] { load_run_file(run); }, run.string());
}

bool names(const std::vector<std::string>& problems, const std::string& field) {
  return std::any_of(problems.begin(), problems.end(), [&](const auto& p) { return p.rfind(field + ":", 0) == 0; });
}

}  // namespace

BOOST_AUTO_TEST_CASE(lr_schedule_keys_reach_braid_train_and_span_the_run) {
  const fs::path run = test::run_folder(
      "lr_run", run_json("ppo", "{}", R"({"lr": 0.001, "lr_schedule": "cosine", "warmup_steps": 3, "min_lr": 0.0001})"));
  const RunSpec spec = load_run_file(run);
  const Layout layout(run.parent_path() / "out");
  const PlanOptions opt;
  for (int i = 1; i <= 3; ++i) {
    const auto& argv = train_step(spec, layout, opt, i).pipeline.back().argv;
    BOOST_TEST(value_after(argv, "--lr-schedule") == "cosine");
    BOOST_TEST(value_after(argv, "--warmup-steps") == "3");
    BOOST_TEST(value_after(argv, "--min-lr") == "0.0001");
    // This iteration and the ones after it: the decay ends with the run.
    BOOST_TEST(value_after(argv, "--lr-calls") == std::to_string(3 - i + 1));
  }
  // A constant rate needs no horizon.
  const fs::path flat = test::run_folder("lr_flat", run_json("ppo", "{}", R"({"lr_schedule": "constant"})"));
  const RunSpec flat_spec = load_run_file(flat);
  BOOST_TEST(value_after(train_step(flat_spec, layout, opt, 1).pipeline.back().argv, "--lr-calls") == "<absent>");
}

BOOST_AUTO_TEST_CASE(bad_training_options_are_named) {
  const auto problems = problems_of(test::run_folder(
      "bad_opts", run_json("ppo", R"({"kl_coef": 0, "kl_target": -1, "kl_horizon": 0})",
                           R"({"lr": 0.001, "lr_schedule": "step", "warmup_steps": -2, "min_lr": 0.5})")));
  BOOST_TEST(names(problems, "train.lr_schedule"));
  BOOST_TEST(names(problems, "train.warmup_steps"));
  BOOST_TEST(names(problems, "train.min_lr"));
  BOOST_TEST(names(problems, "score.kl_target"));
  BOOST_TEST(names(problems, "score.kl_horizon"));

  BOOST_TEST(names(problems_of(test::run_folder("min_above", run_json("ppo", "{}", R"({"lr": 0.001, "lr_schedule": "linear", "min_lr": 0.01})"))),
                   "train.min_lr"));
  BOOST_TEST(names(problems_of(test::run_folder("zero_coef", run_json("ppo", R"({"kl_coef": 0, "kl_target": 6})", "{}"))),
                   "score.kl_coef"));
  BOOST_TEST(names(problems_of(test::run_folder("horizon_alone", run_json("ppo", R"({"kl_horizon": 100})", "{}"))),
                   "score.kl_horizon"));
  BOOST_TEST(names(problems_of(test::run_folder("grpo_target", run_json("grpo", R"({"kl_target": 6})", "{}"))),
                   "score.kl_target"));
}

BOOST_AUTO_TEST_CASE(controller_moves_toward_the_target_by_at_most_a_fifth_per_horizon) {
  // TRL: kl_coef *= 1 + clip(kl / target - 1, -0.2, 0.2) * n_steps / horizon.
  BOOST_CHECK_CLOSE(adaptive_kl_update(0.2, 9.0, 6.0, 256, 10000), 0.2 * (1 + 0.2 * 256.0 / 10000), 1e-12);
  BOOST_CHECK_CLOSE(adaptive_kl_update(0.2, 6.6, 6.0, 256, 10000), 0.2 * (1 + 0.1 * 256.0 / 10000), 1e-9);
  BOOST_CHECK_CLOSE(adaptive_kl_update(0.2, 0.0, 6.0, 100, 1000), 0.2 * (1 - 0.2 * 0.1), 1e-12);
  BOOST_CHECK_CLOSE(adaptive_kl_update(0.05, 6.0, 6.0, 100, 1000), 0.05, 1e-12);
}

BOOST_AUTO_TEST_CASE(each_iteration_takes_its_coefficient_from_the_last_ones_metrics) {
  const fs::path run = test::run_folder(
      "kl_run", run_json("ppo", R"({"kl_coef": 0.1, "kl_target": 2.0, "kl_horizon": 40, "gamma": 1})", "{}"));
  const RunSpec spec = load_run_file(run);
  BOOST_TEST(spec.kl_target.value_or(0) == 2.0);
  BOOST_TEST(spec.kl_horizon == 40.0);
  BOOST_TEST(spec.kl_coef_start == 0.1);
  // The plan's --kl-coef, not the score section's, reaches braid-score.
  BOOST_TEST(std::none_of(spec.score.begin(), spec.score.end(), [](const auto& f) { return f.first == "--kl-coef"; }));
  const Layout layout(run.parent_path() / "out");
  const PlanOptions opt;
  auto score_argv = [&](int i) { return rollout_step(spec, layout, opt, i).pipeline.back().argv; };
  BOOST_TEST(value_after(score_argv(1), "--kl-coef") == "0.1");
  BOOST_TEST(value_after(score_argv(1), "--gamma") == "1");
  // Not measured yet: no value (a dry run shows where it will come from).
  BOOST_TEST(!iteration_kl_coef(spec, layout, 2).has_value());
  BOOST_TEST(value_after(score_argv(2), "--kl-coef").find("adaptive") != std::string::npos);

  // Iteration 1 used 0.1 and measured 0.5 nats a token over 8-token responses (4 a
  // sequence, twice the target): up by a fifth of 8 sequences / horizon 40.
  test::write_file(layout.iteration_metrics(1),
                   R"({"iteration": 1, "sequences": 8, "mean_response_length": 8.0, "kl": 0.5, "kl_coef": 0.1})");
  const double second = 0.1 * (1 + 0.2 * 8.0 / 40.0);
  BOOST_CHECK_CLOSE(*iteration_kl_coef(spec, layout, 2), second, 1e-12);
  BOOST_TEST(std::stod(value_after(score_argv(2), "--kl-coef")) == second);
  // Below target (1 nat a sequence): down, proportionally (1/2 - 1 clipped to -0.2).
  test::write_file(layout.iteration_metrics(2),
                   json{{"sequences", 8}, {"mean_response_length", 4.0}, {"kl", 0.25}, {"kl_coef", second}}.dump());
  BOOST_CHECK_CLOSE(*iteration_kl_coef(spec, layout, 3), second * (1 - 0.2 * 8.0 / 40.0), 1e-12);

  // Metrics without the figures are named.
  test::write_file(layout.iteration_metrics(2), R"({"sequences": 8})");
  try {
    iteration_kl_coef(spec, layout, 3);
    BOOST_FAIL("metrics without kl accepted");
  } catch (const InputError& e) {
    BOOST_TEST(e.file() == layout.iteration_metrics(2).string());
    BOOST_TEST(std::string(e.what()).find("kl") != std::string::npos);
  }
  // A Makefile cannot know the later coefficients.
  try {
    makefile_text(spec, layout, {});
    BOOST_FAIL("makefile with an adaptive KL accepted");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("score.kl_target") != std::string::npos);
  }
}
