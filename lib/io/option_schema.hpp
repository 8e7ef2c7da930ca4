// braid inspect's options, declared once (core/option_schema.hpp): tools/braid/cmd_inspect.cpp
// adds them and `braid options braid-inspect` prints them.
#pragma once

#include <string>

#include "core/option_schema.hpp"
#include "io/inspect.hpp"

namespace braid::io {

struct InspectCommand {
  std::string file;
  bool json = false;
  InspectOptions opt;
};

const cli::OptionSchema<InspectCommand>& inspect_schema();

}  // namespace braid::io
