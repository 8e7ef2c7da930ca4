// A tiny model learns a synthetic task by SFT ("add one to each digit": 3 9 0 7 ->
// 4 0 1 8) through braid-train's trainer (train::Trainer with the SFT objective: the
// engine's forward, backward, chunked LM head and AdamW), with f32 and with bf16 weight
// storage; then greedy generation through the KV-cache loop solves it far above chance.
#define BOOST_TEST_MODULE sft
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/rng.hpp"
#include "generate/generate.hpp"
#include "train/objectives.hpp"
#include "train/trainer.hpp"
#include "tests/common/tiny_models.hpp"

#include <algorithm>
#include <cmath>
#include <vector>


namespace {

constexpr int kDigits = 4;
constexpr std::int32_t kSep = 10, kEos = 11, kBos = 12;

std::vector<std::int32_t> random_digits(braid::Rng& rng) {
  std::vector<std::int32_t> d;
  for (int i = 0; i < kDigits; ++i) d.push_back(static_cast<std::int32_t>(rng.below(10)));
  return d;
}

std::vector<std::int32_t> prompt_of(const std::vector<std::int32_t>& d) {
  std::vector<std::int32_t> p{kBos};
  p.insert(p.end(), d.begin(), d.end());
  p.push_back(kSep);
  return p;
}

std::vector<std::int32_t> answer_of(const std::vector<std::int32_t>& d) {
  std::vector<std::int32_t> a;
  for (auto x : d) a.push_back((x + 1) % 10);
  a.push_back(kEos);
  return a;
}

// n examples: the prompt, then the answer (the response: what is learnt).
braid::io::SampleBatch examples(braid::Rng& rng, int n) {
  braid::io::SampleBatch b;
  for (int i = 0; i < n; ++i) {
    const auto d = random_digits(rng);
    auto tokens = prompt_of(d);
    const auto prompt_len = static_cast<std::int32_t>(tokens.size());
    for (auto t : answer_of(d)) tokens.push_back(t);
    b.add(tokens, prompt_len, static_cast<std::int64_t>(b.size()));
  }
  return b;
}

std::vector<std::size_t> all_of(const braid::io::SampleBatch& b) {
  std::vector<std::size_t> i(b.size());
  for (std::size_t k = 0; k < i.size(); ++k) i[k] = k;
  return i;
}

braid::model::ModelConfig config() {
  return braid::test::tiny_config({.hidden = 64, .intermediate = 128, .vocab = 16, .positions = 16});
}

// Trains with the weights stored as `dtype` (bf16: an f32 master in the optimizer, bf16
// compute copy) and checks the same held-out thresholds whatever the storage.
void learn_add_one(braid::backend::DType dtype) {
  auto be = braid::backend::make_cpu_backend(1);
  braid::model::Model m(config(), {.dtype = dtype}, *be);
  m.init_random(1);

  constexpr int kSteps = 400;
  braid::train::TrainerOptions opt;
  opt.adamw.weight_decay = 0.01;
  opt.lr = {.peak_lr = 3e-3, .min_lr = 3e-4, .warmup_steps = 20, .total_steps = kSteps};
  opt.micro = {.max_tokens = 16 * 11, .max_sequences = 16};
  braid::train::SftObjective objective;
  braid::train::Trainer trainer(m, objective, opt);

  braid::Rng data(7), held_out(8);
  const braid::io::SampleBatch eval = examples(held_out, 16);
  const double loss_before = trainer.evaluate(eval, all_of(eval));
  BOOST_TEST(std::abs(loss_before - std::log(16.0)) < 0.5);  // an untrained model is near uniform

  for (int step = 0; step < kSteps; ++step) {
    // Two micro-batches of 16: gradient accumulation is part of what is tested.
    const std::vector<braid::io::SampleBatch> micro{examples(data, 16), examples(data, 16)};
    const auto r = trainer.step(micro);
    BOOST_TEST_REQUIRE(std::isfinite(r.loss));
    BOOST_TEST(r.micro_batches == 2);
    BOOST_TEST(braid::train::total_units(objective, micro) == 2 * 16 * (kDigits + 1));
  }
  const double loss_after = trainer.evaluate(eval, all_of(eval));
  BOOST_TEST_MESSAGE("held-out loss " << loss_before << " -> " << loss_after);
  BOOST_TEST(loss_after < 0.1);

  // Greedy generation on new prompts; chance is 10% a digit, 0.01% a whole answer.
  std::vector<braid::gen::Prompt> prompts;
  std::vector<std::vector<std::int32_t>> answers;
  for (std::uint64_t i = 0; i < 200; ++i) {
    const auto d = random_digits(held_out);
    prompts.push_back({i, prompt_of(d)});
    answers.push_back(answer_of(d));
  }
  const auto samples = braid::gen::generate(
      m, prompts, {.sampling = {.temperature = 0}, .max_batch = 32, .max_new_tokens = kDigits + 3, .stop_tokens = {kEos}});
  int exact = 0, digits = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    exact += samples[i].response == answers[i];
    for (std::size_t k = 0; k < kDigits && k < samples[i].response.size(); ++k) digits += samples[i].response[k] == answers[i][k];
  }
  BOOST_TEST_MESSAGE("exact " << exact << "/200, digits " << digits << "/800");
  BOOST_TEST(exact >= 150);
  BOOST_TEST(digits >= 700);
}

}  // namespace

BOOST_AUTO_TEST_CASE(sft_learns_add_one_and_generation_solves_it) { learn_add_one(braid::backend::DType::f32); }

BOOST_AUTO_TEST_CASE(sft_learns_add_one_with_bf16_weights) { learn_add_one(braid::backend::DType::bf16); }
