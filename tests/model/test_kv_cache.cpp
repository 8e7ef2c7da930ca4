// KV-cache decoding gives the logits of a full forward pass over the same tokens, with
// prefills and decode steps of several sequences at different positions in one batch
// (continuous batching), and a sequence gets the same logits batched or alone.
#include <boost/test/unit_test.hpp>

#include "model/model.hpp"
#include "tests/common/tiny_models.hpp"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

using namespace braid;

namespace {

model::ModelConfig small_config() {
  return test::tiny_config({.layers = 3, .intermediate = 48, .vocab = 50, .positions = 64});
}

const std::vector<std::vector<std::int32_t>> kSeqs{
    {3, 14, 15, 9, 26, 5, 35, 8, 9}, {27, 1, 8, 28, 18, 2}, {4, 6, 49, 0, 33, 12, 7}};

// Logits of every position of every sequence by one full forward: [seq][pos][vocab].
std::vector<std::vector<std::vector<float>>> full_logits(model::Model& m) {
  std::vector<std::int32_t> tokens;
  std::vector<std::int64_t> offsets{0};
  for (const auto& s : kSeqs) {
    tokens.insert(tokens.end(), s.begin(), s.end());
    offsets.push_back(std::int64_t(tokens.size()));
  }
  auto acts = m.make_activations({.max_tokens = 32, .max_sequences = 3});
  m.forward({tokens, offsets}, acts);
  const int V = m.config().vocab_size;
  std::vector<float> all(tokens.size() * std::size_t(V));
  m.lm_logits(acts.output(), std::int64_t(tokens.size()), all.data());
  std::vector<std::vector<std::vector<float>>> out(kSeqs.size());
  for (std::size_t s = 0; s < kSeqs.size(); ++s)
    for (std::size_t p = 0; p < kSeqs[s].size(); ++p) {
      const float* row = all.data() + (std::size_t(offsets[s]) + p) * std::size_t(V);
      out[s].emplace_back(row, row + V);
    }
  return out;
}

double max_rel_diff(const float* a, const std::vector<float>& b) {
  double scale = 0, diff = 0;
  for (std::size_t j = 0; j < b.size(); ++j) {
    scale = std::max(scale, double(std::abs(b[j])));
    diff = std::max(diff, double(std::abs(a[j] - b[j])));
  }
  return diff / scale;
}

struct Model {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  model::Model m{small_config(), {}, *be};
  Model() { m.init_random(5, 0.3); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(kv_cache)

BOOST_AUTO_TEST_CASE(continuous_batching_matches_full_forward) {
  Model fx;
  auto& m = fx.m;
  const auto ref = full_logits(m);
  auto cache = m.make_kv_cache(4, 16);
  auto acts = m.make_activations({.max_tokens = 16, .max_sequences = 4});
  // Sequence s lives in slot slot_of[s]; each step feeds `take` new tokens per sequence.
  const int slot_of[] = {0, 3, 1};
  std::vector<std::size_t> done(kSeqs.size(), 0);
  const std::vector<std::vector<std::size_t>> plan{
      {4, 2, 0},   // two prefills; sequence 2 not yet arrived
      {1, 3, 3},   // a decode step, a second prefill chunk, a new prefill
      {1, 1, 1}, {1, 0, 1}, {1, 0, 1}, {1, 1, 1}};
  int checked = 0;
  for (const auto& step : plan) {
    std::vector<std::int32_t> tokens;
    std::vector<model::Segment> segs;
    std::vector<std::size_t> which;
    for (std::size_t s = 0; s < kSeqs.size(); ++s) {
      const std::size_t take = std::min(step[s], kSeqs[s].size() - done[s]);
      if (take == 0) continue;
      tokens.insert(tokens.end(), kSeqs[s].begin() + long(done[s]), kSeqs[s].begin() + long(done[s] + take));
      segs.push_back({slot_of[s], std::int64_t(take)});
      which.push_back(s);
      done[s] += take;
    }
    m.forward_cached(tokens, segs, cache, acts);
    for (std::size_t i = 0; i < which.size(); ++i) {
      const std::size_t s = which[i];
      BOOST_CHECK_EQUAL(cache.length(slot_of[s]), std::int64_t(done[s]));
      const double d = max_rel_diff(acts.logits() + i * 50, ref[s][done[s] - 1]);
      BOOST_CHECK_MESSAGE(d < 1e-5, "sequence " << s << " position " << done[s] - 1 << ": relative difference " << d);
      ++checked;
    }
  }
  for (std::size_t s = 0; s < kSeqs.size(); ++s) BOOST_CHECK_EQUAL(done[s], kSeqs[s].size());
  BOOST_CHECK_EQUAL(checked, 14);

  // A freed slot serves a new sequence as if fresh.
  cache.clear(0);
  m.forward_cached(kSeqs[2], std::vector<model::Segment>{{0, 7}}, cache, acts);
  BOOST_CHECK_LT(max_rel_diff(acts.logits(), ref[2][6]), 1e-5);
  // Truncation rewinds: re-feeding the last token gives the same logits again.
  cache.truncate(0, 6);
  m.forward_cached(std::vector<std::int32_t>{kSeqs[2][6]}, std::vector<model::Segment>{{0, 1}}, cache, acts);
  BOOST_CHECK_LT(max_rel_diff(acts.logits(), ref[2][6]), 1e-5);
}

BOOST_AUTO_TEST_CASE(decode_alone_matches_decode_batched) {
  Model fx;
  auto& m = fx.m;
  auto acts = m.make_activations({.max_tokens = 16, .max_sequences = 3});
  auto alone = m.make_kv_cache(1, 16), batched = m.make_kv_cache(3, 16);
  std::vector<std::int32_t> prompts;
  std::vector<model::Segment> segs;
  for (int s = 0; s < 3; ++s) {
    prompts.insert(prompts.end(), kSeqs[std::size_t(s)].begin(), kSeqs[std::size_t(s)].begin() + 3);
    segs.push_back({s, 3});
  }
  m.forward_cached(prompts, segs, batched, acts);
  std::vector<float> batched_logits(acts.logits(), acts.logits() + 3 * 50);
  for (int s = 0; s < 3; ++s) {
    alone.clear(0);
    std::vector<std::int32_t> p(kSeqs[std::size_t(s)].begin(), kSeqs[std::size_t(s)].begin() + 3);
    m.forward_cached(p, std::vector<model::Segment>{{0, 3}}, alone, acts);
    std::vector<float> row(batched_logits.begin() + s * 50, batched_logits.begin() + (s + 1) * 50);
    BOOST_CHECK_LT(max_rel_diff(acts.logits(), row), 1e-6);
  }
}

BOOST_AUTO_TEST_CASE(rejects_bad_segments) {
  Model fx;
  auto& m = fx.m;
  auto cache = m.make_kv_cache(2, 4);
  auto acts = m.make_activations({.max_tokens = 8, .max_sequences = 2});
  const std::vector<std::int32_t> five{1, 2, 3, 4, 5};
  BOOST_CHECK_THROW(m.forward_cached(five, std::vector<model::Segment>{{0, 5}}, cache, acts), std::invalid_argument);
  BOOST_CHECK_THROW(m.forward_cached(std::vector<std::int32_t>{1, 2}, std::vector<model::Segment>{{0, 1}, {0, 1}},
                                     cache, acts),
                    std::invalid_argument);
  BOOST_CHECK_THROW(m.forward_cached(std::vector<std::int32_t>{50}, std::vector<model::Segment>{{1, 1}}, cache, acts),
                    std::invalid_argument);
  BOOST_CHECK_EQUAL(cache.length(0), 0);
  BOOST_CHECK_EQUAL(cache.length(1), 0);
}

// The paged pool: blocks are taken as sequences grow, given back by clear and truncate,
// and reused by the next sequence, whose logits are those of a full forward; a step the
// pool cannot hold throws KVCacheFull and changes nothing.
BOOST_AUTO_TEST_CASE(blocks_are_freed_and_reused) {
  Model fx;
  auto& m = fx.m;
  const auto ref = full_logits(m);
  // Blocks of 4 tokens; 4 blocks for two slots of up to 12 tokens (6 would never fill).
  auto cache = m.make_kv_cache({.slots = 2, .max_len = 12, .block_size = 4, .blocks = 4});
  auto acts = m.make_activations({.max_tokens = 16, .max_sequences = 2});
  BOOST_CHECK_EQUAL(cache.blocks(), 4);
  BOOST_CHECK_EQUAL(cache.free_blocks(), 4);
  BOOST_CHECK_EQUAL(cache.bytes(), m.kv_block_bytes(4, backend::DType::f32) * 4);
  BOOST_CHECK_EQUAL(cache.blocks_needed(0, 9), 3);

  m.forward_cached(kSeqs[0], std::vector<model::Segment>{{0, 9}}, cache, acts);   // 9 tokens: 3 blocks
  BOOST_CHECK_EQUAL(cache.held_blocks(0), 3);
  BOOST_CHECK_EQUAL(cache.free_blocks(), 1);
  BOOST_CHECK_LT(max_rel_diff(acts.logits(), ref[0][8]), 1e-5);
  // Slot 1 needs 2 blocks for 6 tokens, 1 is free: refused, nothing changed.
  BOOST_CHECK_THROW(m.forward_cached(kSeqs[1], std::vector<model::Segment>{{1, 6}}, cache, acts), model::KVCacheFull);
  BOOST_CHECK_EQUAL(cache.length(1), 0);
  BOOST_CHECK_EQUAL(cache.free_blocks(), 1);
  // Truncating slot 0 to 4 tokens frees two blocks; slot 1 then runs, in reused blocks
  // whose old keys must not leak into it, decoding its last token from the cache.
  cache.truncate(0, 4);
  BOOST_CHECK_EQUAL(cache.held_blocks(0), 1);
  BOOST_CHECK_EQUAL(cache.free_blocks(), 3);
  m.forward_cached(std::span(kSeqs[1]).first(5), std::vector<model::Segment>{{1, 5}}, cache, acts);
  m.forward_cached(std::span(kSeqs[1]).subspan(5), std::vector<model::Segment>{{1, 1}}, cache, acts);
  BOOST_CHECK_EQUAL(cache.held_blocks(1), 2);
  BOOST_CHECK_LT(max_rel_diff(acts.logits(), ref[1][5]), 1e-5);
  // Slot 0 goes on from its 4 kept tokens alongside: the same logits as a full forward.
  m.forward_cached(std::span(kSeqs[0]).subspan(4, 1), std::vector<model::Segment>{{0, 1}}, cache, acts);
  BOOST_CHECK_LT(max_rel_diff(acts.logits(), ref[0][4]), 1e-5);
  // Clearing gives every block back; a new sequence in slot 0 reuses them from the top.
  cache.clear(0);
  cache.clear(1);
  BOOST_CHECK_EQUAL(cache.free_blocks(), 4);
  m.forward_cached(kSeqs[2], std::vector<model::Segment>{{0, 7}}, cache, acts);
  BOOST_CHECK_LT(max_rel_diff(acts.logits(), ref[2][6]), 1e-5);
  BOOST_CHECK_EQUAL(cache.free_blocks(), 2);
}

// A bf16 cache (half the memory): decode logits within bf16 rounding of the f32 cache's.
BOOST_AUTO_TEST_CASE(bf16_cache_decodes_close_to_f32) {
  Model fx;
  auto& m = fx.m;
  const auto ref = full_logits(m);
  auto cache = m.make_kv_cache({.slots = 1, .max_len = 16, .block_size = 4, .dtype = backend::DType::bf16});
  BOOST_CHECK_EQUAL(cache.bytes(), m.kv_block_bytes(4, backend::DType::bf16) * 4);
  BOOST_CHECK_EQUAL(m.kv_block_bytes(4, backend::DType::bf16) * 2, m.kv_block_bytes(4, backend::DType::f32));
  auto acts = m.make_activations({.max_tokens = 16, .max_sequences = 1});
  m.forward_cached(std::span(kSeqs[0]).first(3), std::vector<model::Segment>{{0, 3}}, cache, acts);
  for (std::size_t p = 3; p < kSeqs[0].size(); ++p) {
    m.forward_cached(std::span(kSeqs[0]).subspan(p, 1), std::vector<model::Segment>{{0, 1}}, cache, acts);
    const double d = max_rel_diff(acts.logits(), ref[0][p]);
    BOOST_CHECK_MESSAGE(d < 2e-2, "position " << p << ": relative difference " << d);
    BOOST_CHECK_MESSAGE(d > 0, "position " << p << ": a bf16 cache should round something");
  }
}

BOOST_AUTO_TEST_SUITE_END()
