// braid-train sft and rm: JSON Lines of text through the tokenizer into one model.
#include "train/commands.hpp"

#include "backend/registry.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/command_steps.hpp"
#include "train/objectives.hpp"
#include "train/train_inputs.hpp"

#include <fmt/format.h>

namespace braid::train {

namespace {

using namespace steps;

int run_text(const TextCommand& c, bool sft) {
  const auto t0 = Clock::now();
  check_common(c.common);
  check_output_folders({c.model_out, c.common.stats});
  auto be = backend::make_backend(c.common.device, c.common.threads);
  Trainee t{checkpoint::open_model(c.model, *be, {}, sft, !sft, c.common.dtype), nullptr, nullptr, c.model, c.model_out,
            sft ? "actor_train" : "reward_train"};
  std::vector<Trainee*> trainees{&t};
  if (already_done(trainees)) return 0;
  const auto tok = tok::load_tokenizer(c.tokenizer);
  const auto& cfg = t.opened.model->config();
  if (tok->vocab_size() > cfg.vocab_size) {
    throw UsageError(fmt::format("the tokenizer ({}) has {} tokens, the model's vocabulary only {}", tok->describe(),
                                 tok->vocab_size(), cfg.vocab_size));
  }
  const io::SampleBatch batch = sft ? read_sft_jsonl(c.data, *tok, cfg.vocab_size, cfg.max_position_embeddings)
                                    : read_preference_jsonl(c.data, *tok, cfg.vocab_size, cfg.max_position_embeddings);
  log::info("{} {} from {}, {} tokens", sft ? batch.size() : batch.size() / 2, sft ? "examples" : "pairs", c.data,
            batch.token_count());
  const std::size_t group = sft ? 1 : 2;
  std::unique_ptr<Objective> obj;
  if (sft) obj = std::make_unique<SftObjective>();
  else obj = std::make_unique<PairwiseRewardObjective>();
  attach(t, std::move(obj), trainer_options(c.common, c.common.lr, group));
  TrainerEngine engine = engine_of(trainees);
  const auto records = run_loop(batch, engine, loop_options(c.common, group));
  save_all(trainees, c.common.created_by);
  write_stats(c.common, t0, batch, records);
  return 0;
}

}  // namespace

int run_sft(const TextCommand& c) { return run_text(c, true); }
int run_rm(const TextCommand& c) { return run_text(c, false); }

}  // namespace braid::train
