#include "score/batch_scorer.hpp"

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "score/advantages.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace braid::score {

BatchScorer::BatchScorer(const ScoreModels& models, const ScoreSettings& settings)
    : models_(models), settings_(settings) {
  if (int(models.reward != nullptr) + int(models.rule != nullptr) + int(models.text != nullptr) != 1) {
    throw std::invalid_argument("BatchScorer: give exactly one of a reward model, a reward rule and a text reward");
  }
  if (models.reward == nullptr && models.tokenizer == nullptr) {
    throw std::invalid_argument("BatchScorer: a reward rule needs a tokenizer to decode responses");
  }
  if (models.rule) wrapped_rule_ = wrap_rule_reward(*models.rule);
  text_ = models.rule ? wrapped_rule_.get() : models.text;
  if (settings.uses_critic() && models.critic == nullptr) {
    throw std::invalid_argument("BatchScorer: PPO needs a critic");
  }
  if (settings.kl_coef != 0.0 && models.ref == nullptr) {
    throw std::invalid_argument("BatchScorer: a KL penalty needs a reference model");
  }
  if (models.ref) ref_ = std::make_unique<ReferencePass>(*models.ref, settings.micro_tokens);
  if (models.critic && settings.uses_critic()) {
    critic_ = std::make_unique<ValuePass>(*models.critic, settings.micro_tokens);
  }
  if (models.reward) reward_ = std::make_unique<RewardModelPass>(*models.reward, settings.micro_tokens);
}

void BatchScorer::check(const io::SampleBatch& b, const std::string& file) const {
  if (!b.logprobs_actor) {
    throw InputError(file, "/logprobs/actor",
                     "is missing: scoring needs the generating policy's logprobs (braid-generate writes them)");
  }
  const auto check_model = [&](const model::Model* m, const char* role) {
    if (m == nullptr) return;
    const auto& cfg = m->config();
    for (std::size_t t = 0; t < b.token_count(); ++t) {
      if (b.tokens[t] >= cfg.vocab_size) {
        throw InputError(file, "/tokens",
                         fmt::format("token {} is id {}, outside the {} model's vocabulary of {}", t, b.tokens[t],
                                     role, cfg.vocab_size));
      }
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (static_cast<std::int64_t>(b.length(i)) > cfg.max_position_embeddings) {
        throw InputError(file, "/offsets",
                         fmt::format("sequence {} has {} tokens, more than the {} model's max_position_embeddings {}",
                                     i, b.length(i), role, cfg.max_position_embeddings));
      }
    }
  };
  check_model(models_.ref, "reference");
  check_model(critic_ ? models_.critic : nullptr, "critic");
  check_model(models_.reward, "reward");
}

namespace {

// Past this many, a shard is surely wrong as a whole; listing more only buries the first.
constexpr std::size_t kMaxListed = 20;

std::vector<TextSample> text_samples(const io::SampleBatch& b, const tok::Tokenizer& tokenizer, const std::string& file,
                                     const std::string& prompts) {
  std::vector<TextSample> out(b.size());
  const std::string shard = file.empty() ? "the shard" : file;
  for (std::size_t i = 0; i < b.size(); ++i) {
    TextSample& s = out[i];
    s.sample_id = b.sample_id[i];
    s.prompt = tokenizer.decode(b.prompt(i), /*skip_special=*/true);
    s.response = tokenizer.decode(b.response(i), /*skip_special=*/true);
    if (b.origin) {
      const io::PromptOrigin& o = (*b.origin)[i];
      s.has_origin = true;
      s.extra = json::parse(o.extra);
      if (!prompts.empty() && o.line > 0) {
        s.where = fmt::format("{}:{}", prompts, o.line);
      } else {
        s.where = fmt::format("{}: sample {}{}", shard, s.sample_id, o.line > 0 ? fmt::format(" (prompt line {})", o.line) : "");
      }
    } else {
      s.where = fmt::format("{}: sample {}", shard, s.sample_id);
    }
  }
  return out;
}

}  // namespace

std::string BatchScorer::reward_by() const {
  if (reward_) return "model";
  return text_->config().contains("command") ? "command" : "rule";
}

void BatchScorer::finish() {
  if (text_) text_->finish();
}

