#define BOOST_TEST_MODULE weight_shard
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <numeric>

#include "core/error.hpp"
#include "io/weight_shard.hpp"
#include "tests/common/arrays.hpp"
#include "tests/common/scratch.hpp"

namespace fs = std::filesystem;
using namespace braid;
using namespace braid::io;
using namespace braid::test;

namespace {

// A stage of a tiny 4-layer model: layers [begin, end), the embedding on the first, the head on the last.
void write_stage(const fs::path& path, int begin, int end, int layers) {
  WeightShardMeta meta;
  meta.model_config = R"({"hidden_size": 4, "num_hidden_layers": 4})";
  meta.layer_begin = begin;
  meta.layer_end = end;
  meta.has_embedding = begin == 0;
  meta.has_head = end == layers;
  meta.step = 7;
  meta.created_by = "test_weight_shard";
  WeightShardWriter w(path, meta);
  if (meta.has_embedding) w.add("model.embed_tokens.weight", {8, 4}, ramp(32, 0.5f));
  for (int l = begin; l < end; ++l) {
    w.add("model.layers." + std::to_string(l) + ".self_attn.q_proj.weight", {4, 4}, ramp(16, 100.0f * l));
  }
  if (meta.has_head) {
    w.add("model.norm.weight", {4}, ramp(4, 1.0f));
    w.add("lm_head.weight", {8, 4}, ramp(32, -3.0f));
  }
  w.commit();
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trip_keeps_tensors_shapes_and_metadata) {
  const auto path = scratch("one.h5");
  write_stage(path, 0, 4, 4);
  WeightShardReader r(path);
  BOOST_TEST(r.meta().layer_begin == 0);
  BOOST_TEST(r.meta().layer_end == 4);
  BOOST_TEST(r.meta().has_embedding);
  BOOST_TEST(r.meta().has_head);
  BOOST_TEST(r.meta().step == 7);
  BOOST_TEST(r.meta().kind == "weights");
  BOOST_TEST(r.meta().created_by == "test_weight_shard");
  BOOST_TEST(r.meta().model_config == R"({"hidden_size": 4, "num_hidden_layers": 4})");
  BOOST_TEST(r.names().size() == 1u + 4u + 2u);
  BOOST_TEST((r.shape("lm_head.weight") == Shape{8, 4}));
  BOOST_TEST((r.shape("model.norm.weight") == Shape{4}));
  const auto q2 = r.read("model.layers.2.self_attn.q_proj.weight");
  const auto expect = ramp(16, 200.0f);
  BOOST_TEST(q2 == expect, boost::test_tools::per_element());
  BOOST_CHECK_THROW(r.shape("model.layers.9.mlp.up_proj.weight"), InputError);
}

BOOST_AUTO_TEST_CASE(four_stage_checkpoint_loads_through_a_set) {
  std::vector<fs::path> stages;
  for (int s = 0; s < 4; ++s) {
    stages.push_back(scratch("stage" + std::to_string(s) + ".h5"));
    write_stage(stages.back(), s, s + 1, 4);
  }
  WeightShardSet set(stages);
  BOOST_TEST(set.layer_begin() == 0);
  BOOST_TEST(set.layer_end() == 4);
  BOOST_TEST(set.names().size() == 7u);
  BOOST_TEST(set.holder("lm_head.weight").path() == stages[3]);
  BOOST_TEST(set.holder("model.layers.1.self_attn.q_proj.weight").path() == stages[1]);
  const auto embed = set.read("model.embed_tokens.weight");
  BOOST_TEST(embed == ramp(32, 0.5f), boost::test_tools::per_element());
  BOOST_CHECK_THROW(set.holder("model.layers.4.self_attn.q_proj.weight"), InputError);
}

BOOST_AUTO_TEST_CASE(a_tensor_in_two_shards_is_refused) {
  const auto a = scratch("dup_a.h5"), b = scratch("dup_b.h5");
  write_stage(a, 0, 2, 4);
  write_stage(b, 1, 4, 4);
  BOOST_CHECK_THROW(WeightShardSet({a, b}), InputError);
}

BOOST_AUTO_TEST_CASE(optimizer_state_is_a_shard_of_kind_optimizer) {
  const auto path = scratch("optim.h5");
  WeightShardMeta meta;
  meta.kind = "optimizer";
  meta.step = 123;
  WeightShardWriter w(path, meta);
  w.add(optimizer_tensor_name("model.norm.weight", "exp_avg"), {4}, ramp(4, 0));
  w.add(optimizer_tensor_name("model.norm.weight", "exp_avg_sq"), {4}, ramp(4, 1));
  w.commit();
  WeightShardReader r(path);
  BOOST_TEST(r.meta().kind == "optimizer");
  BOOST_TEST(r.meta().step == 123);
  BOOST_TEST(r.contains("model.norm.weight.exp_avg_sq"));
}

BOOST_AUTO_TEST_CASE(an_uncommitted_writer_leaves_no_file) {
  const auto path = scratch("abandoned.h5");
  fs::remove(path);
  {
    WeightShardWriter w(path, WeightShardMeta{});
    w.add("x", {2}, ramp(2, 0));
  }
  BOOST_TEST(!fs::exists(path));
  for (const auto& e : fs::directory_iterator(path.parent_path())) {
    BOOST_TEST(e.path().filename().string().find(".abandoned.h5.tmp") == std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(writer_rejects_bad_tensors) {
  WeightShardWriter w(scratch("bad.h5"), WeightShardMeta{});
  BOOST_CHECK_THROW(w.add("a/b", {1}, ramp(1, 0)), std::invalid_argument);
  BOOST_CHECK_THROW(w.add("a", {2, 2}, ramp(3, 0)), std::invalid_argument);
  w.add("a", {1}, ramp(1, 0));
  BOOST_CHECK_THROW(w.add("a", {1}, ramp(1, 0)), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(tensor_parallel_slices_read_along_either_axis) {
  const auto path = scratch("slices.h5");
  WeightShardWriter w(path, WeightShardMeta{});
  w.add("m", {4, 6}, ramp(24, 0));  // m[r][c] = 6r + c
  w.commit();
  WeightShardReader r(path);
  std::vector<float> rows(2 * 6), cols(4 * 3);
  r.read_slice("m", 0, 2, 4, rows.data());
  r.read_slice("m", 1, 3, 6, cols.data());
  BOOST_TEST(rows == ramp(12, 12), boost::test_tools::per_element());
  const std::vector<float> expect_cols{3, 4, 5, 9, 10, 11, 15, 16, 17, 21, 22, 23};
  BOOST_TEST(cols == expect_cols, boost::test_tools::per_element());
  BOOST_CHECK_THROW(r.read_slice("m", 2, 0, 1, rows.data()), std::invalid_argument);
  BOOST_CHECK_THROW(r.read_slice("m", 0, 3, 5, rows.data()), std::invalid_argument);
}

// Attributes that contradict the file are refused naming the attribute (all were read
// as given: a step out of range, layers past the model, weights labelled as optimizer state).
BOOST_AUTO_TEST_CASE(contradictory_attributes_are_refused) {
  auto refusal = [](const fs::path& path) -> std::string {
    try {
      WeightShardReader r(path);
    } catch (const InputError& e) {
      BOOST_TEST(e.file() == path.string());
      return e.what();
    }
    return "";
  };
  auto write = [](const fs::path& path, WeightShardMeta meta, const std::string& tensor) {
    WeightShardWriter w(path, meta);
    w.add(tensor, {4}, ramp(4, 1.0f));
    w.commit();
  };
  WeightShardMeta meta;
  meta.model_config = R"({"hidden_size": 4, "num_hidden_layers": 2})";
  meta.layer_end = 2;

  // A step outside [0, kMaxStep] is refused by the writer before any file exists (the reader
  // refuses it too: tests/io/cli_reliability.sh, a step of 2^63 - 1 set by h5py).
  for (const std::int64_t step : {std::int64_t{-1}, kMaxStep + 1}) {
    WeightShardMeta bad_step = meta;
    bad_step.step = step;
    fs::remove(scratch("bad_step.h5"));
    try {
      write(scratch("bad_step.h5"), bad_step, "model.norm.weight");
      BOOST_FAIL("a step of " << step << " was written");
    } catch (const InputError& e) {
      BOOST_TEST(std::string(e.what()).find("attribute step: would be " + std::to_string(step)) != std::string::npos,
                 e.what());
    }
    BOOST_TEST(!fs::exists(scratch("bad_step.h5")));
  }

  WeightShardMeta past = meta;
  past.layer_end = 3;
  write(scratch("past_layers.h5"), past, "model.norm.weight");
  BOOST_TEST(refusal(scratch("past_layers.h5")).find("attribute layer_end: is 3, past the model's 2 layers") !=
             std::string::npos);

  WeightShardMeta mislabelled = meta;
  mislabelled.kind = "optimizer";
  write(scratch("weights_as_optimizer.h5"), mislabelled, "model.norm.weight");
  BOOST_TEST(refusal(scratch("weights_as_optimizer.h5"))
                 .find("attribute kind: is \"optimizer\" but /model.norm.weight is a parameter") != std::string::npos);

  write(scratch("fine.h5"), meta, "model.norm.weight");
  BOOST_TEST(refusal(scratch("fine.h5")).empty());
}
