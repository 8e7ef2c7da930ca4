#define BOOST_TEST_MODULE checkpoint
#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <vector>
#include "tests/common/scratch.hpp"
#include "tests/common/tiny_models.hpp"

namespace fs = std::filesystem;
using braid::model::Model;
using braid::model::ModelConfig;

namespace {

ModelConfig tiny(bool tied = false) {
  return braid::test::tiny_config({.hidden = 16, .layers = 4, .intermediate = 24, .vocab = 40, .tied = tied});
}

using braid::test::scratch;

std::vector<Model> stages(const ModelConfig& c, int n, braid::backend::Backend& be) {
  std::vector<Model> out;
  for (auto r : braid::checkpoint::split_layers(c.num_hidden_layers, n)) out.emplace_back(c, braid::model::ModelOptions{.layers = r}, be);
  return out;
}

std::map<std::string, std::vector<float>> weights_of(const std::vector<Model>& ms) {
  std::map<std::string, std::vector<float>> w;
  for (const Model& m : ms) {
    for (const auto& t : m.tensors()) {
      std::vector<float> v(t.data, t.data + t.numel);
      auto [it, fresh] = w.emplace(t.name, v);
      if (!fresh) BOOST_TEST((it->second == v), "two stages disagree on " << t.name);
    }
  }
  return w;
}

void save(const std::vector<Model>& ms, const fs::path& out) {
  for (std::size_t i = 0; i < ms.size(); ++i) {
    braid::checkpoint::save_weights(ms[i], braid::checkpoint::stage_path(out, int(i), int(ms.size())), {.step = 7});
  }
}

void load(std::vector<Model>& ms, const fs::path& out, int files) {
  braid::io::WeightShardSet set(braid::checkpoint::stage_paths(out, files));
  for (Model& m : ms) braid::checkpoint::load_weights(m, set);
}

}  // namespace

BOOST_AUTO_TEST_CASE(layer_split_and_file_names) {
  const auto r = braid::checkpoint::split_layers(10, 4);
  BOOST_TEST(r.size() == 4u);
  BOOST_TEST(r[0].begin == 0);
  BOOST_TEST(r[0].end == 3);
  BOOST_TEST(r[1].end == 6);
  BOOST_TEST(r[2].end == 8);
  BOOST_TEST(r[3].end == 10);
  BOOST_CHECK_THROW(braid::checkpoint::split_layers(2, 3), braid::UsageError);
  BOOST_TEST(braid::checkpoint::stage_path("out/ckpt.h5", 2, 4) == fs::path("out/ckpt.stage2-of-4.h5"));
  BOOST_TEST(braid::checkpoint::stage_path("out/ckpt.h5", 0, 1) == fs::path("out/ckpt.h5"));
}

BOOST_AUTO_TEST_CASE(four_stage_checkpoint_loads_into_one_and_two_stages_and_back) {
  auto be = braid::backend::make_cpu_backend(1);
  const ModelConfig c = tiny();
  auto four = stages(c, 4, *be);
  for (auto& m : four) m.init_random(99);
  const auto want = weights_of(four);
  const fs::path ck4 = scratch("ck4.h5");
  save(four, ck4);

  auto one = stages(c, 1, *be);
  load(one, ck4, 4);
  BOOST_TEST((weights_of(one) == want));

  auto two = stages(c, 2, *be);
  load(two, ck4, 4);
  BOOST_TEST((weights_of(two) == want));
  const fs::path ck2 = scratch("ck2.h5");
  save(two, ck2);

  auto back = stages(c, 4, *be);
  for (auto& m : back) m.init_random(1);  // other weights, to be overwritten
  BOOST_TEST((weights_of(back) != want));
  load(back, ck2, 2);
  BOOST_TEST((weights_of(back) == want));

  braid::io::WeightShardReader r(braid::checkpoint::stage_path(ck2, 1, 2));
  BOOST_TEST(r.meta().layer_begin == 2);
  BOOST_TEST(r.meta().layer_end == 4);
  BOOST_TEST(r.meta().has_head);
  BOOST_TEST(!r.meta().has_embedding);
  BOOST_TEST(r.meta().step == 7);
}

BOOST_AUTO_TEST_CASE(tied_embedding_is_written_once_and_feeds_the_last_stage) {
  auto be = braid::backend::make_cpu_backend(1);
  const ModelConfig c = tiny(true);
  auto one = stages(c, 1, *be);
  one[0].init_random(3);
  const fs::path ck = scratch("tied.h5");
  save(one, ck);
  auto two = stages(c, 2, *be);
  load(two, ck, 1);
  BOOST_TEST((weights_of(two) == weights_of(one)));
  const fs::path ck2 = scratch("tied2.h5");
  save(two, ck2);  // two files, one embedding: the set would refuse a duplicate
  auto again = stages(c, 1, *be);
  load(again, ck2, 2);
  BOOST_TEST((weights_of(again) == weights_of(one)));
}

