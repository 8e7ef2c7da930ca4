// Experiment and cluster files: validation and length distributions.
#define BOOST_TEST_MODULE plan_experiment
#include <boost/test/unit_test.hpp>

#include <cstdlib>

#include "core/error.hpp"
#include "plan/experiment.hpp"

using namespace braid::plan;

namespace {
std::string fixture(const std::string& name) { return std::string(std::getenv("BRAID_FIXTURES")) + "/plan/" + name; }
}  // namespace

BOOST_AUTO_TEST_CASE(reads_models_by_hf_config_relative_to_the_experiment) {
  const Experiment e = load_experiment(fixture("ppo-tiny.json"));
  BOOST_TEST(e.models.size() == 4u);
  BOOST_TEST(e.model("actor")->shape.hidden == 2048);
  BOOST_TEST(e.model("actor")->shape.kv_heads == 4);
  BOOST_TEST(e.model("critic")->shape.value_head);
  BOOST_TEST(!e.model("ref")->shape.value_head);
  BOOST_TEST(*e.micro_batch == 4);
}

BOOST_AUTO_TEST_CASE(every_problem_of_an_experiment_is_reported_at_once) {
  const auto doc = braid::json::parse(R"({
    "format": "braid.experiment", "version": 1, "algorithm": "ppo",
    "models": {"actor": {"config": {"hidden_size": 100, "intermediate_size": 10, "num_hidden_layers": 2,
                                    "num_attention_heads": 3, "vocab_size": 10}},
               "critc": {}},
    "batch": {"global": 100, "mini": 30},
    "prompt_len": {"dist": "fixed", "value": 10},
    "response_len": {"dist": "lognormal", "median": 10, "min": 10, "max": 5}
  })");
  try {
    experiment_from_json(doc, "exp.json");
    BOOST_FAIL("accepted a broken experiment");
  } catch (const braid::InputError& e) {
    const std::string all = e.what();
    for (const char* needle : {"models.critc", "did you mean \"critic\"", "models.critic", "models.ref",
                               "hidden_size", "batch.mini", "response_len.sigma", "response_len.max"}) {
      BOOST_TEST_INFO(needle);
      BOOST_TEST(all.find(needle) != std::string::npos);
    }
  }
}

