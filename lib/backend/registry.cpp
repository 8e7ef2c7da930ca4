#include "backend/registry.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <charconv>

#ifdef BRAID_HAVE_CUDA
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/device_query.hpp"
#endif

namespace braid::backend {

std::string BackendSpec::to_string() const {
  return kind == DeviceKind::cpu ? std::string("cpu") : fmt::format("cuda:{}", device);
}

std::optional<BackendSpec> parse_device(std::string_view s, std::string* problem) {
  auto fail = [&](std::string why) -> std::optional<BackendSpec> {
    if (problem) *problem = std::move(why);
    return std::nullopt;
  };
  if (s == "cpu") return BackendSpec{};
  if (s == "cuda") return BackendSpec{.kind = DeviceKind::cuda};
  if (s.starts_with("cuda:")) {
    const std::string_view n = s.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), index);
    if (n.empty() || ec != std::errc() || end != n.data() + n.size() || index < 0) {
      return fail(fmt::format("'{}' names no device: the index after 'cuda:' must be a number >= 0", s));
    }
    return BackendSpec{.kind = DeviceKind::cuda, .device = index};
  }
  return fail(fmt::format("'{}' is not a device ({})", s, kDeviceValues));
}

BackendSpec parse_device_option(std::string_view s) {
  std::string problem;
  if (auto spec = parse_device(s, &problem)) return *spec;
  throw UsageError("--device: " + problem);
}

bool built_with_cuda() {
#ifdef BRAID_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string cuda_unavailable_reason() {
#ifdef BRAID_HAVE_CUDA
  const cuda::DeviceQuery q = cuda::query_devices();
  if (q.devices.empty()) {
    return fmt::format("no CUDA GPU is usable here ({})", q.error.empty() ? "no CUDA device" : q.error);
  }
  return "";
#else
  return "braid was built without CUDA (configure with -DBRAID_CUDA=ON on a machine with nvcc)";
#endif
}

std::unique_ptr<Backend> make_backend(const BackendSpec& spec) {
  if (spec.kind == DeviceKind::cpu) return make_cpu_backend(spec.threads);
  const std::string name = spec.to_string();
  if (const std::string why = cuda_unavailable_reason(); !why.empty()) {
    throw UsageError(fmt::format("--device {}: {}", name, why));
  }
#ifdef BRAID_HAVE_CUDA
  const cuda::DeviceQuery q = cuda::query_devices();
  if (spec.device >= static_cast<int>(q.devices.size())) {
    throw UsageError(fmt::format("--device {}: this process sees {} CUDA device(s) (0 to {})", name,
                                 q.devices.size(), q.devices.size() - 1));
  }
  return make_cuda_backend(spec.device);
#else
  throw UsageError(fmt::format("--device {}: braid was built without CUDA", name));  // not reached
#endif
}

std::unique_ptr<Backend> make_backend(std::string_view spec, int threads) {
  BackendSpec s = parse_device_option(spec);
  s.threads = threads;
  return make_backend(s);
}

}  // namespace braid::backend
