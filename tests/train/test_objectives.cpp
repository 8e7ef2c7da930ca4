// The objectives on a whole tiny model: the gradient the objective and the model's
// backward produce equals a finite difference of the objective's loss along a random
// direction in parameter space; and micro-batching keeps every sequence and its arrays.
#define BOOST_TEST_MODULE train_objectives
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "data/micro_batches.hpp"
#include "train/objectives.hpp"
#include "rl/reference_logprobs.hpp"
#include "tests/train/objective_checks.hpp"

#include <cmath>
#include <numeric>

using namespace braid;

namespace {

using namespace braid::test;

model::ModelConfig tiny() { return braid::test::objective_model(); }

struct Fixture {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(ppo_actor_gradient_through_the_whole_model, Fixture) {
  model::Model m(tiny(), {.lm_head = true}, *be);
  m.init_random(3, 0.2);  // larger weights than usual, so the policy is far from uniform
  Rng rng(1);
  io::SampleBatch mb = random_batch(rng, 4);
  auto lp = current_logprobs(m, mb);
  for (auto& x : lp) x += static_cast<float>(0.05 * rng.normal());
  mb.logprobs_actor = lp;
  mb.advantages = per_token(rng, mb.token_count(), 1.0);
  train::PolicyObjective obj(train::ppo_actor_options(0.2, 0.01));
  check_directional_derivative(m, obj, mb, 100);
}

BOOST_FIXTURE_TEST_CASE(grpo_actor_gradient_through_the_whole_model, Fixture) {
  model::Model m(tiny(), {.lm_head = true}, *be);
  m.init_random(4, 0.2);
  Rng rng(2);
  io::SampleBatch mb = random_batch(rng, 4);
  auto lp = current_logprobs(m, mb);
  mb.logprobs_actor = lp;
  auto ref = lp;
  for (auto& x : ref) x += static_cast<float>(0.3 * rng.normal());
  mb.logprobs_ref = ref;
  mb.advantages = per_token(rng, mb.token_count(), 1.0);
  train::PolicyObjective obj(train::grpo_actor_options(0.2, 0.5));
  check_directional_derivative(m, obj, mb, 101);
}

BOOST_FIXTURE_TEST_CASE(critic_gradient_through_the_whole_model, Fixture) {
  model::Model m(tiny(), {.lm_head = false, .value_head = true}, *be);
  m.init_random(5, 0.2);
  Rng rng(3);
  io::SampleBatch mb = random_batch(rng, 4);
  mb.values = per_token(rng, mb.token_count(), 0.5);
  mb.returns = per_token(rng, mb.token_count(), 1.0, 0.5);
  train::ValueObjective obj(10.0);  // clipping far away: a smooth loss
  check_directional_derivative(m, obj, mb, 102);
}

BOOST_FIXTURE_TEST_CASE(reward_model_gradient_through_the_whole_model, Fixture) {
  model::Model m(tiny(), {.lm_head = false, .value_head = true}, *be);
  m.init_random(6, 0.2);
  Rng rng(4);
  io::SampleBatch mb = random_batch(rng, 6);
  train::PairwiseRewardObjective obj;
  check_directional_derivative(m, obj, mb, 103);
  io::SampleBatch odd = random_batch(rng, 3);
  auto acts = m.make_activations({.max_tokens = 256, .max_sequences = 16, .training = true});
  m.forward({odd.tokens, odd.offsets}, acts);
  BOOST_CHECK_THROW(obj.loss_and_grad(m, acts, odd, 1.0), std::invalid_argument);
}

BOOST_FIXTURE_TEST_CASE(sft_gradient_through_the_whole_model, Fixture) {
  model::Model m(tiny(), {.lm_head = true}, *be);
  m.init_random(7, 0.2);
  Rng rng(5);
  io::SampleBatch mb = random_batch(rng, 4);
  train::SftObjective obj(8);
  check_directional_derivative(m, obj, mb, 104);
}

// DPO's loss is a function of whole-sequence sums of logprobs: the directional check
// covers the sums, the pairing (chosen +, rejected −) and the LM head's backward. The
// reference sits near the policy so that both sides of the pair move the loss.
BOOST_FIXTURE_TEST_CASE(dpo_gradient_through_the_whole_model, Fixture) {
  struct Variant {
    backend::DpoLoss loss;
    bool length_normalize;
    double beta;
  };
  for (const Variant v : {Variant{backend::DpoLoss::sigmoid, false, 0.5}, Variant{backend::DpoLoss::ipo, true, 0.1},
                          Variant{backend::DpoLoss::sigmoid, true, 2.0}}) {
    model::Model m(tiny(), {.lm_head = true}, *be);
    m.init_random(9, 0.2);
    Rng rng(8);
    io::SampleBatch mb = random_batch(rng, 6);
    auto ref = current_logprobs(m, mb);
    for (auto& x : ref) x += static_cast<float>(0.2 * rng.normal());
    mb.logprobs_ref = ref;
    train::DpoObjective obj({.loss = {.loss = v.loss, .beta = v.beta}, .length_normalize = v.length_normalize,
                             .head_chunk_rows = 16});
    check_directional_derivative(m, obj, mb, 105);
  }
  model::Model m(tiny(), {.lm_head = true}, *be);
  m.init_random(9, 0.2);
  Rng rng(9);
  io::SampleBatch odd = random_batch(rng, 3);
  auto acts = m.make_activations({.max_tokens = 256, .max_sequences = 16, .training = true});
  m.forward({odd.tokens, odd.offsets}, acts);
  train::DpoObjective obj({});
  odd.logprobs_ref = std::vector<float>(odd.token_count(), -1.0f);
  BOOST_CHECK_THROW(obj.loss_and_grad(m, acts, odd, 1.0), std::invalid_argument);  // not pairs
  io::SampleBatch no_ref = random_batch(rng, 2);
  m.forward({no_ref.tokens, no_ref.offsets}, acts);
  try {
    obj.loss_and_grad(m, acts, no_ref, 1.0);
    BOOST_FAIL("no error for a batch without reference logprobs");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()).find("logprobs/ref") != std::string::npos);
  }
}

