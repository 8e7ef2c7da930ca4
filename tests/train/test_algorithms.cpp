// Every named policy algorithm (rl/algorithms.hpp) against a direct computation of its
// paper's equations, written out here with nothing of braid's but the model's logprobs:
//
//   advantages  the estimator braid-score runs (rl's group, leave-one-out and
//               returns-to-go advantages; REINFORCE++'s whitening) for groups of samples
//               of random rewards, token by token, within 1e-5;
//   loss        braid-train's policy objective under the algorithm's preset (its
//               aggregation, clip range, sequence ratio and a KL term of each estimator)
//               on a tiny model, against the same loss summed here from the model's own
//               per-token logprobs, within 1e-5 relative;
//   gradient    the objective's backward against a finite difference of that loss along a
//               random direction in parameter space (test_objectives' check, within 3%).
#define BOOST_TEST_MODULE train_algorithms
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "rl/algorithms.hpp"
#include "rl/gae.hpp"
#include "rl/grpo.hpp"
#include "train/commands.hpp"
#include "train/group_filter.hpp"
#include "train/objectives.hpp"
#include "tests/train/objective_checks.hpp"

#include <cmath>
#include <map>
#include <numeric>

using namespace braid;
using braid::test::current_logprobs;

namespace {

constexpr std::size_t kGroups = 3, kGroup = 4;  // 12 sequences: 3 prompts x 4 samples

struct Case {
  io::SampleBatch batch;
  std::vector<float> rewards;  // per sequence
};

// Groups of samples with 0/1 rewards (one group all equal), old logprobs near the model's own
// and a reference farther off.
Case make_case(model::Model& m, std::uint64_t seed) {
  Rng rng(seed);
  Case c{braid::test::random_batch(rng, kGroups * kGroup), {}};
  for (std::size_t i = 0; i < c.batch.size(); ++i) c.rewards.push_back(i < kGroup ? 1.0f : float(rng.below(2)));
  const auto lp = current_logprobs(m, c.batch);
  std::vector<float> old = lp, ref = lp;
  for (std::size_t t = 0; t < lp.size(); ++t) {
    old[t] += static_cast<float>(0.03 * rng.normal());
    ref[t] += static_cast<float>(0.3 * rng.normal());
  }
  c.batch.logprobs_actor = old;
  c.batch.logprobs_ref = ref;
  c.batch.reward = c.rewards;
  return c;
}

// The advantages the algorithm's estimator gives, computed here from the definitions.
std::vector<double> direct_advantages(const rl::Algorithm& a, const Case& c) {
  const io::SampleBatch& b = c.batch;
  std::vector<double> adv(b.token_count(), 0.0);
  if (a.estimator == rl::Estimator::returns_to_go) {
    // r_t = −β·(a_t − r_t) (k1), + R at the last token; A_t = Σ_{s≥t} r_s (γ = 1).
    const double beta = *a.kl_reward_coef;
    for (std::size_t i = 0; i < b.size(); ++i) {
      double to_go = 0;
      for (std::size_t t = b.end(i); t-- > b.response_begin(i);) {
        double r = -beta * (double((*b.logprobs_actor)[t]) - double((*b.logprobs_ref)[t]));
        if (t + 1 == b.end(i)) r += c.rewards[i];
        to_go += r;
        adv[t] = to_go;
      }
    }
  } else {
    for (std::size_t g = 0; g < kGroups; ++g) {
      double mean = 0, var = 0;
      for (std::size_t k = 0; k < kGroup; ++k) mean += c.rewards[g * kGroup + k];
      mean /= kGroup;
      for (std::size_t k = 0; k < kGroup; ++k) var += std::pow(c.rewards[g * kGroup + k] - mean, 2);
      const double sd = std::sqrt(var / kGroup);
      for (std::size_t k = 0; k < kGroup; ++k) {
        const std::size_t i = g * kGroup + k;
        double others = 0;
        for (std::size_t j = 0; j < kGroup; ++j) others += j == k ? 0.0 : c.rewards[g * kGroup + j];
        const double a_i = a.estimator == rl::Estimator::leave_one_out ? c.rewards[i] - others / (kGroup - 1)
                           : a.std_normalize                           ? (c.rewards[i] - mean) / (sd + 1e-6)
                                                                       : c.rewards[i] - mean;
        for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) adv[t] = a_i;
      }
    }
  }
  if (a.whiten) {
    double mean = 0, n = 0, var = 0;
    for (std::size_t i = 0; i < b.size(); ++i)
      for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) mean += adv[t], n += 1;
    mean /= n;
    for (std::size_t i = 0; i < b.size(); ++i)
      for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) var += std::pow(adv[t] - mean, 2);
    const double sd = std::sqrt(var / n);
    for (std::size_t i = 0; i < b.size(); ++i)
      for (std::size_t t = b.response_begin(i); t < b.end(i); ++t) adv[t] = (adv[t] - mean) / (sd + 1e-8);
  }
  return adv;
}

