#define BOOST_TEST_MODULE sampler
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "backend/backend.hpp"
#include "core/rng.hpp"
#include "generate/sampler.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <cmath>
#include <vector>

using braid::gen::Sampled;
using braid::gen::SamplingParams;
using braid::gen::SequenceSampler;

namespace {
// Probabilities 0.5, 0.3, 0.2 (and a fourth token at 0 probability-ish mass 0).
const std::vector<float> kLogits{std::log(0.5f), std::log(0.3f), std::log(0.2f)};

std::array<int, 3> histogram(SamplingParams p, int draws, std::vector<Sampled>* first = nullptr) {
  SequenceSampler s(p, 7);
  std::array<int, 3> h{};
  for (int i = 0; i < draws; ++i) {
    const Sampled x = s.sample(kLogits);
    ++h[static_cast<std::size_t>(x.token)];
    if (first && first->size() < 3u) first->push_back(x);
  }
  return h;
}
}  // namespace

BOOST_AUTO_TEST_CASE(greedy_takes_the_first_maximum) {
  SequenceSampler s({.temperature = 0.0}, 0);
  const std::vector<float> logits{1.f, 3.f, 3.f, -2.f};
  const Sampled x = s.sample(logits);
  BOOST_TEST(x.token == 1);
  BOOST_TEST(x.logprob == 0.f);  // a deterministic policy
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(-2.0));
  BOOST_TEST(x.raw_logprob == static_cast<float>(3.0 - lse), boost::test_tools::tolerance(1e-6f));
  SequenceSampler k1({.temperature = 1.0, .top_k = 1}, 0);
  BOOST_TEST(k1.sample(logits).token == 1);
}

// The draws are seeded, so these frequency checks are deterministic; the margins
// (~5 standard deviations of 20000 draws) say the sampler follows the distribution.
BOOST_AUTO_TEST_CASE(temperature_one_follows_softmax) {
  std::vector<Sampled> seen;
  const auto h = histogram({.temperature = 1.0, .seed = 3}, 20000, &seen);
  BOOST_TEST(std::abs(h[0] / 20000.0 - 0.5) < 0.02);
  BOOST_TEST(std::abs(h[1] / 20000.0 - 0.3) < 0.02);
  BOOST_TEST(std::abs(h[2] / 20000.0 - 0.2) < 0.02);
  const double p[3] = {0.5, 0.3, 0.2};
  for (const Sampled& x : seen) {
    BOOST_TEST(x.logprob == static_cast<float>(std::log(p[x.token])), boost::test_tools::tolerance(1e-5f));
    BOOST_TEST(x.raw_logprob == x.logprob, boost::test_tools::tolerance(1e-5f));
  }
}

BOOST_AUTO_TEST_CASE(temperature_sharpens) {
  // T = 0.5 squares the probabilities: 0.25 : 0.09 : 0.04.
  std::vector<Sampled> seen;
  const auto h = histogram({.temperature = 0.5, .seed = 4}, 20000, &seen);
  const double q[3] = {0.25 / 0.38, 0.09 / 0.38, 0.04 / 0.38};
  for (int i = 0; i < 3; ++i) BOOST_TEST(std::abs(h[static_cast<std::size_t>(i)] / 20000.0 - q[i]) < 0.02);
  for (const Sampled& x : seen) {
    BOOST_TEST(x.logprob == static_cast<float>(std::log(q[x.token])), boost::test_tools::tolerance(1e-5f));
  }
}

BOOST_AUTO_TEST_CASE(top_k_and_top_p_renormalise_over_the_kept_set) {
  std::vector<Sampled> seen;
  auto h = histogram({.temperature = 1.0, .top_k = 2, .seed = 5}, 20000, &seen);
  BOOST_TEST(h[2] == 0);
  BOOST_TEST(std::abs(h[0] / 20000.0 - 0.625) < 0.02);
  for (const Sampled& x : seen) {
    BOOST_TEST(x.logprob == static_cast<float>(std::log((x.token == 0 ? 0.5 : 0.3) / 0.8)),
               boost::test_tools::tolerance(1e-5f));
  }
  // top-p 0.6: 0.5 alone is short of 0.6, so {0, 1} is kept.
  h = histogram({.temperature = 1.0, .top_p = 0.6, .seed = 6}, 20000);
  BOOST_TEST(h[2] == 0);
  BOOST_TEST(std::abs(h[1] / 20000.0 - 0.375) < 0.02);
  // top-p 0.45: the first token alone reaches it, probability 1.
  seen.clear();
  h = histogram({.temperature = 1.0, .top_p = 0.45, .seed = 6}, 1000, &seen);
  BOOST_TEST(h[0] == 1000);
  BOOST_TEST(seen[0].logprob == 0.f);
  BOOST_TEST(seen[0].raw_logprob == std::log(0.5f), boost::test_tools::tolerance(1e-5f));
}

BOOST_AUTO_TEST_CASE(streams_depend_only_on_seed_and_sample_id) {
  std::vector<float> logits(50);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  const SamplingParams p{.temperature = 1.0, .top_p = 0.9, .seed = 11};
  auto run_alone = [&](std::uint64_t id) {
    SequenceSampler s(p, id);
    std::vector<std::int32_t> out;
    for (int i = 0; i < 40; ++i) out.push_back(s.sample(logits).token);
    return out;
  };
  // Interleaved with another sequence, each keeps its own samples.
  SequenceSampler a(p, 1), b(p, 2);
  std::vector<std::int32_t> ta, tb;
  for (int i = 0; i < 40; ++i) {
    tb.push_back(b.sample(logits).token);
    ta.push_back(a.sample(logits).token);
  }
  BOOST_TEST(ta == run_alone(1), boost::test_tools::per_element());
  BOOST_TEST(tb == run_alone(2), boost::test_tools::per_element());
  BOOST_TEST(run_alone(1) != run_alone(2));
  SamplingParams other = p;
  other.seed = 12;
  SequenceSampler c(other, 1);
  std::vector<std::int32_t> tc;
  for (int i = 0; i < 40; ++i) tc.push_back(c.sample(logits).token);
  BOOST_TEST(tc != ta);
}