// The reference pass gives each token the logprob its producing row gives it, however the
// batch is cut into micro-batches; and at the policy's own weights DPO starts at log 2 a
// pair with (to rounding) zero margins.
BOOST_FIXTURE_TEST_CASE(reference_logprobs_are_the_models_own_per_token_logprobs, Fixture) {
  model::Model m(tiny(), {.lm_head = true}, *be);
  m.init_random(10, 0.2);
  Rng rng(10);
  io::SampleBatch b = random_batch(rng, 8);
  const auto want = current_logprobs(m, b);
  for (const std::int64_t max_tokens : {14, 40, 256}) {
    const auto got = rl::reference_logprobs(m, b.tokens, b.offsets, max_tokens);
    BOOST_REQUIRE_EQUAL(got.size(), want.size());
    double apart = 0;
    for (std::size_t t = 0; t < got.size(); ++t) apart = std::max(apart, double(std::abs(got[t] - want[t])));
    BOOST_TEST(apart <= 1e-5, "micro-batches of " << max_tokens << " tokens: apart by " << apart);
  }
  for (std::size_t i = 0; i < b.size(); ++i) BOOST_TEST(rl::reference_logprobs(m, b.tokens, b.offsets, 256)[b.begin(i)] == 0.0f);
  BOOST_CHECK_THROW(rl::reference_logprobs(m, b.tokens, b.offsets, 5), UsageError);  // a sequence longer than a micro-batch

  b.logprobs_ref = rl::reference_logprobs(m, b.tokens, b.offsets, 256);
  train::DpoObjective obj({});
  auto acts = m.make_activations({.max_tokens = 256, .max_sequences = 16, .training = true});
  m.forward({b.tokens, b.offsets}, acts);
  const train::LossStats s = obj.loss_and_grad(m, acts, b, 1.0);
  BOOST_TEST(s.units == 4.0);
  BOOST_TEST(s.loss == 4 * std::log(2.0), boost::test_tools::tolerance(1e-5));
  BOOST_TEST(std::abs(s.metrics.at("margin")) < 1e-6);
}

BOOST_FIXTURE_TEST_CASE(a_missing_array_is_named, Fixture) {
  model::Model m(tiny(), {.lm_head = true}, *be);
  m.init_random(8);
  Rng rng(6);
  io::SampleBatch mb = random_batch(rng, 2);
  mb.logprobs_actor = std::vector<float>(mb.token_count(), -1.0f);
  auto acts = m.make_activations({.max_tokens = 256, .max_sequences = 16, .training = true});
  m.forward({mb.tokens, mb.offsets}, acts);
  train::PolicyObjective obj(train::ppo_actor_options());
  try {
    obj.loss_and_grad(m, acts, mb, 1.0);
    BOOST_FAIL("no error for a batch without advantages");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()).find("advantages") != std::string::npos);
  }
}

// With a loss_mask, SFT's loss is −Σ of the logprobs of the response tokens the mask
// keeps, directly computed, its units their count; and the gradient still matches.
BOOST_FIXTURE_TEST_CASE(sft_with_a_loss_mask_learns_only_the_marked_tokens, Fixture) {
  model::Model m(tiny(), {.lm_head = true}, *be);
  m.init_random(12, 0.2);
  Rng rng(12);
  io::SampleBatch mb = random_batch(rng, 5);
  auto& mask = mb.loss_mask.emplace(mb.token_count(), 0.0f);
  for (auto& x : mask) x = rng.below(2) == 0 ? 0.0f : 1.0f;
  const auto lp = current_logprobs(m, mb);
  double direct = 0;
  int learnt = 0, masked_out = 0;
  for (std::size_t i = 0; i < mb.size(); ++i) {
    for (std::size_t t = mb.response_begin(i); t < mb.end(i); ++t) {
      if (mask[t] == 0.0f) {
        ++masked_out;
        continue;
      }
      direct -= lp[t];
      ++learnt;
    }
  }
  BOOST_TEST_REQUIRE(masked_out > 0);
  train::SftObjective obj(8);
  auto acts = m.make_activations({.max_tokens = 256, .max_sequences = 16, .training = true});
  m.forward({mb.tokens, mb.offsets}, acts);
  const train::LossStats s = obj.loss_and_grad(m, acts, mb, 1.0);
  BOOST_TEST(s.units == double(learnt));
  BOOST_TEST(s.loss == direct, boost::test_tools::tolerance(1e-5));
  check_directional_derivative(m, obj, mb, 106);
}

