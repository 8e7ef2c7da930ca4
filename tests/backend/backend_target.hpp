// The command line of the backend tests: Boost.Test's arguments, then after "--" our own
// `--backend=DEVICE-DTYPE` (cpu-f32, cuda-f32, cuda-bf16), and the backend made from it, or a
// skip (ctest's SKIP_RETURN_CODE) where this build or machine has none.
#pragma once

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "backend/backend.hpp"
#include "backend/dtype.hpp"
#include "backend/registry.hpp"

namespace braid::test {

inline constexpr int kSkip = 77;  // ctest's SKIP_RETURN_CODE for the backend tests

struct BackendTarget {
  std::string name;  // "cuda-f32"
  backend::BackendSpec spec;
  backend::DType dtype = backend::DType::f32;
  std::vector<char*> boost_args;  // argv without our part
};

// nullopt, after saying why on stderr (as `program`, listing `examples`), when the target
// is not DEVICE-DTYPE.
inline std::optional<BackendTarget> parse_backend_target(int argc, char** argv, std::string name,
                                                         const char* program, const char* examples) {
  BackendTarget t;
  bool ours = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") { ours = true; continue; }
    if (ours && a.rfind("--backend=", 0) == 0) { name = a.substr(10); continue; }
    t.boost_args.push_back(argv[i]);
  }
  const auto dash = name.rfind('-');
  std::string problem;
  const auto spec = backend::parse_device(name.substr(0, dash), &problem);
  const auto dtype = backend::parse_dtype(dash == std::string::npos ? "" : name.substr(dash + 1));
  if (!spec || !dtype) {
    std::cerr << program << ": --backend=" << name << " is not DEVICE-DTYPE (" << examples << ")\n";
    return std::nullopt;
  }
  t.name = name;
  t.spec = *spec;
  t.dtype = *dtype;
  return t;
}

// The target's backend (2 host threads), or nullptr after printing "skipped: why" when this
// build or machine has none (not built with CUDA, no GPU).
inline std::unique_ptr<backend::Backend> make_or_skip(const BackendTarget& t) {
  try {
    return backend::make_backend(backend::BackendSpec{t.spec.kind, t.spec.device, 2});
  } catch (const std::exception& e) {
    std::cout << "skipped: " << e.what() << "\n";
    return nullptr;
  }
}

// main's end: Boost.Test's cases (init: the module's init_unit_test) run on the target's
// backend, made and handed to `backend` for them, or the skip where there is none.
inline int run_on_target(const BackendTarget& t, backend::Backend*& backend, bool (*init)()) {
  const auto made = make_or_skip(t);
  if (!made) return kSkip;
  backend = made.get();
  auto args = t.boost_args;
  return boost::unit_test::unit_test_main(init, static_cast<int>(args.size()), args.data());
}

// Copies between the host and a backend, for the tests that compare backends.
inline backend::Buffer<std::int32_t> upload_ids(backend::Backend& b, const std::vector<std::int32_t>& host) {
  backend::Buffer<std::int32_t> buf(b, host.size());
  if (!host.empty()) b.copy_to_device(buf.data(), host.data(), host.size() * sizeof(std::int32_t));
  return buf;
}

template <typename T>
backend::Buffer<T> upload(backend::Backend& b, const std::vector<T>& h) {
  backend::Buffer<T> buf(b, h.size());
  b.copy_to_device(buf.data(), h.data(), h.size() * sizeof(T));
  return buf;
}

template <typename T>
std::vector<T> download(backend::Backend& b, const T* p, std::size_t n) {
  std::vector<T> h(n);
  b.copy_to_host(h.data(), p, n * sizeof(T));
  return h;
}

}  // namespace braid::test
