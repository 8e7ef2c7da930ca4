// Where a test writes its files, and where it reads the repository's fixtures.
//
// scratch(name) is NAME inside the test's scratch folder: the one ctest gives each entry
// (BRAID_SCRATCH, a folder under the build tree). A test run by hand, without ctest, gets a
// folder of its own under the system's temporary directory ($TMPDIR, else /tmp), made on
// first use and named on stderr: never the working directory, so a run from the repository
// root leaves nothing in the source tree. The ranks of one mpirun job share that folder
// (named by the job's PMIx namespace); a process outside mpirun gets a fresh one.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace braid::test {

namespace detail {

inline std::filesystem::path make_scratch_folder() {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path();
  fs::path dir;
  if (const char* job = std::getenv("PMIX_NAMESPACE"); job != nullptr && *job != '\0') {
    // Every rank of the job computes the same name; create_directories tolerates the race.
    dir = tmp / ("braid-test-job-" + std::string(job));
    fs::create_directories(dir);
  } else {
    std::string pattern = (tmp / "braid-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::generic_category(), "making a scratch folder under " + tmp.string());
    dir = pattern;
  }
  std::cerr << "BRAID_SCRATCH is not set: this test writes under " << dir.string() << "\n";
  return dir;
}

}  // namespace detail

// The test's scratch folder itself (created when the fallback is used).
inline const std::filesystem::path& scratch_root() {
  static const std::filesystem::path root = [] {
    const char* dir = std::getenv("BRAID_SCRATCH");
    return dir != nullptr && *dir != '\0' ? std::filesystem::path(dir) : detail::make_scratch_folder();
  }();
  return root;
}

inline std::filesystem::path scratch(const std::string& name) { return scratch_root() / name; }

// An empty folder NAME in the scratch folder (what an earlier run left there removed).
inline std::filesystem::path fresh_scratch(const std::string& name) {
  const std::filesystem::path dir = scratch(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Read-only places, as ctest names them (BRAID_FIXTURES, BRAID_BIN, BRAID_SOURCE); a test run
// by hand from the repository root finds them there: a fixture, a tool of the build, a file
// of the repository.
inline std::filesystem::path fixture(const std::string& name) {
  const char* dir = std::getenv("BRAID_FIXTURES");
  return std::filesystem::path(dir != nullptr ? dir : "tests/fixtures") / name;
}

inline std::filesystem::path tool(const std::string& name) {
  const char* dir = std::getenv("BRAID_BIN");
  return std::filesystem::path(dir != nullptr ? dir : "build/bin") / name;
}

inline std::filesystem::path source(const std::string& name) {
  const char* dir = std::getenv("BRAID_SOURCE");
  return std::filesystem::path(dir != nullptr ? dir : ".") / name;
}

}  // namespace braid::test
