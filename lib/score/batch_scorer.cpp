#include "score/batch_scorer.hpp"

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "score/advantages.hpp"

#include <fmt/format.h>

#include <chrono>
#include <stdexcept>

namespace braid::score {

const char* to_string(Algorithm a) { return a == Algorithm::ppo ? "ppo" : "grpo"; }

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
  if (settings.algorithm == Algorithm::ppo && models.critic == nullptr) {
    throw std::invalid_argument("BatchScorer: PPO needs a critic");
  }
  if (settings.kl_coef != 0.0 && (models.ref == nullptr || settings.algorithm != Algorithm::ppo)) {
    throw std::invalid_argument("BatchScorer: a KL penalty needs PPO and a reference model");
  }
  if (models.ref) ref_ = std::make_unique<ReferencePass>(*models.ref, settings.micro_tokens);
  if (models.critic && settings.algorithm == Algorithm::ppo) {
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

rl::PpoAdvantageSummary BatchScorer::score(io::SampleBatch& b, const std::string& file, const std::string& prompts) {
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
  if (settings_.algorithm == Algorithm::ppo) {
    return ppo_advantages(b, {.kl_coef = settings_.kl_coef, .gamma = settings_.gamma, .lambda = settings_.lambda});
  }
  return {};
}

PassTiming BatchScorer::ref_timing() const { return ref_ ? ref_->timing() : PassTiming{}; }
PassTiming BatchScorer::critic_timing() const { return critic_ ? critic_->timing() : PassTiming{}; }
PassTiming BatchScorer::reward_timing() const { return reward_ ? reward_->timing() : rule_timing_; }

}  // namespace braid::score
