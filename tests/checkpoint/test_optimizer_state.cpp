// checkpoint/optimizer_state.hpp without an optimizer: named moments over a model's
// tensors go to "<param>.<moment>" tensors of a file of kind "optimizer" (the layout
// docs/formats.md gives), come back with the step count, load into another stage
// split, skip the tied embedding's copy on a later stage, and are refused when they do
// not fit the model.
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/optimizer_state.hpp"
#include "core/error.hpp"
#include "io/weight_shard.hpp"

#include "tests/common/scratch.hpp"
#include "tests/common/tiny_models.hpp"

#include <numeric>
#include <stdexcept>
#include <vector>

namespace {

using braid::model::Model;
using braid::model::ModelConfig;
namespace checkpoint = braid::checkpoint;

ModelConfig tiny(bool tied) {
  return braid::test::tiny_config({.hidden = 16, .heads = 2, .kv_heads = 1, .intermediate = 24, .vocab = 20,
                                   .positions = 16, .tied = tied});
}

std::size_t parameters(const Model& m) {
  std::size_t n = 0;
  for (const auto& t : m.tensors()) n += static_cast<std::size_t>(t.numel);
  return n;
}

// Where tensor `name` starts in a moment over m.tensors().
std::size_t offset_of(const Model& m, const std::string& name) {
  std::size_t offset = 0;
  for (const auto& t : m.tensors()) {
    if (t.name == name) return offset;
    offset += static_cast<std::size_t>(t.numel);
  }
  BOOST_FAIL("no tensor " << name);
  return 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(named_moments_round_trip_with_the_step_count) {
  auto be = braid::backend::make_cpu_backend(1);
  const Model whole(tiny(false), {}, *be);
  const std::size_t n = parameters(whole);
  std::vector<float> momentum(n), second(n);
  std::iota(momentum.begin(), momentum.end(), 0.0f);
  for (std::size_t i = 0; i < n; ++i) second[i] = 0.5f * static_cast<float>(i % 97);
  const std::vector<checkpoint::Moment> saved{{"momentum", momentum}, {"second", second}};
  const auto ckpt = braid::test::scratch("named.h5");
  checkpoint::save_optimizer_state(saved, 11, whole, checkpoint::optimizer_state_path(ckpt), {.created_by = "test"});

  // On disk: kind "optimizer", the step, one tensor per parameter and moment, shaped as the parameter.
  const braid::io::WeightShardReader r(braid::test::scratch("named.optim.h5"));
  BOOST_TEST(r.meta().kind == "optimizer");
  BOOST_TEST(r.meta().step == 11);
  BOOST_TEST(r.names().size() == 2 * whole.tensors().size());
  const std::string up = "model.layers.1.mlp.up_proj.weight";
  const auto on_disk = r.read(braid::io::optimizer_tensor_name(up, "momentum"));
  const std::size_t at = offset_of(whole, up);
  BOOST_TEST(on_disk.size() == 24u * 16u);
  BOOST_TEST(on_disk.front() == momentum[at]);
  BOOST_TEST(on_disk.back() == momentum[at + on_disk.size() - 1]);

  std::vector<float> m2(n, -1.0f), s2(n, -1.0f);
  const std::vector<checkpoint::Moment> loaded{{"momentum", m2}, {"second", s2}};
  const auto step = checkpoint::load_optimizer_state(loaded, whole, ckpt);
  BOOST_TEST_REQUIRE(step.has_value());
  BOOST_TEST(*step == 11);
  BOOST_TEST((m2 == momentum));
  BOOST_TEST((s2 == second));

  // The second stage of a split takes its layer and its head from the whole-model file.
  const Model stage1(tiny(false), {.layers = {1, 2}}, *be);
  std::vector<float> m3(parameters(stage1)), s3(parameters(stage1));
  BOOST_TEST_REQUIRE(checkpoint::load_optimizer_state(std::vector<checkpoint::Moment>{{"momentum", m3}, {"second", s3}},
                                                      stage1, ckpt)
                         .has_value());
  for (const std::string& name : {up, std::string("lm_head.weight")}) {
    BOOST_TEST(m3[offset_of(stage1, name)] == momentum[offset_of(whole, name)], name);
    BOOST_TEST(s3[offset_of(stage1, name) + 5] == second[offset_of(whole, name) + 5], name);
  }

  // No state beside a checkpoint: nothing loaded, nothing touched.
  std::vector<float> untouched(n, -1.0f);
  BOOST_TEST(!checkpoint::load_optimizer_state(std::vector<checkpoint::Moment>{{"momentum", untouched}}, whole,
                                               braid::test::scratch("none.h5"))
                  .has_value());
  BOOST_TEST(untouched.front() == -1.0f);
  // A moment the file does not hold, and a moment of the wrong length.
  std::vector<float> other(n);
  BOOST_CHECK_THROW(checkpoint::load_optimizer_state(std::vector<checkpoint::Moment>{{"velocity", other}}, whole, ckpt),
                    braid::InputError);
  std::vector<float> short_one(n - 1);
  BOOST_CHECK_THROW(checkpoint::save_optimizer_state(std::vector<checkpoint::Moment>{{"momentum", short_one}}, 1, whole,
                                                     braid::test::scratch("short.optim.h5")),
                    std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_tied_last_stage_keeps_no_state_for_its_copy_of_the_embedding) {
  auto be = braid::backend::make_cpu_backend(1);
  const Model first(tiny(true), {.layers = {0, 1}}, *be), last(tiny(true), {.layers = {1, 2}}, *be);
  const auto ckpt = braid::test::scratch("tied.h5");
  std::vector<float> m0(parameters(first), 1.0f), m1(parameters(last), 2.0f);
  checkpoint::save_optimizer_state(std::vector<checkpoint::Moment>{{"exp_avg", m0}}, 3, first,
                                   checkpoint::stage_path(checkpoint::optimizer_state_path(ckpt), 0, 2));
  checkpoint::save_optimizer_state(std::vector<checkpoint::Moment>{{"exp_avg", m1}}, 3, last,
                                   checkpoint::stage_path(checkpoint::optimizer_state_path(ckpt), 1, 2));
  const braid::io::WeightShardReader r(checkpoint::stage_path(checkpoint::optimizer_state_path(ckpt), 1, 2));
  BOOST_TEST(!r.contains("model.embed_tokens.weight.exp_avg"));

  // Loading back into the last stage fills what it owns on disk and leaves its copy of
  // the embedding alone (the file's one embedding state is the first stage's).
  std::vector<float> back(parameters(last), -1.0f);
  BOOST_TEST_REQUIRE(
      checkpoint::load_optimizer_state(std::vector<checkpoint::Moment>{{"exp_avg", back}}, last, ckpt).has_value());
  BOOST_TEST(back[offset_of(last, "model.norm.weight")] == 2.0f);
  BOOST_TEST(back[offset_of(last, "model.embed_tokens.weight")] == -1.0f);
  std::vector<float> front(parameters(first), -1.0f);
  BOOST_TEST_REQUIRE(
      checkpoint::load_optimizer_state(std::vector<checkpoint::Moment>{{"exp_avg", front}}, first, ckpt).has_value());
  BOOST_TEST(front[offset_of(first, "model.embed_tokens.weight")] == 1.0f);
}

// Optimizer state given where weights are expected is refused naming its kind, not
// loaded (or refused for a missing tensor).
BOOST_AUTO_TEST_CASE(optimizer_state_is_not_loaded_as_weights) {
  auto be = braid::backend::make_cpu_backend(1);
  Model whole(tiny(false), {}, *be);
  std::vector<float> zeros(parameters(whole), 0.0f);
  const auto ckpt = braid::test::scratch("as_weights.h5");
  checkpoint::save_optimizer_state(std::vector<checkpoint::Moment>{{"exp_avg", zeros}}, 2, whole,
                                   checkpoint::optimizer_state_path(ckpt), {.created_by = "test"});
  const auto state = braid::test::scratch("as_weights.optim.h5");
  try {
    checkpoint::load_weights(whole, braid::io::WeightShardSet({state}));
    BOOST_FAIL("optimizer state was loaded as weights");
  } catch (const braid::InputError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find(state.string() + ": attribute kind: is \"optimizer\"") != std::string::npos, msg);
  }
}