BOOST_AUTO_TEST_CASE(response_rows_are_weighted_by_token_or_sequence_mean) {
  io::SampleBatch b;
  b.add(std::vector<std::int32_t>{1, 2, 3, 4, 5}, 2, 0);  // response tokens 2..4 -> rows 1..3
  b.add(std::vector<std::int32_t>{1, 2, 3}, 2, 1);        // response token 7 -> row 6
  const auto tok = train::response_row_weights(b, train::Aggregation::token_mean);
  const std::vector<float> want_tok{0, 1, 1, 1, 0, 0, 1, 0};
  BOOST_TEST(tok == want_tok, boost::test_tools::per_element());
  BOOST_TEST(train::response_units(b, train::Aggregation::token_mean) == 4.0);
  const auto seq = train::response_row_weights(b, train::Aggregation::seq_mean_token_mean);
  const std::vector<float> want_seq{0, 1 / 3.f, 1 / 3.f, 1 / 3.f, 0, 0, 1, 0};
  for (std::size_t r = 0; r < seq.size(); ++r) BOOST_TEST(seq[r] == want_seq[r], boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(train::response_units(b, train::Aggregation::seq_mean_token_mean) == 2.0);
  const std::vector<float> arr{10, 11, 12, 13, 14, 20, 21, 22};
  const auto rows = train::token_array_on_rows(b, arr);
  const std::vector<float> want_rows{11, 12, 13, 14, 0, 21, 22, 0};
  BOOST_TEST(rows == want_rows, boost::test_tools::per_element());
  // A loss_mask drops token 3 (row 2): the other tokens of its sequence share the mean.
  b.loss_mask = std::vector<float>{0, 0, 1, 0, 1, 0, 0, 1};
  const auto masked = train::response_row_weights(b, train::Aggregation::seq_mean_token_mean);
  const std::vector<float> want_masked{0, 0.5f, 0, 0.5f, 0, 0, 1, 0};
  BOOST_TEST(masked == want_masked, boost::test_tools::per_element());
  BOOST_TEST(train::response_units(b, train::Aggregation::token_mean) == 3.0);
}

BOOST_AUTO_TEST_CASE(micro_batches_keep_order_arrays_limits_and_groups) {
  Rng rng(7);
  io::SampleBatch b = random_batch(rng, 10);
  b.advantages = per_token(rng, b.token_count(), 1.0);
  b.reward = per_token(rng, b.size(), 1.0);
  std::vector<std::size_t> order{9, 3, 0, 7, 1, 2, 8, 4, 6, 5};
  const auto mbs = data::micro_batches(b, order, {.max_tokens = 30, .max_sequences = 3, .group = 2});
  std::size_t k = 0;
  for (const auto& mb : mbs) {
    BOOST_TEST(mb.token_count() <= 30u);
    BOOST_TEST(mb.size() <= 3u);
    BOOST_TEST(mb.size() % 2 == 0u);
    BOOST_TEST(mb.problems().empty());
    for (std::size_t i = 0; i < mb.size(); ++i, ++k) {
      const std::size_t src = order[k];
      BOOST_TEST(mb.sample_id[i] == b.sample_id[src]);
      BOOST_TEST((*mb.reward)[i] == (*b.reward)[src]);
      const auto a = std::span<const float>(*mb.advantages).subspan(mb.begin(i), mb.length(i));
      const auto want = std::span<const float>(*b.advantages).subspan(b.begin(src), b.length(src));
      BOOST_TEST(std::equal(a.begin(), a.end(), want.begin(), want.end()));
    }
  }
  BOOST_TEST(k == order.size());
  BOOST_CHECK_THROW(data::micro_batches(b, order, {.max_tokens = 5}), UsageError);
  BOOST_CHECK_THROW(data::micro_batches(b, std::span(order).first(3), {.max_tokens = 100, .group = 2}), UsageError);

  const auto three = data::split_micro_batches(b, order, 3);
  BOOST_TEST(three.size() == 3u);
  std::size_t total = 0, largest = 0;
  for (const auto& mb : three) {
    BOOST_TEST(mb.size() >= 1u);
    total += mb.size();
    largest = std::max(largest, mb.token_count());
  }
  BOOST_TEST(total == 10u);
  BOOST_TEST(largest <= b.token_count() / 3 + 14);  // within one sequence of an even split
  BOOST_CHECK_THROW(data::split_micro_batches(b, order, 11), UsageError);
}
