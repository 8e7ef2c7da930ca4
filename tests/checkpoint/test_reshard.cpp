// Resharding by files: a checkpoint of two pipeline stages goes from tp 1 to 2 to 4 and
// back to 1 bit-exact, each tp rank's files hold exactly that rank's slices (the same
// bits as a tp model initialised from the same seed), a whole checkpoint loads into any
// tp rank by slicing and one of another degree by joining; the stage count changes too,
// and an optimizer state moves with its weights.
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/optimizer_state.hpp"
#include "checkpoint/reshard.hpp"
#include "core/error.hpp"
#include "tests/common/scratch.hpp"
#include "tests/common/tiny_models.hpp"

#include <cstring>
#include <filesystem>
#include <vector>

namespace fs = std::filesystem;
using namespace braid;

namespace {

model::ModelConfig tp_config() {
  return test::tiny_config({.hidden = 16, .layers = 4, .heads = 8, .kv_heads = 4, .intermediate = 22, .vocab = 41});
}

// Every tensor of files a equals the same tensor of files b, bit for bit.
void require_same_bits(const std::vector<fs::path>& a, const std::vector<fs::path>& b) {
  const io::WeightShardSet sa(a), sb(b);
  BOOST_REQUIRE(sa.names() == sb.names());
  for (const auto& name : sa.names()) {
    BOOST_REQUIRE(sa.shape(name) == sb.shape(name));
    const std::vector<float> x = sa.read(name), y = sb.read(name);
    BOOST_TEST(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0, name);
  }
}

// The model's values equal those of a model of the same tp slice made from the seed.
void require_seeded(model::Model& m, std::uint64_t seed) {
  model::Model want(m.config(), m.options(), m.backend());
  want.init_random(seed, 0.3);
  for (const auto& t : m.tensors()) {
    const auto* w = want.find(t.name);
    BOOST_REQUIRE(w);
    BOOST_TEST(std::memcmp(t.data, w->data, std::size_t(t.numel) * sizeof(float)) == 0, t.name);
  }
}

BOOST_AUTO_TEST_CASE(tp_1_to_2_to_4_and_back_is_bit_exact) {
  auto be = backend::make_cpu_backend(1);
  const model::ModelConfig cfg = tp_config();
  const fs::path dir = test::fresh_scratch("reshard");
  const fs::path a = dir / "a.h5", b = dir / "b.h5", c = dir / "c.h5", d = dir / "d.h5";
  const auto ranges = checkpoint::split_layers(cfg.num_hidden_layers, 2);
  for (int s = 0; s < 2; ++s) {
    model::Model m(cfg, {.layers = ranges[std::size_t(s)], .value_head = s == 1}, *be);
    m.init_random(5, 0.3);
    checkpoint::save_weights(m, checkpoint::stage_path(a, s, 2));
  }
  BOOST_TEST(checkpoint::reshard(checkpoint::checkpoint_files(a), b, {.tp = 2}, "test").size() == 4u);
  BOOST_TEST(checkpoint::reshard(checkpoint::checkpoint_files(b), c, {.tp = 4}, "test").size() == 8u);
  BOOST_TEST(checkpoint::reshard(checkpoint::checkpoint_files(c), d, {.tp = 1}, "test").size() == 2u);
  BOOST_TEST(fs::is_regular_file(dir / "c.tp3-of-4.stage1-of-2.h5"));
  require_same_bits(checkpoint::checkpoint_files(a), checkpoint::checkpoint_files(d));

  // Each tp rank opens its own files (both stages), or slices the whole checkpoint.
  for (int tp : {2, 4}) {
    for (int r = 0; r < tp; ++r) {
      const model::TensorParallel slice{tp, r, nullptr};
      auto own = checkpoint::open_model(tp == 2 ? b : c, *be, {}, false, true, backend::DType::f32, slice);
      BOOST_TEST(own.files.size() == 2u);
      BOOST_TEST(io::WeightShardReader(own.files[0]).meta().tp_rank == r);
      require_seeded(*own.model, 5);
      auto sliced = checkpoint::open_model(a, *be, {}, false, true, backend::DType::f32, slice);
      require_seeded(*sliced.model, 5);
    }
  }
  // Another degree opens joined: tp 4 files into a tp 2 rank and into one process (tp 1).
  for (int r = 0; r < 2; ++r) {
    auto joined = checkpoint::open_model(c, *be, {}, false, true, backend::DType::f32, {2, r, nullptr});
    BOOST_TEST(joined.files.size() == 8u);
    require_seeded(*joined.model, 5);
  }
  auto whole = checkpoint::open_model(b, *be, {}, false, true);
  require_seeded(*whole.model, 5);
  // A degree the heads do not divide is refused.
  BOOST_CHECK_THROW(checkpoint::reshard(checkpoint::checkpoint_files(a), dir / "e.h5", {.tp = 3}, "test"), UsageError);
  // A rank's files alone are not a checkpoint to reshard.
  BOOST_CHECK_THROW(checkpoint::reshard({dir / "b.tp0-of-2.stage0-of-2.h5", dir / "b.tp0-of-2.stage1-of-2.h5"},
                                        dir / "f.h5", {.tp = 1}, "test"),
                    InputError);
}

// The stage count changes with the degree or alone (2 stages at tp 2 -> 4 stages at tp 1 ->
// 1 stage), bit-exact, each stage file holding its layers; an optimizer state the same way.
BOOST_AUTO_TEST_CASE(stages_change_with_the_optimizer_state) {
  auto be = backend::make_cpu_backend(1);
  const model::ModelConfig cfg = tp_config();
  const fs::path dir = test::fresh_scratch("reshard_stages");
  const fs::path a = dir / "a.h5";
  model::Model m(cfg, {.value_head = true}, *be);
  m.init_random(7, 0.3);
  checkpoint::save_weights(m, a);
  std::vector<float> avg(static_cast<std::size_t>(m.parameter_count())), sq(avg.size());
  for (std::size_t i = 0; i < avg.size(); ++i) {
    avg[i] = 0.001f * static_cast<float>(i % 97);
    sq[i] = 0.5f + static_cast<float>(i % 13);
  }
  const std::vector<checkpoint::Moment> moments{{"exp_avg", avg}, {"exp_avg_sq", sq}};
  checkpoint::save_optimizer_state(moments, 3, m, checkpoint::optimizer_state_path(a));

  const fs::path b = dir / "b.h5", c = dir / "c.h5", d = dir / "d.h5";
  BOOST_TEST(checkpoint::reshard(checkpoint::checkpoint_files(a), b, {.tp = 2, .stages = 2}, "test").size() == 4u);
  BOOST_TEST(checkpoint::reshard(checkpoint::checkpoint_files(b), c, {.tp = 1, .stages = 4}, "test").size() == 4u);
  BOOST_TEST(checkpoint::reshard(checkpoint::checkpoint_files(c), d, {.stages = 1}, "test").size() == 1u);
  require_same_bits(checkpoint::checkpoint_files(a), checkpoint::checkpoint_files(d));
  const io::WeightShardReader third(dir / "c.stage2-of-4.h5");
  BOOST_TEST(third.meta().layer_begin == 2);
  BOOST_TEST(third.meta().layer_end == 3);
  BOOST_TEST(!third.meta().has_embedding);
  BOOST_TEST(!third.contains("model.layers.1.mlp.up_proj.weight"));
  BOOST_TEST(third.contains("model.layers.2.mlp.up_proj.weight"));
  BOOST_TEST(io::WeightShardReader(dir / "c.stage3-of-4.h5").contains("score.weight"));

  // The optimizer state: to tp 2 x 3 stages, back to one file, the same bits; and loaded
  // from its tp 2 files into a whole model, the moments as saved.
  const fs::path ob = checkpoint::optimizer_state_path(b), oc = dir / "back.optim.h5";
  BOOST_TEST(checkpoint::reshard(checkpoint::checkpoint_files(checkpoint::optimizer_state_path(a)), ob,
                                 {.tp = 2, .stages = 3}, "test").size() == 6u);
  BOOST_TEST(checkpoint::reshard(checkpoint::checkpoint_files(ob), oc, {.tp = 1, .stages = 1}, "test").size() == 1u);
  require_same_bits({checkpoint::optimizer_state_path(a)}, {oc});
  std::vector<float> avg2(avg.size()), sq2(avg.size());
  const std::vector<checkpoint::Moment> back{{"exp_avg", avg2}, {"exp_avg_sq", sq2}};
  BOOST_TEST(checkpoint::load_optimizer_state(back, m, b).value_or(-1) == 3);
  BOOST_TEST(std::memcmp(avg2.data(), avg.data(), avg.size() * sizeof(float)) == 0);
  BOOST_TEST(std::memcmp(sq2.data(), sq.data(), sq.size() * sizeof(float)) == 0);
}

}  // namespace
