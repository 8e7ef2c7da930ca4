// One way to get a backend: a device spec ("cpu", "cuda", "cuda:N") parsed once and
// turned into a backend by make_backend(). Tools take it as --device (device_option.hpp)
// and run files as the "device" key.
#pragma once

#include "backend/backend.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace braid::backend {

enum class DeviceKind { cpu, cuda };

struct BackendSpec {
  DeviceKind kind = DeviceKind::cpu;
  int device = 0;   // cuda:N
  int threads = 0;  // CPU threads (0: the cores of this process); host threads elsewhere

  std::string to_string() const;  // "cpu", "cuda:1": what parse_device() reads back
};

// The values a device spec may take, for messages and --help.
inline constexpr std::string_view kDeviceValues = "cpu or cuda[:N]";

// Parses "cpu", "cuda" (device 0) or "cuda:N". On failure returns nullopt and sets
// *problem to what is wrong ("'gpu' is not a device (cpu or cuda[:N])").
std::optional<BackendSpec> parse_device(std::string_view s, std::string* problem = nullptr);
// The same, throwing UsageError("--device: <problem>") on failure.
BackendSpec parse_device_option(std::string_view s);

// The backend a spec names: the CPU backend, or the CUDA backend (backend/cuda/) on a
// CUDA build with a GPU. Throws UsageError when it cannot be had here: braid built
// without CUDA, no GPU or driver (with the CUDA runtime's reason), or a device index past
// the devices present.
std::unique_ptr<Backend> make_backend(const BackendSpec& spec);
// parse_device_option(spec) with its threads set, then make_backend().
std::unique_ptr<Backend> make_backend(std::string_view spec, int threads);

// Whether this build has CUDA (kernels/ compiled in).
bool built_with_cuda();
// Why `cuda` cannot be made here, or "" when a GPU is present.
std::string cuda_unavailable_reason();

}  // namespace braid::backend
