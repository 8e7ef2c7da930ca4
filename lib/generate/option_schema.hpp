// braid-generate's options, declared once (core/option_schema.hpp): tools/generate/main.cpp
// adds them, the run file's "generate" section is checked against the ones with a key, and
// `braid options` prints them.
#pragma once

#include "core/option_schema.hpp"
#include "generate/stage.hpp"

namespace braid::gen {

const cli::OptionSchema<StageOptions>& generate_schema();

}  // namespace braid::gen
