// What braid-train ppo|grpo needs from the models it trains, whichever engine trains
// them: the single process (train/commands.cpp) or the fused pipeline under mpirun
// (train/pipeline_command.cpp). run_rl is the one driver over either: validation,
// reading the shards, the advantages, the loop, the outputs and the stats.
#pragma once

#include "backend/backend.hpp"
#include "io/sample_batch.hpp"
#include "model/config.hpp"
#include "core/json.hpp"
#include "train/engine.hpp"
#include "train/optimizer_state.hpp"
#include "train/options.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace braid::train {

class RlSession {
 public:
  virtual ~RlSession() = default;
  // Whether this process reports: the stdout listing and the --stats file.
  virtual bool lead() const = 0;
  // Every output already there, made as this command makes it (made_from: the actor's
  // record, then the critic's; train_outputs.hpp, outputs_already_made): logged and listed.
  virtual bool already_done(const std::vector<ordered_json>& made_from, bool force) = 0;
  // Builds the engine, each model's AdamW state from its source (the actor's, then the critic's).
  virtual void prepare(const std::vector<StateSource>& states) = 0;
  // The configs the samples must fit (actor, and the critic for PPO).
  virtual std::vector<model::ModelConfig> configs() const = 0;
  virtual std::int64_t actor_step() const = 0;
  // The actor's per-token logprobs of b before any update (as rl::reference_logprobs
  // lays them out): truncated importance sampling's proximal policy. UsageError where the
  // session holds no whole actor.
  virtual std::vector<float> actor_logprobs(const io::SampleBatch& b) = 0;
  virtual std::string describe() const = 0;     // "one process" / "fused pipeline over 2 ranks (...)"
  virtual TrainingEngine& engine() = 0;
  virtual backend::Backend& backend() = 0;   // where the models live
  // Writes the new checkpoints (step + 1) with their optimizer state and records; the lead lists the files.
  virtual void save(const std::string& created_by, const std::vector<ordered_json>& made_from) = 0;
};

// The fused pipeline's session (under mpirun; train/pipeline_command.cpp).
std::unique_ptr<RlSession> make_fused_session(const RlCommand& c);

}  // namespace braid::train
