// braid reshard: a checkpoint rewritten at another tensor-parallel degree, by files and
// bit-exact (checkpoint/reshard.hpp); prints the files written.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "core/files.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/reshard.hpp"
#include "verbs.hpp"

namespace braid::driver {

void add_reshard_command(CLI::App& app, Verbs& verbs) {
  struct Opt { std::vector<std::string> in; std::string out; int tp = 1; };
  auto o = std::make_shared<Opt>();
  auto* sub = app.add_subcommand(
      "reshard", "Rewrite a checkpoint (or its optimizer state, ckpt.optim.h5) at another tensor-parallel degree "
                 "(bit-exact; the stage split is kept): every tp rank's slices joined, then cut into --tp slices; "
                 "prints the files written");
  sub->add_option("checkpoint", o->in,
                  "The checkpoint: its name (finds its stage and tp files: ckpt.h5 -> ckpt.tp<r>-of-<N>[.stage..].h5), "
                  "or every one of its files")
      ->required();
  sub->add_option("-o,--output", o->out, "Output name: OUT itself at --tp 1, else OUT's .tp<r>-of-<N> files")->required();
  sub->add_option("--tp", o->tp, "Tensor-parallel degree of the output")->check(CLI::PositiveNumber)->required();
  verbs.add(sub, [o] {
    std::vector<std::filesystem::path> files;
    for (const auto& spec : o->in)
      for (auto& f : checkpoint::checkpoint_files(spec)) files.push_back(std::move(f));
    std::string cmd = "braid reshard";
    for (const auto& spec : o->in) cmd += " " + spec;
    cmd += fmt::format(" --tp {} -o {}", o->tp, o->out);
    for (const auto& f : checkpoint::reshard(files, o->out, o->tp, cmd))
      std::cout << path_line(f.string()) << '\n';
    return 0;
  });
}

}  // namespace braid::driver
