// braid-train sft, rm and dpo: JSON Lines of text through the tokenizer into one model.
#include "train/commands.hpp"

#include "backend/registry.hpp"
#include "checkpoint/adapters.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "data/text_examples.hpp"
#include "rl/reference_logprobs.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/command_steps.hpp"
#include "train/objectives.hpp"
#include "train/train_inputs.hpp"

#include <fmt/format.h>

#include <cmath>
#include <functional>

namespace braid::train {

namespace {

using namespace steps;

enum class TextMode { sft, rm, dpo };

// What a mode adds between reading its data and training: the objective, and for DPO the
// reference logprobs laid into the batch.
using PrepareObjective = std::function<std::unique_ptr<Objective>(Trainee& t, backend::Backend& be, io::SampleBatch& batch,
                                                                  const TrainingRanks& ranks)>;

const char* mode_name(TextMode mode) { return mode == TextMode::sft ? "sft" : mode == TextMode::rm ? "rm" : "dpo"; }

// What makes the output: the options, the model, the data (its content, or unknown when
// read from stdin), the tokenizer and DPO's reference.
io::MadeFrom text_record(const TextCommand& c, TextMode mode, const std::string& ref) {
  io::MadeFrom m = command_record(mode_name(mode), c.common);
  checkpoint::add_checkpoint_input(m, "model", c.model);
  m.add_input_path("data", c.data);
  m.add_tokenizer(c.tokenizer);
  if (!ref.empty()) checkpoint::add_checkpoint_input(m, "ref", ref);
  return m;
}

// before_training: DPO's reference pass, for the device-memory check. ref: DPO's --ref.
int run_text(const TextCommand& c, TextMode mode, const PrepareObjective& prepare,
             const std::function<memory::Prediction(const backend::Backend&)>& before_training = {},
             const std::string& ref = "") {
  const auto t0 = Clock::now();
  check_common(c.common);
  const tok::ChatDefaults chat = tok::chat_defaults(c.tools, c.chat_template_kwargs);
  check_output_folders({c.model_out, c.common.stats});
  TrainingRanks ranks(c.common.data_parallel, c.common.tp);   // under mpirun: devices x tp (train/ranks.hpp)
  ranks.require_named_inputs({c.data}, "data file");
  const bool policy = mode != TextMode::rm;
  auto be = backend::make_backend(c.common.device, c.common.threads);
  ranks.use_device(*be);
  const ObjectiveKind kind = mode == TextMode::sft ? ObjectiveKind::sft
                             : mode == TextMode::rm ? ObjectiveKind::pairwise
                                                    : ObjectiveKind::dpo;
  const auto predicted =
      require_device_memory(*be, c.common, {{c.model, policy ? "policy" : "reward model", kind}}, before_training);
  Trainee t{open_for_ranks(c.model, *be, policy, !policy, c.common, ranks), nullptr, nullptr, c.model, c.model_out,
            policy ? "actor_train" : "reward_train"};
  t.state = optimizer_state_source(c.common.optimizer_state, mode_name(mode), c.model,
                                   fresh_adapters(c.common, c.model, !policy));
  t.made_from = output_record(text_record(c, mode, ref), policy ? "actor" : "reward", t.state);
  std::vector<Trainee*> trainees{&t};
  if (already_done(trainees, ranks, c.common.force)) return 0;
  const auto tok = tok::load_tokenizer(c.tokenizer);
  const auto& cfg = t.opened.model->config();
  if (tok->vocab_size() > cfg.vocab_size) {
    throw UsageError(fmt::format("the tokenizer ({}) has {} tokens, the model's vocabulary only {}", tok->describe(),
                                 tok->vocab_size(), cfg.vocab_size));
  }
  const bool pairs = mode != TextMode::sft;
  io::SampleBatch batch =
      pairs ? data::read_preference_jsonl(c.data, *tok, cfg.vocab_size, cfg.max_position_embeddings, c.tokenizer, chat)
            : data::read_sft_jsonl(c.data, *tok, cfg.vocab_size, cfg.max_position_embeddings, c.tokenizer, chat);
  log::info("{} {} from {}, {} tokens; {}", pairs ? batch.size() / 2 : batch.size(), pairs ? "pairs" : "examples", c.data,
            batch.token_count(), ranks.describe());
  const std::size_t group = pairs ? 2 : 1;
  attach(t, prepare(t, *be, batch, ranks), trainer_options(c.common, c.common.lr, group, ranks.comm()));
  TrainerEngine engine = engine_of(trainees);
  const auto records = run_loop(batch, engine, loop_options(c.common, group), c.common);
  log_device_peak(*be, predicted);
  save_all(trainees, c.common.created_by, ranks);
  if (ranks.lead()) write_stats(c.common, t0, batch, records);
  return 0;
}

backend::DpoLoss dpo_loss_kind(const std::string& name) {
  if (name == "sigmoid") return backend::DpoLoss::sigmoid;
  if (name == "ipo") return backend::DpoLoss::ipo;
  throw UsageError(fmt::format("--dpo-loss is sigmoid or ipo, not {}", name));
}

// DPO's reference pass before training: the policy resident, and the reference (--ref, or
// the policy itself) run over micro-batches of up to --micro-tokens tokens
// (rl/reference_logprobs.cpp: inference activations, the LM head's chunk, targets and
// logprobs).
memory::Prediction dpo_reference_memory(const backend::Backend& be, const DpoCommand& c) {
  const CommonTrainOptions& o = c.text.common;
  const memory::ModelSpec policy = memory::peek_checkpoint(c.text.model, "policy", o.dtype);
  memory::Prediction p = memory::model_bytes(policy);
  memory::ScoredModel ref{.model = c.ref.empty() ? policy : memory::peek_checkpoint(c.ref, "reference", o.dtype),
                          .lm_head_chunk_rows = memory::lm_head_chunk_rows(be, policy.config),
                          .output_rows = 2,
                          .count_model = !c.ref.empty()};
  if (c.ref.empty()) ref.model.role = "reference pass";
  p.append(memory::predict_scoring({ref}, {.tokens = o.micro_tokens, .sequences = o.micro_tokens}));
  return p;
}

}  // namespace

int run_sft(const TextCommand& c) {
  return run_text(c, TextMode::sft, [](Trainee&, backend::Backend&, io::SampleBatch&, const TrainingRanks&) {
    return std::make_unique<SftObjective>();
  });
}

int run_rm(const TextCommand& c) {
  return run_text(c, TextMode::rm, [](Trainee&, backend::Backend&, io::SampleBatch&, const TrainingRanks&) {
    return std::make_unique<PairwiseRewardObjective>();
  });
}

int run_dpo(const DpoCommand& c) {
  DpoObjectiveOptions opt;
  opt.loss.loss = dpo_loss_kind(c.loss);
  if (!(c.beta > 0) || !std::isfinite(c.beta)) throw UsageError(fmt::format("--beta must be > 0, not {}", c.beta));
  opt.loss.beta = c.beta;
  opt.length_normalize = c.length_normalize;
  return run_text(c.text, TextMode::dpo, [&](Trainee& t, backend::Backend& be, io::SampleBatch& batch, const TrainingRanks& ranks) {
    // π_ref: the --ref checkpoint, or the policy's own weights before its first update.
    const auto t_ref = Clock::now();
    std::string from = c.text.model;
    std::int64_t step = t.opened.step;
    if (c.ref.empty()) {
      // Under LoRA the reference is the base: the policy with its adapters off.
      model::Model& policy = *t.opened.model;
      const bool adapted = policy.adapters_enabled();
      policy.set_adapters_enabled(false);
      batch.logprobs_ref = rl::reference_logprobs(policy, batch.tokens, batch.offsets, c.text.common.micro_tokens);
      policy.set_adapters_enabled(true);
      if (adapted) from = t.opened.base.string() + " (the base, adapters off)";
    } else {
      const checkpoint::OpenedModel ref = open_for_ranks(c.ref, be, true, false, c.text.common, ranks, false);
      const std::int32_t vocab = t.opened.model->config().vocab_size;
      if (ref.model->config().vocab_size != vocab) {
        throw InputError(c.ref, "vocab_size",
                         fmt::format("is {}, the policy's ({}) {}: a reference must share the policy's vocabulary",
                                     ref.model->config().vocab_size, c.text.model, vocab));
      }
      check_sequences_fit(batch, 0, ref.model->config(), c.text.data, "reference");
      batch.logprobs_ref = rl::reference_logprobs(*ref.model, batch.tokens, batch.offsets, c.text.common.micro_tokens);
      from = c.ref;
      step = ref.step;
    }
    log::info("reference logprobs of {} sequences from {} (step {}) in {:.2f} s", batch.size(), from, step,
              std::chrono::duration<double>(Clock::now() - t_ref).count());
    return std::make_unique<DpoObjective>(opt);
  }, [&](const backend::Backend& be) { return dpo_reference_memory(be, c); }, c.ref);
}

}  // namespace braid::train
