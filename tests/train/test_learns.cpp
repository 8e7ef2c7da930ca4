// The proof that the trainer learns: a tiny random byte-level policy, rewarded for the
// fraction of its response bytes that are 'a', goes from chance (1/259) to mostly 'a'
// in a few PPO iterations of generate (lib/generate) → rewards, critic values, GAE
// (lib/rl/gae) → train_epochs (actor and critic). The same for GRPO with group
// advantages (lib/rl/grpo) and a KL penalty to the frozen initial policy.
#define BOOST_TEST_MODULE train_learns
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "generate/generate.hpp"
#include "rl/chunked_lm_head.hpp"
#include "rl/grpo.hpp"
#include "score/advantages.hpp"
#include "train/objectives.hpp"
#include "train/trainer.hpp"
#include "tests/common/tiny_models.hpp"

#include <cmath>
#include <numeric>

using namespace braid;

namespace {

constexpr std::int32_t kTarget = 'a';
constexpr std::int32_t kBos = 256;

model::ModelConfig byte_model() {
  return test::tiny_config({.vocab = 259});
}

struct Rollout {
  io::SampleBatch batch;
  double mean_reward = 0;
};

// prompts × per_prompt samples of new_tokens bytes each; sample_id = prompt · per_prompt + k.
Rollout rollout(const model::Model& actor, int prompts, int per_prompt, int new_tokens, std::uint64_t seed) {
  std::vector<gen::Prompt> ps;
  for (int p = 0; p < prompts; ++p) {
    for (int k = 0; k < per_prompt; ++k) {
      ps.push_back({static_cast<std::uint64_t>(p * per_prompt + k), {kBos, static_cast<std::int32_t>('A' + p % 26)}});
    }
  }
  const auto samples = gen::generate(actor, ps,
                                     {.sampling = {.temperature = 1.0, .seed = seed}, .max_batch = 64,
                                      .max_new_tokens = new_tokens});
  Rollout r;
  r.batch.reward.emplace();
  r.batch.logprobs_actor.emplace();
  for (const auto& s : samples) {
    std::vector<std::int32_t> seq = s.prompt;
    seq.insert(seq.end(), s.response.begin(), s.response.end());
    const std::size_t i = r.batch.add(seq, static_cast<std::int32_t>(s.prompt.size()), static_cast<std::int64_t>(s.sample_id));
    const std::size_t first = r.batch.response_begin(i);
    for (std::size_t k = 0; k < s.raw_logprobs.size(); ++k) (*r.batch.logprobs_actor)[first + k] = s.raw_logprobs[k];
    const double hits = double(std::count(s.response.begin(), s.response.end(), kTarget));
    (*r.batch.reward)[i] = static_cast<float>(hits / double(std::max<std::size_t>(s.response.size(), 1)));
    r.mean_reward += (*r.batch.reward)[i] / double(samples.size());
  }
  return r;
}

// A per-token array of b from a model's rows (entry t from row t − 1): values or logprobs.
std::vector<float> rows_to_tokens(const io::SampleBatch& b, const std::vector<float>& rows) {
  std::vector<float> out(b.token_count(), 0.0f);
  for (std::size_t i = 0; i < b.size(); ++i)
    for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) out[t] = rows[t - 1];
  return out;
}

std::vector<float> critic_values(const model::Model& critic, const io::SampleBatch& b) {
  auto acts = critic.make_activations({.max_tokens = static_cast<std::int64_t>(b.token_count()),
                                       .max_sequences = static_cast<std::int64_t>(b.size())});
  critic.forward({b.tokens, b.offsets}, acts);
  std::vector<float> rows(b.token_count());
  critic.values(acts, rows.data());
  return rows_to_tokens(b, rows);
}

std::vector<float> policy_logprobs(const model::Model& m, const io::SampleBatch& b) {
  auto acts = m.make_activations({.max_tokens = static_cast<std::int64_t>(b.token_count()),
                                  .max_sequences = static_cast<std::int64_t>(b.size())});
  m.forward({b.tokens, b.offsets}, acts);
  rl::ChunkedLmHead<float> head(m.backend(), m.config().vocab_size, m.config().hidden_size, 128);
  const auto targets = rl::next_token_targets({b.tokens, b.offsets});
  std::vector<float> rows(b.token_count());
  rl::token_logprobs<float>(m, acts, head, targets.data(), rows.data(), nullptr);
  return rows_to_tokens(b, rows);
}

