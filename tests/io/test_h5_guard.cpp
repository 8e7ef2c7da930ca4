// The guards in front of libhdf5 (io/h5_guard.hpp): the seal braid writes in every HDF5 file's
// user block, checked before libhdf5 parses the file; the probe that reads an unsealed file in
// a child process first; the declared extent checked against the file's size.
#define BOOST_TEST_MODULE h5_guard
#include <boost/test/unit_test.hpp>

#include <hdf5.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/h5.hpp"
#include "io/h5_guard.hpp"
#include "io/inspect.hpp"
#include "io/sample_shard.hpp"
#include "tests/common/input_error.hpp"
#include "tests/common/scratch.hpp"

namespace fs = std::filesystem;
using namespace braid;
using namespace braid::io;
using namespace braid::test;

namespace {

fs::path write_small_shard(const std::string& name, std::int64_t first_id = 100) {
  SampleBatch b;
  b.add(std::vector<std::int32_t>{1, 2, 3, 4, 5}, 2, first_id);
  b.add(std::vector<std::int32_t>{6, 7, 8}, 1, first_id + 1);
  const auto path = scratch(name);
  write_sample_shard(path, b, {});
  return path;
}

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void put_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  BOOST_REQUIRE(out.good());
}

// Sets BRAID_H5_PROBE_TIMEOUT for one scope.
struct ProbeTimeout {
  explicit ProbeTimeout(const char* v) { setenv("BRAID_H5_PROBE_TIMEOUT", v, 1); }
  ~ProbeTimeout() { unsetenv("BRAID_H5_PROBE_TIMEOUT"); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(every_file_braid_writes_starts_with_its_seal) {
  const auto path = write_small_shard("sealed.h5");
  const std::string bytes = bytes_of(path);
  BOOST_TEST(bytes.rfind("BRAID-SEAL 1 xxh3-64:", 0) == 0u);
  const auto seal = h5::read_seal(path, path.string());
  BOOST_REQUIRE(seal.has_value());
  BOOST_TEST(seal->bytes == bytes.size() - h5::kSealBlock);
  BOOST_TEST(seal->checksum == h5::checksum_of(bytes.data() + h5::kSealBlock, bytes.size() - h5::kSealBlock));
  BOOST_TEST(read_sample_shard(path).batch.size() == 2u);
  BOOST_TEST(!check_file(path.string()).has_value());
}

// Metadata that no dataset checksum covers (a root attribute, rewritten in place by libhdf5):
// only the seal can tell, and it does.
BOOST_AUTO_TEST_CASE(a_changed_attribute_breaks_the_seal) {
  const auto path = write_small_shard("changed_attribute.h5");
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  BOOST_REQUIRE(f >= 0);
  const hid_t a = H5Aopen(f, "policy_step", H5P_DEFAULT);
  BOOST_REQUIRE(a >= 0);
  const std::int64_t v = 7;
  H5Awrite(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  H5Fclose(f);
  const std::string why = error_of([&] { read_sample_shard(path); });
  BOOST_TEST(contains(why, path.string()));
  BOOST_TEST(contains(why, "seal: does not match the contents"));
  BOOST_TEST(contains(*check_file(path.string()), "seal"));
}

BOOST_AUTO_TEST_CASE(a_truncated_or_extended_file_breaks_the_seal) {
  const auto path = write_small_shard("cut.h5");
  const std::string bytes = bytes_of(path);
  put_bytes(path, bytes.substr(0, bytes.size() - 7));
  BOOST_TEST(contains(error_of([&] { read_sample_shard(path); }), "is truncated, extended or damaged"));
  put_bytes(path, bytes + "more");
  BOOST_TEST(contains(error_of([&] { read_sample_shard(path); }), "is truncated, extended or damaged"));
  put_bytes(path, bytes);
  BOOST_TEST(read_sample_shard(path).batch.size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_damaged_seal_line_is_named) {
  const auto path = write_small_shard("bad_seal.h5");
  std::string bytes = bytes_of(path);
  bytes[std::string("BRAID-SEAL 1 xxh3-64:").size()] = 'z';  // not a hex digit
  put_bytes(path, bytes);
  const std::string why = error_of([&] { read_sample_shard(path); });
  BOOST_TEST(contains(why, "seal: is damaged"));
}

// A file without a seal (h5py's, an older braid's) is read whole by a child process first.
BOOST_AUTO_TEST_CASE(unsealed_files_read_after_the_probe) {
  const auto old = fixture("io/good_samples.h5");
  BOOST_TEST(!h5::read_seal(old, old.string()).has_value());
  BOOST_TEST(read_sample_shard(old).batch.size() == 3u);
}

// The probe's time limit: a child that does not finish in time proves the file damaged.
// (A file this process has not probed yet: contents read through once are not probed again.)
BOOST_AUTO_TEST_CASE(a_probe_past_its_time_refuses_the_file) {
  const auto old = write_small_shard("unsealed.h5", 7000);
  std::string bytes = bytes_of(old);
  std::fill(bytes.begin(), bytes.begin() + h5::kSealBlock, '\0');
  put_bytes(old, bytes);
  {
    const ProbeTimeout t("0.000001");
    const std::string why = error_of([&] { read_sample_shard(old); });
    BOOST_TEST(contains(why, old.string()));
    BOOST_TEST(contains(why, "libhdf5 did not finish reading it"));
  }
  {
    const ProbeTimeout t("soon");
    BOOST_CHECK_THROW(read_sample_shard(old), UsageError);
  }
  BOOST_TEST(read_sample_shard(old).batch.sample_id[0] == 7000);  // in time, it reads
}

// Found by fuzz/fuzz_sample_shard (tests/fixtures/fuzz/sample_shard/crash-89b21472...): /offsets
// declared 2^48 elements, which the reader allocated before HDF5 noticed the data was missing.
BOOST_AUTO_TEST_CASE(an_extent_the_file_cannot_hold_is_refused_before_allocating) {
  const auto kept = fixture("fuzz/sample_shard/crash-89b2147215d755d7e22f8a9a5649e6ebd94a714e");
  const std::string why = error_of([&] { read_sample_shard(kept); });
  BOOST_TEST(contains(why, kept.string()));
  BOOST_TEST(contains(why, "more than the"));
  BOOST_TEST(contains(why, "-byte file can hold"));
}

// Every input the fuzzers found crashing libhdf5 or braid's HDF5 readers (sanitizer reports,
// allocations of 2^62 bytes, overlapping copies) is now an InputError, or reads.
BOOST_AUTO_TEST_CASE(the_fuzzers_hdf5_findings_end_as_input_errors) {
  for (const char* target : {"sample_shard", "weight_shard"}) {
    for (const auto& entry : fs::directory_iterator(fixture(std::string("fuzz/") + target))) {
      BOOST_TEST_CONTEXT(entry.path().filename().string()) {
        try {
          (void)check_file(entry.path().string());
          (void)read_sample_shard(entry.path());
        } catch (const InputError&) {
        }
      }
    }
  }
}
