// What a plan or a profile records of the inputs that made it (io/fingerprint.hpp): the
// experiment and the models' configs it names, the hardware (a preset by name, a file by
// content).
#pragma once

#include <string>

#include "io/fingerprint.hpp"

namespace braid::plan {

// The experiment file and every model config it names, by content.
void add_experiment_input(io::MadeFrom& m, const std::string& experiment);
// A hardware preset (h100, h200) by its name, a hardware file by its content.
void add_hardware_input(io::MadeFrom& m, const std::string& hardware);

}  // namespace braid::plan
