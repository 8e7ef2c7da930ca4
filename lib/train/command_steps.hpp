// The steps every braid-train mode shares: a model with its trainer and optimizer
// state, the loop with progress and logs, the outputs and the stats file.
#pragma once

#include "checkpoint/checkpoint.hpp"
#include "core/json.hpp"
#include "io/fingerprint.hpp"
#include "memory/prediction.hpp"
#include "train/commands.hpp"
#include "train/ranks.hpp"
#include "train/objective.hpp"
#include "train/optimizer_state.hpp"
#include "train/trainer.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace braid::train::steps {

using Clock = std::chrono::steady_clock;

// The learning rate of a model whose peak is `peak` (--lr, or PPO's --critic-lr) under the
// schedule of c (--lr-schedule, --warmup-steps, --min-lr scaled by peak / --lr,
// --total-steps); run_loop sets the end from --lr-calls when --total-steps is 0.
optim::LrSchedule lr_schedule(const CommonTrainOptions& c, double peak);
// dp: the data-parallel ranks (nullptr: this process alone); the model's tp group is its own.
TrainerOptions trainer_options(const CommonTrainOptions& c, double lr, std::size_t group,
                               comm::Communicator* dp = nullptr);
LoopOptions loop_options(const CommonTrainOptions& c, std::size_t group);

// A checkpoint a mode reads (a model to train, DPO's reference), opened at this rank's
// tp slice (ranks.tp()): InputError first when its model does not split that many ways.
// A trained model gets the LoRA adapters of c.lora (fresh ones, A seeded by --seed; with
// need_value_head its value head trained beside them: trained_lora) or those of the adapter
// file it names; a model only read (trained = false) gets none.
checkpoint::OpenedModel open_for_ranks(const std::string& spec, backend::Backend& be, bool need_lm_head,
                                          bool need_value_head, const CommonTrainOptions& c, const TrainingRanks& ranks,
                                          bool trained = true);

// A model opened from a checkpoint with its trainer, its optimizer state from `state`,
// and the record its output gets (made_from).
struct Trainee {
  checkpoint::OpenedModel opened;
  std::unique_ptr<Objective> objective;
  std::unique_ptr<Trainer> trainer;
  std::string spec, out, call;
  StateSource state = {};
  ordered_json made_from = ordered_json::object();
};
void attach(Trainee& t, std::unique_ptr<Objective> obj, const TrainerOptions& opt);
// Logs where a model's AdamW state comes from, and loads it (into opt, built over m).
void load_state(optim::AdamW& opt, const model::Model& m, const std::string& call, const StateSource& state);

// The record of what makes this command's outputs (io/fingerprint.hpp): "braid-train MODE"
// and the options; the caller adds the inputs.
io::MadeFrom command_record(const std::string& mode, const CommonTrainOptions& c);
// The LoRA options of a trained model: c.lora, and for a model whose value head is trained (a
// reward model, a critic) that head trained in full beside the adapters (LoraOptions::value_head).
model::LoraOptions trained_lora(const CommonTrainOptions& c, bool value_head);
// The new LoRA adapters a model trained from `spec` gets (trained_lora when spec is no adapter
// file: a base); disabled when it trains no adapters or continues those of an adapter file.
model::LoraOptions fresh_adapters(const CommonTrainOptions& c, const std::string& spec, bool value_head = false);
// One output's record: the command's, with the model's optimizer-state source and the
// output's role ("actor", "critic", "reward").
ordered_json output_record(io::MadeFrom record, const std::string& role, const StateSource& state);

// The trainees' trainers as one engine (after attach).
TrainerEngine engine_of(const std::vector<Trainee*>& trainees);
// train_epochs with progress on stderr and a summary line per call; first, unless
// --total-steps fixed it, the LR schedules' end (c.lr_calls calls of this one's steps).
std::vector<CallRecord> run_loop(const io::SampleBatch& batch, TrainingEngine& engine, const LoopOptions& loop,
                                 const CommonTrainOptions& c);
// New checkpoints (step + 1) with their optimizer state; the weight files on stdout.
// Collective over the ranks: each tp rank of device 0 writes its slice files (LoRA: its
// optimizer state's; the adapter file is whole, written by tp rank 0), the lead lists every
// file once they all exist.
void save_all(const std::vector<Trainee*>& trainees, const std::string& created_by, const TrainingRanks& ranks);
// `extra`'s keys are added to the document's top level ("staleness").
void write_stats(const CommonTrainOptions& c, Clock::time_point t0, const io::SampleBatch& batch,
                 const std::vector<CallRecord>& records, const ordered_json& extra = ordered_json::object());
// A rerun after an interruption: every output already there, made as this command makes it
// (train_outputs.hpp, outputs_already_made; each trainee's made_from): logged, printed
// again by the lead. Collective over the ranks, which all answer alike.
bool already_done(const std::vector<Trainee*>& trainees, const TrainingRanks& ranks, bool force);
void check_common(const CommonTrainOptions& c);

// A checkpoint a call trains, and the objective it trains under (what the objective holds
// beside the model, train/objectives.hpp: an LM-head chunk or none, its per-token arrays).
enum class ObjectiveKind { policy, value, pairwise, sft, dpo };
struct TrainedCheckpoint {
  std::string checkpoint, role;
  ObjectiveKind kind;
};
// The memory of the models trained together on backend `be` (memory::predict_training at
// --micro-tokens, with --dtype, --lora-* and --recompute), from the checkpoints' headers: what
// require_device_memory checks on a GPU, and bench/train/memory_1b.sh prints for the host.
memory::Prediction training_memory(const backend::Backend& be, const CommonTrainOptions& c,
                                   const std::vector<TrainedCheckpoint>& trained);
// Before any model is loaded, on a backend that reports its free memory (a GPU): the device
// memory of the models trained together (memory::predict_training at --micro-tokens), or of
// what runs before training (DPO's reference pass, `before_training`) where that is larger,
// against the free memory. InputError (exit 2) naming each part, the free memory and what to
// change when it will not fit. Returns the prediction checked; nullopt on the CPU, which is
// not checked (and no checkpoint is opened for it).
std::optional<memory::Prediction> require_device_memory(const backend::Backend& be, const CommonTrainOptions& c,
                                                        const std::vector<TrainedCheckpoint>& trained,
                                                        const std::function<memory::Prediction(const backend::Backend&)>& before_training = {});
// The device's peak beside the prediction, at the end of a call (CUDA; nothing elsewhere).
void log_device_peak(backend::Backend& be, const std::optional<memory::Prediction>& predicted);
// Before any work: the folder of every output file ("" skipped) exists and is writable,
// so that a typo fails now (UsageError naming the path) and not after training.
void check_output_folders(const std::vector<std::string>& outputs);

}  // namespace braid::train::steps