train::TrainerOptions trainer_options(double lr) {
  train::TrainerOptions t;
  t.lr = {.peak_lr = lr, .min_lr = lr, .kind = optim::LrSchedule::Kind::constant};
  t.micro = {.max_tokens = 256};  // several micro-batches per step: accumulation is exercised
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(ppo_raises_the_reward_of_a_tiny_byte_policy) {
  auto be = backend::make_cpu_backend(1);
  model::Model actor(byte_model(), {.lm_head = true}, *be);
  model::Model critic(byte_model(), {.lm_head = false, .value_head = true}, *be);
  actor.init_random(1);
  critic.init_random(2);
  train::PolicyObjective actor_obj(train::ppo_actor_options(0.2));
  train::ValueObjective critic_obj(0.2);
  train::Trainer actor_trainer(actor, actor_obj, trainer_options(3e-3));
  train::Trainer critic_trainer(critic, critic_obj, trainer_options(3e-3));
  const std::vector<train::NamedTrainer> trainers{{"actor_train", &actor_trainer}, {"critic_train", &critic_trainer}};

  constexpr int kIterations = 40;
  std::vector<double> rewards;
  for (int it = 0; it < kIterations; ++it) {
    Rollout r = rollout(actor, 16, 4, 8, 1000 + it);
    rewards.push_back(r.mean_reward);
    r.batch.values = critic_values(critic, r.batch);
    score::ppo_advantages(r.batch, {.kl_coef = 0.0, .gamma = 1.0, .lambda = 0.95});
    const auto records = train::train_epochs(r.batch, trainers, {.epochs = 2, .mini_batch = 32, .seed = std::uint64_t(it)});
    BOOST_TEST_REQUIRE(records[0].steps.size() == 4u);
    BOOST_TEST_REQUIRE(std::isfinite(records[0].steps.back().loss));
    BOOST_TEST_MESSAGE("PPO iteration " << it << ": reward " << r.mean_reward << ", actor loss "
                       << records[0].steps.back().loss << ", clip " << records[0].steps.back().metrics.at("clip_fraction")
                       << ", value loss " << records[1].steps.back().loss);
  }
  const double first = rewards.front(), last = rollout(actor, 16, 4, 8, 99).mean_reward;
  BOOST_TEST_MESSAGE("PPO reward " << first << " -> " << last);
  BOOST_TEST(first < 0.05);
  BOOST_TEST(last > 0.5);
}

BOOST_AUTO_TEST_CASE(grpo_raises_the_reward_of_a_tiny_byte_policy) {
  auto be = backend::make_cpu_backend(1);
  model::Model actor(byte_model(), {.lm_head = true}, *be);
  model::Model ref(byte_model(), {.lm_head = true}, *be);
  actor.init_random(3);
  ref.init_random(3);
  train::PolicyObjective obj(train::grpo_actor_options(0.2, 0.001));
  train::Trainer trainer(actor, obj, trainer_options(3e-3));
  const std::vector<train::NamedTrainer> trainers{{"actor_train", &trainer}};

  constexpr int kIterations = 40, kGroup = 8;
  std::vector<double> rewards;
  for (int it = 0; it < kIterations; ++it) {
    Rollout r = rollout(actor, 8, kGroup, 8, 2000 + it);
    rewards.push_back(r.mean_reward);
    r.batch.logprobs_ref = policy_logprobs(ref, r.batch);
    rl::GroupRewards groups(kGroup);
    for (std::size_t i = 0; i < r.batch.size(); ++i) groups.add(r.batch.sample_id[i], (*r.batch.reward)[i]);
    score::group_advantages(r.batch, groups, {});
    const auto records = train::train_epochs(r.batch, trainers, {.epochs = 2, .mini_batch = 32, .seed = std::uint64_t(it)});
    BOOST_TEST_REQUIRE(std::isfinite(records[0].steps.back().loss));
    BOOST_TEST_MESSAGE("GRPO iteration " << it << ": reward " << r.mean_reward << ", loss "
                       << records[0].steps.back().loss << ", kl_ref " << records[0].steps.back().metrics.at("kl_ref"));
  }
  const double first = rewards.front(), last = rollout(actor, 8, kGroup, 8, 99).mean_reward;
  BOOST_TEST_MESSAGE("GRPO reward " << first << " -> " << last);
  BOOST_TEST(first < 0.05);
  BOOST_TEST(last > 0.5);
}
