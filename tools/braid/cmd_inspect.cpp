// braid inspect FILE: what a braid file holds, as text or (--json) as JSON.
#include <filesystem>
#include <iostream>
#include <memory>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/weight_layout.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "io/inspect.hpp"
#include "io/option_schema.hpp"
#include "verbs.hpp"

namespace braid::driver {

void add_inspect_command(CLI::App& app, Verbs& verbs) {
  auto opt = std::make_shared<io::InspectCommand>();
  auto* sub = app.add_subcommand(
      "inspect",
      "Summarise a braid file: sample shard (counts, length distributions, reward and per-token "
      "statistics, the first samples decoded), weight shard (tensors, shapes, layer range) or braid "
      "JSON file (format, keys, key figures), with what made it (tool, options, inputs, fingerprint). A file "
      "with problems (a NaN tensor, a tensor missing or of another shape) is shown, its problems named, and "
      "exits 2");
  cli::add_schema_options(*sub, *opt, io::inspect_schema());
  verbs.add(sub, [opt] {
    // A checkpoint's name (no file of its own) stands for its stage and tensor-parallel
    // files: each is summarised (--json: a list).
    std::vector<std::string> files{opt->file};
    std::error_code ec;
    if (opt->file != "-" && !std::filesystem::exists(opt->file, ec)) {
      try {
        files.clear();
        for (const auto& f : checkpoint::checkpoint_files(opt->file)) files.push_back(f.string());
      } catch (const InputError&) {
        files = {opt->file};  // reported as the missing file it is
      }
    }
    ordered_json all = ordered_json::array();
    int rc = 0;
    for (const auto& f : files) {
      auto summary = io::inspect_file(f, opt->opt);
      // A weight shard's tensors against its model_config, as braid check reads them.
      if (io::is_weight_shard(f)) {
        for (const auto& p : checkpoint::layout_problems(io::WeightShardReader(f))) summary["problems"].push_back(p);
      }
      if (opt->json) {
        all.push_back(summary);
      } else {
        std::cout << io::render_inspect_text(summary);
      }
      // A file with problems is shown, and said to be bad: exit 2, each problem on stderr.
      const auto problems = summary.value("problems", ordered_json::array());
      for (const auto& p : problems) log::error("{}: {}", f, p.get<std::string>());
      if (!problems.empty()) rc = 2;
    }
    if (opt->json) std::cout << (files.size() == 1 ? all.front() : all).dump(2) << '\n';
    return rc;
  });
}

}  // namespace braid::driver
