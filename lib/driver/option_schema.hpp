// braid run's and braid makefile's options, declared once (core/option_schema.hpp):
// tools/braid/cmd_run.cpp and cmd_makefile.cpp add them and `braid options braid-run` /
// `braid-makefile` print them.
#pragma once

#include <string>

#include "core/option_schema.hpp"

namespace braid::driver {

struct RunCommand {
  std::string run_file;
  std::string out;
  int iterations = 0;   // 0: the run file's
  bool dry_run = false;
  bool force = false;
};

struct MakefileCommand {
  std::string run_file;
  std::string dir;
  std::string out = "-";
  int iterations = 0;   // 0: the run file's
};

const cli::OptionSchema<RunCommand>& run_schema();
const cli::OptionSchema<MakefileCommand>& makefile_schema();

}  // namespace braid::driver
