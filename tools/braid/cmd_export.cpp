// braid export: braid weight shards as a Hugging Face folder; prints the files written.
#include <filesystem>
#include <iostream>
#include <memory>

#include "checkpoint/adapters.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "hf/import_export.hpp"
#include "hf/option_schema.hpp"
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
  auto o = std::make_shared<hf::ExportCommand>();
  auto* sub = app.add_subcommand(
      "export", "Export braid weight shards (all stages of one checkpoint) as a Hugging Face folder: config.json, "
                "model.safetensors and, for a causal LM, generation_config.json (with --tokenizer also the tokenizer "
                "files and special_tokens_map.json), loadable by transformers as it is (<Family>ForCausalLM, or a "
                "reward/value model's classification class); a LoRA adapter file (braid-train --lora-rank) as a PEFT "
                "adapter folder (adapter_config.json, adapter_model.safetensors); prints the files written");
  cli::add_schema_options(*sub, *o, hf::export_schema());
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
