// braid-train end to end: braid init makes an actor and a critic, the test writes
// two small scored shards (generation by lib/generate, rewards and GAE computed here:
// this does not depend on braid-generate / braid-score), and braid-train ppo writes
// new checkpoints (step + 1, changed weights) with their AdamW state, which a second
// call reuses; bad inputs exit 2 naming the file and the field.
#define BOOST_TEST_MODULE train_cli
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "generate/generate.hpp"
#include "io/sample_shard.hpp"
#include "io/weight_shard.hpp"
#include "score/advantages.hpp"

#include "../common/scratch.hpp"

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

using namespace braid;
namespace fs = std::filesystem;

namespace {

std::string bin(const std::string& tool) {
  const char* dir = std::getenv("BRAID_BIN");
  return (fs::path(dir != nullptr ? dir : "build/bin") / tool).string();
}

std::string source(const std::string& rel) {
  const char* dir = std::getenv("BRAID_SOURCE");
  return (fs::path(dir != nullptr ? dir : ".") / rel).string();
}

struct Run {
  int code = -1;
  std::string out, err;
};

// Runs a shell command line, stdout and stderr captured in scratch files.
Run run(const std::string& cmd, const std::string& tag) {
  const auto out = test::scratch(tag + ".out"), err = test::scratch(tag + ".err");
  const int status = std::system((cmd + " > " + out.string() + " 2> " + err.string()).c_str());
  Run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text_file(out.string());
  r.err = read_text_file(err.string());
  BOOST_TEST_MESSAGE(cmd << " -> " << r.code << "\n" << r.err);
  return r;
}

std::string p(const std::string& name) { return test::scratch(name).string(); }

// A scored shard of `prompts` × 2 samples from the actor, with made-up rewards and critic values.
// whitened: advantages to mean 0, std 1 over the response tokens, computed here
// (what --normalize-advantages should do to the unwhitened shard).
void write_scored_shard(const std::string& path, const model::Model& actor, int first_prompt, bool with_advantages,
                        bool with_ref = false, bool whitened = false) {
  std::vector<gen::Prompt> ps;
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 2; ++k)
      ps.push_back({static_cast<std::uint64_t>((first_prompt + i) * 2 + k), {256, static_cast<std::int32_t>('a' + i)}});
  const auto samples = gen::generate(actor, ps, {.sampling = {.seed = 7}, .max_batch = 8, .max_new_tokens = 6});
  io::SampleBatch b;
  b.reward.emplace();
  b.logprobs_actor.emplace();
  b.values.emplace();
  for (const auto& s : samples) {
    auto seq = s.prompt;
    seq.insert(seq.end(), s.response.begin(), s.response.end());
    const auto i = b.add(seq, static_cast<std::int32_t>(s.prompt.size()), static_cast<std::int64_t>(s.sample_id));
    for (std::size_t k = 0; k < s.response.size(); ++k) {
      (*b.logprobs_actor)[b.response_begin(i) + k] = s.raw_logprobs[k];
      (*b.values)[b.response_begin(i) + k] = 0.1f * static_cast<float>(k);
    }
    (*b.reward)[i] = static_cast<float>(s.sample_id % 3) / 2.0f;
  }
  if (with_advantages) score::ppo_advantages(b, {.kl_coef = 0.0});
  if (whitened) {
    std::vector<float*> response;
    for (std::size_t i = 0; i < b.size(); ++i) {
      for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) response.push_back(&(*b.advantages)[t]);
    }
    double mean = 0, var = 0;
    for (float* a : response) mean += *a;
    mean /= static_cast<double>(response.size());
    for (float* a : response) var += (*a - mean) * (*a - mean);
    const double sd = std::sqrt(var / static_cast<double>(response.size()));
    BOOST_TEST_REQUIRE(sd > 0.01);
    for (float* a : response) *a = static_cast<float>((*a - mean) / (sd + 1e-8));
  }
  if (with_ref) {
    std::vector<float> ref = *b.logprobs_actor;
    for (auto& x : ref) x -= 0.1f;
    b.logprobs_ref = std::move(ref);
  }
  write_sample_shard(path, b, {.policy_step = 0, .created_by = "test_cli", .config = "{}"});
}

double max_abs_difference(const std::string& a, const std::string& b, const std::string& tensor) {
  const auto x = io::WeightShardReader(a).read(tensor), y = io::WeightShardReader(b).read(tensor);
  double d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) d = std::max(d, double(std::abs(x[i] - y[i])));
  return d;
}

