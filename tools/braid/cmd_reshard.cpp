// braid reshard: a checkpoint rewritten at another tensor-parallel degree and/or pipeline
// stage count, by files and bit-exact (checkpoint/reshard.hpp), with the optimizer state
// beside it; prints the files written.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "core/files.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/option_schema.hpp"
#include "checkpoint/optimizer_state.hpp"
#include "checkpoint/reshard.hpp"
#include "core/error.hpp"
#include "io/weight_shard.hpp"
#include "verbs.hpp"

namespace braid::driver {

void add_reshard_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<checkpoint::ReshardCommand>();
  auto* sub = app.add_subcommand(
      "reshard", "Rewrite a checkpoint (or an optimizer state, ckpt.optim.h5) at another tensor-parallel degree "
                 "and/or pipeline stage count (bit-exact): every tp rank's slices joined, placed on the new stages and "
                 "cut into --tp slices. A checkpoint named by its name takes its optimizer state along (OUT.optim); "
                 "prints the files written");
  cli::add_schema_options(*sub, *o, checkpoint::reshard_schema());
  verbs.add(sub, [o] {
    if (o->tp == 0 && o->pp == 0) throw UsageError("reshard: give --tp N, --pp S or both");
    std::vector<std::filesystem::path> files;
    for (const auto& spec : o->in)
      for (auto& f : checkpoint::checkpoint_files(spec)) files.push_back(std::move(f));
    std::string cmd = "braid reshard";
    for (const auto& spec : o->in) cmd += " " + spec;
    if (o->tp > 0) cmd += fmt::format(" --tp {}", o->tp);
    if (o->pp > 0) cmd += fmt::format(" --pp {}", o->pp);
    cmd += " -o " + o->out;
    const checkpoint::ReshardLayout layout{.tp = o->tp, .stages = o->pp};
    // The optimizer state of a checkpoint named by its name moves with it.
    std::vector<std::filesystem::path> state;
    const bool weights = io::WeightShardReader(files.front()).meta().kind == "weights";
    if (!o->no_optimizer && o->in.size() == 1 && weights) {
      try {
        state = checkpoint::checkpoint_files(checkpoint::optimizer_state_path(o->in.front()));
      } catch (const InputError&) {
        state.clear();  // none beside it
      }
    }
    for (const auto& f : checkpoint::reshard(files, o->out, layout, cmd)) std::cout << path_line(f.string()) << '\n';
    if (!state.empty()) {
      for (const auto& f : checkpoint::reshard(state, checkpoint::optimizer_state_path(o->out), layout, cmd))
        std::cout << path_line(f.string()) << '\n';
    }
    return 0;
  });
}

}  // namespace braid::driver
