// The trainer's accumulation and loop: k micro-batches give the very gradient one
// micro-batch of them all gives (test_invariance.cpp tries every objective and uneven
// lengths), and train_epochs walks
// every sequence once per epoch in mini-batches of the asked size.
#define BOOST_TEST_MODULE train_trainer
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/rng.hpp"
#include "train/objectives.hpp"
#include "train/trainer.hpp"
#include "tests/common/arrays.hpp"
#include "tests/common/tiny_models.hpp"

#include <cmath>
#include <numeric>

using namespace braid;

namespace {

using braid::test::max_difference;

model::ModelConfig tiny() {
  return test::tiny_config();
}

// n sequences of 8 tokens (prompt 3) with every array the policy and value losses read.
io::SampleBatch equal_length_batch(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  io::SampleBatch b;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::int32_t> seq(8);
    for (auto& t : seq) t = static_cast<std::int32_t>(rng.below(24));
    b.add(seq, 3, static_cast<std::int64_t>(i));
  }
  auto arr = [&](double mean, double sd) {
    std::vector<float> v(b.token_count());
    for (auto& x : v) x = static_cast<float>(mean + sd * rng.normal());
    return v;
  };
  b.logprobs_actor = arr(-3.2, 0.05);
  b.advantages = arr(0.0, 1.0);
  b.values = arr(0.0, 0.5);
  b.returns = arr(0.3, 0.5);
  return b;
}

train::TrainerOptions options(std::int64_t micro_tokens, double lr = 1e-2) {
  train::TrainerOptions t;
  t.lr = {.peak_lr = lr, .min_lr = lr, .kind = optim::LrSchedule::Kind::constant};
  t.adamw.max_grad_norm = 0;  // no clipping: the update shows the gradient's scale as it is
  t.micro = {.max_tokens = micro_tokens};
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(four_micro_batches_give_the_gradient_of_one) {
  auto be = backend::make_cpu_backend(1);
  const io::SampleBatch batch = equal_length_batch(8, 1);
  std::vector<std::size_t> all(8);
  std::iota(all.begin(), all.end(), std::size_t{0});
  for (const bool critic : {false, true}) {
    const model::ModelOptions mo{.lm_head = !critic, .value_head = critic};
    model::Model one(tiny(), mo, *be), four(tiny(), mo, *be);
    for (auto* m : {&one, &four}) m->init_random(7, 0.1);
    std::unique_ptr<train::Objective> obj_one, obj_four;
    if (critic) {
      obj_one = std::make_unique<train::ValueObjective>(0.2);
      obj_four = std::make_unique<train::ValueObjective>(0.2);
    } else {
      obj_one = std::make_unique<train::PolicyObjective>(train::ppo_actor_options());
      obj_four = std::make_unique<train::PolicyObjective>(train::ppo_actor_options());
    }
    // lr 0: the step leaves the weights, and the accumulated gradients stay to compare.
    train::Trainer t_one(one, *obj_one, options(64, 0.0)), t_four(four, *obj_four, options(16, 0.0));
    const auto s1 = t_one.step(batch, all);
    const auto s4 = t_four.step(batch, all);
    BOOST_TEST(s1.micro_batches == 1);
    BOOST_TEST(s4.micro_batches == 4);
    BOOST_TEST(s4.loss == s1.loss, boost::test_tools::tolerance(1e-5));
    BOOST_TEST(s4.grad_norm == s1.grad_norm, boost::test_tools::tolerance(1e-4));
    double largest = 0;
    for (float g : one.gradients()) largest = std::max(largest, double(std::abs(g)));
    const double apart = max_difference(one.gradients(), four.gradients());
    BOOST_TEST_MESSAGE((critic ? "critic" : "actor") << ": largest gradient " << largest << ", one vs four " << apart);
    BOOST_TEST(largest > 1e-3);
    BOOST_TEST(apart < 1e-5 * largest);
  }
}

BOOST_AUTO_TEST_CASE(every_sequence_once_per_epoch_in_mini_batches) {
  auto be = backend::make_cpu_backend(1);
  const io::SampleBatch batch = equal_length_batch(10, 2);
  model::Model m(tiny(), {.lm_head = false, .value_head = true}, *be);
  m.init_random(3);
  train::ValueObjective obj;
  train::Trainer t(m, obj, options(24));
  const train::LoopOptions loop{.epochs = 3, .mini_batch = 4, .seed = 5};
  BOOST_TEST(train::steps_per_call(10, loop) == 9);  // 4 + 4 + 2 per epoch
  std::vector<std::int64_t> sizes;
  const auto records = train::train_epochs(batch, std::vector<train::NamedTrainer>{{"critic_train", &t}}, loop,
                                           [&](const std::string& call, const train::StepStats& s) {
                                             BOOST_TEST(call == "critic_train");
                                             sizes.push_back(s.sequences);
                                           });
  const std::vector<std::int64_t> want{4, 4, 2, 4, 4, 2, 4, 4, 2};
  BOOST_TEST(sizes == want, boost::test_tools::per_element());
  BOOST_TEST(records[0].steps.size() == 9u);
  BOOST_TEST(records[0].tokens == 3 * 80);
  BOOST_TEST(t.optimizer().steps_taken() == 9);
  for (const auto& s : records[0].steps) BOOST_TEST(s.micro_batches == (s.sequences == 4 ? 2 : 1));
}
