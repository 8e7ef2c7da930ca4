// io/finite.hpp: the first non-finite index, and the writers and readers of shards
// refusing NaN/Inf with an InputError naming the file, the tensor or array, and the index.
#define BOOST_TEST_MODULE io_finite
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "io/finite.hpp"
#include "io/sample_shard.hpp"
#include "io/weight_shard.hpp"
#include "tests/common/input_error.hpp"
#include "tests/common/scratch.hpp"

namespace fs = std::filesystem;
using namespace braid;
using namespace braid::io;

namespace {
const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

using namespace braid::test;
}  // namespace

BOOST_AUTO_TEST_CASE(first_non_finite_finds_the_first_bad_value_in_any_block) {
  std::vector<float> v(10000, 1.5f);
  BOOST_TEST(first_non_finite(v) == v.size());
  BOOST_TEST(first_non_finite(std::span<const float>{}) == 0u);
  v[9999] = -kInf;
  BOOST_TEST(first_non_finite(v) == 9999u);
  v[4097] = kNan;
  BOOST_TEST(first_non_finite(v) == 4097u);
  v[3] = kInf;
  BOOST_TEST(first_non_finite(v) == 3u);
  // The largest finite float, denormals and -0 are finite.
  std::vector<float> edge{std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(), -0.0f};
  BOOST_TEST(first_non_finite(edge) == edge.size());
}

BOOST_AUTO_TEST_CASE(require_finite_names_file_field_index_and_value) {
  std::vector<float> v{0.f, 1.f, kNan, kInf};
  const std::string msg = refusal([&] { require_finite(v, "a.h5", "/advantages", "stored"); });
  BOOST_TEST(msg.find("a.h5: /advantages: value 2 of 4 is nan") != std::string::npos, msg);
  v[2] = -kInf;
  BOOST_TEST(refusal([&] { require_finite(v, "a.h5", "x", "stored"); }).find("is -inf") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(weight_writer_refuses_a_non_finite_tensor_and_leaves_no_file) {
  const fs::path p = scratch("w.h5");
  fs::remove(p);
  WeightShardMeta meta;
  meta.step = 7;
  const std::string msg = refusal([&] {
    WeightShardWriter w(p, meta);
    w.add("model.norm.weight", {3}, std::vector<float>{1.f, kInf, 2.f});
    w.commit();
  });
  BOOST_TEST(msg.find("model.norm.weight: value 1 of 3 is inf") != std::string::npos, msg);
  BOOST_TEST(msg.find("step 7") != std::string::npos, msg);
  BOOST_TEST(!fs::exists(p));
}

BOOST_AUTO_TEST_CASE(sample_writer_refuses_a_non_finite_array_and_leaves_no_file) {
  const fs::path p = scratch("s.h5");
  fs::remove(p);
  SampleBatch b;
  b.advantages.emplace();
  b.add(std::vector<std::int32_t>{1, 2, 3, 4}, 2, 0);
  (*b.advantages)[3] = kNan;
  const std::string msg = refusal([&] { write_sample_shard(p, b, {}); });
  BOOST_TEST(msg.find("/advantages: value 3 of 4 is nan") != std::string::npos, msg);
  BOOST_TEST(!fs::exists(p));
  // The same batch with finite values writes and reads back.
  (*b.advantages)[3] = 0.5f;
  write_sample_shard(p, b, {});
  BOOST_TEST((*read_sample_shard(p).batch.advantages)[3] == 0.5f);
}