// Lengths of 1e300 and a config that is neither a path nor an object are input errors
// naming the field (they were accepted, or a raw JSON-library type error).
BOOST_AUTO_TEST_CASE(huge_lengths_and_a_numeric_config_are_refused) {
  const auto doc = braid::json::parse(R"({
    "format": "braid.experiment", "version": 1, "algorithm": "grpo",
    "models": {"actor": {"config": 7},
               "ref": {"config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "vocab_size": 100, "_name_or_path": 3}},
               "reward": {"config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                     "num_attention_heads": 4, "vocab_size": 100}}},
    "batch": {"global": 8, "mini": 8},
    "prompt_len": {"dist": "fixed", "value": 1e300},
    "response_len": {"dist": "samples", "values": [10, 3e9]}
  })");
  try {
    experiment_from_json(doc, "exp.json");
    BOOST_FAIL("accepted a broken experiment");
  } catch (const braid::InputError& e) {
    BOOST_TEST(e.file() == "exp.json");
    const std::string all = e.what();
    BOOST_TEST(e.problems().size() == 3u, all);
    for (const char* needle : {"models.actor.config: expected a path to an HF config.json or the config object",
                               "prompt_len.value: is 1e+300, must be <= 2147483647",
                               "response_len.values[1]: expected a length in [1, 2147483647]"}) {
      BOOST_TEST_INFO(needle);
      BOOST_TEST(all.find(needle) != std::string::npos);
    }
  }
}

// The trained models' settings: LoRA's rank, recomputation fixed or left to the plan; a
// recomputation that is neither a count nor "auto", a negative rank and an unknown key are
// refused naming the field.
BOOST_AUTO_TEST_CASE(train_settings_are_read_and_checked) {
  auto doc = braid::json::parse(R"({
    "format": "braid.experiment", "version": 1, "algorithm": "grpo",
    "models": {"actor": {"config": "cfg.json"}, "ref": {"config": "cfg.json"}, "reward": {"config": "cfg.json"}},
    "batch": {"global": 8, "mini": 8},
    "prompt_len": {"dist": "fixed", "value": 10}, "response_len": {"dist": "fixed", "value": 10}
  })");
  const braid::json cfg = braid::json::parse(R"({"hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100})");
  for (const char* role : {"actor", "ref", "reward"}) doc["models"][role]["config"] = cfg;
  BOOST_TEST(experiment_from_json(doc, "exp.json").train.lora_rank == 0);
  BOOST_TEST(experiment_from_json(doc, "exp.json").train.recompute == 0);
  doc["train"] = {{"lora_rank", 16}, {"recompute", "auto"}};
  const Experiment e = experiment_from_json(doc, "exp.json");
  BOOST_TEST(e.train.lora_rank == 16);
  BOOST_TEST(e.train.recompute_auto);
  doc["train"] = {{"recompute", 4}};
  BOOST_TEST(experiment_from_json(doc, "exp.json").train.recompute == 4);
  doc["train"] = {{"lora_rank", -1}, {"recompute", "sometimes"}, {"lora_alpha", 8}};
  try {
    experiment_from_json(doc, "exp.json");
    BOOST_FAIL("accepted broken train settings");
  } catch (const braid::InputError& err) {
    const std::string all = err.what();
    for (const char* needle : {"train.lora_rank", "train.recompute", "train.lora_alpha"}) {
      BOOST_TEST_INFO(needle);
      BOOST_TEST(all.find(needle) != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(lognormal_quantiles_have_the_median_and_the_cap) {
  LengthDist d;
  d.kind = "lognormal";
  d.median = 100;
  d.sigma = 1.0;
  d.min = 1;
  d.max = 1000;
  const auto q = d.quantiles(1000);
  BOOST_TEST(q.size() == 1000u);
  BOOST_TEST(std::abs(q[500] - 100) <= 1);
  BOOST_TEST(q.back() <= 1000);
  // P(len > 1000) = P(z > ln 10) = 1.07%: about ten samples sit at the cap.
  int capped = 0;
  for (int v : q) capped += v == 1000;
  BOOST_TEST(capped >= 8);
  BOOST_TEST(capped <= 13);
}

BOOST_AUTO_TEST_CASE(cluster_rejects_what_meshes_cannot_split) {
  const auto doc = braid::json::parse(R"({"format": "braid.cluster", "version": 1, "nodes": 0, "devices_per_node": 6})");
  try {
    cluster_from_json(doc, "c.json");
    BOOST_FAIL("accepted a broken cluster");
  } catch (const braid::InputError& e) {
    BOOST_TEST(e.problems().size() == 2u);
  }
  // A name that is not text and memory or links past any device (1e300 GB was planned with).
  const auto absurd = braid::json::parse(R"({"format": "braid.cluster", "version": 1, "name": null, "nodes": 1,
    "devices_per_node": 2, "device_memory_gb": 1e300, "inter_node_gbs": 9223372036854775808})");
  try {
    cluster_from_json(absurd, "c.json");
    BOOST_FAIL("accepted an absurd cluster");
  } catch (const braid::InputError& e) {
    const std::string all = e.what();
    for (const char* field : {"name: expected a string", "device_memory_gb: is 1e+300", "inter_node_gbs"}) {
      BOOST_TEST(all.find(field) != std::string::npos, all);
    }
  }
}

// An experiment's algorithm is required (a missing one planned PPO's six calls), its name text.
BOOST_AUTO_TEST_CASE(an_experiment_without_an_algorithm_or_with_a_name_not_text_is_refused) {
  auto doc = braid::json::parse(R"({"format": "braid.experiment", "version": 1, "name": 3,
    "models": {"actor": {"config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                    "num_attention_heads": 4, "vocab_size": 100}}},
    "batch": {"global": 8, "mini": 8},
    "prompt_len": {"dist": "fixed", "value": 8}, "response_len": {"dist": "fixed", "value": 8}})");
  try {
    experiment_from_json(doc, "exp.json");
    BOOST_FAIL("accepted an experiment without an algorithm");
  } catch (const braid::InputError& e) {
    const std::string all = e.what();
    BOOST_TEST(all.find("algorithm: missing (required)") != std::string::npos, all);
    BOOST_TEST(all.find("name: expected a string") != std::string::npos, all);
  }
}
