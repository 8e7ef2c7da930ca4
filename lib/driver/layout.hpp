// Where a run keeps its files: one folder per iteration under the output folder.
//
//   OUT/iter-0000/actor.h5 ...          the random start (models with an "init" block)
//   OUT/iter-0001/samples/gen-*.h5      braid-generate's shards
//   OUT/iter-0001/scored/scored-*.h5    braid-score's shards
//   OUT/iter-0001/{generate,score,train}.stats.json
//   OUT/iter-0001/actor.h5 critic.h5    (+ .optim.h5) the checkpoints iteration 2 starts from
//   OUT/iter-0001/deferred.h5          with overcommit: the samples the next iteration resumes
//   OUT/iter-0001/eval.json             braid eval of its actor on the held-out prompts (run file's "eval")
//   OUT/iter-0001/metrics.json          the iteration's summary; OUT/metrics.jsonl gathers them
//   OUT/iter-0001/ablation.json         stage times with each fusion on and off (when measured)
//   OUT/report.json, OUT/report.svg     every iteration so far, as numbers and as a picture
//   OUT/data/train.jsonl, heldout.jsonl the prompts with the run file's field map and held-out split
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braid::driver {

class Layout {
 public:
  explicit Layout(std::filesystem::path out) : out_(std::move(out)) {}

  const std::filesystem::path& out() const { return out_; }
  std::filesystem::path iteration_dir(int iteration) const;
  std::filesystem::path samples_dir(int iteration) const { return iteration_dir(iteration) / "samples"; }
  std::filesystem::path scored_dir(int iteration) const { return iteration_dir(iteration) / "scored"; }
  // "generate", "score", "train" -> iter-000N/<stage>.stats.json
  std::filesystem::path stats_file(int iteration, std::string_view stage) const;
  // "actor" -> iter-000N/actor.h5
  std::filesystem::path checkpoint(int iteration, std::string_view model) const;
  // braid-generate --overcommit's samples left out of the iteration's batch, resumed by the next.
  std::filesystem::path deferred_file(int iteration) const { return iteration_dir(iteration) / "deferred.h5"; }
  std::filesystem::path iteration_metrics(int iteration) const { return iteration_dir(iteration) / "metrics.json"; }
  std::filesystem::path metrics_file() const { return out_ / "metrics.jsonl"; }
  std::filesystem::path eval_file(int iteration) const { return iteration_dir(iteration) / "eval.json"; }
  std::filesystem::path ablation_file(int iteration) const { return iteration_dir(iteration) / "ablation.json"; }
  std::filesystem::path report_json() const { return out_ / "report.json"; }
  std::filesystem::path report_svg() const { return out_ / "report.svg"; }
  // braid data's files of a run with a field map or a held-out split: "train", "heldout"
  // -> OUT/data/<name>.jsonl.
  std::filesystem::path data_file(std::string_view name) const;

 private:
  std::filesystem::path out_;
};

// Iteration i's scored shards (scored_dir's scored-*.h5), sorted: what its training reads.
std::vector<std::filesystem::path> scored_shards(const Layout& layout, int iteration);

// The files a checkpoint spec stands for: the file itself, else its stage files
// "x.stage<i>-of-<S>.h5", else every tp rank's "x.tp<r>-of-<N>[.stage..].h5" (as
// checkpoint::checkpoint_files finds them); empty when they are not all there.
std::vector<std::filesystem::path> checkpoint_files_of(const std::filesystem::path& spec);
inline bool checkpoint_present(const std::filesystem::path& spec) { return !checkpoint_files_of(spec).empty(); }

// The files a checkpoint of `stages` pipeline stages is written as: the file itself for
// one stage, else "x.stage<i>-of-<S>.h5" (checkpoint::stage_path's names).
std::vector<std::filesystem::path> stage_files(const std::filesystem::path& checkpoint, int stages);

// The AdamW state braid-train keeps beside a checkpoint: "x.h5" -> "x.optim.h5".
std::filesystem::path optimizer_path(const std::filesystem::path& checkpoint);

}  // namespace braid::driver
