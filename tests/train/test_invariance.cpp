// A step's update does not depend on how its mini-batch is cut: for every objective
// (PPO actor, GRPO actor, PPO critic, reward model, SFT, DPO and IPO), the same mini-batch of
// sequences of different lengths split into 1, 2, 3 and 7 micro-batches gives the same
// gradient, loss and updated weights, to float rounding; and so does a LoRA model with
// dropout on its adapters' input.
//
// Tolerances: gradients within 1e-5 of the largest gradient element (float sums taken
// in another order); weights within 2e-6 after one AdamW step at lr 1e-2 with eps 1e-3
// (an update moves by at most lr/eps times a gradient difference; eps this large keeps
// elements within rounding of zero from stepping by ±lr on either side).
#define BOOST_TEST_MODULE train_invariance
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/rng.hpp"
#include "train/commands.hpp"
#include "data/micro_batches.hpp"
#include "train/objectives.hpp"
#include "tests/common/arrays.hpp"
#include "tests/train/objective_cases.hpp"
#include "tests/train/uneven_batch.hpp"
#include "train/trainer.hpp"

#include <cmath>
#include <functional>
#include <numeric>

using namespace braid;

namespace {

using namespace braid::test;

using Case = test::ObjectiveCase;

std::unique_ptr<train::Objective> policy(const char* algorithm, const char* kl_estimator) {
  train::RlCommand c = train::rl_command(algorithm);
  c.kl_coef = 0.1;
  c.kl_estimator = kl_estimator;
  c.entropy_coef = 0.01;
  if (c.sequence_ratio) c.clip_low = c.clip_high = 0.2;  // some sequences inside the range, some out
  train::PolicyObjectiveOptions o = train::actor_objective_options(c);
  o.head_chunk_rows = 16;
  return std::make_unique<train::PolicyObjective>(o);
}

// Every objective braid-train has, and more of the policy's: every aggregation, the
// sequence ratio and each KL estimator (the algorithms' presets with a KL term and an
// entropy bonus added), and IPO.
std::vector<Case> cases() {
  std::vector<Case> all = test::objective_cases();
  const std::vector<Case> more = {
      {"dr-grpo: seq-mean-token-sum, k2", false, 1, [] { return policy("dr-grpo", "k2"); }},
      {"dapo: token-mean, clip-higher, k1", false, 1, [] { return policy("dapo", "k1"); }},
      {"gspo: sequence ratio, k3", false, 1, [] { return policy("gspo", "k3"); }},
      // β 0.5: gradients of the size the weight tolerance assumes. At β 0.1 IPO's target
      // 1/(2β) = 5 makes the largest gradient 2.4, and 2 micro-batches leave the weights
      // 3.6e-6 apart, still within lr/eps × their gradient difference (1.3e-6).
      {"ipo length-normalised", false, 2,
       [] {
         return std::make_unique<train::DpoObjective>(train::DpoObjectiveOptions{
             .loss = {.loss = backend::DpoLoss::ipo, .beta = 0.5}, .length_normalize = true, .head_chunk_rows = 16});
       }},
  };
  all.insert(all.end(), more.begin(), more.end());
  return all;
}

struct Result {
  std::vector<float> grads, weights;
  train::StepStats stats;
};

// With `lora` (rank > 0) the model trains adapters (B random, the value head beside them).
Result step_split(const Case& c, const io::SampleBatch& batch, int pieces, model::LoraOptions lora = {}) {
  auto be = backend::make_cpu_backend(1);
  lora.value_head = lora.enabled() && c.value_head;
  model::Model m(tiny(), {.lm_head = !c.value_head, .value_head = c.value_head, .lora = lora}, *be);
  m.init_random(11, 0.1);
  if (lora.enabled()) m.init_adapters(12, 0.1);
  auto obj = c.make();
  train::TrainerOptions opt;
  opt.lr = {.peak_lr = 1e-2, .min_lr = 1e-2, .kind = optim::LrSchedule::Kind::constant};
  opt.adamw.eps = 1e-3;
  opt.adamw.max_grad_norm = 0;
  opt.micro = {.max_tokens = 1024, .max_sequences = 16};
  train::Trainer t(m, *obj, opt);
  std::vector<std::size_t> order(batch.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  Rng rng(3);
  // A shuffled mini-batch in whole groups, as train_epochs makes them.
  std::vector<std::size_t> groups(batch.size() / c.group), indices;
  std::iota(groups.begin(), groups.end(), std::size_t{0});
  rng.shuffle(std::span<std::size_t>(groups));
  for (std::size_t g : groups) for (std::size_t k = 0; k < c.group; ++k) indices.push_back(g * c.group + k);
  const auto mbs = data::split_micro_batches(batch, indices, pieces, c.group);
  BOOST_REQUIRE_EQUAL(mbs.size(), static_cast<std::size_t>(pieces));
  Result r;
  r.stats = t.step(mbs);
  if (lora.enabled()) {
    for (const auto& a : m.adapters()) {
      r.grads.insert(r.grads.end(), a.grad, a.grad + a.numel);
      r.weights.insert(r.weights.end(), a.data, a.data + a.numel);
    }
    return r;
  }
  r.grads.assign(m.gradients().begin(), m.gradients().end());
  r.weights.assign(m.parameters().begin(), m.parameters().end());
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_objective_gives_one_update_however_the_mini_batch_is_split) {
  const io::SampleBatch batch = uneven_batch(5);
  for (const Case& c : cases()) {
    const Result one = step_split(c, batch, 1);
    const double top = largest(one.grads);
    BOOST_TEST(top > 1e-3, c.name << ": the gradient is not trivially zero");
    for (const int pieces : {2, 3, 7}) {
      const Result split = step_split(c, batch, pieces);
      const double dg = max_difference(one.grads, split.grads);
      const double dw = max_difference(one.weights, split.weights);
      BOOST_TEST_MESSAGE(c.name << ", " << pieces << " micro-batches: gradient apart " << dg << " (largest " << top
                                << "), weights apart " << dw << ", loss " << split.stats.loss << " vs " << one.stats.loss);
      BOOST_TEST(split.stats.micro_batches == pieces);
      BOOST_TEST(dg <= 1e-5 * top, c.name << " in " << pieces << ": gradient apart by " << dg);
      BOOST_TEST(dw <= 2e-6, c.name << " in " << pieces << ": weights apart by " << dw);
      BOOST_TEST(split.stats.loss == one.stats.loss, boost::test_tools::tolerance(1e-5));
      BOOST_TEST(split.stats.grad_norm == one.stats.grad_norm, boost::test_tools::tolerance(1e-5));
      for (const auto& [k, v] : one.stats.metrics) {
        BOOST_TEST(split.stats.metrics.at(k) == v, c.name << " metric " << k << ": " << split.stats.metrics.at(k)
                                                          << " vs " << v << boost::test_tools::tolerance(1e-4));
      }
    }
  }
}

// The same with a loss_mask that leaves holes in the responses (a conversation's user
// and tool turns between assistant turns), for the objectives that read it (every one
// but the reward model, which reads the last token): the same tolerances.
BOOST_AUTO_TEST_CASE(a_loss_mask_gives_one_update_however_the_mini_batch_is_split) {
  io::SampleBatch batch = uneven_batch(5);
  Rng rng(17);
  auto& mask = batch.loss_mask.emplace(batch.token_count(), 0.0f);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    for (std::size_t t = batch.response_begin(i); t < batch.end(i); ++t) mask[t] = rng.below(3) == 0 ? 0.0f : 1.0f;
  }
  for (const Case& c : cases()) {
    if (c.value_head && c.group == 2) continue;  // the reward model
    const Result one = step_split(c, batch, 1);
    const double top = largest(one.grads);
    BOOST_TEST(top > 1e-3, c.name << ": the gradient is not trivially zero");
    for (const int pieces : {2, 7}) {
      const Result split = step_split(c, batch, pieces);
      const double dg = max_difference(one.grads, split.grads);
      BOOST_TEST(dg <= 1e-5 * top, c.name << " masked, in " << pieces << ": gradient apart by " << dg);
      BOOST_TEST(max_difference(one.weights, split.weights) <= 2e-6, c.name << " masked, in " << pieces);
      BOOST_TEST(split.stats.loss == one.stats.loss, boost::test_tools::tolerance(1e-5));
    }
  }
}

// LoRA dropout (p 0.3 on every adapter's input): the masks are drawn by each sequence and
// token position and the optimizer step, not by the micro-batch a sequence lands in, so the
// update is the same however the mini-batch is cut, to the tolerances above; and the masks act
// (the loss is not the one without dropout).
BOOST_AUTO_TEST_CASE(lora_dropout_gives_one_update_however_the_mini_batch_is_split) {
  const io::SampleBatch batch = uneven_batch(5);
  const model::LoraOptions lora{.rank = 2, .alpha = 4, .dropout = 0.3};
  for (const Case& c : test::objective_cases()) {
    const Result one = step_split(c, batch, 1, lora);
    const Result plain = step_split(c, batch, 1, {.rank = 2, .alpha = 4});
    const double top = largest(one.grads);
    BOOST_TEST(top > 1e-3, c.name << ": the gradient is not trivially zero");
    BOOST_TEST(std::abs(one.stats.loss - plain.stats.loss) > 1e-6 * std::abs(plain.stats.loss),
               c.name << ": dropout leaves the loss as it was");
    for (const int pieces : {2, 7}) {
      const Result split = step_split(c, batch, pieces, lora);
      const double dg = max_difference(one.grads, split.grads);
      BOOST_TEST_MESSAGE(c.name << " (LoRA dropout), " << pieces << " micro-batches: gradient apart " << dg
                                << " (largest " << top << ")");
      BOOST_TEST(dg <= 1e-5 * top, c.name << " with dropout, in " << pieces << ": gradient apart by " << dg);
      BOOST_TEST(max_difference(one.weights, split.weights) <= 2e-6, c.name << " with dropout, in " << pieces);
      BOOST_TEST(split.stats.loss == one.stats.loss, boost::test_tools::tolerance(1e-5));
    }
  }
}
