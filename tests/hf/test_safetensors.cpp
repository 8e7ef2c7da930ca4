#define BOOST_TEST_MODULE safetensors
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "hf/half.hpp"
#include "hf/hf_folder.hpp"
#include "hf/safetensors.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>
#include "tests/common/scratch.hpp"

namespace fs = std::filesystem;
using braid::hf::SafetensorsReader;
using braid::hf::SafetensorsWriter;

namespace {
fs::path fixture(const std::string& name) { return fs::path(std::getenv("BRAID_FIXTURES")) / "hf" / name; }
using braid::test::scratch;
}  // namespace

// mixed.safetensors was written by tests/fixtures/hf/make_fixtures.py (Python struct + json).
BOOST_AUTO_TEST_CASE(reads_a_file_written_by_python) {
  SafetensorsReader r(fixture("mixed.safetensors"));
  BOOST_TEST(r.names() == (std::vector<std::string>{"a.f32", "b.f16", "c.bf16", "d.i64", "e.empty"}),
             boost::test_tools::per_element());
  BOOST_TEST(r.metadata().at("format") == "pt");
  BOOST_TEST(r.info("a.f32").shape == (braid::hf::Shape{2, 3}), boost::test_tools::per_element());
  BOOST_TEST(r.read("a.f32") == (std::vector<float>{0.f, 1.f, -2.5f, 3.25f, 1e-3f, 65504.f}),
             boost::test_tools::per_element());
  // Half values, including the smallest normal (2^-14) and smallest subnormal (2^-24).
  BOOST_TEST(r.read("b.f16") == (std::vector<float>{1.f, -2.f, 0.5f, std::ldexp(1.f, -14), std::ldexp(1.f, -24)}),
             boost::test_tools::per_element());
  // bfloat16 keeps 8 bits of mantissa: pi becomes 3.140625.
  BOOST_TEST(r.read("c.bf16") == (std::vector<float>{1.f, -3.f, 0.15625f, 3.140625f}), boost::test_tools::per_element());
  BOOST_TEST(r.read("e.empty").empty());
  BOOST_CHECK_THROW(r.read("d.i64"), braid::InputError);
  BOOST_CHECK_THROW(r.read("missing"), braid::InputError);
}

