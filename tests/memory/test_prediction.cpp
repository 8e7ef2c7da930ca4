// The device-memory prediction against what the engine allocates, counted on the CPU by a
// backend that forwards to the CPU one and records every allocation: each piece exactly
// (model, AdamW, activations, LM-head chunk), a training run's and a scoring run's peak
// within the prediction, and the refusal with an injected free figure (the check sites of
// braid-train and braid-score included), which names each part, the free memory and what to
// change. The CPU backend itself reports no device memory: nothing is checked there.
#define BOOST_TEST_MODULE memory_prediction
#include <boost/test/unit_test.hpp>

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/units.hpp"
#include "io/sample_shard.hpp"
#include "memory/prediction.hpp"
#include "model/model.hpp"
#include "optim/adamw.hpp"
#include "rl/chunked_lm_head.hpp"
#include "score/device_memory.hpp"
#include "score/model_passes.hpp"
#include "bench/model/shapes.hpp"
#include "tests/common/scratch.hpp"
#include "tests/model/family_configs.hpp"
#include "tests/train/uneven_batch.hpp"
#include "train/command_steps.hpp"
#include "train/objectives.hpp"
#include "train/trainer.hpp"

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>
#include <unordered_map>

namespace be = braid::backend;
namespace mem = braid::memory;
namespace model = braid::model;
using braid::InputError;

namespace {

// The CPU backend, with every allocation counted (live bytes and their peak) and a device
// memory figure of the test's choosing (none by default, as the CPU).
class CountingBackend final : public be::Backend {
 public:
  explicit CountingBackend(std::optional<be::DeviceMemory> mem = std::nullopt)
      : inner_(be::make_cpu_backend(1)), mem_(mem) {}

  std::uint64_t live() const { return live_; }
  std::uint64_t peak() const { return peak_; }
  void reset_peak() { peak_ = live_; }

  std::string name() const override { return "counting-" + inner_->name(); }
  int threads() const override { return inner_->threads(); }
  bool supports(be::Op op, be::DType dtype) const override { return inner_->supports(op, dtype); }
  bool host_accessible() const override { return inner_->host_accessible(); }
  void* allocate(std::size_t bytes) override {
    void* p = inner_->allocate(bytes);
    sizes_[p] = bytes;
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    return p;
  }
  void deallocate(void* p) noexcept override {
    if (auto it = sizes_.find(p); it != sizes_.end()) {
      live_ -= it->second;
      sizes_.erase(it);
    }
    inner_->deallocate(p);
  }
  void copy_to_device(void* d, const void* s, std::size_t n) override { inner_->copy_to_device(d, s, n); }
  void copy_to_host(void* d, const void* s, std::size_t n) override { inner_->copy_to_host(d, s, n); }
  void copy(void* d, const void* s, std::size_t n) override { inner_->copy(d, s, n); }
  void fill_zero(void* d, std::size_t n) override { inner_->fill_zero(d, n); }
  void synchronize() override { inner_->synchronize(); }
  be::Stream default_stream() const override { return inner_->default_stream(); }
  be::Stream create_stream() override { return inner_->create_stream(); }
  void destroy_stream(be::Stream s) override { inner_->destroy_stream(s); }
  be::Stream current_stream() const override { return inner_->current_stream(); }
  void set_stream(be::Stream s) override { inner_->set_stream(s); }
  be::Event create_event() override { return inner_->create_event(); }
  void destroy_event(be::Event e) override { inner_->destroy_event(e); }
  void record(be::Event e, be::Stream s) override { inner_->record(e, s); }
  void wait(be::Stream s, be::Event e) override { inner_->wait(s, e); }
  bool query(be::Event e) override { return inner_->query(e); }
  void synchronize(be::Event e) override { inner_->synchronize(e); }
  void synchronize(be::Stream s) override { inner_->synchronize(s); }
  void copy_to_device_async(void* d, const void* s, std::size_t n, be::Stream st) override {
    inner_->copy_to_device_async(d, s, n, st);
  }
  void copy_to_host_async(void* d, const void* s, std::size_t n, be::Stream st) override {
    inner_->copy_to_host_async(d, s, n, st);
  }
  std::optional<be::DeviceMemory> device_memory() const override { return mem_; }

