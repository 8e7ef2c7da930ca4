// braid inspect FILE: what a braid file holds, as text or (--json) as JSON.
#include <iostream>
#include <memory>

#include "io/inspect.hpp"
#include "verbs.hpp"

namespace braid::driver {

namespace {
struct InspectOptions {
  std::string file;
  bool json = false;
  std::size_t samples = 3;
  std::string tokenizer;
};
}  // namespace

void add_inspect_command(CLI::App& app, Verbs& verbs) {
  auto opt = std::make_shared<InspectOptions>();
  auto* sub = app.add_subcommand(
      "inspect",
      "Summarise a braid file: sample shard (counts, length distributions, reward and per-token "
      "statistics, the first samples decoded), weight shard (tensors, shapes, layer range) or braid "
      "JSON file (format, keys, key figures)");
  sub->add_option("file", opt->file, "The file (\"-\": a JSON file on stdin)")->required();
  sub->add_flag("--json", opt->json, "Print the summary as JSON for scripts");
  sub->add_option("-n,--samples", opt->samples, "Sample shards: how many sequences to decode")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--tokenizer", opt->tokenizer,
                  "Sample shards: decode with this tokenizer (\"byte\", a tokenizer.json or its folder); by default "
                  "the one the shard's meta.config records, when it is there");
  verbs.add(sub, [opt] {
    const auto summary = io::inspect_file(opt->file, {.samples_shown = opt->samples, .tokenizer = opt->tokenizer});
    if (opt->json) {
      std::cout << summary.dump(2) << '\n';
    } else {
      std::cout << io::render_inspect_text(summary);
    }
    return 0;
  });
}

}  // namespace braid::driver