double sum_abs(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += std::abs(x);
  return s;
}

struct World {
  World() {
    // Outputs of an earlier run would be skipped as complete: every case starts empty,
    // which is safe only in ctest's own scratch folder.
    BOOST_TEST_REQUIRE(std::getenv("BRAID_SCRATCH") != nullptr, "run under ctest (BRAID_SCRATCH, BRAID_BIN)");
    for (const auto& e : fs::directory_iterator(test::scratch(""))) fs::remove_all(e.path());
    const std::string cfg = source("examples/tiny/config.json");
    BOOST_TEST_REQUIRE(run(bin("braid") + " init -q --config " + cfg + " --seed 1 -o " + p("actor.h5"), "init-actor").code == 0);
    BOOST_TEST_REQUIRE(run(bin("braid") + " init -q --config " + cfg + " --seed 2 --value-head --no-lm-head -o " +
                               p("critic.h5"), "init-critic").code == 0);
    auto be = backend::make_cpu_backend(1);
    const auto actor = checkpoint::open_model(p("actor.h5"), *be, {}, true);
    write_scored_shard(p("scored-00000.h5"), *actor.model, 0, true);
    write_scored_shard(p("scored-00001.h5"), *actor.model, 4, true);
    write_scored_shard(p("unscored.h5"), *actor.model, 0, false);
    write_scored_shard(p("grpo-00000.h5"), *actor.model, 0, true, true);
    write_scored_shard(p("whitened-00000.h5"), *actor.model, 0, true, false, true);
  }
  std::string ppo(const std::string& inputs, const std::string& actor, const std::string& critic, const std::string& out) {
    return bin("braid-train") + " ppo " + inputs + " --actor " + actor + " --critic " + critic + " --actor-out " +
           p(out + "-actor.h5") + " --critic-out " + p(out + "-critic.h5") + " --lr 1e-3 --critic-lr 1e-3 --threads 1";
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(ppo_writes_new_checkpoints_and_reuses_the_optimizer_state, World) {
  const std::string shards = p("scored-00000.h5") + " " + p("scored-00001.h5");
  const Run first = run(ppo(shards, p("actor.h5"), p("critic.h5"), "one") + " --mini-batch 8 --stats " + p("stats.json"), "first");
  BOOST_TEST_REQUIRE(first.code == 0);
  BOOST_TEST(first.out == p("one-actor.h5") + "\n" + p("one-critic.h5") + "\n");

  for (const std::string who : {"actor", "critic"}) {
    const std::string out = p("one-" + who + ".h5"), in = p(who + ".h5");
    BOOST_TEST(io::WeightShardReader(out).meta().step == 1);
    BOOST_TEST(max_abs_difference(in, out, "model.layers.0.self_attn.q_proj.weight") > 1e-5);
    const io::WeightShardReader state(p("one-" + who + ".optim.h5"));
    BOOST_TEST(state.meta().kind == "optimizer");
    BOOST_TEST(state.meta().step == 2);  // 16 sequences in mini-batches of 8: two steps
    BOOST_TEST(sum_abs(state.read(io::optimizer_tensor_name("model.norm.weight", "exp_avg"))) > 0);
    BOOST_TEST(sum_abs(state.read(io::optimizer_tensor_name("model.layers.3.mlp.down_proj.weight", "exp_avg_sq"))) > 0);
  }
  BOOST_TEST(max_abs_difference(p("critic.h5"), p("one-critic.h5"), "score.weight") > 1e-5);

  const json stats = load_json_file(p("stats.json"));
  BOOST_TEST(stats["format"] == "braid.stagestats");
  BOOST_TEST(stats["stage"] == "train");
  BOOST_TEST(stats["sequences"] == 16);
  for (const char* call : {"actor_train", "critic_train"}) {
    const json& c = stats["calls"][call];
    BOOST_TEST(c["seconds"].get<double>() > 0);
    BOOST_TEST(c["steps"] == 2);
    BOOST_TEST(c["tokens"] == stats["tokens"]);
    BOOST_TEST(c["per_step"].size() == 2u);
    BOOST_TEST(c["per_step"][0]["grad_norm"].get<double>() > 0);
  }
  BOOST_TEST(stats["calls"]["actor_train"].contains("clip_fraction"));
  BOOST_TEST(stats["calls"]["actor_train"].contains("approx_kl"));
  BOOST_TEST(stats["calls"]["critic_train"].contains("value_clip_fraction"));

  // The second iteration reads its shard paths from stdin and continues the AdamW state.
  const Run second = run("printf '%s\\n%s\\n' " + p("scored-00000.h5") + " " + p("scored-00001.h5") + " | " +
                             ppo("-", p("one-actor.h5"), p("one-critic.h5"), "two"), "second");
  BOOST_TEST_REQUIRE(second.code == 0);
  BOOST_TEST(io::WeightShardReader(p("two-actor.h5")).meta().step == 2);
  BOOST_TEST(io::WeightShardReader(p("two-actor.optim.h5")).meta().step == 3);  // 2 before + 1 (all 16 in one step)
  BOOST_TEST(second.err.find("optimizer state") != std::string::npos);

  // A rerun finds its outputs complete and leaves them alone.
  const auto written = fs::last_write_time(p("one-actor.h5"));
  const Run again = run(ppo(shards, p("actor.h5"), p("critic.h5"), "one") + " --mini-batch 8", "again");
  BOOST_TEST(again.code == 0);
  BOOST_TEST(again.out == first.out);
  BOOST_TEST(again.err.find("skipped") != std::string::npos);
  BOOST_TEST((fs::last_write_time(p("one-actor.h5")) == written));
}

// PPO with LoRA: both models get adapters; the critic's value head (new, so no adapter can
// learn it) is trained in full beside them and stored in its adapter file (modules_to_save),
// the actor's file holds adapters alone; the critic's loss falls over the epochs; the next call
// continues both adapter files on their bases.
BOOST_FIXTURE_TEST_CASE(ppo_with_lora_trains_the_critic_head_beside_the_adapters, World) {
  const std::string shards = p("scored-00000.h5") + " " + p("scored-00001.h5");
  const Run first = run(ppo(shards, p("actor.h5"), p("critic.h5"), "lora") + " --lora-rank 2 --epochs 4 --stats " +
                            p("lora-stats.json"),
                        "lora");
  BOOST_TEST_REQUIRE(first.code == 0, first.err);
  const io::WeightShardReader actor(p("lora-actor.h5")), critic(p("lora-critic.h5"));
  BOOST_TEST(actor.meta().kind == "adapters");
  BOOST_TEST(critic.meta().kind == "adapters");
  BOOST_TEST(!actor.contains("score.weight"));
  BOOST_TEST(!json::parse(actor.meta().adapter_config).contains("modules_to_save"));
  BOOST_TEST(json::parse(critic.meta().adapter_config)["modules_to_save"].dump() == R"(["score"])");
  BOOST_TEST(max_abs_difference(p("critic.h5"), p("lora-critic.h5"), "score.weight") > 1e-5);
  const json stats = load_json_file(p("lora-stats.json"));
  const json& steps = stats["calls"]["critic_train"]["per_step"];
  BOOST_TEST_REQUIRE(steps.size() == 4u);
  BOOST_TEST(steps.back()["loss"].get<double>() < steps.front()["loss"].get<double>());
  const Run second = run(ppo(shards, p("lora-actor.h5"), p("lora-critic.h5"), "lora2"), "lora2");
  BOOST_TEST_REQUIRE(second.code == 0, second.err);
  const io::WeightShardReader critic2(p("lora2-critic.h5"));
  BOOST_TEST(critic2.meta().step == 2);
  BOOST_TEST(json::parse(critic2.meta().adapter_config)["base"] == "critic.h5");
  BOOST_TEST(max_abs_difference(p("lora-critic.h5"), p("lora2-critic.h5"), "score.weight") > 1e-6);
}

// --normalize-advantages trains exactly as the same samples whose advantages were
// whitened beforehand, and not as the raw ones.
BOOST_FIXTURE_TEST_CASE(normalize_advantages_whitens_the_input_before_training, World) {
  const Run norm = run(ppo(p("scored-00000.h5"), p("actor.h5"), p("critic.h5"), "norm") + " --normalize-advantages", "norm");
  const Run pre = run(ppo(p("whitened-00000.h5"), p("actor.h5"), p("critic.h5"), "pre"), "pre");
  const Run raw = run(ppo(p("scored-00000.h5"), p("actor.h5"), p("critic.h5"), "raw"), "raw");
  BOOST_TEST_REQUIRE(norm.code == 0);
  BOOST_TEST_REQUIRE(pre.code == 0);
  BOOST_TEST_REQUIRE(raw.code == 0);
  BOOST_TEST(norm.err.find("advantages normalised over") != std::string::npos);
  for (const char* t : {"model.layers.0.self_attn.q_proj.weight", "lm_head.weight"}) {
    BOOST_TEST(max_abs_difference(p("norm-actor.h5"), p("pre-actor.h5"), t) < 1e-6);
    BOOST_TEST(max_abs_difference(p("norm-actor.h5"), p("raw-actor.h5"), t) > 1e-5);
  }
}

BOOST_FIXTURE_TEST_CASE(bad_inputs_exit_2_naming_the_file_and_field, World) {
  const Run unscored = run(ppo(p("unscored.h5"), p("actor.h5"), p("critic.h5"), "bad1"), "unscored");
  BOOST_TEST(unscored.code == 2);
  BOOST_TEST(unscored.err.find("unscored.h5") != std::string::npos);
  BOOST_TEST(unscored.err.find("advantages") != std::string::npos);
  BOOST_TEST(!fs::exists(p("bad1-actor.h5")));

  const Run no_value_head = run(ppo(p("scored-00000.h5"), p("actor.h5"), p("actor.h5"), "bad2"), "no-value-head");
  BOOST_TEST(no_value_head.code == 2);
  BOOST_TEST(no_value_head.err.find("score.weight") != std::string::npos);

  // A critic whose vocabulary is smaller than the samples' tokens: the message says it is the critic.
  json small = load_json_file(source("examples/tiny/config.json"));
  small["vocab_size"] = 40;
  for (const char* id : {"bos_token_id", "eos_token_id", "pad_token_id"}) small[id] = nullptr;  // ids of its vocabulary, or none
  write_text_file(p("small-vocab.json"), small.dump());
  BOOST_TEST_REQUIRE(run(bin("braid") + " init -q --config " + p("small-vocab.json") +
                             " --seed 2 --value-head --no-lm-head -o " + p("small-critic.h5"),
                         "init-small-critic")
                         .code == 0);
  const Run small_critic = run(ppo(p("scored-00000.h5"), p("actor.h5"), p("small-critic.h5"), "bad6"), "small-critic");
  BOOST_TEST(small_critic.code == 2);
  BOOST_TEST(small_critic.err.find("outside the critic's vocabulary of 40") != std::string::npos, small_critic.err);

  const Run missing = run(ppo(p("no-such-shard.h5"), p("actor.h5"), p("critic.h5"), "bad3"), "missing");
  BOOST_TEST(missing.code == 2);
  BOOST_TEST(missing.err.find("no-such-shard.h5") != std::string::npos);

  const Run missing_ckpt = run(ppo(p("scored-00000.h5"), p("no-such-actor.h5"), p("critic.h5"), "bad4"), "missing-ckpt");
  BOOST_TEST(missing_ckpt.code == 2);
  BOOST_TEST(missing_ckpt.err.find("no-such-actor.h5") != std::string::npos);

  const Run grpo_no_ref = run(bin("braid-train") + " grpo " + p("scored-00000.h5") + " --actor " + p("actor.h5") +
                                  " --actor-out " + p("bad5.h5"), "grpo-no-ref");
  BOOST_TEST(grpo_no_ref.code == 2);
  BOOST_TEST(grpo_no_ref.err.find("logprobs/ref") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(grpo_sft_and_rm_modes_write_step_plus_one, World) {
  const Run grpo = run(bin("braid-train") + " grpo " + p("grpo-00000.h5") + " --actor " + p("actor.h5") + " --actor-out " +
                           p("grpo-actor.h5") + " --kl-coef 0.1 --lr 1e-3 --threads 1 --stats " + p("grpo-stats.json"),
                       "grpo");
  BOOST_TEST_REQUIRE(grpo.code == 0);
  BOOST_TEST(grpo.out == p("grpo-actor.h5") + "\n");
  BOOST_TEST(io::WeightShardReader(p("grpo-actor.h5")).meta().step == 1);
  const json gs = load_json_file(p("grpo-stats.json"));
  BOOST_TEST(gs["calls"]["actor_train"]["kl_ref"].get<double>() > 0);
  BOOST_TEST(!gs["calls"].contains("critic_train"));

  write_text_file(p("sft.jsonl"), "{\"prompt\": \"Say a:\", \"response\": \"aaa\"}\n{\"prompt\": \"Say b:\", \"response\": \"bbb\"}\n");
  const Run sft = run(bin("braid-train") + " sft " + p("sft.jsonl") + " --actor " + p("actor.h5") + " --actor-out " +
                          p("sft-actor.h5") + " --lr 1e-3 --epochs 3 --threads 1 --stats " + p("sft-stats.json"),
                      "sft");
  BOOST_TEST_REQUIRE(sft.code == 0);
  BOOST_TEST(io::WeightShardReader(p("sft-actor.h5")).meta().step == 1);
  BOOST_TEST(io::WeightShardReader(p("sft-actor.optim.h5")).meta().step == 3);
  const json ss = load_json_file(p("sft-stats.json"));
  const json& steps = ss["calls"]["actor_train"]["per_step"];
  BOOST_TEST(steps.back()["loss"].get<double>() < steps.front()["loss"].get<double>());  // the same data, learnt

  write_text_file(p("pairs.jsonl"), "{\"prompt\": \"x\", \"chosen\": \"good\", \"rejected\": \"bad\"}\n"
                                    "{\"prompt\": \"y\", \"chosen\": \"fine\", \"rejected\": \"poor\"}\n");
  const Run rm = run(bin("braid-train") + " rm " + p("pairs.jsonl") + " --reward " + p("critic.h5") + " --reward-out " +
                         p("rm.h5") + " --lr 1e-3 --mini-batch 1 --threads 1 --stats " + p("rm-stats.json"),
                     "rm");
  BOOST_TEST_REQUIRE(rm.code == 0);
  BOOST_TEST(io::WeightShardReader(p("rm.h5")).meta().step == 1);
  const json rs = load_json_file(p("rm-stats.json"));
  BOOST_TEST(rs["calls"]["reward_train"]["steps"] == 2);  // two pairs, one a step
  BOOST_TEST(rs["calls"]["reward_train"].contains("accuracy"));

  // A policy checkpoint is no reward model.
  const Run rm_bad = run(bin("braid-train") + " rm " + p("pairs.jsonl") + " --reward " + p("actor.h5") + " --reward-out " +
                             p("rm-bad.h5"), "rm-bad");
  BOOST_TEST(rm_bad.code == 2);
  BOOST_TEST(rm_bad.err.find("score.weight") != std::string::npos);
}

// braid-train dpo: step + 1 with its AdamW state, the DPO metrics per step, the loss
// falling on the pairs it trains on; --ref, IPO; bad pairs and options exit 2.
BOOST_FIXTURE_TEST_CASE(dpo_mode_trains_a_policy_on_pairs, World) {
  write_text_file(p("dpo.jsonl"), "{\"prompt\": \"x\", \"chosen\": \"good\", \"rejected\": \"bad\"}\n"
                                  "{\"prompt\": \"y\", \"chosen\": \"fine\", \"rejected\": \"poor\"}\n"
                                  "{\"prompt\": \"z\", \"chosen\": \"yes\", \"rejected\": \"no\"}\n");
  const std::string base = bin("braid-train") + " dpo " + p("dpo.jsonl") + " --threads 1 --lr 1e-3";
  const Run dpo = run(base + " --actor " + p("actor.h5") + " --actor-out " + p("dpo-actor.h5") +
                          " --beta 0.5 --epochs 6 --stats " + p("dpo-stats.json"), "dpo");
  BOOST_TEST_REQUIRE(dpo.code == 0);
  BOOST_TEST(dpo.out == p("dpo-actor.h5") + "\n");
  BOOST_TEST(dpo.err.find("reference logprobs of 6 sequences") != std::string::npos);
  BOOST_TEST(io::WeightShardReader(p("dpo-actor.h5")).meta().step == 1);
  BOOST_TEST(io::WeightShardReader(p("dpo-actor.optim.h5")).meta().step == 6);
  BOOST_TEST(max_abs_difference(p("actor.h5"), p("dpo-actor.h5"), "model.layers.0.mlp.up_proj.weight") > 1e-5);
  const json ds = load_json_file(p("dpo-stats.json"));
  const json& call = ds["calls"]["actor_train"];
  for (const char* metric : {"accuracy", "margin", "reward_chosen", "reward_rejected", "logp_chosen", "logp_rejected",
                             "logp_accuracy"}) {
    BOOST_TEST(call.contains(metric), metric);
  }
  const json& steps = call["per_step"];
  BOOST_TEST(steps.size() == 6u);
  BOOST_TEST(steps.front()["loss"].get<double>() == std::log(2.0), boost::test_tools::tolerance(1e-4));  // at the reference
  BOOST_TEST(std::abs(steps.front()["margin"].get<double>()) < 1e-4);
  BOOST_TEST(steps.back()["loss"].get<double>() < steps.front()["loss"].get<double>());
  BOOST_TEST(steps.back()["margin"].get<double>() > 0);
  BOOST_TEST(steps.back()["reward_chosen"].get<double>() > steps.back()["reward_rejected"].get<double>());

  // Onward from the trained policy against the original reference: its first step already
  // has the margin it learnt (with --ref omitted it would start again at log 2).
  const Run more = run(base + " --actor " + p("dpo-actor.h5") + " --actor-out " + p("dpo-more.h5") + " --ref " +
                           p("actor.h5") + " --beta 0.5 --stats " + p("dpo-more-stats.json"), "dpo-more");
  BOOST_TEST_REQUIRE(more.code == 0);
  BOOST_TEST(io::WeightShardReader(p("dpo-more.h5")).meta().step == 2);
  const json ms = load_json_file(p("dpo-more-stats.json"));
  BOOST_TEST(ms["calls"]["actor_train"]["per_step"][0]["loss"].get<double>() < 0.99 * std::log(2.0));

  // IPO, length-normalised: (z − 1/(2β))² = 1 at the reference for β = 0.5.
  const Run ipo = run(base + " --actor " + p("actor.h5") + " --actor-out " + p("ipo-actor.h5") +
                          " --dpo-loss ipo --length-normalize --beta 0.5 --stats " + p("ipo-stats.json"), "ipo");
  BOOST_TEST_REQUIRE(ipo.code == 0);
  BOOST_TEST(load_json_file(p("ipo-stats.json"))["calls"]["actor_train"]["loss"].get<double>() == 1.0,
             boost::test_tools::tolerance(1e-4));

  write_text_file(p("no-chosen.jsonl"), "{\"prompt\": \"x\", \"chosen\": \"good\", \"rejected\": \"bad\"}\n"
                                        "{\"prompt\": \"y\", \"rejected\": \"poor\"}\n");
  const Run no_chosen = run(bin("braid-train") + " dpo " + p("no-chosen.jsonl") + " --actor " + p("actor.h5") +
                                " --actor-out " + p("bad-dpo.h5"), "dpo-no-chosen");
  BOOST_TEST(no_chosen.code == 2);
  BOOST_TEST(no_chosen.err.find(p("no-chosen.jsonl")) != std::string::npos, no_chosen.err);
  BOOST_TEST(no_chosen.err.find("line 2.chosen: missing") != std::string::npos, no_chosen.err);
  write_text_file(p("empty.jsonl"), "{\"prompt\": \"x\", \"chosen\": \"good\", \"rejected\": \"\"}\n");
  const Run empty = run(bin("braid-train") + " dpo " + p("empty.jsonl") + " --actor " + p("actor.h5") + " --actor-out " +
                            p("bad-dpo.h5"), "dpo-empty");
  BOOST_TEST(empty.code == 2);
  BOOST_TEST(empty.err.find(p("empty.jsonl")) != std::string::npos, empty.err);
  BOOST_TEST(empty.err.find("line 1.rejected: is empty") != std::string::npos, empty.err);
  const Run beta = run(base + " --actor " + p("actor.h5") + " --actor-out " + p("bad-dpo.h5") + " --beta 0", "dpo-beta");
  BOOST_TEST(beta.code == 2);
  BOOST_TEST(beta.err.find("--beta") != std::string::npos, beta.err);
  const Run kind = run(base + " --actor " + p("actor.h5") + " --actor-out " + p("bad-dpo.h5") + " --dpo-loss hinge", "dpo-kind");
  BOOST_TEST(kind.code == 2);
  BOOST_TEST(kind.err.find("--dpo-loss") != std::string::npos, kind.err);
  // A reward model is no policy (no LM head), as --actor or as --ref.
  const Run no_head = run(base + " --actor " + p("critic.h5") + " --actor-out " + p("bad-dpo.h5"), "dpo-no-head");
  BOOST_TEST(no_head.code == 2);
  BOOST_TEST(no_head.err.find("critic.h5") != std::string::npos, no_head.err);
  const Run ref_no_head =
      run(base + " --actor " + p("actor.h5") + " --actor-out " + p("bad-dpo.h5") + " --ref " + p("critic.h5"), "dpo-ref-no-head");
  BOOST_TEST(ref_no_head.code == 2);
  BOOST_TEST(ref_no_head.err.find("critic.h5") != std::string::npos, ref_no_head.err);
  // A reference of another vocabulary.
  json wide = load_json_file(source("examples/tiny/config.json"));
  wide["vocab_size"] = wide["vocab_size"].get<int>() + 8;
  write_text_file(p("wide.json"), wide.dump());
  BOOST_TEST_REQUIRE(run(bin("braid") + " init -q --config " + p("wide.json") + " --seed 3 -o " + p("wide.h5"), "init-wide").code == 0);
  const Run ref_vocab =
      run(base + " --actor " + p("actor.h5") + " --actor-out " + p("bad-dpo.h5") + " --ref " + p("wide.h5"), "dpo-ref-vocab");
  BOOST_TEST(ref_vocab.code == 2);
  BOOST_TEST(ref_vocab.err.find("wide.h5: vocab_size") != std::string::npos, ref_vocab.err);
  BOOST_TEST(!fs::exists(p("bad-dpo.h5")));
}

// --schedule under mpirun: the fused pipeline writes stage files of step + 1 with their
// AdamW state; a single-process call then continues from those stage files (any split
// loads into any other, optimizer state included).
BOOST_FIXTURE_TEST_CASE(fused_pipeline_under_mpirun_and_back_to_one_process, World) {
  write_text_file(p("spec.json"), R"({"format": "braid.schedspec", "version": 1, "devices": 2, "models": [
    {"name": "actor", "stages": 2, "replicas": 1, "micro_batches": 2, "fwd": 1, "bwd": 2, "act_mem": 1},
    {"name": "critic", "stages": 2, "replicas": 1, "micro_batches": 2, "fwd": 1, "bwd": 2, "act_mem": 1}]})");
  BOOST_TEST_REQUIRE(run(bin("braid-schedgen") + " -q " + p("spec.json") + " -o " + p("schedule.json") +
                             " --time-limit 0.2", "schedgen").code == 0);
  const std::string shards = p("scored-00000.h5") + " " + p("scored-00001.h5");
  const Run fused = run("mpirun -np 2 " + ppo(shards, p("actor.h5"), p("critic.h5"), "fused") + " --mini-batch 8 --schedule " +
                            p("schedule.json") + " --stats " + p("fused-stats.json"), "fused");
  BOOST_TEST_REQUIRE(fused.code == 0);
  BOOST_TEST(fused.out == p("fused-actor.stage0-of-2.h5") + "\n" + p("fused-actor.stage1-of-2.h5") + "\n" +
                              p("fused-critic.stage0-of-2.h5") + "\n" + p("fused-critic.stage1-of-2.h5") + "\n");
  for (const std::string who : {"actor", "critic"}) {
    for (int s = 0; s < 2; ++s) {
      const std::string suffix = ".stage" + std::to_string(s) + "-of-2.h5";
      BOOST_TEST(io::WeightShardReader(p("fused-" + who + suffix)).meta().step == 1);
      BOOST_TEST(io::WeightShardReader(p("fused-" + who + ".optim" + suffix)).meta().step == 2);
    }
  }
  BOOST_TEST(max_abs_difference(p("actor.h5"), p("fused-actor.stage0-of-2.h5"), "model.layers.0.mlp.up_proj.weight") > 1e-5);
  const json stats = load_json_file(p("fused-stats.json"));
  BOOST_TEST(stats["calls"]["actor_train"]["steps"] == 2);
  BOOST_TEST(stats["calls"]["critic_train"]["per_step"][0]["micro_batches"] == 2);

  const Run single = run(ppo(shards, p("fused-actor.h5"), p("fused-critic.h5"), "after"), "after-fused");
  BOOST_TEST_REQUIRE(single.code == 0);
  BOOST_TEST(io::WeightShardReader(p("after-actor.h5")).meta().step == 2);
  BOOST_TEST(io::WeightShardReader(p("after-actor.optim.h5")).meta().step == 3);
}
