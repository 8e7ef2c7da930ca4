// braid export: braid weight shards as a Hugging Face folder; prints the files written.
#include <filesystem>
#include <iostream>
#include <memory>

#include "hf/import_export.hpp"
#include "verbs.hpp"

namespace braid::driver {

void add_export_command(CLI::App& app, Verbs& verbs) {
  struct Opt { std::vector<std::string> shards; std::string out, dtype = "f32", tokenizer; };
  auto o = std::make_shared<Opt>();
  auto* sub = app.add_subcommand(
      "export", "Export braid weight shards (all stages of one checkpoint) as a Hugging Face folder: config.json "
                "and model.safetensors, loadable by transformers; prints the files written");
  sub->add_option("weights", o->shards, "Weight shard files (every stage of the checkpoint)")->required();
  sub->add_option("-o,--output", o->out, "Output folder (created if missing)")->required();
  sub->add_option("--dtype", o->dtype, "Stored precision")->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  sub->add_option("--tokenizer", o->tokenizer,
                  "tokenizer.json (or a folder with one) to copy into the output, with its tokenizer_config.json")
      ->check(CLI::ExistingPath);
  verbs.add(sub, [o] {
    std::vector<std::filesystem::path> paths(o->shards.begin(), o->shards.end());
    const auto files = hf::export_hf(paths, o->out,
                                     {.dtype = o->dtype == "bf16" ? hf::StoreDtype::bf16 : hf::StoreDtype::f32,
                                      .tokenizer = o->tokenizer});
    for (const auto& f : files) std::cout << f.string() << '\n';
    return 0;
  });
}

}  // namespace braid::driver
