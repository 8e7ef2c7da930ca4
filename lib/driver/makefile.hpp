// `braid makefile`: the run's steps (plan.hpp) as Makefile rules — one rule per
// step, real files as targets and prerequisites (grouped targets `&:` where a
// step writes several), the generate | score pipe in one recipe under
// `set -o pipefail` — so that `make` does what `braid run` does, `make -j` is
// safe, and `make -n` after a finished run has nothing to do.
#pragma once

#include <string>

#include "driver/layout.hpp"
#include "driver/plan.hpp"
#include "driver/run_file.hpp"

namespace braid::driver {

struct MakefileOptions {
  Tools tools;                  // written as the variables BRAID, BRAID_GENERATE, ... (overridable)
  std::string command_line;     // the braid makefile command, for the header
};

// The Makefile text. InputError naming the path when a file name cannot be a make
// target (white space or one of : # $ % * ? [ ] \ ; =).
std::string makefile_text(const RunSpec& spec, const Layout& layout, const MakefileOptions& opt);

}  // namespace braid::driver
