// braid init's and braid reshard's options, declared once (core/option_schema.hpp):
// tools/braid/cmd_init.cpp and cmd_reshard.cpp add them and `braid options braid-init` /
// `braid-reshard` print them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/option_schema.hpp"

namespace braid::checkpoint {

// A new model with random weights from a config.json.
struct InitCommand {
  std::string config;
  std::string out;
  std::uint64_t seed = 0;
  int stages = 1;
  double init_std = 0.02;
  bool value_head = false;
  bool no_lm_head = false;
};

// A checkpoint at another tensor-parallel degree and/or stage count (checkpoint/reshard.hpp).
struct ReshardCommand {
  std::vector<std::string> in;   // a checkpoint's name, or its files
  std::string out;
  int tp = 0;                    // 0: the input's
  int pp = 0;                    // 0: the input's
  bool no_optimizer = false;
};

const cli::OptionSchema<InitCommand>& init_schema();
const cli::OptionSchema<ReshardCommand>& reshard_schema();

}  // namespace braid::checkpoint