 protected:
  be::Ops<float>* f32_ops() override { return &inner_->ops<float>(); }
  be::Ops<double>* f64_ops() override { return &inner_->ops<double>(); }

 private:
  std::unique_ptr<be::Backend> inner_;
  std::optional<be::DeviceMemory> mem_;
  std::unordered_map<void*, std::size_t> sizes_;
  std::uint64_t live_ = 0, peak_ = 0;
};

// GQA, untied; a vocabulary larger than the hidden size so that logits weigh.
model::ModelConfig config() {
  model::ModelConfig c = braid::test::tiny();
  c.vocab_size = 97;
  return c;
}

mem::ModelSpec spec(const model::ModelConfig& c, model::ModelOptions o, std::string role = "") {
  return {.role = std::move(role), .config = c, .options = o};
}

std::vector<std::size_t> all_indices(const braid::io::SampleBatch& b) {
  std::vector<std::size_t> v(b.size());
  std::iota(v.begin(), v.end(), std::size_t{0});
  return v;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A shard as generation writes it (tokens, prompts, the actor's logprobs) of uneven sequences.
braid::io::SampleBatch generated_shard(const std::filesystem::path& path, std::uint64_t seed) {
  const auto batch = braid::test::uneven_batch(seed);
  braid::io::SampleBatch plain;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto seq = batch.sequence(i);
    const auto prompt = std::min<std::int32_t>(batch.prompt_len[i], std::int32_t(seq.size()) - 1);
    plain.add(std::vector<std::int32_t>(seq.begin(), seq.end()), prompt, std::int64_t(i));
  }
  plain.logprobs_actor = batch.logprobs_actor;
  std::filesystem::create_directories(path.parent_path());
  braid::io::write_sample_shard(path, plain, {});
  return plain;
}

}  // namespace

BOOST_AUTO_TEST_CASE(each_piece_is_what_the_engine_allocates) {
  model::ModelConfig tied = config();
  tied.tie_word_embeddings = true;
  const std::vector<std::pair<model::ModelConfig, model::ModelOptions>> cases{
      {config(), {}},
      {config(), {.dtype = be::DType::bf16}},
      {config(), {.lm_head = false, .value_head = true}},
      {tied, {.dtype = be::DType::bf16}},
      {config(), {.dtype = be::DType::bf16, .lora = {.rank = 3, .targets = {"q_proj", "down_proj"}}}},
  };
  for (const auto& [c, o] : cases) {
    BOOST_TEST_CONTEXT("lm_head " << o.lm_head << ", value_head " << o.value_head << ", bf16 "
                                  << (o.dtype == be::DType::bf16) << ", tied " << c.tie_word_embeddings) {
      CountingBackend b;
      model::Model m(c, o, b);
      BOOST_TEST(b.live() == mem::model_bytes(spec(c, o)).total());
      std::uint64_t before = b.live();
      {
        // Under LoRA the optimizer trains the adapters alone.
        braid::optim::AdamW adamw(b, o.lora.enabled() ? m.adapters() : m.tensors(), {});
        BOOST_TEST(b.live() - before == mem::adamw_bytes(spec(c, o)));
      }
      for (const bool training : {true, false}) {
        for (const std::int64_t seqs : {1, 7, 40}) {
          const model::ActivationOptions a{.max_tokens = 40, .max_sequences = seqs, .training = training};
          before = b.live();
          auto acts = m.make_activations(a);
          BOOST_TEST(b.live() - before == mem::activation_bytes(c, o, a), "training " << training << ", " << seqs
                                                                                      << " sequences");
        }
      }
      if (o.lm_head) {
        before = b.live();
        braid::rl::ChunkedLmHead<float> head(m);   // its default chunk: the one the prediction assumes
        BOOST_TEST(head.chunk_rows() == mem::lm_head_chunk_rows(b, c));
        BOOST_TEST(b.live() - before == mem::lm_head_chunk_bytes(c, mem::lm_head_chunk_rows(b, c)));
      }
    }
  }
}

// The families' pieces (biases' column of ones, q/k norms, Gemma's norms, a second rotary
// table, the capped logits of the LM head), also at tp 2 (a slice's heads; q/k norm grads),
// with LoRA, and with LoRA at tp 2 (the adapters' slices, the replicated ones' gradient parts),
// and with LoRA dropout (a masked input of the widest adapter, a key per row).
BOOST_AUTO_TEST_CASE(every_family_is_predicted) {
  for (const auto& f : braid::test::family_configs({.hidden = 16, .heads = 4, .kv_heads = 2, .head_dim = 6,
                                                    .inter = 20, .vocab = 97, .layers = 2, .max_positions = 32})) {
    const model::ModelConfig c = f.parsed();
    for (const model::ModelOptions& o : {model::ModelOptions{}, model::ModelOptions{.lm_head = false, .value_head = true,
                                                                                     .value_bias = true},
                                          model::ModelOptions{.tp = {2, 1, nullptr}},
                                          model::ModelOptions{.lora = {.rank = 2}},
                                          model::ModelOptions{.lm_head = false, .value_head = true,
                                                              .tp = {2, 1, nullptr},
                                                              .lora = {.rank = 2, .value_head = true}},
                                          model::ModelOptions{.lora = {.rank = 2, .dropout = 0.1,
                                                                       .targets = {"q_proj", "down_proj"}}}}) {
      BOOST_TEST_CONTEXT(f.name << ", value head " << o.value_head << ", tp " << o.tp.size << ", LoRA rank "
                                << o.lora.rank) {
        CountingBackend b;
        model::Model m(c, o, b);
        BOOST_TEST(b.live() == mem::model_bytes(spec(c, o)).total());
        // Training keeps every layer, recomputes every one, or every second (layer 0 of 2).
        for (const auto& [training, recompute] : {std::pair{true, 0}, std::pair{true, 1}, std::pair{true, 2},
                                                  std::pair{false, 0}}) {
          const model::ActivationOptions a{.max_tokens = 40, .max_sequences = 7, .training = training,
                                           .recompute = recompute};
          const std::uint64_t before = b.live();
          auto acts = m.make_activations(a);
          BOOST_TEST(b.live() - before == mem::activation_bytes(c, o, a), "training " << training << ", recompute "
                                                                                      << recompute);
        }
        if (o.lm_head && o.tp.size == 1) {
          const std::uint64_t before = b.live();
          braid::rl::ChunkedLmHead<float> head(m);
          BOOST_TEST(b.live() - before == mem::lm_head_chunk_bytes(c, mem::lm_head_chunk_rows(b, c)));
        }
      }
    }
  }
}

namespace {

// PPO's actor and critic trained together at --micro-tokens 40 (both resident at once) for two
// steps, their activations recomputed under `recompute`: the backend's peak, and the prediction.
std::pair<std::uint64_t, mem::Prediction> ppo_peak(int recompute) {
  const model::ModelConfig c = config();
  const auto batch = braid::test::uneven_batch(3);
  const std::int64_t micro = 40;
  CountingBackend b;
  model::Model actor(c, {}, b), critic(c, {.lm_head = false, .value_head = true, .dtype = be::DType::bf16}, b);
  actor.init_random(1);
  critic.init_random(2);
  braid::train::PolicyObjective policy(braid::train::ppo_actor_options(0.2, 0.01));
  braid::train::ValueObjective value(0.2);
  braid::train::TrainerOptions opt;
  opt.micro.max_tokens = micro;
  opt.recompute = recompute;
  braid::train::Trainer ta(actor, policy, opt), tc(critic, value, opt);
  const auto all = all_indices(batch);
  for (int step = 0; step < 2; ++step) {
    ta.step(batch, all);
    tc.step(batch, all);
  }
  const mem::Prediction p = mem::predict_training(
      {{.model = spec(c, actor.options(), "actor"), .lm_head_chunk_rows = mem::lm_head_chunk_rows(b, c),
        .loss_rows = 9},
       {.model = spec(c, critic.options(), "critic"), .loss_rows = 5}},
      micro, recompute);
  return {b.peak(), p};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_training_run_stays_within_its_prediction) {
  std::uint64_t kept_peak = 0;
  for (const int recompute : {0, 1}) {
    const auto [peak, p] = ppo_peak(recompute);
    std::uint64_t loss_arrays = 0;
    for (const auto& part : p.parts) {
      if (contains(part.name, "loss arrays")) loss_arrays += part.bytes;
    }
    BOOST_TEST_MESSAGE("training, recompute " << recompute << ": peak " << peak << " bytes, predicted " << p.total()
                                              << " (" << p.describe() << ")");
    // Everything but the loss arrays is exact; those grow to at most twice a micro-batch's rows.
    BOOST_TEST(peak <= p.total());
    BOOST_TEST(peak >= p.total() - loss_arrays);
    BOOST_TEST(loss_arrays < p.total() / 20);
    if (recompute == 0) kept_peak = peak;
    else BOOST_TEST(peak < kept_peak, "recomputing every layer lowers the peak");
  }
}

BOOST_AUTO_TEST_CASE(a_scoring_run_stays_within_its_prediction) {
  const model::ModelConfig c = config();
  const auto shard = braid::test::scratch("scoring") / "gen-00000.h5";
  const braid::io::SampleBatch plain = generated_shard(shard, 4);
  std::int64_t longest = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) longest = std::max<std::int64_t>(longest, plain.length(i));

