#include "checkpoint/option_schema.hpp"

namespace braid::checkpoint {
namespace {

using cli::field;
using cli::kMaxCount;
using I = InitCommand;
using R = ReshardCommand;
using namespace cli::option_types;

}  // namespace

const cli::OptionSchema<InitCommand>& init_schema() {
  static const cli::OptionSchema<I> s = {
      field<I>(&I::config, {.flag = "-c,--config", .type = path, .help = "config.json (Hugging Face Llama keys)",
                            .required = true, .show_default = false}),
      field<I>(&I::out, {.flag = "-o,--output", .type = path,
                         .help = "Output weight file (with --stages N: NAME.stageI-of-N.h5)", .required = true,
                         .show_default = false}),
      field<I>(&I::seed, {.flag = "--seed", .type = integer,
                          .help = "Random seed (the same seed gives the same weights for any --stages)"}),
      field<I>(&I::stages, {.flag = "--stages", .type = integer,
                            .help = "Write the layers as this many pipeline-stage shards",
                            .bounds = {.min = 1, .max = kMaxCount}}),
      field<I>(&I::init_std, {.flag = "--init-std", .type = number,
                              .help = "Standard deviation of the matrices' normal init (norms start at 1)",
                              .bounds = {.min = 0, .exclusive_min = true}}),
      field<I>(&I::value_head, {.flag = "--value-head", .type = boolean,
                                .help = "Add a scalar value head (score.weight) for a critic or reward model",
                                .show_default = false}),
      field<I>(&I::no_lm_head, {.flag = "--no-lm-head", .type = boolean,
                                .help = "Leave out the LM head (a critic or reward model)", .show_default = false}),
  };
  return s;
}

const cli::OptionSchema<ReshardCommand>& reshard_schema() {
  static const cli::OptionSchema<R> s = {
      field<R>(&R::in, {.flag = "checkpoint", .type = path,
                        .help = "The checkpoint: its name (finds its stage and tp files: ckpt.h5 -> "
                                "ckpt.tp<r>-of-<N>[.stage..].h5), or every one of its files",
                        .required = true, .show_default = false}),
      field<R>(&R::out, {.flag = "-o,--output", .type = path,
                         .help = "Output name: OUT itself at --tp 1 and one stage, else OUT's .tp<r>-of-<N> and "
                                 ".stage<s>-of-<S> files",
                         .required = true, .show_default = false}),
      field<R>(&R::tp, {.flag = "--tp", .type = integer,
                        .help = "Tensor-parallel degree of the output (default: the input's)",
                        .bounds = {.min = 1, .max = kMaxCount}, .show_default = false}),
      field<R>(&R::pp, {.flag = "--stages,--pp", .type = integer,
                        .help = "Pipeline stages of the output (default: the input's)",
                        .bounds = {.min = 1, .max = kMaxCount}, .show_default = false}),
      field<R>(&R::no_optimizer, {.flag = "--no-optimizer", .type = boolean,
                                  .help = "Leave the optimizer state beside the checkpoint alone", .show_default = false}),
  };
  return s;
}

}  // namespace braid::checkpoint