BOOST_AUTO_TEST_CASE(wrong_or_incomplete_checkpoints_are_refused) {
  auto be = braid::backend::make_cpu_backend(1);
  auto four = stages(tiny(), 4, *be);
  const fs::path ck = scratch("partial.h5");
  save(four, ck);
  auto one = stages(tiny(), 1, *be);
  // Only the first two stage files: layers 2, 3 and the head are missing.
  braid::io::WeightShardSet half({braid::checkpoint::stage_path(ck, 0, 4), braid::checkpoint::stage_path(ck, 1, 4)});
  BOOST_CHECK_THROW(braid::checkpoint::load_weights(one[0], half), braid::InputError);

  ModelConfig other = tiny();
  other.intermediate_size = 32;
  auto wrong = stages(other, 1, *be);
  braid::io::WeightShardSet all(braid::checkpoint::stage_paths(ck, 4));
  BOOST_CHECK_THROW(braid::checkpoint::load_weights(wrong[0], all), braid::InputError);
}

BOOST_AUTO_TEST_CASE(checkpoint_files_resolve_a_file_or_its_stage_files) {
  auto be = braid::backend::make_cpu_backend();
  const fs::path dir = scratch("resolve");
  fs::remove_all(dir);  // a rerun must not find the last run's second split
  fs::create_directories(dir);
  const ModelConfig c = tiny();
  std::vector<Model> four = stages(c, 4, *be);
  for (Model& m : four) m.init_random(3);
  save(four, dir / "ck.h5");
  const auto files = braid::checkpoint::checkpoint_files(dir / "ck.h5");
  BOOST_TEST(files.size() == 4u);
  BOOST_TEST((files == braid::checkpoint::stage_paths(dir / "ck.h5", 4)));

  // The whole model from its four stage files, heads as the checkpoint has them.
  const auto opened = braid::checkpoint::open_model(dir / "ck.h5", *be, {}, /*need_lm_head=*/true);
  BOOST_TEST(opened.step == 7);
  BOOST_TEST(opened.model->is_first_stage());
  BOOST_TEST(opened.model->is_last_stage());
  BOOST_TEST(!opened.model->options().value_head);
  const auto want = weights_of(four);
  for (const auto& t : opened.model->tensors()) {
    BOOST_TEST((std::vector<float>(t.data, t.data + t.numel) == want.at(t.name)), t.name);
  }
  // A single file names itself; a critic is demanded of a model without score.weight.
  braid::checkpoint::save_weights(*opened.model, dir / "one.h5");
  BOOST_TEST(braid::checkpoint::checkpoint_files(dir / "one.h5").size() == 1u);
  BOOST_CHECK_THROW(braid::checkpoint::open_model(dir / "one.h5", *be, {}, false, /*need_value_head=*/true), braid::InputError);

  // Neither the file nor stage files; one stage file missing; two splits side by side.
  BOOST_CHECK_THROW(braid::checkpoint::checkpoint_files(dir / "none.h5"), braid::InputError);
  fs::remove(braid::checkpoint::stage_path(dir / "ck.h5", 2, 4));
  BOOST_CHECK_THROW(braid::checkpoint::checkpoint_files(dir / "ck.h5"), braid::InputError);
  std::vector<Model> two = stages(c, 2, *be);
  save(two, dir / "ck.h5");
  BOOST_CHECK_THROW(braid::checkpoint::checkpoint_files(dir / "ck.h5"), braid::InputError);
}

// A checkpoint written as stage files where an earlier run left the whole file (and stage
// files of another count) under the same name: the reader would prefer the whole file, so
// the writer's lead removes every other layout, and the reader then gets the new weights.
BOOST_AUTO_TEST_CASE(writing_a_layout_removes_the_other_layouts_of_the_same_name) {
  auto be = braid::backend::make_cpu_backend(1);
  const ModelConfig c = tiny();
  auto old_whole = stages(c, 1, *be);
  old_whole[0].init_random(5);
  auto old_four = stages(c, 4, *be);
  for (auto& m : old_four) m.init_random(6);
  auto fresh = stages(c, 2, *be);
  for (auto& m : fresh) m.init_random(7);
  const fs::path ck = scratch("relayout.h5");
  save(old_whole, ck);
  save(old_four, ck);
  save(fresh, ck);
  const fs::path other = scratch("relayout.optim.h5");   // another checkpoint's name: untouched
  save(old_whole, other);
  const auto written = braid::checkpoint::stage_paths(ck, 2);
  const auto removed = braid::checkpoint::remove_other_layouts(ck, written);
  BOOST_TEST(removed.size() == 5u);   // the whole file and the four stage files of 4
  BOOST_TEST(!fs::exists(ck));
  for (int s = 0; s < 4; ++s) BOOST_TEST(!fs::exists(braid::checkpoint::stage_path(ck, s, 4)));
  for (const auto& f : written) BOOST_TEST(fs::exists(f));
  BOOST_TEST(fs::exists(other));
  auto back = stages(c, 1, *be);
  load(back, ck, 2);
  BOOST_TEST((weights_of(back) == weights_of(fresh)));
  BOOST_TEST(braid::checkpoint::remove_other_layouts(ck, written).empty());
}