// The advantages braid computes: rl's estimators as braid-score runs them, then braid-train's
// whitening where the algorithm asks for it.
std::vector<float> braid_advantages(const rl::Algorithm& a, Case& c, backend::Backend& be) {
  io::SampleBatch& b = c.batch;
  const rl::SequenceLayout layout{b.offsets, b.prompt_len};
  std::vector<float> adv(b.token_count()), returns(b.token_count());
  if (a.estimator == rl::Estimator::returns_to_go) {
    rl::ppo_advantages({.layout = layout, .logprobs_actor = *b.logprobs_actor, .logprobs_ref = *b.logprobs_ref,
                        .values = {}, .rewards = c.rewards},
                       {.kl_coef = *a.kl_reward_coef, .gamma = 1.0, .lambda = 1.0}, adv, returns);
  } else {
    rl::GroupRewards groups(kGroup);
    for (std::size_t i = 0; i < b.size(); ++i) groups.add(b.sample_id[i], c.rewards[i]);
    rl::broadcast_group_advantages(layout, b.sample_id, groups,
                                   {.estimator = a.estimator, .std_normalize = a.std_normalize}, adv);
  }
  if (a.whiten) rl::whiten_advantages(be, layout, adv);
  return adv;
}

// The policy loss of the options, summed here from the current logprobs: per token
// ℓ = max(−A·ρ, −A·clip(ρ, 1 − ε_low, 1 + ε_high)) + β·k(logp − ref), ρ the token's ratio
// (or under GSPO its sequence's, exp of the mean log-ratio), then aggregated.
double direct_loss(const train::PolicyObjectiveOptions& o, const io::SampleBatch& b, const std::vector<float>& lp) {
  double total = 0, tokens = 0, sequences = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const std::size_t first = b.response_begin(i), end = b.end(i);
    double seq_log_ratio = 0;
    for (std::size_t t = first; t < end; ++t) seq_log_ratio += double(lp[t]) - double((*b.logprobs_actor)[t]);
    seq_log_ratio /= double(end - first);
    double sum = 0;
    for (std::size_t t = first; t < end; ++t) {
      const double a = (*b.advantages)[t];
      const double ratio = std::exp(o.sequence_ratio ? seq_log_ratio : double(lp[t]) - double((*b.logprobs_actor)[t]));
      const double clipped = std::clamp(ratio, 1.0 - o.loss.clip_low, 1.0 + o.loss.clip_high);
      const double d = double(lp[t]) - double((*b.logprobs_ref)[t]);
      const double kl = o.loss.kl_estimator == backend::KlEstimator::k1   ? d
                        : o.loss.kl_estimator == backend::KlEstimator::k2 ? 0.5 * d * d
                                                                          : std::exp(-d) + d - 1.0;
      sum += std::max(-a * ratio, -a * clipped) + o.loss.kl_coef * kl;
    }
    const double n = double(end - first);
    total += o.aggregation == train::Aggregation::seq_mean_token_mean ? sum / n : sum;
    tokens += n;
    sequences += 1;
  }
  return total / (o.aggregation == train::Aggregation::token_mean ? tokens : sequences);
}

