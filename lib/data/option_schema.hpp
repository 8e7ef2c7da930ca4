// braid data's options, declared once (core/option_schema.hpp): tools/braid/cmd_data.cpp
// adds them and `braid options braid-data` prints them.
#pragma once

#include "core/option_schema.hpp"
#include "data/prepare.hpp"

namespace braid::data {

struct PrepareCommand {
  PrepareOptions opt;
  std::string heldout;   // a count of lines, or a fraction in (0, 1) ("" : none)
};

const cli::OptionSchema<PrepareCommand>& data_schema();

}  // namespace braid::data
