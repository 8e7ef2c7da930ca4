// The scoring passes equal a direct computation: one sequence at a time through the
// model's forward and heads, and through the KV-cache decode path; the shift by one
// (entry t from the row that produced token t); micro-batching changes nothing.
#define BOOST_TEST_MODULE score_passes
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "rl/chunked_lm_head.hpp"
#include "score/batch_scorer.hpp"
#include "data/micro_batches.hpp"
#include "score/model_passes.hpp"
#include "tests/common/tiny_models.hpp"

#include <cmath>
#include <vector>

namespace {

using braid::io::SampleBatch;
using braid::model::Model;

braid::model::ModelConfig config() {
  return braid::test::tiny_config({.intermediate = 48, .vocab = 40, .positions = 64, .rms_norm_eps = 1e-5,
                                   .rope_theta = 1000.0});
}

// Sequences of random lengths and prompt lengths (one with an empty response, one with
// no prompt at all).
SampleBatch random_batch(std::uint64_t seed) {
  braid::Rng rng(seed);
  SampleBatch b;
  const std::vector<std::pair<int, int>> shapes{{3, 5}, {1, 9}, {4, 0}, {0, 6}, {6, 12}, {2, 1}, {5, 7}};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto [p, r] = shapes[i];
    std::vector<std::int32_t> seq(std::size_t(p + r));
    for (auto& t : seq) t = std::int32_t(rng.below(40));
    b.add(seq, p, std::int64_t(i));
  }
  b.logprobs_actor = std::vector<float>(b.token_count(), -1.0f);
  return b;
}

struct Models {
  std::unique_ptr<braid::backend::Backend> be = braid::backend::make_cpu_backend(2);
  Model policy{config(), {.lm_head = true}, *be};
  Model critic{config(), {.lm_head = false, .value_head = true}, *be};
  Models() {
    policy.init_random(11, 0.2);  // large weights: logprobs far from uniform
    critic.init_random(12, 0.2);
  }
};

// One sequence alone through forward + the chunked head: logprob of token j+1 at row j.
std::vector<float> direct_row_logprobs(const Model& m, std::span<const std::int32_t> seq) {
  auto acts = m.make_activations({.max_tokens = std::int64_t(seq.size()), .max_sequences = 1});
  const std::vector<std::int64_t> off{0, std::int64_t(seq.size())};
  const braid::model::Batch batch{seq, off};
  m.forward(batch, acts);
  braid::rl::ChunkedLmHead<float> head(m.backend(), m.config().vocab_size, m.config().hidden_size, 3);
  const auto targets = braid::rl::next_token_targets(batch);
  std::vector<float> lp(seq.size());
  braid::rl::token_logprobs<float>(m, acts, head, targets.data(), lp.data(), nullptr);
  return lp;
}

std::vector<float> direct_row_values(const Model& m, std::span<const std::int32_t> seq) {
  auto acts = m.make_activations({.max_tokens = std::int64_t(seq.size()), .max_sequences = 1});
  const std::vector<std::int64_t> off{0, std::int64_t(seq.size())};
  m.forward({seq, off}, acts);
  std::vector<float> v(seq.size());
  m.values(acts, v.data());
  return v;
}

// The decode path: prefill the first token, then one token at a time; log-softmax of
// the logits that were about to produce token j.
std::vector<float> decoded_logprobs(const Model& m, std::span<const std::int32_t> seq) {
  const int V = m.config().vocab_size;
  auto cache = m.make_kv_cache(1, std::int64_t(seq.size()));
  auto acts = m.make_activations({.max_tokens = 1, .max_sequences = 1});
  std::vector<float> out(seq.size(), 0.0f);
  for (std::size_t j = 0; j + 1 < seq.size(); ++j) {
    const braid::model::Segment seg{0, 1};
    m.forward_cached(seq.subspan(j, 1), std::span(&seg, 1), cache, acts);
    const float* logits = acts.logits();
    double mx = logits[0];
    for (int v = 1; v < V; ++v) mx = std::max(mx, double(logits[v]));
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(double(logits[v]) - mx);
    out[j + 1] = float(double(logits[seq[j + 1]]) - mx - std::log(sum));
  }
  return out;
}

