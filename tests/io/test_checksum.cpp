// Dataset checksums: every weight and sample shard dataset carries one, every
// read verifies it, `braid check` (check_file) lists every damaged dataset, and
// older files without checksums still read. Damage is made two ways: a byte
// flipped in the file at the dataset's data offset (H5Dget_offset), and values
// rewritten through HDF5 without touching the stored checksum.
#define BOOST_TEST_MODULE checksum
#include <boost/test/unit_test.hpp>

#include <hdf5.h>

#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/h5.hpp"
#include "io/h5_guard.hpp"
#include "io/inspect.hpp"
#include "io/sample_shard.hpp"
#include "io/weight_shard.hpp"
#include "tests/common/input_error.hpp"
#include "tests/common/arrays.hpp"
#include "tests/common/scratch.hpp"

namespace fs = std::filesystem;
using namespace braid;
using namespace braid::io;
using namespace braid::test;

namespace {

void write_weights(const fs::path& path) {
  WeightShardMeta meta;
  meta.layer_end = 1;
  meta.has_embedding = true;
  WeightShardWriter w(path, meta);
  w.add("model.embed_tokens.weight", {8, 4}, ramp(32, 0.5f));
  w.add("model.layers.0.self_attn.q_proj.weight", {4, 4}, ramp(16, 10.0f));
  w.add("model.norm.weight", {4}, ramp(4, 1.0f));
  w.commit();
}

SampleBatch small_batch() {
  SampleBatch b;
  b.add(std::vector<std::int32_t>{1, 2, 3, 4, 5}, 2, 100);
  b.add(std::vector<std::int32_t>{6, 7, 8}, 1, 101);
  b.logprobs_actor = ramp(static_cast<std::int64_t>(b.token_count()), -4.0f);
  b.reward = std::vector<float>{0.5f, -1.0f};
  return b;
}

// Flips one byte of a contiguous dataset's data in the file itself.
void flip_byte(const fs::path& path, const std::string& dataset, std::size_t at = 5) {
  haddr_t offset = HADDR_UNDEF;
  {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
    offset = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
  }
  BOOST_REQUIRE(offset != HADDR_UNDEF);
  std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(static_cast<std::streamoff>(offset + at));
  char c = 0;
  io.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  io.seekp(static_cast<std::streamoff>(offset + at));
  io.write(&c, 1);
  BOOST_REQUIRE(io.good());
}

// Rewrites one value of a float32 or int32 dataset through HDF5, leaving its checksum attribute as it was.
template <typename T>
void rewrite_value(const fs::path& path, const std::string& dataset, hid_t mem_type) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const hid_t space = H5Dget_space(d);
  std::vector<T> v(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
  BOOST_REQUIRE(H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
  v[1] = static_cast<T>(v[1] + 1);
  BOOST_REQUIRE(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_written_dataset_carries_a_checksum_that_verifies) {
  const auto w = scratch("sum_weights.h5");
  write_weights(w);
  const auto s = scratch("sum_samples.h5");
  write_sample_shard(s, small_batch(), {});
  for (const auto& path : {w, s}) {
    const auto file = h5::File::open_read(path);
    const auto report = file.verify_checksums();
    BOOST_TEST(report.absent.empty());
    BOOST_TEST(report.mismatched.empty());
    BOOST_TEST(report.verified.size() == file.dataset_paths().size());
  }
  const auto summary = inspect_file(w.string());
  BOOST_TEST(summary["checksums"]["verified"] == 3);
  BOOST_TEST(summary["checksums"]["absent"] == 0);
  BOOST_TEST(render_inspect_text(summary).find("checksums: 3 verified, 0 absent") != std::string::npos);
  // The stored value is XXH3-64 of the values as written.
  const auto q = ramp(16, 10.0f);
  const hid_t f = H5Fopen(w.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, "model.layers.0.self_attn.q_proj.weight", H5P_DEFAULT);
  const hid_t a = H5Aopen(d, h5::kChecksumAttr, H5P_DEFAULT);
  const hid_t t = H5Aget_type(a);
  std::string stored(H5Tget_size(t), '\0');
  H5Aread(a, t, stored.data());
  stored.resize(stored.find('\0'));
  H5Tclose(t);
  H5Aclose(a);
  H5Dclose(d);
  H5Fclose(f);
  BOOST_TEST(stored == h5::checksum_of(q.data(), q.size() * sizeof(float)));
  BOOST_TEST(stored.rfind("xxh3-64:", 0) == 0u);
  BOOST_TEST(stored.size() == 8u + 16u);
}

// Zeroes the user block that holds a file's seal: the file reads as an unsealed one.
void unseal(const fs::path& path) {
  std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
  const std::string zeros(h5::kSealBlock, '\0');
  io.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  BOOST_REQUIRE(io.good());
}

BOOST_AUTO_TEST_CASE(a_flipped_byte_in_a_weight_tensor_is_refused_by_every_reader) {
  const auto path = scratch("flipped_weights.h5");
  write_weights(path);
  const std::string damaged = "model.layers.0.self_attn.q_proj.weight";
  flip_byte(path, damaged);

  // The seal no longer matches: every reader refuses the file at open, naming the damaged
  // dataset (its checksum tells which).
  const std::string why = error_of([&] { WeightShardReader r(path); });
  BOOST_TEST(contains(why, path.string()));
  BOOST_TEST(contains(why, "/" + damaged));
  BOOST_TEST(contains(why, "checksum mismatch: the file is damaged"));
  BOOST_TEST(contains(error_of([&] { WeightShardSet({path}).read(damaged); }), "/" + damaged));

  // Without its seal (the user block zeroed, as an old braid file), the dataset checksums
  // still refuse the damaged tensor on read, slices too, and the undamaged ones read.
  unseal(path);
  WeightShardReader r(path);
  BOOST_TEST(contains(error_of([&] { r.read(damaged); }), "checksum mismatch: the file is damaged"));
  BOOST_TEST(contains(error_of([&] { r.read_slice(damaged, 0, 1, 3, std::vector<float>(8).data()); }),
                      "checksum mismatch"));
  BOOST_TEST(r.read("model.norm.weight") == ramp(4, 1.0f));

  const auto problem = check_file(path.string());
  BOOST_REQUIRE(problem.has_value());
  BOOST_TEST(contains(*problem, "/" + damaged + ": checksum mismatch"));
  BOOST_TEST(contains(error_of([&] { inspect_file(path.string()); }), "/" + damaged));
}

BOOST_AUTO_TEST_CASE(check_lists_every_damaged_dataset_at_once) {
  const auto path = scratch("two_damaged.h5");
  write_weights(path);
  flip_byte(path, "model.embed_tokens.weight", 17);
  rewrite_value<float>(path, "model.norm.weight", H5T_NATIVE_FLOAT);
  const auto problem = check_file(path.string());
  BOOST_REQUIRE(problem.has_value());
  BOOST_TEST(contains(*problem, "2 problems"));
  BOOST_TEST(contains(*problem, "/model.embed_tokens.weight: checksum mismatch"));
  BOOST_TEST(contains(*problem, "/model.norm.weight: checksum mismatch"));
  BOOST_TEST(!contains(*problem, "q_proj"));
}

BOOST_AUTO_TEST_CASE(a_changed_sample_array_is_refused_naming_it) {
  const auto path = scratch("damaged_samples.h5");
  write_sample_shard(path, small_batch(), {});
  rewrite_value<float>(path, "logprobs/actor", H5T_NATIVE_FLOAT);
  rewrite_value<std::int32_t>(path, "tokens", H5T_NATIVE_INT32);
  const std::string why = error_of([&] { read_sample_shard(path); });
  BOOST_TEST(contains(why, path.string()));
  BOOST_TEST(contains(why, "checksum mismatch"));
  const auto problem = check_file(path.string());
  BOOST_REQUIRE(problem.has_value());
  BOOST_TEST(contains(*problem, "/logprobs/actor: checksum mismatch"));
  BOOST_TEST(contains(*problem, "/tokens: checksum mismatch"));
}

BOOST_AUTO_TEST_CASE(a_damaged_offsets_array_is_refused_when_probing) {
  const auto path = scratch("damaged_offsets.h5");
  write_sample_shard(path, small_batch(), {});
  // Offsets 0, 5, 8 -> 0, 6, 8: still a valid layout, only the checksum tells.
  rewrite_value<std::int64_t>(path, "offsets", H5T_NATIVE_INT64);
  BOOST_TEST(contains(error_of([&] { probe_sample_shard(path); }), "/offsets: checksum mismatch"));
}

BOOST_AUTO_TEST_CASE(files_without_checksums_still_read_and_check_notes_it) {
  const auto weights = fixture("io/good_weights.h5");
  WeightShardReader r(weights);
  for (const auto& name : r.names()) BOOST_TEST(!r.read(name).empty());
  const auto samples = read_sample_shard(fixture("io/good_samples.h5"));
  BOOST_TEST(samples.batch.size() == 3u);

  std::vector<std::string> notes;
  BOOST_TEST(!check_file(weights.string(), &notes).has_value());
  BOOST_REQUIRE(notes.size() == 1u);
  BOOST_TEST(contains(notes[0], "no checksum"));
  BOOST_TEST(contains(notes[0], weights.string()));
  const auto report = h5::File::open_read(weights).verify_checksums();
  BOOST_TEST(report.verified.empty());
  BOOST_TEST(report.absent.size() == r.names().size());
}

BOOST_AUTO_TEST_CASE(an_unknown_checksum_algorithm_is_refused) {
  const auto path = scratch("other_algorithm.h5");
  write_weights(path);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, "model.norm.weight", H5P_DEFAULT);
  H5Adelete(d, h5::kChecksumAttr);
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, 16);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(d, h5::kChecksumAttr, t, space, H5P_DEFAULT, H5P_DEFAULT);
  const char value[16] = "sha9:0123";
  H5Awrite(a, t, value);
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(t);
  H5Dclose(d);
  H5Fclose(f);
  const std::string why = error_of([&] { WeightShardReader(path).read("model.norm.weight"); });
  BOOST_TEST(contains(why, "/model.norm.weight attribute checksum"));
  BOOST_TEST(contains(why, "sha9:0123"));
}
