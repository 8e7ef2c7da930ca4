#include "train/command_steps.hpp"

#include "core/error.hpp"
#include "core/files.hpp"
#include "checkpoint/adapters.hpp"
#include "checkpoint/optimizer_state.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "core/units.hpp"
#include "train/objectives.hpp"
#include "train/optimizer_state.hpp"
#include "train/train_outputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include <unistd.h>

namespace braid::train::steps {

optim::LrSchedule lr_schedule(const CommonTrainOptions& c, double peak) {
  using Kind = optim::LrSchedule::Kind;
  const Kind kind = c.lr_schedule == "cosine" ? Kind::cosine : c.lr_schedule == "linear" ? Kind::linear : Kind::constant;
  return {.peak_lr = peak, .min_lr = kind == Kind::constant ? peak : (c.lr > 0 ? c.min_lr * (peak / c.lr) : 0.0),
          .warmup_steps = c.warmup_steps, .total_steps = c.total_steps, .kind = kind};
}

TrainerOptions trainer_options(const CommonTrainOptions& c, double lr, std::size_t group, comm::Communicator* dp) {
  TrainerOptions t;
  t.data_parallel.comm = dp;
  t.adamw.max_grad_norm = c.max_grad_norm;
  t.adamw.weight_decay = c.weight_decay;
  t.lr = lr_schedule(c, lr);
  t.micro = {.max_tokens = c.micro_tokens, .max_sequences = 0, .group = group};
  t.recompute = c.recompute;
  t.seed = c.seed;
  return t;
}

LoopOptions loop_options(const CommonTrainOptions& c, std::size_t group) {
  return {.epochs = c.epochs, .mini_batch = c.mini_batch * group, .seed = c.seed, .group = group};
}

checkpoint::OpenedModel open_for_ranks(const std::string& spec, backend::Backend& be, bool need_lm_head,
                                          bool need_value_head, const CommonTrainOptions& c, const TrainingRanks& ranks,
                                          bool trained) {
  ranks.require_splits(spec);
  const bool adapter_file = checkpoint::read_adapter_file(spec).has_value();
  if (!trained && adapter_file) {
    throw InputError(spec, "kind", "is a LoRA adapter file: name its base, or the adapters merged (braid export --merge)");
  }
  checkpoint::OpenedModel out = checkpoint::open_model(spec, be, {}, need_lm_head, need_value_head, c.dtype, ranks.tp(),
                                                       trained ? trained_lora(c, need_value_head) : model::LoraOptions{});
  // Fresh adapters: A seeded by --seed, B zero.
  if (trained && c.lora.enabled() && !adapter_file) out.model->init_adapters(c.seed);
  return out;
}

void load_state(optim::AdamW& opt, const model::Model& m, const std::string& call, const StateSource& state) {
  if (!state.state) {
    log::info("{}: {}", call, state.why);
    return;
  }
  if (!load_optimizer_state_file(opt, m, *state.state)) {
    throw InputError(state.state->string(), "", "optimizer state is not there");
  }
  log::info("{}: optimizer state loaded (step {}): {}", call, opt.steps_taken(), state.why);
}

void attach(Trainee& t, std::unique_ptr<Objective> obj, const TrainerOptions& opt) {
  t.objective = std::move(obj);
  t.trainer = std::make_unique<Trainer>(*t.opened.model, *t.objective, opt);
  load_state(t.trainer->optimizer(), *t.opened.model, t.call, t.state);
  const optim::AdamW& adamw = t.trainer->optimizer();
  if (adamw.dp_size() > 1) {
    const double mib = 1.0 / (1024.0 * 1024.0);
    log::info("{}: optimizer state sharded over {} ranks: {:.2f} MiB on this rank ({} of {} parameters), {:.2f} MiB "
              "unsharded",
              t.call, adamw.dp_size(), double(adamw.state_bytes()) * mib, adamw.shard_size(), adamw.parameter_count(),
              double(adamw.parameter_count()) * (t.opened.model->dtype() == backend::DType::f32 ? 8.0 : 12.0) * mib);
  }
}

TrainerEngine engine_of(const std::vector<Trainee*>& trainees) {
  std::vector<NamedTrainer> named;
  for (Trainee* t : trainees) named.push_back({t->call, t->trainer.get()});
  return TrainerEngine(std::move(named));
}

std::vector<CallRecord> run_loop(const io::SampleBatch& batch, TrainingEngine& engine, const LoopOptions& loop,
                                 const CommonTrainOptions& c) {
  const auto calls = static_cast<std::int64_t>(engine.calls().size());
  const std::int64_t call_steps = steps_per_call(batch.size(), loop);
  if (c.lr_schedule != "constant") {
    if (c.total_steps == 0) engine.set_lr_steps_left(call_steps * c.lr_calls);
    log::info("learning rate: {} warmup steps, then {} decay to {:g} by {}", c.warmup_steps, c.lr_schedule, c.min_lr,
              c.total_steps > 0 ? fmt::format("optimizer step {}", c.total_steps)
                                : fmt::format("{} more steps ({} calls of {})", call_steps * c.lr_calls, c.lr_calls,
                                              call_steps));
  }
  const auto total = static_cast<std::uint64_t>(call_steps * calls);
  Progress progress("training", total, "step");
  auto records = train_epochs(batch, engine, loop, [&](const std::string& call, const StepStats& s) {
    progress.advance(1);
    progress.set_status(fmt::format("{} loss {:.4g} |g| {:.3g}", call, s.loss, s.grad_norm));
    log::debug("{} step: loss {:.6g}, grad norm {:.4g}, {} tokens in {} micro-batches, {:.3f} s", call, s.loss,
               s.grad_norm, s.tokens, s.micro_batches, s.seconds);
  });
  progress.finish();
  for (const auto& r : records) {
    log::info("{}: {} steps, {} tokens in {:.2f} s ({:.0f} tokens/s), last loss {:.5g}", r.call, r.steps.size(), r.tokens,
              r.seconds, r.seconds > 0 ? double(r.tokens) / r.seconds : 0.0,
              r.steps.empty() ? 0.0 : r.steps.back().loss);
  }
  return records;
}

namespace {

// The files of a trainee's checkpoint: every tp rank's, or the one adapter file of a LoRA run
// (whole at any tp: train_outputs.hpp).
std::vector<std::filesystem::path> weight_files(const Trainee& t, const TrainingRanks& ranks) {
  if (t.opened.model->options().lora.enabled()) return {t.out};
  return ranks.files(t.out);
}

}  // namespace

void save_all(const std::vector<Trainee*>& trainees, const std::string& created_by, const TrainingRanks& ranks) {
  // All or nothing: every model's weights are checked before any file is written, and the
  // files appear together (a critic that diverged, or a disk that fills on its state,
  // leaves the new actor unwritten too).
  for (Trainee* t : trainees) {
    const model::TensorParallel& tp = t->opened.model->tensor_parallel();
    checkpoint::require_finite_weights(*t->opened.model, checkpoint::tp_path(t->out, tp.rank, tp.size),
                                       t->opened.step + 1);
  }
  CommitGroup outputs;
  std::vector<std::vector<std::filesystem::path>> saved;
  for (Trainee* t : trainees) {
    saved.push_back(save_checkpoint(*t->opened.model, t->trainer->optimizer(), t->out,
                                    {.step = t->opened.step + 1, .created_by = created_by,
                                     .config_json = t->opened.config_json, .made_from = t->made_from.dump(),
                                     .base = t->opened.base},
                                    ranks.writes_checkpoints()));
  }
  outputs.commit();
  for (std::size_t i = 0; i < trainees.size() && ranks.lead(); ++i) {
    const Trainee* t = trainees[i];
    log::info("{}: wrote {} (step {}) and {}{}", t->call, saved[i][0].string(), t->opened.step + 1,
              saved[i][1].string(),
              ranks.tp().size > 1 ? fmt::format(", and the slices of the other {} tp ranks", ranks.tp().size - 1) : "");
  }
  // Every tp rank's files exist before the lead names them.
  ranks.barrier();
  if (!ranks.lead()) return;
  for (Trainee* t : trainees) {
    const auto files = weight_files(*t, ranks);
    auto written = files;
    for (const auto& f : ranks.files(checkpoint::optimizer_state_path(t->out))) written.push_back(f);
    // A name written before in another layout (a whole file beside these tp files, stage
    // files of an earlier --schedule run) would be what the next reader loads.
    remove_other_layouts(t->out, written);
    for (const auto& f : files) std::cout << path_line(f.string()) << std::endl;
  }
}

void write_stats(const CommonTrainOptions& c, Clock::time_point t0, const io::SampleBatch& batch,
                 const std::vector<CallRecord>& records, const ordered_json& extra) {
  if (c.stats.empty()) return;
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  json doc = train_stats_json(wall, static_cast<std::int64_t>(batch.size()), static_cast<std::int64_t>(batch.token_count()),
                              records);
  for (const auto& [key, value] : extra.items()) doc[key] = json::parse(value.dump());
  write_text_file(c.stats, doc.dump(2) + "\n");
}

io::MadeFrom command_record(const std::string& mode, const CommonTrainOptions& c) {
  io::MadeFrom m("braid-train " + mode);
  m.set_options(c.option_values, c.options_given);
  return m;
}

model::LoraOptions trained_lora(const CommonTrainOptions& c, bool value_head) {
  model::LoraOptions lora = c.lora;
  lora.value_head = lora.enabled() && value_head;
  return lora;
}

model::LoraOptions fresh_adapters(const CommonTrainOptions& c, const std::string& spec, bool value_head) {
  return c.lora.enabled() && !checkpoint::read_adapter_file(spec) ? trained_lora(c, value_head) : model::LoraOptions{};
}

ordered_json output_record(io::MadeFrom record, const std::string& role, const StateSource& state) {
  if (state.state) {
    record.add_input("optimizer_state", checkpoint::checkpoint_files(*state.state));
  } else {
    record.add_input_value("optimizer_state", "fresh");
  }
  record.set_output(role);
  return record.to_json();
}

bool already_done(const std::vector<Trainee*>& trainees, const TrainingRanks& ranks, bool force) {
  std::vector<PlannedOutput> outputs;
  std::vector<std::filesystem::path> inputs;
  for (const Trainee* t : trainees) {
    outputs.push_back({t->out, t->made_from});
    inputs.emplace_back(t->spec);
  }
  const bool complete = outputs_already_made(outputs, inputs, force);
  if (!ranks.all(complete)) return false;
  if (!ranks.lead()) return true;
  for (const Trainee* t : trainees) {
    log::info("{}: {} is already complete (step {}), made from the same inputs and options: skipped", t->call, t->out,
              t->opened.step + 1);
    for (const auto& f : weight_files(*t, ranks)) std::cout << path_line(f.string()) << std::endl;
  }
  return true;
}

void check_common(const CommonTrainOptions& c) {
  if (c.micro_tokens < 1) throw UsageError("--micro-tokens must be at least 1");
  try {
    model::check_lora(c.lora);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--lora-*: {}", e.what()));
  }
  if (c.recompute < 0) throw UsageError("--recompute must be >= 0 (0: keep every layer's activations)");
  if (c.epochs < 1) throw UsageError("--epochs must be at least 1");
  if (c.stats == "-") throw UsageError("--stats cannot be stdout (stdout lists the checkpoints written)");
  if (c.lr_schedule != "constant" && c.lr_schedule != "cosine" && c.lr_schedule != "linear") {
    throw UsageError(fmt::format("--lr-schedule is constant, cosine or linear, not {}", c.lr_schedule));
  }
  if (c.warmup_steps < 0) throw UsageError("--warmup-steps must be >= 0");
  if (!(c.min_lr >= 0) || !(c.min_lr <= c.lr)) {
    throw UsageError(fmt::format("--min-lr must lie in [0, --lr {}], not {}", c.lr, c.min_lr));
  }
  if (c.total_steps < 0) throw UsageError("--total-steps must be >= 0 (0: from --lr-calls)");
  if (c.lr_calls < 1) throw UsageError("--lr-calls must be at least 1");
  // An option given where nothing reads it is refused, naming it (the option audit,
  // tests/audit/option_effects.tsv).
  const auto given = [&](const std::string& name) {
    return std::find(c.options_given.begin(), c.options_given.end(), name) != c.options_given.end();
  };
  for (const char* name : {"--min-lr", "--total-steps", "--lr-calls"}) {
    if (c.lr_schedule == "constant" && given(name)) {
      throw UsageError(fmt::format("{}: the learning rate is constant (--lr-schedule constant) and has no decay to "
                                   "shape: give --lr-schedule cosine or linear, or leave {} out",
                                   name, name));
    }
  }
  for (const char* name : {"--lora-alpha", "--lora-dropout", "--rslora", "--lora-targets"}) {
    if (!c.lora.enabled() && given(name)) {
      throw UsageError(fmt::format("{}: shapes fresh LoRA adapters, which only --lora-rank R > 0 makes (an adapter "
                                   "file given as the model keeps its own): leave {} out or give --lora-rank",
                                   name, name));
    }
  }
}

namespace {

memory::TrainedModel trained_model(const backend::Backend& be, const TrainedCheckpoint& t, const CommonTrainOptions& c) {
  const bool value_head = t.kind == ObjectiveKind::value || t.kind == ObjectiveKind::pairwise;
  memory::TrainedModel m{.model = memory::peek_checkpoint(t.checkpoint, t.role, c.dtype, trained_lora(c, value_head))};
  // The objectives' LM-head chunk: their option, or the backend's default when 0.
  auto chunk = [&](std::int64_t asked) { return asked > 0 ? asked : memory::lm_head_chunk_rows(be, m.model.config); };
  // The per-token device arrays (DeviceRows) of each objective in train/objectives.hpp;
  // an int64 array of pairs or sequence offsets counts as the rows it spans in f32.
  switch (t.kind) {
    case ObjectiveKind::policy:   // targets, old, adv, ref, weight, logprob, entropy, d_logprob, d_entropy
      m.lm_head_chunk_rows = chunk(PolicyObjectiveOptions{}.head_chunk_rows);
      m.loss_rows = 9;
      break;
    case ObjectiveKind::value:    // old, returns, weight, values, d_values
      m.loss_rows = 5;
      break;
    case ObjectiveKind::pairwise: // values, d_values, chosen and rejected (int64, a pair each)
      m.loss_rows = 4;
      break;
    case ObjectiveKind::sft:      // targets, weight, logprob, d_logprob (SftObjective's chunk: the same default)
      m.lm_head_chunk_rows = chunk(PolicyObjectiveOptions{}.head_chunk_rows);
      m.loss_rows = 4;
      break;
    case ObjectiveKind::dpo:      // targets, ref, weight, logprob, d_logprob, sequence offsets (int64)
      m.lm_head_chunk_rows = chunk(DpoObjectiveOptions{}.head_chunk_rows);
      m.loss_rows = 7;
      break;
  }
  return m;
}

std::vector<memory::TrainedModel> trained_models(const backend::Backend& be, const CommonTrainOptions& c,
                                                 const std::vector<TrainedCheckpoint>& trained) {
  std::vector<memory::TrainedModel> models;
  for (const TrainedCheckpoint& t : trained) models.push_back(trained_model(be, t, c));
  return models;
}

}  // namespace

memory::Prediction training_memory(const backend::Backend& be, const CommonTrainOptions& c,
                                   const std::vector<TrainedCheckpoint>& trained) {
  return memory::predict_training(trained_models(be, c, trained), c.micro_tokens, c.recompute);
}

std::optional<memory::Prediction> require_device_memory(const backend::Backend& be, const CommonTrainOptions& c,
                                                        const std::vector<TrainedCheckpoint>& trained,
                                                        const std::function<memory::Prediction(const backend::Backend&)>& before_training) {
  if (!be.device_memory()) return std::nullopt;
  const std::vector<memory::TrainedModel> models = trained_models(be, c, trained);
  memory::Prediction p = memory::predict_training(models, c.micro_tokens, c.recompute);
  if (before_training) {
    memory::Prediction before = before_training(be);
    if (before.total() > p.total()) p = std::move(before);
  }
  std::uint64_t per_token = 0;
  for (const memory::TrainedModel& m : models) {
    per_token += memory::activation_bytes(m.model.config, m.model.options,
                                          {.max_tokens = 1, .max_sequences = 1, .training = true,
                                           .recompute = c.recompute});
  }
  std::string advice = fmt::format("Lower --micro-tokens (now {}; the activations take about {} a token)",
                                   c.micro_tokens, gib(per_token));
  if (c.dtype != backend::DType::bf16) advice += ", or store the weights in bf16 (--dtype bf16)";
  if (c.recompute != 1) advice += ", or recompute every layer's activations in the backward (--recompute 1)";
  memory::require_fits(p, be, c.device, advice);
  return p;
}

void log_device_peak(backend::Backend& be, const std::optional<memory::Prediction>& predicted) {
  if (predicted) memory::log_peak(be, *predicted);
}

void check_output_folders(const std::vector<std::string>& outputs) {
  for (const auto& out : outputs) {
    if (out.empty()) continue;
    const std::filesystem::path p(out);
    const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      throw UsageError(fmt::format("{}: its folder {} does not exist", out, dir.string()));
    }
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      throw UsageError(fmt::format("{}: its folder {} is not writable", out, dir.string()));
    }
  }
}

}  // namespace braid::train::steps
