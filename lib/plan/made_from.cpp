#include "plan/made_from.hpp"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "plan/experiment.hpp"
#include "plan/hardware.hpp"

namespace braid::plan {

void add_experiment_input(io::MadeFrom& m, const std::string& experiment) {
  m.add_input_path("experiment", experiment);
  const auto configs = load_experiment(experiment).config_files;
  if (!configs.empty()) m.add_input("model configs", std::vector<std::filesystem::path>(configs.begin(), configs.end()));
}

void add_hardware_input(io::MadeFrom& m, const std::string& hardware) {
  const auto presets = hardware_preset_names();
  if (std::find(presets.begin(), presets.end(), hardware) != presets.end()) {
    m.add_input_value("hardware", hardware);
  } else {
    m.add_input_path("hardware", hardware);
  }
}

}  // namespace braid::plan