BOOST_AUTO_TEST_CASE(truncated_file_is_refused_naming_the_tensor) {
  try {
    SafetensorsReader r(fixture("truncated.safetensors"));
    BOOST_FAIL("a truncated file was accepted");
  } catch (const braid::InputError& e) {
    // d.i64 is the last tensor with bytes: its end now lies past the file's end.
    BOOST_TEST(std::string(e.what()).find("d.i64") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("truncated") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("a.f32") == std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(garbage_header_length_is_refused) {
  const fs::path p = scratch("garbage.safetensors");
  std::ofstream(p, std::ios::binary) << "\xff\xff\xff\xff\xff\xff\xff\x7f{}";
  BOOST_CHECK_THROW(SafetensorsReader{p}, braid::InputError);
}

// Found by fuzz/fuzz_safetensors: an F32 tensor of shape [0, 4] was read with memcpy from and
// to null pointers (undefined behaviour, reported by -fsanitize=undefined, `make sanitize`).
BOOST_AUTO_TEST_CASE(an_empty_tensor_reads_as_no_values) {
  const fs::path p = fs::path(std::getenv("BRAID_FIXTURES")) / "fuzz" / "safetensors" /
                     "crash-60adf89e50c93db9c966ede9529abfdc23b95df1";
  SafetensorsReader r(p);
  const std::string name = "_44444444444444444444444444444444444e.empty";
  BOOST_REQUIRE(r.contains(name));
  BOOST_TEST(r.info(name).shape == (braid::hf::Shape{0, 4}));
  BOOST_TEST(r.read(name).empty());
}

// Found by fuzz/fuzz_safetensors (tests/fixtures/fuzz/safetensors/crash-6aa5e89d...): a dtype
// that is not a string escaped as nlohmann's type_error (exit 1); it is a problem naming it.
BOOST_AUTO_TEST_CASE(a_dtype_that_is_not_a_string_is_named) {
  const fs::path p = fs::path(std::getenv("BRAID_FIXTURES")) / "fuzz" / "safetensors" /
                     "crash-6aa5e89d9256e2e570609b50fa21339e57e386ad";
  try {
    SafetensorsReader r(p);
    BOOST_FAIL("a header with an array as dtype was accepted");
  } catch (const braid::InputError& e) {
    BOOST_TEST(std::string(e.what()).find(".dtype") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(f32_round_trip_is_exact_and_header_aligned) {
  const fs::path p = scratch("rt32.safetensors");
  std::vector<float> w(7 * 5), b(3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i)) * 1e3f;
  b = {-0.f, 1e-30f, INFINITY};
  SafetensorsWriter wr(p);
  wr.set_metadata("format", "pt");
  wr.add("layer.weight", {7, 5}, w.data());
  wr.add("layer.bias", {3}, b.data());
  wr.commit();
  BOOST_TEST(fs::file_size(p) == wr.planned_bytes());

  std::ifstream in(p, std::ios::binary);
  std::uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  BOOST_TEST(len % 8 == 0u);

  SafetensorsReader r(p);
  BOOST_TEST(r.info("layer.weight").dtype == "F32");
  BOOST_TEST(r.read("layer.weight") == w, boost::test_tools::per_element());
  BOOST_TEST(r.read("layer.bias") == b, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bf16_write_rounds_to_nearest_even) {
  // 1 + 2^-8 lies halfway between two bfloat16 values: ties go to the even one (1.0);
  // 1 + 3·2^-8 goes up to 1 + 2^-6.
  BOOST_TEST(braid::hf::bf16_to_float(braid::hf::float_to_bf16(1.f + std::ldexp(1.f, -8))) == 1.f);
  BOOST_TEST(braid::hf::bf16_to_float(braid::hf::float_to_bf16(1.f + 3 * std::ldexp(1.f, -8))) ==
             1.f + std::ldexp(1.f, -6));
  const fs::path p = scratch("rt16.safetensors");
  std::vector<float> w{1.f, -3.f, 0.15625f, 3.14159265f, 1e-3f};
  SafetensorsWriter wr(p, braid::hf::StoreDtype::bf16);
  wr.add("w", {5}, w.data());
  wr.commit();
  SafetensorsReader r(p);
  BOOST_TEST(r.info("w").dtype == "BF16");
  const auto got = r.read("w");
  for (std::size_t i = 0; i < w.size(); ++i) BOOST_TEST(std::abs(got[i] - w[i]) <= std::abs(w[i]) * (1.f / 256));
  BOOST_TEST(got[3] == 3.140625f);
}

BOOST_AUTO_TEST_CASE(sharded_folder_follows_the_index) {
  const fs::path dir = scratch("sharded");
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "llama"})";
  std::vector<float> a{1, 2, 3}, b{4, 5};
  {
    SafetensorsWriter w1(dir / "model-00001-of-00002.safetensors");
    w1.add("x.a", {3}, a.data());
    w1.commit();
    SafetensorsWriter w2(dir / "model-00002-of-00002.safetensors");
    w2.add("x.b", {2}, b.data());
    w2.commit();
  }
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"x.a": "model-00001-of-00002.safetensors",
                                            "x.b": "model-00002-of-00002.safetensors"}})";
  braid::hf::HfFolder f(dir);
  BOOST_TEST(f.names() == (std::vector<std::string>{"x.a", "x.b"}), boost::test_tools::per_element());
  std::vector<float> got(2);
  f.read("x.b", got.data());
  BOOST_TEST(got == b, boost::test_tools::per_element());
  BOOST_TEST(f.config()["model_type"] == "llama");

  // An index that points a tensor at the wrong file is refused.
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map": {"x.a": "model-00002-of-00002.safetensors", "x.b": "model-00002-of-00002.safetensors"}})";
  BOOST_CHECK_THROW(braid::hf::HfFolder{dir}, braid::InputError);
}
