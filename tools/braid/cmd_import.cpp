// braid import: a Hugging Face model folder as braid weight shards; prints the files written.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "core/files.hpp"
#include "hf/import_export.hpp"
#include "verbs.hpp"

namespace braid::driver {

void add_import_command(CLI::App& app, Verbs& verbs) {
  struct Opt { std::string dir, out; int stages = 1; };
  auto o = std::make_shared<Opt>();
  auto* sub = app.add_subcommand(
      "import", "Import a Hugging Face Llama folder (config.json + model.safetensors, or sharded with "
                "model.safetensors.index.json; F32/F16/BF16) as braid weight shards; prints the files written");
  sub->add_option("hf_dir", o->dir, "Hugging Face model folder")->required()->check(CLI::ExistingDirectory);
  sub->add_option("-o,--output", o->out, "Output weight file (with --stages N: NAME.stageI-of-N.h5)")->required();
  sub->add_option("--stages", o->stages, "Write the layers as this many pipeline-stage shards")
      ->check(CLI::PositiveNumber)->capture_default_str();
  verbs.add(sub, [o] {
    const auto files = hf::import_hf(o->dir, o->out,
                                     {.stages = o->stages,
                                      .created_by = fmt::format("braid import {} --stages {} -o {}", o->dir, o->stages, o->out)});
    for (const auto& f : files) std::cout << path_line(f.string()) << '\n';
    return 0;
  });
}

}  // namespace braid::driver
