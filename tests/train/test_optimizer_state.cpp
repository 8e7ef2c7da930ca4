// AdamW's state to <stem>.optim.h5 and back through train/optimizer_state.hpp's adapter:
// a two-stage model loads its part of a whole-model state, and a file of another kind
// is refused by name.
#define BOOST_TEST_MODULE train_optimizer_state
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "train/optimizer_state.hpp"

#include "../common/scratch.hpp"
#include "tests/common/tiny_models.hpp"

using namespace braid;

namespace {

model::ModelConfig tiny() {
  return test::tiny_config({.hidden = 16, .heads = 2, .kv_heads = 1, .intermediate = 32, .vocab = 20, .positions = 16});
}

// Two AdamW steps on random gradients: nonzero moments, step count 2.
void take_steps(model::Model& m, optim::AdamW& opt) {
  Rng rng(3);
  for (int s = 0; s < 2; ++s) {
    for (auto& g : m.gradients()) g = static_cast<float>(rng.normal());
    opt.step(1e-3);
  }
}

// The moments of the tensor `name` in a model's AdamW.
std::vector<float> moment_of(model::Model& m, optim::AdamW& opt, const std::string& name, bool second) {
  std::size_t offset = 0;
  for (const auto& t : m.tensors()) {
    if (t.name == name) {
      const auto all = second ? opt.second_moment() : opt.first_moment();
      return {all.begin() + static_cast<std::ptrdiff_t>(offset), all.begin() + static_cast<std::ptrdiff_t>(offset + t.numel)};
    }
    offset += static_cast<std::size_t>(t.numel);
  }
  BOOST_FAIL("no tensor " << name);
  return {};
}

}  // namespace

BOOST_AUTO_TEST_CASE(state_round_trips_and_loads_into_another_stage_split) {
  auto be = backend::make_cpu_backend(1);
  model::Model whole(tiny(), {}, *be);
  whole.init_random(1);
  optim::AdamW opt(*be, whole.tensors(), {});
  take_steps(whole, opt);
  const auto ckpt = test::scratch("ckpt.h5");
  BOOST_TEST(checkpoint::optimizer_state_path(ckpt).filename() == "ckpt.optim.h5");
  train::save_optimizer_state(opt, whole, checkpoint::optimizer_state_path(ckpt));

  model::Model again(tiny(), {}, *be);
  optim::AdamW fresh(*be, again.tensors(), {});
  BOOST_TEST_REQUIRE(train::load_optimizer_state(fresh, again, ckpt));
  BOOST_TEST(fresh.steps_taken() == 2);
  const auto a = opt.first_moment(), b = fresh.first_moment();
  BOOST_TEST(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  const auto c = opt.second_moment(), d = fresh.second_moment();
  BOOST_TEST(std::equal(c.begin(), c.end(), d.begin(), d.end()));

  // The second stage of a split loads its layer and head from the whole-model file.
  model::Model stage1(tiny(), {.layers = {1, 2}}, *be);
  optim::AdamW stage_opt(*be, stage1.tensors(), {});
  BOOST_TEST_REQUIRE(train::load_optimizer_state(stage_opt, stage1, ckpt));
  for (const std::string name : {"model.layers.1.mlp.up_proj.weight", "lm_head.weight"}) {
    BOOST_TEST(moment_of(stage1, stage_opt, name, true) == moment_of(whole, opt, name, true));
  }

  // No state beside a checkpoint: nothing loaded.
  BOOST_TEST(!train::load_optimizer_state(fresh, again, test::scratch("other.h5")));
  // Weights where the state should be: refused, naming the file.
  checkpoint::save_weights(whole, checkpoint::optimizer_state_path(test::scratch("wrong.h5")));
  try {
    train::load_optimizer_state(fresh, again, test::scratch("wrong.h5"));
    BOOST_FAIL("a weights file was taken for optimizer state");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("wrong.optim.h5") != std::string::npos, e.what());
  }
}
