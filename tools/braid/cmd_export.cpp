// braid export: braid weight shards as a Hugging Face folder; prints the files written.
#include <filesystem>
#include <iostream>
#include <memory>

#include "core/files.hpp"
#include "hf/import_export.hpp"
#include "verbs.hpp"

namespace braid::driver {

void add_export_command(CLI::App& app, Verbs& verbs) {
  struct Opt {
    std::vector<std::string> shards;
    std::string out, dtype = "f32", tokenizer;
    hf::GenerationDefaults generation;
  };
  auto o = std::make_shared<Opt>();
  auto* sub = app.add_subcommand(
      "export", "Export braid weight shards (all stages of one checkpoint) as a Hugging Face folder: config.json, "
                "model.safetensors and generation_config.json (with --tokenizer also the tokenizer files and "
                "special_tokens_map.json), loadable by transformers as it is; prints the files written");
  sub->add_option("weights", o->shards, "Weight shard files (every stage of the checkpoint)")->required();
  sub->add_option("-o,--output", o->out, "Output folder (created if missing)")->required();
  sub->add_option("--dtype", o->dtype, "Stored precision")->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  sub->add_option("--tokenizer", o->tokenizer,
                  "tokenizer.json (or a folder with one) to copy into the output, with its tokenizer_config.json, "
                  "special_tokens_map.json and tokenizer.model when present; its BOS/EOS/PAD ids go into "
                  "generation_config.json")
      ->check(CLI::ExistingPath);
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
    std::vector<std::filesystem::path> paths(o->shards.begin(), o->shards.end());
    const auto files = hf::export_hf(paths, o->out,
                                     {.dtype = o->dtype == "bf16" ? hf::StoreDtype::bf16 : hf::StoreDtype::f32,
                                      .tokenizer = o->tokenizer,
                                      .generation = o->generation});
    for (const auto& f : files) std::cout << path_line(f.string()) << '\n';
    return 0;
  });
}

}  // namespace braid::driver
