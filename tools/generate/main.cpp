// braid-generate: actor rollouts for a prompt file, written as sample shards that
// stream out as they complete (each path on stdout at once). lib/generate/stage.hpp.
// With `-- SCORE-OPTIONS` the ranks score the shards themselves (lib/fuse).
#include "core/cli.hpp"
#include "fuse/fused_rollout.hpp"
#include "generate/migrate.hpp"
#include "generate/option_schema.hpp"
#include "generate/stage.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  braid::gen::RankGroup ranks(&argc, &argv);
  braid::gen::StageOptions o;
  std::string cmdline = "braid-generate";
  for (int i = 1; i < argc; ++i) cmdline += std::string(" ") + argv[i];
  o.created_by = cmdline;
  auto split = braid::fuse::split_at_double_dash(argc, argv);

  CLI::App app{
      "Generate actor rollouts for every prompt x --samples-per-prompt and write them as sample shards "
      "(DIR/PREFIX-00000.h5, ...). Shard k holds the samples with ids [k*shard_size, (k+1)*shard_size) "
      "(sample_id = prompt_index * samples_per_prompt + k) and is written the moment its last sample finishes; "
      "its path is then printed on stdout, one line, so that `braid-generate ... | braid-score - ...` scores "
      "while generation goes on. A rerun skips complete shards. Under mpirun the shards are dealt to the ranks "
      "and --migrate-threshold moves the long tail to a few of them (RLHFuse section 4.2). "
      "Fused: `braid-generate OPTIONS -- SCORE-OPTIONS` (SCORE-OPTIONS: braid-score's, without the shard list) "
      "scores every shard in these processes as generation frees each rank, and prints the scored shards' paths "
      "instead (docs/fusion.md).",
      "braid-generate"};
  braid::cli::add_schema_options(app, o, braid::gen::generate_schema());   // lib/generate/option_schema.cpp
  const int rc = braid::cli::run(app, static_cast<int>(split.before.size()), split.before.data(), [&] {
    o.options_given = braid::cli::options_given(app, {});
    ranks.split_tp(o.tp, o.device);
    if (!split.fused) return braid::gen::run_generate_stage(o, ranks);
    return braid::fuse::run_fused_rollout(o, braid::fuse::parse_score_options(split.after, cmdline), ranks);
  });
  if (rc != 0 && ranks.world_size() > 1) {
    // Leave without finalising MPI: the other ranks may be waiting in a collective for
    // this one, and mpirun ends the whole job when a rank exits without finalizing.
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  return rc;
}