  // One micro-batch holds the whole shard: the shape, and so the prediction, is exact.
  // Smaller micro-batches: the shards' headers bound the largest one.
  for (const std::int64_t micro : {std::int64_t(plain.token_count()), std::int64_t(40)}) {
    BOOST_TEST_CONTEXT("--micro-tokens " << micro) {
      const mem::MicroBatchShape shape = braid::score::largest_micro_batch({shard.string()}, micro);
      BOOST_TEST(shape.tokens == std::min<std::int64_t>(plain.token_count(), std::max(micro, longest)));
      BOOST_TEST(shape.sequences == std::min<std::int64_t>(plain.size(), micro));
      CountingBackend b;
      model::Model ref(c, {.dtype = be::DType::bf16}, b), critic(c, {.lm_head = false, .value_head = true}, b);
      ref.init_random(1);
      critic.init_random(2);
      braid::score::ReferencePass rp(ref, micro);
      braid::score::ValuePass vp(critic, micro);
      for (int round = 0; round < 2; ++round) {
        (void)rp.logprobs(plain);
        (void)vp.values(plain);
      }
      const mem::Prediction p = mem::predict_scoring(
          {{.model = spec(c, ref.options(), "reference"), .lm_head_chunk_rows = mem::lm_head_chunk_rows(b, c), .output_rows = 2},
           {.model = spec(c, critic.options(), "critic"), .output_rows = 1}},
          shape);
      BOOST_TEST_MESSAGE("scoring at " << micro << ": peak " << b.peak() << " bytes, predicted " << p.total());
      BOOST_TEST(b.peak() <= p.total());
      if (micro >= std::int64_t(plain.token_count())) BOOST_TEST(b.peak() == p.total());
    }
  }
  // Paths to come on stdin: --micro-tokens of both.
  const mem::MicroBatchShape unknown = braid::score::largest_micro_batch({"-"}, 64);
  BOOST_TEST(unknown.tokens == 64);
  BOOST_TEST(unknown.sequences == 64);
}

BOOST_AUTO_TEST_CASE(memory_that_will_not_suffice_is_refused_naming_each_part) {
  const model::ModelConfig c = config();
  const mem::Prediction p = mem::predict_training(
      {{.model = spec(c, {.dtype = be::DType::bf16}, "actor"), .lm_head_chunk_rows = 128, .loss_rows = 9}}, 4096);
  const std::uint64_t need = p.total();
  const be::DeviceMemory enough{need, 2 * need}, short_by_one{need - 1, 2 * need};
  mem::require_fits(p, enough, "cuda:0", "Lower --micro-tokens");
  try {
    mem::require_fits(p, short_by_one, "cuda:0", "Lower --micro-tokens (now 4096)");
    BOOST_ERROR("accepted a prediction of " << need << " bytes with " << need - 1 << " free");
  } catch (const InputError& e) {
    const std::string what = e.what();
    BOOST_TEST_MESSAGE(what);
    BOOST_TEST(e.file() == "--device cuda:0");
    BOOST_TEST(e.field() == "device memory");
    for (const auto& part : p.parts) {
      BOOST_TEST(contains(what, part.name + " " + braid::gib(part.bytes)), part.name);
    }
    BOOST_TEST(contains(what, "actor weights (bf16)"));
    BOOST_TEST(contains(what, "actor AdamW state (f32 moments and master)"));
    BOOST_TEST(contains(what, "actor activations (4096 tokens"));
    BOOST_TEST(contains(what, "needs " + braid::gib(need)));
    BOOST_TEST(contains(what, braid::gib(need - 1) + " of the device's " + braid::gib(2 * need) + " are free"));
    BOOST_TEST(contains(what, "Lower --micro-tokens (now 4096)"));
  }
  // The CPU reports no device memory: nothing to check, whatever the prediction.
  const auto cpu = be::make_cpu_backend(1);
  mem::Prediction huge;
  huge.add("everything", std::uint64_t(1) << 62);
  mem::require_fits(huge, *cpu, "cpu", "");
  BOOST_TEST(braid::gib(std::uint64_t(3) << 29) == "1.50 GiB");
  BOOST_TEST(braid::gib(std::uint64_t(5) << 20) == "5.00 MiB");  // not "0.00 GiB"
  BOOST_TEST(braid::gib(0) == "0.00 GiB");
}

BOOST_AUTO_TEST_CASE(the_tools_check_sites_refuse_before_loading) {
  // braid-train's and braid-score's checks, on a backend that reports free memory: from the
  // checkpoints' headers and the shard's, nothing loaded.
  const model::ModelConfig c = config();
  const auto dir = braid::test::scratch("sites");
  std::filesystem::create_directories(dir);
  const std::string actor = (dir / "actor.h5").string(), critic = (dir / "critic.h5").string();
  {
    auto cpu = be::make_cpu_backend(1);
    model::Model a(c, {}, *cpu), v(c, {.lm_head = false, .value_head = true}, *cpu);
    a.init_random(1);
    v.init_random(2);
    braid::checkpoint::save_weights(a, actor);
    braid::checkpoint::save_weights(v, critic);
  }
  braid::train::CommonTrainOptions t;
  t.micro_tokens = 40;
  t.device = "cuda:0";
  using braid::train::steps::ObjectiveKind;
  const std::vector<braid::train::steps::TrainedCheckpoint> ppo{{actor, "actor", ObjectiveKind::policy},
                                                                 {critic, "critic", ObjectiveKind::value}};
  // The CPU: not checked, and no prediction.
  BOOST_TEST(!braid::train::steps::require_device_memory(*be::make_cpu_backend(1), t, ppo).has_value());
  const mem::Prediction want = mem::predict_training(
      {{.model = spec(c, {}, "actor"), .lm_head_chunk_rows = 128, .loss_rows = 9},
       {.model = spec(c, {.lm_head = false, .value_head = true}, "critic"), .loss_rows = 5}},
      40);
  {
    CountingBackend roomy(be::DeviceMemory{want.total(), want.total()});
    const auto p = braid::train::steps::require_device_memory(roomy, t, ppo);
    BOOST_REQUIRE(p.has_value());
    BOOST_TEST(p->total() == want.total());
    BOOST_TEST(roomy.peak() == 0u);   // nothing allocated: headers only
  }
  try {
    CountingBackend tight(be::DeviceMemory{want.total() - 1, want.total()});
    braid::train::steps::require_device_memory(tight, t, ppo);
    BOOST_ERROR("braid-train's check accepted too little memory");
  } catch (const InputError& e) {
    const std::string what = e.what();
    BOOST_TEST(contains(what, "critic activations (40 tokens"), what);
    BOOST_TEST(contains(what, "Lower --micro-tokens (now 40;"), what);
    BOOST_TEST(contains(what, "--dtype bf16"), what);
  }

  // braid-score: reference (the actor) and critic over a shard of 14 sequences.
  const auto shard = dir / "gen-00000.h5";
  generated_shard(shard, 5);
  braid::score::CommandOptions o;
  o.inputs = {shard.string()};
  o.ref = actor;
  o.critic = critic;
  o.reward_rule = "digits";
  o.device = "cuda:0";
  o.micro_tokens = 64;
  const auto settings = braid::score::settings_from(o);
  const mem::Prediction score_want = braid::score::scoring_memory(*be::make_cpu_backend(1), o, settings, braid::score::largest_micro_batch(o.inputs, 64));
  BOOST_TEST(contains(score_want.describe(), "reference weights (f32)"));
  BOOST_TEST(contains(score_want.describe(), "critic activations"));
  BOOST_TEST(!contains(score_want.describe(), "reward model"));   // a rule, not a model
  CountingBackend roomy(be::DeviceMemory{score_want.total(), score_want.total()});
  BOOST_TEST(braid::score::require_device_memory(roomy, o, settings)->total() == score_want.total());
  try {
    CountingBackend tight(be::DeviceMemory{score_want.total() / 2, score_want.total()});
    braid::score::require_device_memory(tight, o, settings);
    BOOST_ERROR("braid-score's check accepted too little memory");
  } catch (const InputError& e) {
    BOOST_TEST(contains(e.what(), "Lower --micro-tokens (now 64"), e.what());
    BOOST_TEST(contains(e.what(), "reference LM-head chunk (128 rows)"), e.what());
  }
}

// bench_gpu --part train's step (bench/gpu/bench_gpu.cpp: the "1b" shape, bf16 weights, AdamW,
// 4 × 2048 tokens kept for backward, a 2048-row LM-head chunk, four per-token arrays), as the
// prediction counts it: docs/memory.md holds it beside the peak the H200 measured. Printed
// (--log_level=message), not asserted: a measurement is no test of the formula; the pieces
// above are.
// braid-train sft's prediction (policy, 128-row LM-head chunk as on the host, four loss rows)
// for the bench shapes with every weight trained, LoRA (rank 16 on every module) and every
// layer recomputed: docs/memory.md holds them beside bench/train/lora_recompute_memory.sh's
// measured peaks. Printed (--log_level=message), not asserted.
BOOST_AUTO_TEST_CASE(bench_lora_recompute_shapes) {
  for (const auto& [shape, micro] : {std::pair{"100m", std::int64_t(1024)}, std::pair{"1b", std::int64_t(4096)}}) {
    const model::ModelConfig c = braid::bench::bench_config(shape);
    for (const auto& [what, lora, recompute] :
         {std::tuple{"full", 0, 0}, std::tuple{"recompute 1", 0, 1}, std::tuple{"LoRA r16", 16, 0},
          std::tuple{"LoRA r16 + recompute 1", 16, 1}}) {
      const mem::Prediction p = mem::predict_training(
          {{.model = spec(c, {.lora = {.rank = lora}}, "policy"), .lm_head_chunk_rows = 128, .loss_rows = 4}}, micro,
          recompute);
      BOOST_TEST_MESSAGE(shape << " sft --micro-tokens " << micro << ", " << what << ": " << p.total() << " bytes = "
                               << double(p.total()) / (1 << 20) << " MiB: " << p.describe());
    }
  }
}

BOOST_AUTO_TEST_CASE(bench_1b_train_shape) {
  const model::ModelConfig c = braid::bench::bench_config("1b");
  const mem::ModelSpec m = spec(c, {.dtype = be::DType::bf16});
  const std::int64_t n = 4 * 2048;
  mem::Prediction p = mem::model_bytes(m);
  p.add("AdamW state", mem::adamw_bytes(m));
  p.add("activations", mem::activation_bytes(c, m.options, {.max_tokens = n, .max_sequences = 4, .training = true}));
  p.add("LM-head chunk (2048 rows)", mem::lm_head_chunk_bytes(c, 2048));
  p.add("targets, logprobs, gradients, weights", 4 * std::uint64_t(n) * 4);
  BOOST_TEST_MESSAGE("bench_gpu train 1b bf16 4x2048: " << p.total() << " bytes = " << double(p.total()) / (1 << 20)
                                                        << " MiB: " << p.describe());
}
