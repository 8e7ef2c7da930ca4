#include "backend/device_option.hpp"

#include "backend/registry.hpp"

namespace braid::backend {

CLI::Option* add_device_option(CLI::App& app, std::string& device) {
  return app
      .add_option("--device", device,
                  std::string("Where the model runs: ") + std::string(kDeviceValues) + " (cuda: GPU 0)")
      ->capture_default_str()
      ->check(
          [](const std::string& s) {
            std::string problem;
            return parse_device(s, &problem) ? std::string() : problem;
          },
          "DEVICE");
}

}  // namespace braid::backend