// Tolerance that scales with magnitude (atol + |want|·rtol), as llm.c's checks do.
bool near(double got, double want, double atol = 1e-5, double rtol = 1e-4) {
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

}  // namespace

BOOST_AUTO_TEST_CASE(micro_batches_hold_at_most_the_budget_and_skip_empty_sequences) {
  const std::vector<std::int64_t> off{0, 3, 3, 8, 20, 22, 23};  // lengths 3 0 5 12 2 1
  const auto mbs = braid::data::pack_micro_batches(off, 8);
  BOOST_TEST(mbs.size() == 3);
  BOOST_TEST((mbs[0].sequences == std::vector<std::size_t>{0, 2}));
  BOOST_TEST(mbs[0].tokens == 8);
  BOOST_TEST((mbs[1].sequences == std::vector<std::size_t>{3}));  // longer than the budget: alone
  BOOST_TEST(mbs[1].tokens == 12);
  BOOST_TEST((mbs[2].sequences == std::vector<std::size_t>{4, 5}));
  BOOST_CHECK_THROW(braid::data::pack_micro_batches(off, 0), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(reference_logprobs_are_the_single_sequence_logprobs_shifted_by_one) {
  Models m;
  const SampleBatch b = random_batch(1);
  braid::score::ReferencePass pass(m.policy, 4096);
  const auto lp = pass.logprobs(b);
  BOOST_TEST(lp.size() == b.token_count());
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b.length(i) == 0) continue;
    const auto rows = direct_row_logprobs(m.policy, b.sequence(i));
    const auto decoded = decoded_logprobs(m.policy, b.sequence(i));
    for (std::size_t j = 0; j < b.length(i); ++j) {
      const float got = lp[b.begin(i) + j];
      if (j < std::size_t(b.prompt_len[i]) || j == 0) {
        BOOST_TEST(got == 0.0f);
      } else {
        BOOST_TEST(near(got, rows[j - 1]), got << " vs " << rows[j - 1]);
        BOOST_TEST(near(got, decoded[j], 1e-4), got << " vs " << decoded[j]);
        BOOST_TEST(got < -1e-3f);  // response tokens carry a computed log-probability, never the prompt's 0
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(values_are_the_critic_at_the_position_before_each_token) {
  Models m;
  const SampleBatch b = random_batch(2);
  braid::score::ValuePass pass(m.critic, 4096);
  const auto v = pass.values(b);
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b.length(i) == 0) continue;
    const auto rows = direct_row_values(m.critic, b.sequence(i));
    for (std::size_t j = 0; j < b.length(i); ++j) {
      const float got = v[b.begin(i) + j];
      if (j < std::size_t(b.prompt_len[i]) || j == 0) {
        BOOST_TEST(got == 0.0f);
      } else {
        BOOST_TEST(near(got, rows[j - 1]), got << " vs " << rows[j - 1]);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(reward_model_reads_the_value_head_at_the_last_token) {
  Models m;
  const SampleBatch b = random_batch(3);
  braid::score::RewardModelPass pass(m.critic, 4096);
  const auto r = pass.rewards(b);
  BOOST_TEST(r.size() == b.size());
  for (std::size_t i = 0; i < b.size(); ++i) {
    const auto rows = direct_row_values(m.critic, b.sequence(i));
    BOOST_TEST(near(r[i], rows.back()), r[i] << " vs " << rows.back());
  }
}

BOOST_AUTO_TEST_CASE(micro_batching_changes_nothing) {
  Models m;
  const SampleBatch b = random_batch(4);
  braid::score::ReferencePass whole(m.policy, 4096), small(m.policy, 7);
  braid::score::ValuePass whole_v(m.critic, 4096), small_v(m.critic, 7);
  const auto a = whole.logprobs(b), c = small.logprobs(b);
  const auto va = whole_v.values(b), vc = small_v.values(b);
  for (std::size_t t = 0; t < a.size(); ++t) {
    BOOST_TEST(near(a[t], c[t]), a[t] << " vs " << c[t]);
    BOOST_TEST(near(va[t], vc[t]), va[t] << " vs " << vc[t]);
  }
  BOOST_TEST(whole.timing().tokens == std::int64_t(b.token_count()));
  BOOST_TEST(small.timing().tokens == std::int64_t(b.token_count()));
  // A second batch through the same pass reuses (and grows) its activations.
  const SampleBatch b2 = random_batch(5);
  const auto again = small.logprobs(b2);
  braid::score::ReferencePass fresh(m.policy, 4096);
  const auto want = fresh.logprobs(b2);
  for (std::size_t t = 0; t < want.size(); ++t) BOOST_TEST(near(again[t], want[t]), again[t] << " vs " << want[t]);
}

BOOST_AUTO_TEST_CASE(batch_scorer_fills_every_array_for_ppo) {
  Models m;
  SampleBatch b = random_batch(6);
  braid::score::BatchScorer scorer({.ref = &m.policy, .critic = &m.critic, .reward = &m.critic},
                                   {.algorithm = "ppo", .kl_coef = 0.1, .micro_tokens = 9});
  scorer.check(b, "x.h5");
  const auto summary = scorer.score(b);
  BOOST_TEST(b.logprobs_ref.has_value());
  BOOST_TEST(b.values.has_value());
  BOOST_TEST(b.reward.has_value());
  BOOST_TEST(b.advantages.has_value());
  BOOST_TEST(b.returns.has_value());
  // Every array sized as the tokens: the one problem is the prompt-less sequence random_batch
  // holds on purpose, which a shard may not hold (io::layout_problems: a prompt holds a token).
  const auto problems = b.problems();
  BOOST_TEST(problems.size() == 1u);
  BOOST_TEST(problems.front().starts_with("/prompt_len: sequence 3 has prompt_len 0"), problems.front());
  BOOST_TEST(summary.response_tokens == 40);
  for (std::size_t t = 0; t < b.token_count(); ++t) {
    BOOST_TEST(near((*b.returns)[t], (*b.advantages)[t] + (*b.values)[t]));
  }
  BOOST_TEST(scorer.ref_timing().tokens == std::int64_t(b.token_count()));
  BOOST_TEST(scorer.critic_timing().tokens == std::int64_t(b.token_count()));
  BOOST_TEST(scorer.reward_timing().sequences == std::int64_t(b.size()));
}

BOOST_AUTO_TEST_CASE(batch_scorer_refuses_what_its_models_cannot_score) {
  Models m;
  braid::score::BatchScorer scorer({.ref = &m.policy, .critic = &m.critic, .reward = &m.critic},
                                   {.algorithm = "ppo", .kl_coef = 0.1});
  SampleBatch b = random_batch(7);
  b.logprobs_actor.reset();
  try {
    scorer.check(b, "gen-00001.h5");
    BOOST_FAIL("a shard without logprobs_actor was accepted");
  } catch (const braid::InputError& e) {
    BOOST_TEST(e.file() == "gen-00001.h5");
    BOOST_TEST(e.field() == "/logprobs/actor");
  }
  b = random_batch(7);
  b.tokens[3] = 40;  // one past the vocabulary
  try {
    scorer.check(b, "gen-00001.h5");
    BOOST_FAIL("a token outside the vocabulary was accepted");
  } catch (const braid::InputError& e) {
    BOOST_TEST(e.field() == "/tokens");
  }
  BOOST_CHECK_THROW(braid::score::BatchScorer({.critic = &m.critic, .reward = &m.critic},
                                              {.algorithm = "ppo", .kl_coef = 0.1}),
                    std::invalid_argument);
}
