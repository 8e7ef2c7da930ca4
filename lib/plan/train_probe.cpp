#include "plan/train_probe.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include "core/rng.hpp"
#include "io/sample_batch.hpp"
#include "model/model.hpp"
#include "train/objectives.hpp"
#include "train/trainer.hpp"

namespace braid::plan {
namespace {

constexpr int kPrompt = 8, kLength = 32;  // tokens of each synthetic sequence, its prompt

model::ModelConfig whole_config(const ModelShape& s) {
  model::ModelConfig c;
  c.hidden_size = static_cast<int>(s.hidden);
  c.num_hidden_layers = static_cast<int>(s.layers);
  c.num_attention_heads = static_cast<int>(s.heads);
  c.num_key_value_heads = static_cast<int>(s.kv_heads);
  c.intermediate_size = static_cast<int>(s.intermediate);
  c.vocab_size = static_cast<int>(s.vocab);
  c.max_position_embeddings = 4 * kLength;
  return c;
}

// `n` sequences of kLength tokens with every array the PPO objectives read.
io::SampleBatch scored(int n, int vocab) {
  Rng rng(7, 0);
  io::SampleBatch b;
  b.logprobs_actor.emplace();
  b.advantages.emplace();
  b.values.emplace();
  b.returns.emplace();
  for (int s = 0; s < n; ++s) {
    std::vector<std::int32_t> tokens(kLength);
    for (auto& t : tokens) t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
    const std::size_t i = b.add(tokens, kPrompt, s);
    for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) {
      (*b.logprobs_actor)[t] = -5.5f;
      (*b.advantages)[t] = static_cast<float>(rng.uniform()) - 0.5f;
      (*b.values)[t] = static_cast<float>(rng.uniform()) - 0.5f;
      (*b.returns)[t] = static_cast<float>(rng.uniform()) - 0.5f;
    }
  }
  return b;
}

// The tables' time of one micro-batch of `tokens` tokens in sequences of kLength.
double tables_micro(const ModelProfile& m, double tokens) {
  return static_cast<double>(m.shape.layers) * (m.layer_fwd.at(tokens, kLength) + m.layer_bwd.at(tokens, kLength)) +
         m.embed_fwd.at(tokens) + m.embed_bwd.at(tokens) + m.head_fwd.at(tokens) + m.head_bwd.at(tokens);
}


}  // namespace

void measure_train_extra(ModelProfile& m, backend::Backend& be, int repeats) {
  const ModelShape& s = m.shape;
  model::Model model(whole_config(s), {.lm_head = !s.value_head, .value_head = s.value_head}, be);
  model.init_random(3, 0.02);
  train::PolicyObjective policy(train::ppo_actor_options());
  train::ValueObjective value(0.2);
  train::Objective& obj = s.value_head ? static_cast<train::Objective&>(value) : policy;
  constexpr int kFew = 16, kMany = 64;
  // Steps of the same model at a tiny learning rate (the weights stay where they are).
  auto time_step = [&](int sequences, int per_micro) {
    train::TrainerOptions opt;
    opt.lr.peak_lr = 1e-9;
    opt.lr.kind = optim::LrSchedule::Kind::constant;
    opt.micro = {.max_tokens = static_cast<std::int64_t>(per_micro) * kLength, .max_sequences = 0, .group = 1};
    train::Trainer trainer(model, obj, opt);
    const io::SampleBatch batch = scored(sequences, static_cast<int>(s.vocab));
    std::vector<std::size_t> idx(batch.size());
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    trainer.step(batch, idx);  // untimed
    std::vector<double> t;
    for (int r = 0; r < std::max(1, repeats); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      trainer.step(batch, idx);
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return median(t);
  };
  const double per_seq_micro = time_step(kFew, 1), one_micro = time_step(kFew, kFew), big = time_step(kMany, kMany);
  // Residuals against the tables: r = micro-batches x micro + tokens x token + step.
  const double r_split = per_seq_micro - kFew * tables_micro(m, kLength);
  const double r_one = one_micro - tables_micro(m, static_cast<double>(kFew) * kLength);
  const double r_big = big - tables_micro(m, static_cast<double>(kMany) * kLength);
  auto& x = m.train_extra;
  x.micro = std::max(0.0, (r_split - r_one) / (kFew - 1));
  x.token = std::max(0.0, (r_big - r_one) / (static_cast<double>(kMany - kFew) * kLength));
  x.step = std::max(0.0, r_one - x.micro - x.token * kFew * kLength);
}

}  // namespace braid::plan