float BatchScorer::group_reward(const io::SampleBatch& b, std::size_t i) const {
  const float r = (*b.reward)[i];
  if (settings_.kl_coef == 0.0) return r;
  return static_cast<float>(r - rl::sequence_kl_penalty(b.response_of(*b.logprobs_actor, i),
                                                        b.response_of(*b.logprobs_ref, i), settings_.kl_coef,
                                                        settings_.kl_estimator));
}

double overlong_reward(std::int64_t response_tokens, std::int64_t max_new_tokens, std::int64_t buffer, double factor) {
  const std::int64_t excess = response_tokens - (max_new_tokens - buffer);
  if (buffer <= 0 || excess <= 0) return 0.0;
  return -factor * std::min(1.0, double(excess) / double(buffer));
}

rl::PpoAdvantageSummary BatchScorer::score(io::SampleBatch& b, const std::string& file, const std::string& prompts,
                                           std::int64_t max_new_tokens) {
  std::vector<TextSample> samples;
  if (text_) {
    samples = text_samples(b, *models_.tokenizer, file, prompts);
    auto problems = text_->problems(samples);
    if (!problems.empty()) {
      const std::size_t bad = problems.size();
      if (bad > kMaxListed) {
        problems.resize(kMaxListed);
        problems.push_back(fmt::format("(the first shown; {} in all)", bad));
      }
      throw InputError(file.empty() ? "the shard" : file, std::move(problems));
    }
  }
  if (ref_) b.logprobs_ref = ref_->logprobs(b);
  if (critic_) {
    b.values = critic_->values(b);
  } else {
    b.values.reset();
  }
  if (reward_) {
    b.reward = reward_->rewards(b);
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<double> scores(b.size());
    comm::Communicator* tp = models_.tp_group;
    if (!tp || tp->rank() == 0) scores = text_->score(samples);
    if (scores.size() != b.size()) throw std::logic_error("BatchScorer: a text reward gave the wrong number of rewards");
    if (tp) tp->broadcast(std::span<double>(scores), 0);
    std::vector<float> r(b.size());
    for (std::size_t i = 0; i < b.size(); ++i) {
      r[i] = static_cast<float>(scores[i]);
      rule_timing_.tokens += static_cast<std::int64_t>(b.response_length(i));
    }
    b.reward = std::move(r);
    rule_timing_.sequences += static_cast<std::int64_t>(b.size());
    rule_timing_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const bool shaped = settings_.overlong_buffer > 0 || (settings_.overlong_buffer < 0 && settings_.overlong_fraction > 0);
  if (shaped) {
    const std::int64_t buffer = settings_.overlong_buffer_for(max_new_tokens);
    if (max_new_tokens <= 0 || buffer >= max_new_tokens) {
      throw InputError(file.empty() ? "the shard" : file, "attribute config",
                       max_new_tokens <= 0
                           ? std::string("does not say the generation's max_new_tokens, which the overlong reward "
                                         "shaping counts back from (--overlong-buffer 0 turns it off)")
                           : fmt::format("max_new_tokens is {}: an overlong buffer of {} tokens leaves no length "
                                         "unpenalised (--overlong-buffer)",
                                         max_new_tokens, buffer));
    }
    // A fraction of a short cap can round to no buffer: no shaping then.
    for (std::size_t i = 0; buffer > 0 && i < b.size(); ++i) {
      (*b.reward)[i] += static_cast<float>(overlong_reward(static_cast<std::int64_t>(b.response_length(i)),
                                                           max_new_tokens, buffer, settings_.overlong_penalty));
    }
  }
  if (settings_.grouped()) return {};
  // GAE over the critic's values, or (returns-to-go) over none with λ = 1.
  return ppo_advantages(b, {.kl_coef = settings_.kl_coef,
                            .gamma = settings_.gamma,
                            .lambda = settings_.uses_critic() ? settings_.lambda : 1.0,
                            .kl_estimator = settings_.kl_estimator});
}

PassTiming BatchScorer::ref_timing() const { return ref_ ? ref_->timing() : PassTiming{}; }
PassTiming BatchScorer::critic_timing() const { return critic_ ? critic_->timing() : PassTiming{}; }
PassTiming BatchScorer::reward_timing() const { return reward_ ? reward_->timing() : rule_timing_; }

}  // namespace braid::score
