// Resharding by files: a checkpoint of two pipeline stages goes from tp 1 to 2 to 4 and
// back to 1 bit-exact, each tp rank's files hold exactly that rank's slices (the same
// bits as a tp model initialised from the same seed), and a whole checkpoint loads into
// any tp rank by slicing.
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/reshard.hpp"
#include "core/error.hpp"
#include "tests/common/scratch.hpp"

#include <cstring>
#include <filesystem>
#include <vector>

namespace fs = std::filesystem;
using namespace braid;

namespace {

model::ModelConfig tp_config() {
  return model::ModelConfig{.hidden_size = 16, .num_hidden_layers = 4, .num_attention_heads = 8,
      .num_key_value_heads = 4, .intermediate_size = 22, .vocab_size = 41,
      .max_position_embeddings = 32};
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
  const fs::path dir = test::scratch("reshard");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path a = dir / "a.h5", b = dir / "b.h5", c = dir / "c.h5", d = dir / "d.h5";
  const auto ranges = checkpoint::split_layers(cfg.num_hidden_layers, 2);
  for (int s = 0; s < 2; ++s) {
    model::Model m(cfg, {.layers = ranges[std::size_t(s)], .value_head = s == 1}, *be);
    m.init_random(5, 0.3);
    checkpoint::save_weights(m, checkpoint::stage_path(a, s, 2));
  }
  BOOST_TEST(checkpoint::reshard(checkpoint::checkpoint_files(a), b, 2, "test").size() == 4u);
  BOOST_TEST(checkpoint::reshard(checkpoint::checkpoint_files(b), c, 4, "test").size() == 8u);
  BOOST_TEST(checkpoint::reshard(checkpoint::checkpoint_files(c), d, 1, "test").size() == 2u);
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
  // Another degree is refused, naming it; so is a degree the heads do not divide.
  BOOST_CHECK_THROW(checkpoint::open_model(c, *be, {}, false, true, backend::DType::f32, {2, 0, nullptr}), InputError);
  BOOST_CHECK_THROW(checkpoint::reshard(checkpoint::checkpoint_files(a), dir / "e.h5", 3, "test"), UsageError);
  // A rank's files alone are not a checkpoint to reshard.
  BOOST_CHECK_THROW(checkpoint::reshard({dir / "b.tp0-of-2.stage0-of-2.h5", dir / "b.tp0-of-2.stage1-of-2.h5"},
                                        dir / "f.h5", 1, "test"),
                    InputError);
}

}  // namespace
