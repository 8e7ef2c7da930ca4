#include "hf/option_schema.hpp"

namespace braid::hf {
namespace {

using cli::custom;
using cli::field;
using cli::kMaxCount;
using cli::OptionSpec;
using X = ExportCommand;
using I = ImportCommand;
using namespace cli::option_types;

// A path option whose file or folder must be there.
template <typename Opts>
cli::SchemaEntry<Opts> existing(std::string Opts::*member, const CLI::Validator& exists, OptionSpec spec) {
  return custom<Opts>(
      [member, exists](CLI::App& app, Opts& o, const OptionSpec& s) {
        return cli::decorate(app.add_option(s.flag, o.*member, s.help), s)->check(exists);
      },
      std::move(spec));
}

}  // namespace

const cli::OptionSchema<ExportCommand>& export_schema() {
  static const cli::OptionSchema<X> s = {
      field<X>(&X::shards, {.flag = "weights", .type = path,
                            .help = "The checkpoint: its name (ckpt.h5, which finds its stage and tensor-parallel files) "
                                    "or every one of its files; a tensor-parallel checkpoint's slices are joined",
                            .required = true, .show_default = false}),
      field<X>(&X::out, {.flag = "-o,--output", .type = path, .help = "Output folder (created if missing)",
                         .required = true, .show_default = false}),
      field<X>(&X::merge, {.flag = "--merge", .type = boolean,
                           .help = "A LoRA adapter file: export its base with the adapters merged into the weights (a "
                                   "whole model) instead of a PEFT adapter folder",
                           .show_default = false}),
      field<X>(&X::dtype, {.flag = "--dtype", .type = choice, .help = "Stored precision", .choices = {"f32", "bf16"}}),
      existing<X>(&X::tokenizer, CLI::ExistingPath,
                  {.flag = "--tokenizer", .type = path,
                   .help = "tokenizer.json (or a folder with one) to copy into the output, with its tokenizer_config.json, "
                           "special_tokens_map.json and tokenizer.model when present; its BOS/EOS/PAD ids go into "
                           "generation_config.json",
                   .show_default = false}),
      field<X>(&X::value_head,
               {.flag = "--value-head", .type = choice,
                .help = "A model with a value head and no LM head: as <Family>ForSequenceClassification (a reward model), "
                        "<Family>ForTokenClassification (a value model; a zero bias where it has none), or auto (the class "
                        "its config.json names, else token with a score bias, else sequence); for a reward model's or "
                        "critic's LoRA adapters, PEFT's task_type (SEQ_CLS or TOKEN_CLS)",
                .choices = {"auto", "sequence", "token"}}),
      field<X>([](X& o) -> double& { return o.generation.temperature; },
               {.flag = "--temperature", .type = number,
                .help = "generation_config.json: sampling temperature (0: greedy, do_sample false); braid-generate's "
                        "default",
                .bounds = {.min = 0}}),
      field<X>([](X& o) -> double& { return o.generation.top_p; },
               {.flag = "--top-p", .type = number, .help = "generation_config.json: nucleus mass (1: off)",
                .bounds = {.min = 0, .max = 1, .exclusive_min = true}}),
      field<X>([](X& o) -> int& { return o.generation.top_k; },
               {.flag = "--top-k", .type = integer, .help = "generation_config.json: top-k (0: off)",
                .bounds = {.min = 0, .max = kMaxCount}}),
      field<X>([](X& o) -> std::int64_t& { return o.generation.max_new_tokens; },
               {.flag = "--max-new-tokens", .type = integer, .help = "generation_config.json: max_new_tokens",
                .bounds = {.min = 1, .max = kMaxCount}}),
  };
  return s;
}

const cli::OptionSchema<ImportCommand>& import_schema() {
  static const cli::OptionSchema<I> s = {
      existing<I>(&I::dir, CLI::ExistingDirectory,
                  {.flag = "hf_dir", .type = path, .help = "Hugging Face model folder", .required = true,
                   .show_default = false}),
      field<I>(&I::out, {.flag = "-o,--output", .type = path,
                         .help = "Output weight file (with --stages N: NAME.stageI-of-N.h5)", .required = true,
                         .show_default = false}),
      field<I>(&I::stages, {.flag = "--stages", .type = integer,
                            .help = "Write the layers as this many pipeline-stage shards",
                            .bounds = {.min = 1, .max = kMaxCount}}),
      field<I>(&I::base, {.flag = "--base", .type = path,
                          .help = "A PEFT adapter folder: the braid checkpoint of the model it adapts",
                          .show_default = false}),
  };
  return s;
}

}  // namespace braid::hf
