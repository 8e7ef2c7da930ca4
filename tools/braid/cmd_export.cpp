// braid export: braid weight shards as a Hugging Face folder; prints the files written.
#include <filesystem>
#include <iostream>
#include <memory>

#include "checkpoint/adapters.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "hf/import_export.hpp"
#include "hf/peft.hpp"
#include "verbs.hpp"

namespace braid::driver {

namespace {

hf::ValueHeadClass value_head_class(const std::string& option) {
  return option == "token" ? hf::ValueHeadClass::token
         : option == "sequence" ? hf::ValueHeadClass::sequence
                                : hf::ValueHeadClass::automatic;
}

}  // namespace

void add_export_command(CLI::App& app, Verbs& verbs) {
  struct Opt {
    std::vector<std::string> shards;
    std::string out, dtype = "f32", tokenizer, value_head = "auto";
    bool merge = false;
    hf::GenerationDefaults generation;
  };
  auto o = std::make_shared<Opt>();
  auto* sub = app.add_subcommand(
      "export", "Export braid weight shards (all stages of one checkpoint) as a Hugging Face folder: config.json, "
                "model.safetensors and, for a causal LM, generation_config.json (with --tokenizer also the tokenizer "
                "files and special_tokens_map.json), loadable by transformers as it is (<Family>ForCausalLM, or a "
                "reward/value model's classification class); a LoRA adapter file (braid-train --lora-rank) as a PEFT "
                "adapter folder (adapter_config.json, adapter_model.safetensors); prints the files written");
  sub->add_option("weights", o->shards,
                  "The checkpoint: its name (ckpt.h5, which finds its stage and tensor-parallel files) or every one "
                  "of its files; a tensor-parallel checkpoint's slices are joined")
      ->required();
  sub->add_option("-o,--output", o->out, "Output folder (created if missing)")->required();
  sub->add_flag("--merge", o->merge, "A LoRA adapter file: export its base with the adapters merged into the weights "
                                     "(a whole model) instead of a PEFT adapter folder");
  sub->add_option("--dtype", o->dtype, "Stored precision")->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  sub->add_option("--tokenizer", o->tokenizer,
                  "tokenizer.json (or a folder with one) to copy into the output, with its tokenizer_config.json, "
                  "special_tokens_map.json and tokenizer.model when present; its BOS/EOS/PAD ids go into "
                  "generation_config.json")
      ->check(CLI::ExistingPath);
  sub->add_option("--value-head", o->value_head,
                  "A model with a value head and no LM head: as <Family>ForSequenceClassification (a reward model), "
                  "<Family>ForTokenClassification (a value model; a zero bias where it has none), or auto (the class its "
                  "config.json names, else token with a score bias, else sequence); for a reward model's or critic's LoRA "
                  "adapters, PEFT's task_type (SEQ_CLS or TOKEN_CLS)")
      ->check(CLI::IsMember({"auto", "sequence", "token"}))
      ->capture_default_str();
  sub->add_option("--temperature", o->generation.temperature,
                  "generation_config.json: sampling temperature (0: greedy, do_sample false); braid-generate's default")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--top-p", o->generation.top_p, "generation_config.json: nucleus mass (1: off)")
      ->check(CLI::Validator(
          [](std::string& v) {
            const double p = std::stod(v);
            return p > 0 && p <= 1 ? std::string() : std::string("must be in (0, 1]");
          },
          "(0, 1]"))
      ->capture_default_str();
  sub->add_option("--top-k", o->generation.top_k, "generation_config.json: top-k (0: off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--max-new-tokens", o->generation.max_new_tokens, "generation_config.json: max_new_tokens")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  verbs.add(sub, [o] {
    const bool adapters = o->shards.size() == 1 && checkpoint::read_adapter_file(o->shards.front());
    if (adapters && !o->merge) {
      for (const auto& f : hf::export_peft(o->shards.front(), o->out, value_head_class(o->value_head)))
        std::cout << path_line(f.string()) << '\n';
      return 0;
    }
    if (o->merge && !adapters) throw UsageError("--merge: name one LoRA adapter file");
    // A checkpoint's name stands for its files (stage files, every tp rank's).
    std::vector<std::filesystem::path> paths;
    if (adapters) {
      paths.emplace_back(o->shards.front());
    } else {
      for (const auto& spec : o->shards)
        for (auto& f : checkpoint::checkpoint_files(spec)) paths.push_back(std::move(f));
    }
    const hf::ExportOptions opt{.dtype = o->dtype == "bf16" ? hf::StoreDtype::bf16 : hf::StoreDtype::f32,
                                .tokenizer = o->tokenizer,
                                .generation = o->generation,
                                .value_head = value_head_class(o->value_head)};
    const auto files = adapters ? hf::export_merged(paths.front(), o->out, opt) : hf::export_hf(paths, o->out, opt);
    for (const auto& f : files) std::cout << path_line(f.string()) << '\n';
    return 0;
  });
}

}  // namespace braid::driver
