// braid import: a Hugging Face model folder as braid weight shards; prints the files written.
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "hf/import_export.hpp"
#include "hf/peft.hpp"
#include "verbs.hpp"

namespace braid::driver {

void add_import_command(CLI::App& app, Verbs& verbs) {
  struct Opt { std::string dir, out, base; int stages = 1; };
  auto o = std::make_shared<Opt>();
  auto* sub = app.add_subcommand(
      "import", "Import a Hugging Face folder of a Llama, Mistral, Qwen2, Qwen3, Gemma 2 or Gemma 3 model "
                "(causal LM, or sequence/token classification as a reward/value model; config.json + model.safetensors, "
                "or sharded with model.safetensors.index.json; F32/F16/BF16) as braid weight shards; prints the files "
                "written. A PEFT LoRA adapter folder (adapter_config.json) with --base becomes a braid adapter file on "
                "that base checkpoint");
  sub->add_option("hf_dir", o->dir, "Hugging Face model folder")->required()->check(CLI::ExistingDirectory);
  sub->add_option("-o,--output", o->out, "Output weight file (with --stages N: NAME.stageI-of-N.h5)")->required();
  sub->add_option("--stages", o->stages, "Write the layers as this many pipeline-stage shards")
      ->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--base", o->base, "A PEFT adapter folder: the braid checkpoint of the model it adapts");
  verbs.add(sub, [o] {
    if (std::filesystem::exists(std::filesystem::path(o->dir) / "adapter_config.json")) {
      if (o->base.empty()) throw UsageError("a PEFT adapter folder is imported onto its base: name it with --base");
      std::cout << hf::import_peft(o->dir, o->base, o->out,
                                   fmt::format("braid import {} --base {} -o {}", o->dir, o->base, o->out))
                       .string()
                << '\n';
      return 0;
    }
    const auto files = hf::import_hf(o->dir, o->out,
                                     {.stages = o->stages,
                                      .created_by = fmt::format("braid import {} --stages {} -o {}", o->dir, o->stages, o->out)});
    for (const auto& f : files) std::cout << path_line(f.string()) << '\n';
    return 0;
  });
}

}  // namespace braid::driver
