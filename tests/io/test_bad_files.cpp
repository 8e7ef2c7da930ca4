// Every kind of bad file (tests/fixtures/io/bad_*.h5, written by
// make_fixtures.py with h5py) is refused with an InputError that names the
// file and says what is wrong; the good fixtures, written by h5py alone, read.
#define BOOST_TEST_MODULE bad_files
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/sample_shard.hpp"
#include "io/weight_shard.hpp"
#include "tests/common/scratch.hpp"

namespace bdata = boost::unit_test::data;
using namespace braid;
using namespace braid::io;
using braid::test::fixture;

namespace {

struct BadFile {
  const char* name;
  const char* says;  // a fragment the message must contain
};
std::ostream& operator<<(std::ostream& os, const BadFile& b) { return os << b.name; }

const std::vector<BadFile> kBadSampleShards = {
    {"bad_format.h5", "attribute format: is \"braid.sample\", expected \"braid.samples\""},
    {"bad_version.h5", "attribute version: is 2"},
    {"bad_unfinished.h5", "attribute complete: missing: the file is unfinished"},
    {"bad_no_format.h5", "not a braid file"},
    {"bad_token_array_length.h5", "/logprobs/actor: has 13 entries, expected 14 (the length of /tokens)"},
    {"bad_offsets.h5", "/offsets: decreases at sequence 1"},
    {"bad_offsets_end.h5", "/offsets: the last offset is 13, expected 14"},
    {"bad_prompt_len.h5", "/prompt_len: sequence 1 has prompt_len 4 but 3 tokens"},
    {"bad_reward_length.h5", "/reward: has 2 entries, expected 3"},
    {"bad_tokens_dtype.h5", "/tokens: is stored as float32, expected int32"},
    {"bad_truncated.h5", "damaged or truncated"},
    {"bad_not_hdf5.h5", "not an HDF5 file"},
    {"bad_config_json.h5", "attribute config: is not valid JSON text"},
    {"good_weights.h5", "is \"braid.weights\", expected \"braid.samples\""},
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_DATA_TEST_CASE(bad_sample_shard_is_refused_by_reader_and_probe, bdata::make(kBadSampleShards), bad) {
  const auto path = fixture(std::string("io/") + bad.name);
  for (const auto& msg : {message_of([&] { read_sample_shard(path); }), message_of([&] { probe_sample_shard(path); })}) {
    BOOST_TEST_INFO("message: " << msg);
    BOOST_TEST(msg.find(path.string()) != std::string::npos);
    BOOST_TEST(msg.find(bad.says) != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(unfinished_weight_shard_is_refused) {
  const auto path = fixture("io/bad_weights_unfinished.h5");
  const auto msg = message_of([&] { WeightShardReader r(path); });
  BOOST_TEST(msg.find(path.string()) != std::string::npos);
  BOOST_TEST(msg.find("unfinished") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(sample_shard_written_by_h5py_reads) {
  const auto s = read_sample_shard(fixture("io/good_samples.h5"));
  const auto& b = s.batch;
  BOOST_TEST(b.size() == 3u);
  BOOST_TEST(b.token_count() == 14u);
  BOOST_TEST(b.response(0).size() == 3u);
  BOOST_TEST(b.response(0)[0] == ' ');
  BOOST_TEST(b.response(1).empty());
  BOOST_TEST(b.sample_id[2] == 102);
  BOOST_TEST(b.reward.has_value());
  BOOST_TEST((*b.reward)[1] == -0.5f);
  BOOST_TEST(b.logprobs_actor.has_value());
  BOOST_TEST(b.values.has_value());
  BOOST_TEST(!b.logprobs_ref.has_value());
  BOOST_TEST(s.meta.policy_step == 3);
  BOOST_TEST(s.meta.created_by == "make_fixtures.py");
  BOOST_TEST(s.meta.config == R"({"fixture": true})");
}

BOOST_AUTO_TEST_CASE(weight_shard_written_by_h5py_reads) {
  WeightShardReader r(fixture("io/good_weights.h5"));
  BOOST_TEST(r.meta().layer_end == 1);
  BOOST_TEST(r.meta().has_embedding);
  BOOST_TEST(r.meta().step == 5);
  BOOST_TEST((r.shape("model.embed_tokens.weight") == Shape{8, 4}));
  BOOST_TEST(r.read("model.embed_tokens.weight")[31] == 31.0f);
  BOOST_TEST(r.read("model.layers.0.self_attn.q_proj.weight")[5] == 1.0f);
}

BOOST_AUTO_TEST_CASE(unknown_datasets_are_ignored_and_listed) {
  const auto path = fixture("io/good_samples_extra.h5");
  BOOST_TEST(read_sample_shard(path).batch.size() == 3u);
  const auto info = probe_sample_shard(path);
  BOOST_TEST(info.other_datasets == std::vector<std::string>{"debug/entropy"}, boost::test_tools::per_element());
}
