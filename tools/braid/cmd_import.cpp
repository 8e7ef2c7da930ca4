// braid import: a Hugging Face model folder as braid weight shards; prints the files written.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "hf/import_export.hpp"
#include "hf/option_schema.hpp"
#include "hf/peft.hpp"
#include "io/fingerprint.hpp"
#include "verbs.hpp"

namespace braid::driver {

void add_import_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<hf::ImportCommand>();
  auto* sub = app.add_subcommand(
      "import", "Import a Hugging Face folder of a Llama, Mistral, Qwen2, Qwen3, Gemma 2 or Gemma 3 model "
                "(causal LM, or sequence/token classification as a reward/value model; config.json + model.safetensors, "
                "or sharded with model.safetensors.index.json; F32/F16/BF16) as braid weight shards; prints the files "
                "written. A PEFT LoRA adapter folder (adapter_config.json) with --base becomes a braid adapter file on "
                "that base checkpoint");
  cli::add_schema_options(*sub, *o, hf::import_schema());
  verbs.add(sub, [o] {
    // What made the output (io/fingerprint.hpp): the folder's files by content, the base's too.
    io::MadeFrom made_from("braid import");
    std::vector<std::filesystem::path> folder;
    for (const auto& e : std::filesystem::directory_iterator(o->dir))
      if (e.is_regular_file()) folder.push_back(e.path());
    std::sort(folder.begin(), folder.end());
    if (std::filesystem::exists(std::filesystem::path(o->dir) / "adapter_config.json")) {
      if (o->base.empty()) throw UsageError("a PEFT adapter folder is imported onto its base: name it with --base");
      if (o->stages != 1) throw UsageError("--stages: an adapter file holds every layer's adapters in one file");
      made_from.add_input("adapter", folder);
      made_from.add_input("base", checkpoint::checkpoint_files(o->base));
      std::cout << hf::import_peft(o->dir, o->base, o->out,
                                   fmt::format("braid import {} --base {} -o {}", o->dir, o->base, o->out),
                                   made_from.to_json().dump())
                       .string()
                << '\n';
      return 0;
    }
    if (std::filesystem::exists(std::filesystem::path(o->dir) / "adapter_model.safetensors") ||
        std::filesystem::exists(std::filesystem::path(o->dir) / "adapter_model.bin")) {
      throw InputError((std::filesystem::path(o->dir) / "adapter_config.json").string(), "",
                       "missing: the folder holds a PEFT adapter's weights without its config (r, lora_alpha, "
                       "target_modules)");
    }
    if (!o->base.empty()) throw UsageError(fmt::format("--base: {} holds no adapter_config.json: a model folder "
                                                       "is imported without a base", o->dir));
    made_from.set_option("--stages", std::to_string(o->stages));
    made_from.add_input("model", folder);
    const auto files = hf::import_hf(o->dir, o->out,
                                     {.stages = o->stages,
                                      .created_by = fmt::format("braid import {} --stages {} -o {}", o->dir, o->stages, o->out),
                                      .made_from = made_from.to_json().dump()});
    for (const auto& f : files) std::cout << path_line(f.string()) << '\n';
    return 0;
  });
}

}  // namespace braid::driver