BOOST_AUTO_TEST_CASE(bad_parameters_are_refused) {
  BOOST_CHECK_THROW(braid::gen::validate({.temperature = -1}), braid::UsageError);
  BOOST_CHECK_THROW(braid::gen::validate({.top_k = -2}), braid::UsageError);
  BOOST_CHECK_THROW(braid::gen::validate({.top_p = 0}), braid::UsageError);
  BOOST_CHECK_THROW(braid::gen::validate({.top_p = 1.5}), braid::UsageError);
}

// A large vocabulary whose nucleus holds hundreds of tokens (the sampler sorts a
// growing prefix): every pick lies in the nucleus a full sort gives, with its
// renormalised probability.
BOOST_AUTO_TEST_CASE(large_vocabulary_nucleus_matches_a_full_sort) {
  const int V = 5000;
  std::vector<float> logits(V);
  braid::Rng r(9);
  for (float& l : logits) l = static_cast<float>(r.normal() * 2.0);
  for (double top_p : {0.3, 0.9}) {
    for (int top_k : {0, 1000}) {
      std::vector<int> order(V);
      for (int i = 0; i < V; ++i) order[static_cast<std::size_t>(i)] = i;
      std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
      const std::size_t cand = top_k ? static_cast<std::size_t>(top_k) : order.size();
      double mass = 0;
      for (std::size_t i = 0; i < cand; ++i) mass += std::exp(logits[order[i]] - logits[order[0]]);
      std::map<int, double> nucleus;
      double acc = 0;
      for (std::size_t i = 0; i < cand && acc < top_p * mass; ++i) {
        const double w = std::exp(logits[order[i]] - logits[order[0]]);
        acc += w;
        nucleus[order[i]] = w;
      }
      if (top_p > 0.5) BOOST_TEST(nucleus.size() > 64u);  // past the first sorted prefix
      SequenceSampler s({.temperature = 1.0, .top_k = top_k, .top_p = top_p, .seed = 2}, 0);
      for (int i = 0; i < 200; ++i) {
        const Sampled x = s.sample(logits);
        BOOST_TEST_REQUIRE(nucleus.contains(x.token));
        BOOST_TEST(x.logprob == static_cast<float>(std::log(nucleus[x.token] / acc)), boost::test_tools::tolerance(1e-4f));
      }
    }
  }
}

// The backend's sample op over a batch of rows (RowSampler) gives each row what that
// sequence's own sampler gives on the host: same tokens, same logprobs, bit for bit,
// and the draws advance each sequence's stream as sample() does.
BOOST_AUTO_TEST_CASE(row_sampler_on_the_backend_matches_the_host_sampler) {
  auto be = braid::backend::make_cpu_backend(2);
  const std::int64_t vocab = 300, rows = 7;
  std::vector<float> logits(static_cast<std::size_t>(rows * vocab));
  braid::Rng rng(9, 0);
  for (float& l : logits) l = static_cast<float>(6 * rng.uniform() - 3);
  braid::backend::Buffer<float> d_logits(*be, logits.size());
  be->copy_to_device(d_logits.data(), logits.data(), logits.size() * sizeof(float));
  for (const SamplingParams p : {SamplingParams{.temperature = 0.0}, SamplingParams{.temperature = 0.9, .seed = 4},
                                 SamplingParams{.temperature = 1.1, .top_k = 30, .top_p = 0.8, .seed = 5}}) {
    std::vector<SequenceSampler> on_device, on_host;
    for (std::int64_t i = 0; i < rows; ++i) {
      on_device.emplace_back(p, static_cast<std::uint64_t>(i), /*position=*/i);
      on_host.emplace_back(p, static_cast<std::uint64_t>(i), i);
    }
    std::vector<SequenceSampler*> ptrs;
    for (auto& s : on_device) ptrs.push_back(&s);
    braid::gen::RowSampler row_sampler(*be, p, static_cast<std::size_t>(rows));
    std::vector<Sampled> out(static_cast<std::size_t>(rows));
    for (int step = 0; step < 3; ++step) {  // the streams advance: three different draws
      row_sampler.sample(d_logits.data(), vocab, ptrs, out);
      for (std::int64_t i = 0; i < rows; ++i) {
        const Sampled want = on_host[static_cast<std::size_t>(i)].sample(
            {logits.data() + i * vocab, static_cast<std::size_t>(vocab)});
        const Sampled& got = out[static_cast<std::size_t>(i)];
        BOOST_TEST(got.token == want.token);
        BOOST_TEST(got.logprob == want.logprob);
        BOOST_TEST(got.raw_logprob == want.raw_logprob);
      }
    }
  }
  // More rows than the sampler has room for is a bug of the caller.
  braid::gen::RowSampler small(*be, SamplingParams{}, 2);
  std::vector<SequenceSampler> three(3, SequenceSampler(SamplingParams{}, 0));
  std::vector<SequenceSampler*> ptrs{&three[0], &three[1], &three[2]};
  std::vector<Sampled> out(3);
  BOOST_CHECK_THROW(small.sample(d_logits.data(), vocab, ptrs, out), std::logic_error);
}
