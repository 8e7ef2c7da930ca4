// braid-generate's options, declared once (core/option_schema.hpp): tools/generate/main.cpp
// adds them, the run file's "generate" section is checked against the ones with a key, and
// `braid options` prints them; braid tokenize's too (tools/braid/cmd_tokenize.cpp).
#pragma once

#include "core/option_schema.hpp"
#include "generate/stage.hpp"
#include "generate/tokenize.hpp"

namespace braid::gen {

const cli::OptionSchema<StageOptions>& generate_schema();
const cli::OptionSchema<TokenizeOptions>& tokenize_schema();

}  // namespace braid::gen
