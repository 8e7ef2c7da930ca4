// Which iterations' checkpoints a run keeps (the run file's "checkpoints": save_every,
// keep_last): a long run writes a model and its AdamW state every iteration (about 170 GB
// for a 7B actor and critic), and most of them are never read again.
//
// After iteration j is complete (trained, evaluated), the weights and optimizer state of
// an earlier iteration i ≥ 1 are removed unless i is saved — a multiple of save_every, or
// the last iteration — and among the keep_last most recent saved ones. The newest (and
// under "async" the one before it, which the next rollout reads) and the start models
// (iteration 0, also the default reference) are never removed. A removed iteration leaves
// OUT/iter-i/pruned.json naming what went, so a rerun counts its training as done
// instead of redoing it; everything else of it (samples, scored shards, stats, metrics,
// eval.json) stays.
#pragma once

#include <filesystem>
#include <vector>

#include "driver/layout.hpp"
#include "driver/run_file.hpp"

namespace braid::driver {

// Whether iteration i's checkpoints were removed by the retention (OUT/iter-i/pruned.json).
bool pruned(const Layout& layout, int iteration);

// Whether iteration i's checkpoints are kept once iteration `done` is complete.
bool kept(const RunSpec& spec, int iteration, int done);

// Removes iteration i's checkpoints (and optimizer state) and writes its pruned.json,
// naming what went and `done`, the iteration after which it went.
void remove_checkpoints(const RunSpec& spec, const Layout& layout, int iteration, int done);

// Removes the checkpoints (and optimizer state) of every iteration in [1, done) not kept
// (kept()), writing each one's pruned.json; returns the iterations removed now.
std::vector<int> prune_checkpoints(const RunSpec& spec, const Layout& layout, int done);

}  // namespace braid::driver
