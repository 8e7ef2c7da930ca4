#include "generate/generate.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <stdexcept>

namespace braid::gen {

const char* to_string(FinishReason r) { return r == FinishReason::stop ? "stop" : "length"; }

namespace {

struct Running {
  Sample sample;
  SequenceSampler sampler;
  bool prefilled = false;
};

}  // namespace

Generator::Generator(const model::Model& m, GenerateOptions opt) : m_(&m), opt_(std::move(opt)) {
  if (!m.is_first_stage() || !m.is_last_stage() || !m.options().lm_head) {
    throw UsageError("generation needs a whole model with an LM head, not a pipeline stage");
  }
  validate(opt_.sampling);
  if (opt_.max_batch < 1) throw UsageError("max batch must be at least 1");
  if (opt_.max_new_tokens < 1) throw UsageError("max new tokens must be at least 1");
  if (opt_.max_len <= 0) opt_.max_len = m.config().max_position_embeddings;
  if (opt_.max_len > m.config().max_position_embeddings) {
    throw UsageError(fmt::format("max length {} exceeds the model's max_position_embeddings {}", opt_.max_len,
                                 m.config().max_position_embeddings));
  }
}

void Generator::check(const Prompt& p) const {
  const auto& cfg = m_->config();
  const std::string field = fmt::format("prompt of sample {}", p.sample_id);
  const auto len = static_cast<std::int64_t>(p.tokens.size());
  const auto done = static_cast<std::int64_t>(p.response.size());
  require(!p.tokens.empty(), "prompts", field, "is empty (start it with a BOS token)");
  require(len + done < opt_.max_len, "prompts", field,
          fmt::format("has {} tokens, not fewer than the max length {}", len + done, opt_.max_len));
  for (auto t : p.tokens) {
    require(t >= 0 && t < cfg.vocab_size, "prompts", field,
            fmt::format("token {} is outside the model's vocabulary [0, {})", t, cfg.vocab_size));
  }
  if (done == 0) return;
  const std::string what = fmt::format("continuation of sample {}", p.sample_id);
  require(p.logprobs.size() == p.response.size() && p.raw_logprobs.size() == p.response.size(), "prompts", what,
          "needs one logprob and one raw logprob per response token");
  require(done < opt_.max_new_tokens, "prompts", what,
          fmt::format("already has {} of at most {} new tokens", done, opt_.max_new_tokens));
  for (auto t : p.response) {
    require(t >= 0 && t < cfg.vocab_size, "prompts", what,
            fmt::format("token {} is outside the model's vocabulary [0, {})", t, cfg.vocab_size));
  }
  require(std::find(opt_.stop_tokens.begin(), opt_.stop_tokens.end(), p.response.back()) == opt_.stop_tokens.end(),
          "prompts", what, "already ends with a stop token");
}

GenerateStats Generator::run(std::span<const Prompt> prompts, const std::function<void(Sample&&)>& on_done,
                            const StepHook& after_step, std::vector<Prompt>* unfinished) {
  if (after_step && unfinished == nullptr) throw std::logic_error("Generator::run: a step hook needs `unfinished`");
  const auto& cfg = m_->config();
  std::int64_t longest_prompt = 0;
  std::int64_t longest_prefill = 0;
  std::int64_t all_prefill = 0;
  for (const Prompt& p : prompts) {
    check(p);
    const auto len = static_cast<std::int64_t>(p.tokens.size());
    const auto done = static_cast<std::int64_t>(p.response.size());
    longest_prompt = std::max(longest_prompt, len);
    longest_prefill = std::max(longest_prefill, len + done);
    all_prefill += len + done;
  }
  GenerateStats stats;
  if (prompts.empty()) return stats;

  const std::int64_t reserve = opt_.reserve_prompt_len;
  const int slots = reserve > 0 ? opt_.max_batch
                                : static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(opt_.max_batch),
                                                                         prompts.size()));
  // No sequence can hold more than its prompt plus max_new_tokens: size the cache
  // (layers x slots x length, the big allocation) for that, not for max_len.
  const std::int64_t cache_len = std::min(opt_.max_len, std::max(longest_prompt, reserve) + opt_.max_new_tokens);
  // No step prefills more than all the prompts: activations sized for the default
  // budget cost a big model a second of allocation on a short run. Prompts added
  // later may be continuations as long as the cache.
  std::int64_t prefill_budget = std::max(std::min(opt_.prefill_tokens, all_prefill), longest_prefill);
  if (reserve > 0) prefill_budget = std::max(prefill_budget, cache_len - 1);
  auto cache = m_->make_kv_cache(slots, cache_len);
  auto acts = m_->make_activations({.max_tokens = prefill_budget + slots,
                                    .max_sequences = slots,
                                    .max_seq_len = cache_len,
                                    .training = false});
  // Sampling runs where the logits are; only a token and two logprobs per row come back.
  RowSampler row_sampler(m_->backend(), opt_.sampling, static_cast<std::size_t>(slots));

  std::deque<const Prompt*> waiting;
  for (const Prompt& p : prompts) waiting.push_back(&p);
  std::deque<Prompt> added;  // prompts from the hook (a deque: pointers into it stay valid)
  std::vector<Prompt> more;
  std::vector<std::optional<Running>> slot(static_cast<std::size_t>(slots));
  std::vector<std::int32_t> tokens;
  std::vector<model::Segment> segments;
  std::vector<int> segment_slot;
  std::vector<Sampled> sampled;
  std::vector<SequenceSampler*> samplers;

  std::int64_t finished = 0;
  auto finish = [&](int s, FinishReason why) {
    ++finished;
    Running& r = *slot[static_cast<std::size_t>(s)];
    r.sample.finish = why;
    cache.clear(s);
    Sample done = std::move(r.sample);
    slot[static_cast<std::size_t>(s)].reset();
    on_done(std::move(done));
  };

  for (;;) {
    tokens.clear();
    segments.clear();
    segment_slot.clear();
    // Decode rows of the running sequences first, then prompts that fit in the budget.
    for (int s = 0; s < slots; ++s) {
      const auto& r = slot[static_cast<std::size_t>(s)];
      if (r && r->prefilled) {
        tokens.push_back(r->sample.response.back());
        segments.push_back({s, 1});
        segment_slot.push_back(s);
      }
    }
    std::int64_t prefilled = 0;
    for (int s = 0; s < slots && !waiting.empty(); ++s) {
      if (slot[static_cast<std::size_t>(s)]) continue;
      const Prompt& p = *waiting.front();
      const auto len = static_cast<std::int64_t>(p.tokens.size() + p.response.size());
      if (prefilled > 0 && prefilled + len > prefill_budget) break;
      waiting.pop_front();
      slot[static_cast<std::size_t>(s)].emplace(
          Running{Sample{.sample_id = p.sample_id, .prompt = p.tokens, .response = p.response,
                         .logprobs = p.logprobs, .raw_logprobs = p.raw_logprobs},
                  SequenceSampler(opt_.sampling, p.sample_id, static_cast<std::int64_t>(p.response.size()))});
      tokens.insert(tokens.end(), p.tokens.begin(), p.tokens.end());
      tokens.insert(tokens.end(), p.response.begin(), p.response.end());
      segments.push_back({s, len});
      segment_slot.push_back(s);
      prefilled += len;
    }
    if (segments.empty()) break;

    const auto t0 = std::chrono::steady_clock::now();
    m_->forward_cached(tokens, segments, cache, acts);
    m_->backend().synchronize();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++stats.steps;
    stats.prefill_tokens += prefilled;
    stats.decode_tokens += static_cast<std::int64_t>(tokens.size()) - prefilled;
    (prefilled > 0 ? stats.prefill_seconds : stats.decode_seconds) += dt;

    // One logits row per segment. Each sequence draws from its own stream and its own
    // row, so the tokens do not depend on the batch; the finishing and callbacks below
    // stay in slot order.
    samplers.clear();
    for (const int s : segment_slot) samplers.push_back(&slot[static_cast<std::size_t>(s)]->sampler);
    sampled.resize(segments.size());
    row_sampler.sample(acts.logits(), cfg.vocab_size, samplers, sampled);
    for (std::size_t i = 0; i < segments.size(); ++i) {
      const int s = segment_slot[i];
      Running& r = *slot[static_cast<std::size_t>(s)];
      r.prefilled = true;
      const Sampled x = sampled[i];
      r.sample.response.push_back(x.token);
      r.sample.logprobs.push_back(x.logprob);
      r.sample.raw_logprobs.push_back(x.raw_logprob);
      const auto total = static_cast<std::int64_t>(r.sample.prompt.size() + r.sample.response.size());
      if (std::find(opt_.stop_tokens.begin(), opt_.stop_tokens.end(), x.token) != opt_.stop_tokens.end()) {
        finish(s, FinishReason::stop);
      } else if (static_cast<std::int64_t>(r.sample.response.size()) >= opt_.max_new_tokens || total >= opt_.max_len) {
        finish(s, FinishReason::length);
      }
    }
    if (after_step) {
      StepInfo info{.waiting = static_cast<std::int64_t>(waiting.size()),
                    .finished = finished,
                    .sampled = static_cast<std::int64_t>(segments.size())};
      for (const auto& r : slot) info.running += r.has_value();
      more.clear();
      const bool stop = after_step(info, more);
      for (Prompt& p : more) {
        check(p);
        if (static_cast<std::int64_t>(p.tokens.size()) > reserve || static_cast<std::int64_t>(p.tokens.size()) > cache_len) {
          throw std::logic_error(fmt::format("a prompt added during the run has {} tokens, more than the {} reserved",
                                             p.tokens.size(), reserve));
        }
        added.push_back(std::move(p));
        waiting.push_back(&added.back());
      }
      if (stop) {
        for (auto& r : slot) {
          if (!r) continue;
          Sample& x = r->sample;
          unfinished->push_back(Prompt{.sample_id = x.sample_id, .tokens = std::move(x.prompt),
                                       .response = std::move(x.response), .logprobs = std::move(x.logprobs),
                                       .raw_logprobs = std::move(x.raw_logprobs)});
        }
        for (const Prompt* p : waiting) unfinished->push_back(*p);
        return stats;
      }
    }
  }
  return stats;
}

std::vector<Sample> generate(const model::Model& m, std::span<const Prompt> prompts, const GenerateOptions& opt,
                             GenerateStats* stats) {
  std::map<std::uint64_t, std::size_t> index;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    if (!index.emplace(prompts[i].sample_id, i).second) {
      throw InputError("prompts", fmt::format("sample {}", prompts[i].sample_id), "sample id is not unique");
    }
  }
  std::vector<Sample> out(prompts.size());
  Generator g(m, opt);
  const GenerateStats st = g.run(prompts, [&](Sample&& s) { out[index.at(s.sample_id)] = std::move(s); });
  if (stats) *stats = st;
  return out;
}

}  // namespace braid::gen
