// SFT and reward-model training from their JSON Lines inputs (read_sft_jsonl,
// read_preference_jsonl) through the Trainer: SFT learns to echo its prompt; the
// reward model learns to rank the completion that repeats the prompt's letter above
// one that does not, on held-out pairs; DPO teaches a policy the same preference.
#define BOOST_TEST_MODULE train_text_modes
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/rng.hpp"
#include "data/text_examples.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/objectives.hpp"
#include "rl/reference_logprobs.hpp"
#include "train/trainer.hpp"

#include "../common/scratch.hpp"
#include "tests/common/tiny_models.hpp"
#include "tests/common/input_error.hpp"

#include <nlohmann/json.hpp>

#include <numeric>

using namespace braid;

namespace {

model::ModelConfig byte_model() {
  return test::tiny_config({.hidden = 48, .intermediate = 96, .vocab = 259, .positions = 40});
}

std::string random_text(Rng& rng, int n, const std::string& alphabet) {
  std::string s;
  for (int i = 0; i < n; ++i) s += alphabet[rng.below(alphabet.size())];
  return s;
}

std::string jsonl(const std::vector<nlohmann::json>& lines) {
  std::string s;
  for (const auto& l : lines) s += l.dump() + "\n";
  return s;
}

std::vector<std::size_t> all(const io::SampleBatch& b) {
  std::vector<std::size_t> v(b.size());
  std::iota(v.begin(), v.end(), std::size_t{0});
  return v;
}

train::TrainerOptions options(double lr) {
  train::TrainerOptions t;
  t.lr = {.peak_lr = lr, .min_lr = lr, .kind = optim::LrSchedule::Kind::constant};
  t.micro = {.max_tokens = 512, .group = 1};
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(sft_learns_to_echo_the_prompt) {
  Rng rng(1);
  std::vector<nlohmann::json> train_lines, eval_lines;
  for (int i = 0; i < 96; ++i) {
    const std::string p = random_text(rng, 4, "bcdfg");
    (i < 64 ? train_lines : eval_lines).push_back({{"prompt", p + ">"}, {"response", p}});
  }
  const auto train_file = test::scratch("sft.jsonl"), eval_file = test::scratch("sft-eval.jsonl");
  write_text_file(train_file.string(), jsonl(train_lines));
  write_text_file(eval_file.string(), jsonl(eval_lines));
  const auto tok = tok::load_tokenizer("byte");
  const io::SampleBatch data = data::read_sft_jsonl(train_file.string(), *tok, 259, 40);
  const io::SampleBatch eval = data::read_sft_jsonl(eval_file.string(), *tok, 259, 40);
  BOOST_TEST(data.size() == 64u);
  BOOST_TEST(data.prompt_len[0] == 6);   // BOS + 4 letters + '>'
  BOOST_TEST(data.length(0) == 11u);     // + 4 letters + EOS
  BOOST_TEST(data.tokens[10] == *tok->eos());

  auto be = backend::make_cpu_backend(1);
  model::Model m(byte_model(), {.lm_head = true}, *be);
  m.init_random(5);
  train::SftObjective obj;
  train::Trainer trainer(m, obj, options(3e-3));
  const double before = trainer.evaluate(eval, all(eval));
  const auto records = train::train_epochs(data, std::vector<train::NamedTrainer>{{"actor_train", &trainer}},
                                           {.epochs = 60, .mini_batch = 16, .seed = 1});
  const double after = trainer.evaluate(eval, all(eval));
  BOOST_TEST_MESSAGE("SFT held-out NLL " << before << " -> " << after << " in " << records[0].steps.size() << " steps");
  BOOST_TEST(before > 4.5);  // near log 259
  BOOST_TEST(after < 1.0);
}

BOOST_AUTO_TEST_CASE(reward_model_ranks_held_out_pairs) {
  Rng rng(2);
  std::vector<nlohmann::json> train_lines, eval_lines;
  for (int i = 0; i < 160; ++i) {
    // Preferred: the completion that repeats the prompt's letter. Letters are symmetric,
    // so a random model ranks at chance; only the relation to the prompt tells them apart.
    const std::string letters = "abcdef";
    const std::size_t p = rng.below(6), q = (p + 1 + rng.below(5)) % 6;
    const std::string prompt(1, letters[p]);
    const std::string more(4, letters[p]), fewer(4, letters[q]);
    (i < 128 ? train_lines : eval_lines).push_back({{"prompt", prompt}, {"chosen", more}, {"rejected", fewer}});
  }
  const auto train_file = test::scratch("pairs.jsonl"), eval_file = test::scratch("pairs-eval.jsonl");
  write_text_file(train_file.string(), jsonl(train_lines));
  write_text_file(eval_file.string(), jsonl(eval_lines));
  const auto tok = tok::load_tokenizer("byte");
  const io::SampleBatch data = data::read_preference_jsonl(train_file.string(), *tok, 259, 40);
  const io::SampleBatch eval = data::read_preference_jsonl(eval_file.string(), *tok, 259, 40);
  BOOST_TEST(data.size() == 256u);

  auto be = backend::make_cpu_backend(1);
  model::Model m(byte_model(), {.lm_head = false, .value_head = true}, *be);
  m.init_random(6);
  train::PairwiseRewardObjective obj;
  auto opt = options(3e-3);
  opt.micro.group = 2;
  train::Trainer trainer(m, obj, opt);
  auto held_out_accuracy = [&] {
    auto acts = m.make_activations({.max_tokens = static_cast<std::int64_t>(eval.token_count()),
                                    .max_sequences = static_cast<std::int64_t>(eval.size())});
    m.forward({eval.tokens, eval.offsets}, acts);
    const auto r = train::last_token_values(m, acts, eval);
    int right = 0;
    for (std::size_t p = 0; p < eval.size() / 2; ++p) right += r[2 * p] > r[2 * p + 1];
    return double(right) / double(eval.size() / 2);
  };
  const double before = held_out_accuracy();
  train::train_epochs(data, std::vector<train::NamedTrainer>{{"reward_train", &trainer}},
                      {.epochs = 40, .mini_batch = 32, .seed = 2, .group = 2});
  const double after = held_out_accuracy();
  BOOST_TEST_MESSAGE("RM held-out accuracy " << before << " -> " << after);
  BOOST_TEST(before < 0.75);
  BOOST_TEST(after > 0.95);
}

// DPO on the reward model's task: the policy should come to prefer the completion that
// repeats the prompt's letter. The reference is the initial policy (its logprobs computed
// once, before training, as braid-train dpo does).
BOOST_AUTO_TEST_CASE(dpo_learns_the_preferred_completion_on_held_out_pairs) {
  Rng rng(3);
  std::vector<nlohmann::json> train_lines, eval_lines;
  for (int i = 0; i < 160; ++i) {
    const std::string letters = "abcdef";
    const std::size_t p = rng.below(6), q = (p + 1 + rng.below(5)) % 6;
    (i < 128 ? train_lines : eval_lines)
        .push_back({{"prompt", std::string(1, letters[p])}, {"chosen", std::string(4, letters[p])},
                    {"rejected", std::string(4, letters[q])}});
  }
  const auto train_file = test::scratch("dpo.jsonl"), eval_file = test::scratch("dpo-eval.jsonl");
  write_text_file(train_file.string(), jsonl(train_lines));
  write_text_file(eval_file.string(), jsonl(eval_lines));
  const auto tok = tok::load_tokenizer("byte");
  io::SampleBatch data = data::read_preference_jsonl(train_file.string(), *tok, 259, 40);
  io::SampleBatch eval = data::read_preference_jsonl(eval_file.string(), *tok, 259, 40);

  struct Variant {
    const char* name;
    train::DpoObjectiveOptions opt;
    double start_loss;  // at the reference: z = 0
  };
  const Variant variants[] = {
      {"DPO", {.loss = {.loss = backend::DpoLoss::sigmoid, .beta = 0.1}}, std::log(2.0)},
      {"IPO length-normalised", {.loss = {.loss = backend::DpoLoss::ipo, .beta = 0.5}, .length_normalize = true}, 1.0},
  };
  for (const Variant& v : variants) {
    auto be = backend::make_cpu_backend(1);
    model::Model m(byte_model(), {.lm_head = true}, *be);
    m.init_random(7);
    data.logprobs_ref = rl::reference_logprobs(m, data.tokens, data.offsets, 512);
    eval.logprobs_ref = rl::reference_logprobs(m, eval.tokens, eval.offsets, 512);
    train::DpoObjective obj(v.opt), held_out_obj(v.opt);
    auto opt = options(3e-3);
    opt.micro.group = 2;
    train::Trainer trainer(m, obj, opt);
    auto held_out = [&] {
      auto acts = m.make_activations({.max_tokens = static_cast<std::int64_t>(eval.token_count()),
                                      .max_sequences = static_cast<std::int64_t>(eval.size()), .training = true});
      m.forward({eval.tokens, eval.offsets}, acts);
      train::LossStats s = held_out_obj.loss_and_grad(m, acts, eval, 1.0);
      m.zero_grad();
      s.loss /= s.units;
      return s;
    };
    const train::LossStats before = held_out();
    const auto records = train::train_epochs(data, std::vector<train::NamedTrainer>{{"actor_train", &trainer}},
                                             {.epochs = 10, .mini_batch = 32, .seed = 3, .group = 2});
    const train::LossStats after = held_out();
    const auto& steps = records[0].steps;
    BOOST_TEST_MESSAGE(v.name << " training loss " << steps.front().loss << " -> " << steps[3].loss << " (4 steps) -> "
                       << steps.back().loss << " in " << steps.size() << " steps; held-out loss " << before.loss
                       << " -> " << after.loss << ", accuracy " << before.metrics.at("accuracy") << " -> "
                       << after.metrics.at("accuracy") << ", margin " << before.metrics.at("margin") << " -> "
                       << after.metrics.at("margin") << ", logp accuracy " << before.metrics.at("logp_accuracy")
                       << " -> " << after.metrics.at("logp_accuracy"));
    BOOST_TEST_CONTEXT(v.name) {
      BOOST_TEST(steps.front().loss == v.start_loss, boost::test_tools::tolerance(1e-4));  // the policy is the reference
      BOOST_TEST(steps[3].loss < steps.front().loss);                                      // falls within a few steps
      BOOST_TEST(steps.back().loss < 0.5 * steps.front().loss);
      BOOST_TEST(before.loss == v.start_loss, boost::test_tools::tolerance(1e-4));
      BOOST_TEST(after.loss < 0.5 * before.loss);
      BOOST_TEST(after.metrics.at("accuracy") > 0.9);
      BOOST_TEST(after.metrics.at("margin") > 0.1);
      BOOST_TEST(after.metrics.at("reward_chosen") > after.metrics.at("reward_rejected"));
      // The policy alone: its own logprobs rank the pairs near chance before, right after.
      BOOST_TEST(before.metrics.at("logp_accuracy") < 0.75);
      BOOST_TEST(after.metrics.at("logp_accuracy") > 0.9);
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_lines_are_all_reported_with_their_line_numbers) {
  const auto file = test::scratch("bad.jsonl");
  write_text_file(file.string(), "{\"prompt\": \"a\", \"response\": \"b\"}\nnot json\n{\"prompt\": \"a\", \"respons\": \"b\"}\n");
  const auto tok = tok::load_tokenizer("byte");
  const std::string what = braid::test::refusal([&] { data::read_sft_jsonl(file.string(), *tok, 259, 40); });
  BOOST_TEST(what.find("line 2") != std::string::npos, what);
  BOOST_TEST(what.find("line 3") != std::string::npos, what);
  BOOST_TEST(what.find("response") != std::string::npos, what);
}

// A missing field is named with its line (every such line at once); an empty completion
// (checked once every line has its fields) likewise.
BOOST_AUTO_TEST_CASE(bad_preference_pairs_name_the_line_and_the_field) {
  const auto tok = tok::load_tokenizer("byte");
  auto problems = [&](const std::string& name, const std::string& text) {
    const auto file = test::scratch(name);
    write_text_file(file.string(), text);
    try {
      data::read_preference_jsonl(file.string(), *tok, 259, 40);
    } catch (const InputError& e) {
      const std::string what = e.what();
      BOOST_TEST(what.find(file.string()) != std::string::npos, what);
      return what;
    }
    BOOST_FAIL("bad pairs were accepted");
    return std::string();
  };
  const std::string good = "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n";
  const std::string missing = problems("missing-chosen.jsonl", good + "{\"prompt\": \"a\", \"rejected\": \"c\"}\n" + good +
                                                                   "{\"prompt\": \"a\", \"chosen\": \"b\"}\n");
  BOOST_TEST(missing.find("line 2.chosen: missing") != std::string::npos, missing);
  BOOST_TEST(missing.find("line 4.rejected: missing") != std::string::npos, missing);
  const std::string empty = problems("empty-chosen.jsonl", good + "{\"prompt\": \"a\", \"chosen\": \"\", \"rejected\": \"c\"}\n");
  BOOST_TEST(empty.find("line 2.chosen: is empty") != std::string::npos, empty);
  BOOST_TEST(empty.find("line 1") == std::string::npos, empty);
}
