// Tensor parallelism: a model split over the ranks of the job (tp = world size; run
// alone, and under mpirun with 2 and 4 ranks) gives what the whole model gives on one
// rank — final hidden states, log-probabilities and entropies (vocabulary-parallel
// chunked head), values, every gradient (each rank's slice of it), KV-cache decoding
// logits, greedy and sampled tokens of the generation engine — to rounding:
// max |tp − whole| / max |whole| per array below 1e-12 in f64, 1e-5 (forward) and 2e-5
// (gradients) in f32 (docs/parallel.md; measured: about 4e-15 in f64, 8e-7 and 2e-6 in f32).
#define BOOST_TEST_MODULE tensor_parallel
#include <boost/test/unit_test.hpp>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/reshard.hpp"
#include "comm/communicator.hpp"
#include "core/rng.hpp"
#include "generate/generate.hpp"
#include "model/model.hpp"
#include "rl/chunked_lm_head.hpp"
#include "tests/common/mpi_fixture.hpp"
#include "tests/common/scratch.hpp"
#include "tests/model/family_configs.hpp"
#include "tests/common/tiny_models.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace braid;
using braid::test::MpiFixture;
BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

namespace {

// 8 query heads over 4 key/value heads (GQA), 40 intermediate units and 67 vocabulary
// rows: at tp 4 the MLP and vocabulary parts are of unequal sizes.
model::ModelConfig config(bool tied) {
  return test::tiny_config({.heads = 8, .kv_heads = 4, .intermediate = 42, .vocab = 67, .positions = 64, .tied = tied,
                            .rms_norm_eps = 1e-5, .rope_theta = 1000.0});
}

template <typename T> double forward_tolerance() { return sizeof(T) == 8 ? 1e-12 : 1e-5; }
template <typename T> double gradient_tolerance() { return sizeof(T) == 8 ? 1e-12 : 2e-5; }

template <typename T>
double rel_diff(const T* got, const T* want, std::size_t n) {
  double scale = 0, diff = 0;
  for (std::size_t i = 0; i < n; ++i) {
    scale = std::max(scale, std::abs(double(want[i])));
    diff = std::max(diff, std::abs(double(got[i]) - double(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

template <typename T>
double largest_abs(const std::vector<T>& v) {
  double m = 0;
  for (T x : v) m = std::max(m, std::abs(double(x)));
  return m;
}

template <typename T>
std::vector<T> random_weights(std::size_t n, std::uint64_t stream) {
  Rng rng(7, stream);
  std::vector<T> v(n);
  for (T& x : v) x = T(rng.normal());
  return v;
}

std::string fmt_dir(int tp) { return "tp" + std::to_string(tp); }

// The whole model (tp 1) and this rank's slice of the same weights (tp = world size).
template <typename T>
struct Pair {
  std::unique_ptr<comm::Communicator> world = comm::mpi_world();
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  model::BasicModel<T> whole, part;
  Pair(bool tied, bool value_head) : Pair(config(tied), value_head) {}
  Pair(const model::ModelConfig& cfg, bool value_head, bool value_bias = false, const model::LoraOptions& lora = {})
      : whole(cfg, {.value_head = value_head, .value_bias = value_bias, .lora = lora}, *be),
        part(cfg, {.value_head = value_head, .value_bias = value_bias,
                   .tp = {world->size(), world->rank(), world.get()}, .lora = lora}, *be) {
    whole.init_random(11, 0.2);
    part.init_random(11, 0.2);
    if (lora.enabled()) {   // B random too, so that every adapter acts
      whole.init_adapters(5, 0.3);
      part.init_adapters(5, 0.3);
    }
  }
  // Biases and norm gains random too (init_random gives 0 and 1), the same whole values
  // sliced on each rank.
  void randomize_vectors() {
    for (model::BasicModel<T>* m : {&whole, &part}) {
      for (auto& t : m->tensors()) {
        if (t.shape.size() != 1) continue;
        std::vector<T> full = random_weights<T>(std::size_t(t.full_shape[0]), std::hash<std::string>{}(t.name));
        for (T& x : full) x = T(0.2) * x + T(1.0 - m->config().norm_weight_offset) * T(t.name.find("norm") != std::string::npos);
        const std::vector<T> mine = model::extract_slice(full.data(), t.full_shape, t.slice);
        model::write_values(*be, t, mine.data());
      }
    }
  }
};

struct Sequences {
  std::vector<std::int32_t> tokens;
  std::vector<std::int64_t> offsets{0};
  explicit Sequences(std::vector<int> lengths) {
    Rng rng(3, 1);
    for (int len : lengths) {
      for (int i = 0; i < len; ++i) tokens.push_back(std::int32_t(rng.below(67)));
      offsets.push_back(std::int64_t(tokens.size()));
    }
  }
  model::Batch batch() const { return {tokens, offsets}; }
};

// Forward, heads and backward of one model; returns hidden, logprob, entropy, values.
template <typename T>
struct Pass {
  std::vector<T> hidden, logprob, entropy, values;
};

template <typename T>
Pass<T> run(model::BasicModel<T>& m, const Sequences& s, bool backward, int recompute = 0,
           const model::DropoutDraw* draw = nullptr) {
  const auto n = std::size_t(s.tokens.size());
  auto acts = m.make_activations({.max_tokens = 32, .max_sequences = 4, .training = true, .recompute = recompute});
  m.zero_grad();
  model::Batch batch = s.batch();
  batch.dropout = draw;
  m.forward(batch, acts);
  rl::ChunkedLmHead<T> head(m, /*chunk_rows*/ 4);
  const std::vector<std::int32_t> targets = rl::next_token_targets(s.batch());
  Pass<T> p;
  p.hidden.assign(acts.output(), acts.output() + n * std::size_t(m.config().hidden_size));
  p.logprob.resize(n);
  p.entropy.resize(n);
  p.values.resize(n);
  rl::token_logprobs(m, acts, head, targets.data(), p.logprob.data(), p.entropy.data());
  m.values(acts, p.values.data());
  if (backward) {
    const auto a = random_weights<T>(n, 1), b = random_weights<T>(n, 2), c = random_weights<T>(n, 3);
    rl::token_logprobs_backward(m, acts, head, targets.data(), a.data(), b.data());
    m.values_backward(acts, c.data());
    m.backward(acts);
  }
  return p;
}

// The whole model's and this rank's passes over 3 sequences: forward heads to `forward`
// tolerance, every gradient slice to `gradient` tolerance; returns the worst of each.
template <typename T>
std::pair<double, double> check_forward_and_backward(Pair<T>& pair, const std::string& what) {
  const Sequences s({9, 6, 11});
  const Pass<T> want = run(pair.whole, s, true), got = run(pair.part, s, true);
  const double tol = forward_tolerance<T>();
  const double forward[] = {rel_diff(got.hidden.data(), want.hidden.data(), want.hidden.size()),
                            rel_diff(got.logprob.data(), want.logprob.data(), want.logprob.size()),
                            rel_diff(got.entropy.data(), want.entropy.data(), want.entropy.size()),
                            rel_diff(got.values.data(), want.values.data(), want.values.size())};
  for (double d : forward) BOOST_TEST(d < tol, what);
  const double worst_forward = *std::max_element(std::begin(forward), std::end(forward));
  BOOST_TEST_MESSAGE("tp " << pair.world->size() << what << ": worst forward difference " << worst_forward);
  // Every gradient: this rank's slice of the whole model's.
  double worst = 0;
  for (const auto& t : pair.part.tensors()) {
    const auto* w = pair.whole.find(t.name);
    BOOST_REQUIRE_MESSAGE(w, t.name);
    BOOST_TEST(t.full_shape == w->shape);
    const std::vector<T> slice = model::extract_slice(w->grad, w->shape, t.slice);
    BOOST_REQUIRE_EQUAL(std::int64_t(slice.size()), t.numel);
    const double d = rel_diff(t.grad, slice.data(), slice.size());
    BOOST_TEST(d < gradient_tolerance<T>(), what << " " << t.name << ": " << d);
    worst = std::max(worst, d);
  }
  BOOST_TEST_MESSAGE("tp " << pair.world->size() << what << ": worst gradient difference " << worst);
  return {worst_forward, worst};
}

template <typename T>
void check_forward_and_backward(bool tied) {
  Pair<T> pair(tied, /*value_head*/ true);
  check_forward_and_backward(pair, tied ? " tied" : "");
}

// Every family (biases and q/k norms sliced with their heads and units or replicated,
// Gemma's norms and soft-caps, windows, local RoPE) at 8 query / 4 kv heads of 6.
template <typename T>
void check_families() {
  double forward = 0, gradient = 0;
  for (const auto& f : test::family_configs({.hidden = 32, .heads = 8, .kv_heads = 4, .head_dim = 6, .inter = 42,
                                             .vocab = 67, .layers = 3, .max_positions = 64})) {
    Pair<T> pair(f.parsed(), /*value_head*/ true, /*value_bias*/ true);
    pair.randomize_vectors();
    const auto [fw, gr] = check_forward_and_backward(pair, " " + f.name);
    forward = std::max(forward, fw);
    gradient = std::max(gradient, gr);
  }
  BOOST_TEST_MESSAGE("tp " << comm::mpi_world()->size() << ", every family (" << sizeof(T) * 8
                     << " bit): worst forward difference " << forward << ", worst gradient difference " << gradient);
}

BOOST_AUTO_TEST_CASE(slices_split_heads_units_and_vocabulary) {
  Pair<float> pair(false, true);
  const int tp = pair.world->size(), r = pair.world->rank();
  const auto* q = pair.part.find("model.layers.0.self_attn.q_proj.weight");
  const auto* k = pair.part.find("model.layers.0.self_attn.k_proj.weight");
  const auto* o = pair.part.find("model.layers.0.self_attn.o_proj.weight");
  const auto* down = pair.part.find("model.layers.1.mlp.down_proj.weight");
  const auto* embed = pair.part.find("model.embed_tokens.weight");
  const auto* norm = pair.part.find("model.norm.weight");
  BOOST_TEST(q->shape == (std::vector<std::int64_t>{8 / tp * 4, 32}));
  BOOST_TEST(k->shape == (std::vector<std::int64_t>{4 / tp * 4, 32}));
  BOOST_TEST(o->shape == (std::vector<std::int64_t>{32, 8 / tp * 4}));
  BOOST_TEST(o->slice.axis == (tp == 1 ? -1 : 1));
  BOOST_TEST(down->slice.begin == 42 * r / tp);
  BOOST_TEST(embed->slice.end - embed->slice.begin == 67 * (r + 1) / tp - 67 * r / tp);
  BOOST_TEST(!norm->slice.split());
  BOOST_TEST(pair.part.vocab_slice().first == 67 * r / tp);
  // The ranks' parameters add up to the whole model's, plus tp copies of the replicated ones.
  std::vector<std::int64_t> count{pair.part.parameter_count()};
  pair.world->all_reduce_sum(std::span<std::int64_t>(count));
  std::int64_t replicated = 0;
  for (const auto& t : pair.part.tensors())
    if (!t.slice.split()) replicated += t.numel;
  BOOST_TEST(count[0] == pair.whole.parameter_count() + (tp - 1) * replicated);
}

BOOST_AUTO_TEST_CASE(refuses_a_split_of_the_key_value_heads) {
  auto be = backend::make_cpu_backend(1);
  BOOST_CHECK_THROW(model::Model(config(false), {.tp = {3, 0, nullptr}}, *be), std::invalid_argument);
  BOOST_CHECK_THROW(model::Model(config(false), {.tp = {2, 2, nullptr}}, *be), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(forward_heads_and_gradients_match_the_whole_model_f64) {
  check_forward_and_backward<double>(false);
  check_forward_and_backward<double>(true);
}

BOOST_AUTO_TEST_CASE(forward_heads_and_gradients_match_the_whole_model_f32) {
  check_forward_and_backward<float>(false);
  check_forward_and_backward<float>(true);
}

BOOST_AUTO_TEST_CASE(every_family_matches_the_whole_model) {
  check_families<double>();
  check_families<float>();
}

// LoRA adapters under tp, cut as the matrices they adapt (B of q/k/v/gate/up by rows, A of
// o/down by columns, the other factor replicated), with the value head's trained copy: each
// rank's adapters are its slice of the whole model's (the same seed), and the forward, the
// heads and every adapter's gradient (the replicated ones summed over the group) are the
// whole model's to the tolerances above, keeping or recomputing every layer's activations; and
// with dropout on the adapters' input (the mask of each element the same at any tp: drawn by
// the whole model's column).
template <typename T>
void check_lora_adapters(double dropout) {
  Pair<T> pair(config(false), /*value_head*/ true, /*value_bias*/ false,
               {.rank = 3, .alpha = 5, .dropout = dropout, .value_head = true});
  const std::vector<std::uint64_t> keys{7, 8, 9};
  const model::DropoutDraw draw{.sequence_keys = keys, .seed = 3};
  double worst_init = 0;
  for (const auto& t : pair.part.adapters()) {
    const auto* w = &*std::find_if(pair.whole.adapters().begin(), pair.whole.adapters().end(),
                                   [&](const auto& x) { return x.name == t.name; });
    BOOST_TEST(t.full_shape == w->shape, t.name);
    const std::vector<T> slice = model::extract_slice(w->data, w->shape, t.slice);
    BOOST_REQUIRE_EQUAL(std::int64_t(slice.size()), t.numel);
    worst_init = std::max(worst_init, rel_diff(t.data, slice.data(), slice.size()));
  }
  BOOST_TEST(worst_init == 0.0);
  const Sequences s({9, 6, 11});
  for (int recompute : {0, 1}) {
    const Pass<T> want = run(pair.whole, s, true, 0, &draw), got = run(pair.part, s, true, recompute, &draw);
    const double forward = std::max({rel_diff(got.hidden.data(), want.hidden.data(), want.hidden.size()),
                                     rel_diff(got.logprob.data(), want.logprob.data(), want.logprob.size()),
                                     rel_diff(got.values.data(), want.values.data(), want.values.size())});
    BOOST_TEST(forward < forward_tolerance<T>());
    double worst = 0;
    for (const auto& t : pair.part.adapters()) {
      const auto* w = &*std::find_if(pair.whole.adapters().begin(), pair.whole.adapters().end(),
                                     [&](const auto& x) { return x.name == t.name; });
      const std::vector<T> slice = model::extract_slice(w->grad, w->shape, t.slice);
      const double d = rel_diff(t.grad, slice.data(), slice.size());
      BOOST_TEST(d < gradient_tolerance<T>(), t.name << ": " << d);
      BOOST_TEST(largest_abs(slice) > 0, t.name << ": no gradient to compare");
      worst = std::max(worst, d);
    }
    BOOST_TEST_MESSAGE("tp " << pair.world->size() << " LoRA (" << sizeof(T) * 8 << " bit, dropout " << dropout
                             << ", recompute " << recompute
                             << "): worst forward difference " << forward << ", worst adapter gradient difference "
                             << worst);
  }
}

BOOST_AUTO_TEST_CASE(lora_adapters_match_the_whole_model) {
  for (double dropout : {0.0, 0.25}) {
    check_lora_adapters<double>(dropout);
    check_lora_adapters<float>(dropout);
  }
}

// Prefill two prompts into a KV cache split by heads, then decode greedily: the logits
// of every step match the whole model's, and so do the tokens.
BOOST_AUTO_TEST_CASE(kv_cache_decoding_and_greedy_tokens_match) {
  Pair<float> pair(false, false);
  const int V = 67;
  const std::vector<std::vector<std::int32_t>> prompts{{5, 17, 3, 60, 22}, {41, 9, 0}};
  auto decode = [&](model::Model& m, std::vector<std::vector<float>>& logits_seen) {
    auto cache = m.make_kv_cache(2, 32);
    auto acts = m.make_activations({.max_tokens = 16, .max_sequences = 2});
    std::vector<std::int32_t> tokens;
    std::vector<model::Segment> segs;
    for (int s = 0; s < 2; ++s) {
      tokens.insert(tokens.end(), prompts[std::size_t(s)].begin(), prompts[std::size_t(s)].end());
      segs.push_back({s, std::int64_t(prompts[std::size_t(s)].size())});
    }
    std::vector<std::vector<std::int32_t>> out(2);
    for (int step = 0; step < 8; ++step) {
      m.forward_cached(tokens, segs, cache, acts);
      tokens.clear();
      for (int s = 0; s < 2; ++s) {
        const float* row = acts.logits() + std::size_t(s * V);
        logits_seen.emplace_back(row, row + V);
        const std::int32_t next = std::int32_t(std::max_element(row, row + V) - row);
        out[std::size_t(s)].push_back(next);
        tokens.push_back(next);
        segs[std::size_t(s)].len = 1;
      }
    }
    return out;
  };
  std::vector<std::vector<float>> want_logits, got_logits;
  const auto want = decode(pair.whole, want_logits);
  const auto got = decode(pair.part, got_logits);
  BOOST_TEST(got == want);
  double worst = 0;
  for (std::size_t i = 0; i < want_logits.size(); ++i)
    worst = std::max(worst, rel_diff(got_logits[i].data(), want_logits[i].data(), std::size_t(V)));
  BOOST_TEST(worst < forward_tolerance<float>());
  BOOST_TEST_MESSAGE("tp " << pair.world->size() << ": worst decoding logit difference " << worst);
}

// The generation engine runs a tp model unchanged (continuous batching over 3 slots for 5
// prompts): greedy and sampled (temperature, top-p, per-sample seeds) responses are the
// whole model's tokens, their logprobs the same to rounding, and every rank has the same.
BOOST_AUTO_TEST_CASE(generation_greedy_and_sampled_gives_the_same_tokens) {
  Pair<float> pair(false, false);
  std::vector<gen::Prompt> prompts;
  for (std::uint64_t i = 0; i < 5; ++i) {
    gen::Prompt p{.sample_id = 100 + i};
    for (std::uint64_t j = 0; j <= i; ++j) p.tokens.push_back(std::int32_t((13 * i + 7 * j + 1) % 67));
    prompts.push_back(p);
  }
  for (double temperature : {0.0, 0.9}) {
    gen::GenerateOptions opt{.sampling = {.temperature = temperature, .top_p = 0.95, .seed = 7}, .max_batch = 3,
                             .max_new_tokens = 10};
    const auto want = gen::generate(pair.whole, prompts, opt), got = gen::generate(pair.part, prompts, opt);
    BOOST_REQUIRE_EQUAL(want.size(), got.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      BOOST_TEST(got[i].response == want[i].response, "sample " << i << " at temperature " << temperature);
      BOOST_TEST(rel_diff(got[i].raw_logprobs.data(), want[i].raw_logprobs.data(), want[i].raw_logprobs.size()) <
                 forward_tolerance<float>());
      // Every rank sampled the same tokens (they read the same gathered logits).
      std::vector<std::int64_t> lo(got[i].response.begin(), got[i].response.end()), hi = lo, mine = lo;
      pair.world->all_reduce(std::span<std::int64_t>(lo), comm::ReduceOp::min);
      pair.world->all_reduce(std::span<std::int64_t>(hi), comm::ReduceOp::max);
      BOOST_TEST(lo == mine);
      BOOST_TEST(hi == mine);
    }
  }
}

// Each rank saves its slices (tp_rank/tp_size recorded); resharded to tp 1 by files they
// are the whole model's weights bit for bit, and the whole file opened at this tp rank
// (sliced on load) runs the same forward as the model it came from.
BOOST_AUTO_TEST_CASE(slices_saved_at_tp_reshard_to_the_whole_model) {
  namespace fs = std::filesystem;
  Pair<float> pair(true, true);
  const int tp = pair.world->size(), r = pair.world->rank();
  const fs::path dir = test::scratch(fmt_dir(tp));
  if (r == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    checkpoint::save_weights(pair.whole, dir / "whole.h5");
  }
  pair.world->barrier();
  checkpoint::save_weights(pair.part, checkpoint::tp_path(dir / "part.h5", r, tp));
  BOOST_TEST(io::WeightShardReader(checkpoint::tp_path(dir / "part.h5", r, tp)).meta().tp_rank == r);
  pair.world->barrier();
  if (r == 0) {
    checkpoint::reshard(checkpoint::checkpoint_files(dir / "part.h5"), dir / "joined.h5", {.tp = 1}, "test");
    const io::WeightShardSet want({dir / "whole.h5"}), got({dir / "joined.h5"});
    BOOST_REQUIRE(want.names() == got.names());
    for (const auto& name : want.names()) {
      const auto x = want.read(name), y = got.read(name);
      BOOST_TEST(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0, name);
    }
  }
  auto opened = checkpoint::open_model(dir / "whole.h5", *pair.be, {}, true, true, backend::DType::f32,
                                       pair.part.tensor_parallel());
  const Sequences s({7, 5});
  const Pass<float> want = run(pair.part, s, false), got = run(*opened.model, s, false);
  BOOST_TEST(want.logprob == got.logprob);
  BOOST_TEST(want.values == got.values);
  pair.world->barrier();
}

}  // namespace
