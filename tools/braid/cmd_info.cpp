// braid info: how this braid was built and what it sees (CUDA devices, BLAS,
// MPI and HDF5 libraries), as text or JSON.
#include <cblas.h>

#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "comm/mpi.hpp"
#include "io/h5.hpp"
#include "verbs.hpp"

#ifdef BRAID_HAVE_CUDA
#include "backend/cuda/device_query.hpp"
#endif

#ifndef BRAID_VERSION
#define BRAID_VERSION "unknown"
#endif

namespace braid::driver {
namespace {

nlohmann::ordered_json build_info() {
  nlohmann::ordered_json info;
  info["version"] = BRAID_VERSION;
  info["compiler"] = __VERSION__;
#ifdef NDEBUG
  info["assertions"] = false;
#else
  info["assertions"] = true;
#endif
#ifdef BRAID_HAVE_CUDA
  nlohmann::ordered_json cuda;
  cuda["built"] = true;
  const auto q = cuda::query_devices();
  cuda["runtime_version"] = q.runtime_version;
  if (!q.error.empty()) cuda["error"] = q.error;
  cuda["devices"] = nlohmann::ordered_json::array();
  for (const auto& d : q.devices) {
    cuda["devices"].push_back({{"index", d.index},
                               {"name", d.name},
                               {"compute_capability", fmt::format("{}.{}", d.sm_major, d.sm_minor)},
                               {"multiprocessors", d.multiprocessors},
                               {"memory_bytes", d.memory_bytes}});
  }
  info["cuda"] = cuda;
#else
  info["cuda"] = {{"built", false}};
#endif
  info["blas"] = openblas_get_config();
  info["mpi"] = comm::mpi_library_version();
  info["hdf5"] = io::h5::library_version();
  return info;
}

std::string render(const nlohmann::ordered_json& info) {
  std::string out = fmt::format("braid {}\n", info["version"].get<std::string>());
  out += fmt::format("  compiler   {}\n", info["compiler"].get<std::string>());
  const auto& cuda = info["cuda"];
  if (!cuda["built"].get<bool>()) {
    out += "  cuda       not built (CPU backend only)\n";
  } else {
    const int rt = cuda["runtime_version"].get<int>();  // 1000 * major + 10 * minor
    out += fmt::format("  cuda       built, runtime {}.{}, {} device(s){}\n", rt / 1000, rt % 1000 / 10,
                       cuda["devices"].size(),
                       cuda.contains("error") ? " (" + cuda["error"].get<std::string>() + ")" : "");
    for (const auto& d : cuda["devices"]) {
      out += fmt::format("    [{}] {} (sm {}, {} SMs, {:.1f} GiB)\n", d["index"].get<int>(),
                         d["name"].get<std::string>(), d["compute_capability"].get<std::string>(),
                         d["multiprocessors"].get<int>(),
                         static_cast<double>(d["memory_bytes"].get<std::size_t>()) / (1 << 30));
    }
  }
  out += fmt::format("  blas       {}\n", info["blas"].get<std::string>());
  out += fmt::format("  mpi        {}\n", info["mpi"].get<std::string>());
  out += fmt::format("  hdf5       {}\n", info["hdf5"].get<std::string>());
  return out;
}

}  // namespace

void add_info_command(CLI::App& app, Verbs& verbs) {
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("info", "Show how this braid was built: version, CUDA and devices, BLAS, MPI, HDF5");
  sub->add_flag("--json", *json, "Print as JSON");
  verbs.add(sub, [json] {
    const auto info = build_info();
    std::cout << (*json ? info.dump(2) + "\n" : render(info));
    return 0;
  });
}

}  // namespace braid::driver