struct Fixture {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(every_algorithm_is_its_papers_equations, Fixture) {
  std::uint64_t seed = 1;
  for (const std::string& name : rl::algorithm_names()) {
    if (name == "ppo") continue;  // GAE with a critic: tests/rl and test_objectives
    BOOST_TEST_CONTEXT(name) {
      const rl::Algorithm a = *rl::algorithm_named(name);
      model::Model m(braid::test::objective_model(), {.lm_head = true}, *be);
      m.init_random(seed, 0.2);
      Case c = make_case(m, 10 + seed++);

      const std::vector<double> want_adv = direct_advantages(a, c);
      const std::vector<float> adv = braid_advantages(a, c, *be);
      double apart = 0;
      for (std::size_t t = 0; t < adv.size(); ++t) apart = std::max(apart, std::abs(adv[t] - want_adv[t]));
      BOOST_TEST(apart <= 1e-5, "advantages apart by " << apart);
      c.batch.advantages = adv;

      // The preset's loss with a KL term of each estimator in turn.
      for (const char* estimator : {"k1", "k2", "k3"}) {
        train::RlCommand cmd = train::rl_command(name);
        cmd.kl_coef = 0.1;
        cmd.kl_estimator = estimator;
        const train::PolicyObjectiveOptions o = train::actor_objective_options(cmd);
        BOOST_TEST((o.aggregation == *train::aggregation_named(a.loss_agg)));
        BOOST_TEST(o.loss.clip_low == a.clip_low);
        BOOST_TEST(o.loss.clip_high == a.clip_high);
        BOOST_TEST(o.sequence_ratio == a.sequence_ratio);
        train::PolicyObjective obj({.loss = o.loss, .aggregation = o.aggregation, .sequence_ratio = o.sequence_ratio,
                                    .head_chunk_rows = 16});
        auto acts = m.make_activations({.max_tokens = 256, .max_sequences = 16, .training = true});
        m.forward({c.batch.tokens, c.batch.offsets}, acts);
        const train::LossStats s = obj.loss_and_grad(m, acts, c.batch, 1.0);
        const double want = direct_loss(o, c.batch, current_logprobs(m, c.batch));
        BOOST_TEST(s.loss / s.units == want, boost::test_tools::tolerance(1e-5));
      }

      // The gradient, with an entropy bonus too; GSPO's 3e-4 clip would leave no token
      // unclipped, so its ratio is checked inside a wider range.
      train::RlCommand cmd = train::rl_command(name);
      cmd.kl_coef = 0.1;
      cmd.entropy_coef = 0.01;
      if (a.sequence_ratio) cmd.clip_low = cmd.clip_high = 0.5;
      train::PolicyObjectiveOptions o = train::actor_objective_options(cmd);
      o.head_chunk_rows = 16;
      train::PolicyObjective obj(o);
      braid::test::check_directional_derivative(m, obj, c.batch, 100 + seed);
    }
  }
}

// GSPO's ratio is one per sequence: every response row of a sequence gets the same log
// ratio, the mean of its tokens' (capped at 10), and a sequence without a response none.
BOOST_AUTO_TEST_CASE(gspo_sequence_ratio_is_the_mean_token_log_ratio) {
  io::SampleBatch b;
  b.add(std::vector<std::int32_t>{1, 2, 3, 4}, 2, 0);  // response tokens 2, 3: rows 1, 2
  b.add(std::vector<std::int32_t>{5, 6}, 2, 1);        // no response
  const std::vector<float> lp{0, -1.0f, -2.0f, 0, 0, 0}, old{0, -1.5f, -1.0f, 0, 0, 0};
  const auto r = train::sequence_log_ratios(b, lp, old);
  BOOST_TEST(r[1] == -0.25f);
  BOOST_TEST(r[2] == -0.25f);
  BOOST_TEST(r[0] == 0.0f);
  BOOST_TEST(r[4] == 0.0f);
  const std::vector<float> far{0, 50.0f, 50.0f, 0, 0, 0};
  BOOST_TEST(train::sequence_log_ratios(b, far, old)[1] == 10.0f);
}

// The options that cannot be are refused by name: a clip-higher below the floor's ε, an
// unknown aggregation or KL estimator, negative coefficients, an unknown algorithm.
BOOST_AUTO_TEST_CASE(bad_policy_options_are_refused_naming_the_option) {
  const auto refused = [](train::RlCommand c, const std::string& name) {
    try {
      train::actor_objective_options(c);
      BOOST_ERROR("accepted; expected an error naming " << name);
    } catch (const UsageError& e) {
      BOOST_TEST(std::string(e.what()).find(name) != std::string::npos, e.what());
    }
  };
  train::RlCommand c = train::rl_command("dapo");
  c.clip_high = 0.1;
  refused(c, "--clip-high");
  c = train::rl_command("grpo");
  c.clip = 0.3;
  c.clip_high = 0.2;
  refused(c, "--clip-high");
  c = train::rl_command("grpo");
  c.loss_agg = "seq-sum";
  refused(c, "--loss-agg");
  c.loss_agg = "token-mean";
  c.kl_estimator = "k0";
  refused(c, "--kl-estimator");
  c.kl_estimator = "k2";
  c.tis_cap = -1;
  refused(c, "--tis-cap");
  BOOST_CHECK_THROW(train::rl_command("ppo2"), UsageError);
  // --clip sets both sides, each side its own option over it.
  c = train::rl_command("dapo");
  BOOST_TEST(train::actor_objective_options(c).loss.clip_high == 0.28);
  c.clip = 0.1;
  BOOST_TEST(train::actor_objective_options(c).loss.clip_high == 0.1);
  c.clip_high = 0.3;
  BOOST_TEST(train::actor_objective_options(c).loss.clip_low == 0.1);
  BOOST_TEST(train::actor_objective_options(c).loss.clip_high == 0.3);
}

// DAPO's dynamic sampling in braid-train: groups whose rewards are all equal are dropped,
// then at most max_groups are kept, the first in stream order; the rest of the batch keeps
// its order and arrays.
BOOST_AUTO_TEST_CASE(the_group_filter_drops_groups_of_equal_rewards) {
  io::SampleBatch b;
  // Groups by stream position: 7 (rewards 1, 0), 3 (1, 1), 5 (0, 1), 9 (0, 0), in that batch order.
  const std::vector<std::int64_t> group_of{7, 7, 3, 3, 5, 5, 9, 9};
  const std::vector<float> rewards{1, 0, 1, 1, 0, 1, 0, 0};
  for (std::size_t i = 0; i < group_of.size(); ++i) b.add(std::vector<std::int32_t>{1, 2, int(i) + 3}, 2, std::int64_t(i));
  b.reward = rewards;
  b.advantages = std::vector<float>(b.token_count(), 0.5f);
  io::SampleBatch all = b;
  train::GroupFilterSummary s = train::filter_groups(all, group_of, {.drop_equal = true});
  BOOST_TEST(s.groups == 4);
  BOOST_TEST(s.all_equal == 2);
  BOOST_TEST(s.kept == 2);
  BOOST_TEST((all.sample_id == std::vector<std::int64_t>{0, 1, 4, 5}));
  BOOST_TEST(all.advantages->size() == all.token_count());
  io::SampleBatch first = b;
  s = train::filter_groups(first, group_of, {.drop_equal = true, .max_groups = 1});
  BOOST_TEST((first.sample_id == std::vector<std::int64_t>{4, 5}));  // group 5 comes before 7 in the stream
  BOOST_TEST(s.beyond_max == 1);
  io::SampleBatch capped = b;
  s = train::filter_groups(capped, group_of, {.max_groups = 2});
  BOOST_TEST((capped.sample_id == std::vector<std::int64_t>{2, 3, 4, 5}));  // groups 3 and 5
  BOOST_CHECK_THROW(train::filter_groups(capped, std::vector<std::int64_t>{1}, {.drop_equal = true}), std::invalid_argument);
}
