#include "generate/generate.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "generate/decode_graph.hpp"

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

namespace {

void report(const GenerateStats& s) {
  log::info("KV cache: at most {} of {} blocks held, {} preemption{}{}", s.kv_peak_blocks, s.kv_blocks, s.preemptions,
            s.preemptions == 1 ? "" : "s",
            s.graph_steps > 0 ? fmt::format("; {} of {} steps replayed as CUDA graphs", s.graph_steps, s.steps) : "");
}

}  // namespace

std::int64_t Generator::pool_blocks(int slots, std::int64_t cache_len, std::int64_t longest,
                                    backend::DType dtype) const {
  const int bs = opt_.kv_block_size;
  const std::int64_t block_bytes = m_->kv_block_bytes(bs, dtype);
  const std::int64_t per_seq = (cache_len + bs - 1) / bs;
  const std::int64_t full = std::int64_t(slots) * per_seq;
  const std::int64_t need_one = (longest + bs - 1) / bs;
  backend::Backend& be = m_->backend();
  std::int64_t budget = 0;
  std::string where;
  if (opt_.kv_cache_bytes > 0) {
    budget = opt_.kv_cache_bytes;
    where = fmt::format("{} gives {:.4g} MiB", opt_.kv_cache_option, double(budget) / (1 << 20));
  } else if (auto mem = be.device_memory()) {
    const auto reserve = std::max<std::int64_t>(kDeviceReserveBytes,
                                                std::int64_t(kDeviceReserveFraction * double(mem->total)));
    budget = std::int64_t(mem->free) - reserve;
    where = fmt::format("{} has {:.2f} GiB free of {:.2f} GiB after the weights ({:.2f} GiB) and activations, "
                        "{:.2f} GiB kept in reserve",
                        be.name(), double(mem->free) / (1 << 30), double(mem->total) / (1 << 30),
                        double(m_->parameter_bytes()) / (1 << 30), double(reserve) / (1 << 30));
  } else {
    budget = kDefaultHostKvBytes;
    where = fmt::format("the host budget is {:.0f} MiB ({} sets it)", double(budget) / (1 << 20), opt_.kv_cache_option);
  }
  const std::int64_t fit = std::max<std::int64_t>(0, budget) / block_bytes;
  if (fit < need_one) {
    throw InputError(opt_.kv_cache_option, "KV cache",
                     fmt::format("one sequence of up to {} tokens needs {} blocks of {} tokens ({:.2f} MiB, {} bytes "
                                 "a block of {} layers), but the pool has room for {} ({})",
                                 longest, need_one, bs, double(need_one * block_bytes) / (1 << 20), block_bytes,
                                 m_->layer_end() - m_->layer_begin(), fit, where));
  }
  return std::min(full, fit);
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
  if (opt_.kv_block_size < 1) throw UsageError("the KV cache's block size must be at least 1");

  const std::int64_t reserve = opt_.reserve_prompt_len;
  const int slots = reserve > 0 ? opt_.max_batch
                                : static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(opt_.max_batch),
                                                                         prompts.size()));
  // No sequence can hold more than its prompt plus max_new_tokens: size the cache
  // (layers x slots x length, the big allocation) for that, not for max_len.
  const std::int64_t cache_len = std::min(opt_.max_len, std::max(longest_prompt, reserve) + opt_.max_new_tokens);
  // No step prefills more than all the prompts: activations sized for the default
  // budget cost a big model a second of allocation on a short run. Prompts added
  // later may be continuations as long as the cache. A preempted sequence comes back
  // as a continuation of up to cache_len - 1 tokens.
  std::int64_t prefill_budget = std::max(std::min(opt_.prefill_tokens, all_prefill), longest_prefill);
  if (reserve > 0) prefill_budget = std::max(prefill_budget, cache_len - 1);
  auto acts = m_->make_activations({.max_tokens = std::max(prefill_budget, cache_len - 1) + slots,
                                    .max_sequences = slots,
                                    .max_seq_len = cache_len,
                                    .training = false});
  // Sampling runs where the logits are; only a token and two logprobs per row come back.
  RowSampler row_sampler(m_->backend(), opt_.sampling, static_cast<std::size_t>(slots));

  // The pool, from what is left after the weights and activations.
  const backend::DType kv_dtype = m_->dtype() == backend::DType::bf16 ? backend::DType::bf16 : backend::DType::f32;
  const std::int64_t blocks = pool_blocks(slots, cache_len, cache_len, kv_dtype);
  auto cache = m_->make_kv_cache({.slots = slots, .max_len = cache_len, .block_size = opt_.kv_block_size,
                                  .blocks = blocks, .dtype = kv_dtype});
  const std::int64_t per_seq = (cache_len + opt_.kv_block_size - 1) / opt_.kv_block_size;
  stats.kv_blocks = blocks;
  stats.kv_block_tokens = opt_.kv_block_size;
  stats.kv_bytes = cache.bytes();
  const std::int64_t room = std::min<std::int64_t>(slots, blocks / per_seq);
  log::info("KV cache: {} blocks of {} tokens ({:.1f} MiB, {}): room for {} sequence{} of {} tokens at once{}", blocks,
            opt_.kv_block_size, double(cache.bytes()) / (1 << 20), backend::dtype_name(kv_dtype), room,
            room == 1 ? "" : "s", cache_len,
            blocks / per_seq < slots ? fmt::format(" (max batch {}: more run while they are short)", slots) : "");
  // Preempting keeps a little of the pool free when prompts join (vLLM's watermark).
  const std::int64_t watermark = blocks / 100;
  const auto blocks_for = [&](std::int64_t tokens) { return (tokens + opt_.kv_block_size - 1) / opt_.kv_block_size; };

  std::optional<DecodeGraphs> graphs;
  if (DecodeGraphs::wanted(*m_, opt_.graphs)) graphs.emplace(*m_, cache, acts, row_sampler, slots);

  std::deque<const Prompt*> waiting;
  for (const Prompt& p : prompts) waiting.push_back(&p);
  std::deque<Prompt> added;  // prompts from the hook and preempted sequences (pointers into a deque stay valid)
  std::vector<Prompt> more;
  std::vector<std::optional<Running>> slot(static_cast<std::size_t>(slots));
  std::vector<std::int64_t> joined(static_cast<std::size_t>(slots), 0);  // admission order, for preemption
  std::int64_t admissions = 0;
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
  auto as_continuation = [](Sample&& x) {
    return Prompt{.sample_id = x.sample_id, .tokens = std::move(x.prompt), .response = std::move(x.response),
                  .logprobs = std::move(x.logprobs), .raw_logprobs = std::move(x.raw_logprobs)};
  };
  // Back to wait, first in line: its blocks are freed; it resumes by re-prefilling.
  auto preempt = [&](int s) {
    Running& r = *slot[static_cast<std::size_t>(s)];
    cache.clear(s);
    added.push_back(as_continuation(std::move(r.sample)));
    waiting.push_front(&added.back());
    slot[static_cast<std::size_t>(s)].reset();
    ++stats.preemptions;
  };

  for (;;) {
    tokens.clear();
    segments.clear();
    segment_slot.clear();
    // The decode rows' new blocks; while the pool lacks them, the sequence that joined
    // last waits again (the one that joined first always fits: the pool holds one).
    for (;;) {
      std::int64_t need = 0;
      int latest = -1;
      for (int s = 0; s < slots; ++s) {
        const auto& r = slot[static_cast<std::size_t>(s)];
        if (!r || !r->prefilled) continue;
        need += cache.blocks_needed(s, 1);
        if (latest < 0 || joined[static_cast<std::size_t>(s)] > joined[static_cast<std::size_t>(latest)]) latest = s;
      }
      if (need <= cache.free_blocks() || latest < 0) break;
      preempt(latest);
    }
    std::int64_t free_after = cache.free_blocks();
    bool decode_only = true;
    for (int s = 0; s < slots; ++s) {
      const auto& r = slot[static_cast<std::size_t>(s)];
      if (r && r->prefilled) {
        tokens.push_back(r->sample.response.back());
        segments.push_back({s, 1});
        segment_slot.push_back(s);
        free_after -= cache.blocks_needed(s, 1);
      }
    }
    // Then prompts (and preempted sequences, first) that fit in the budget and the pool.
    std::int64_t prefilled = 0;
    for (int s = 0; s < slots && !waiting.empty(); ++s) {
      if (slot[static_cast<std::size_t>(s)]) continue;
      const Prompt& p = *waiting.front();
      const auto len = static_cast<std::int64_t>(p.tokens.size() + p.response.size());
      if (prefilled > 0 && prefilled + len > prefill_budget) break;
      const bool alone = segments.empty();
      if (blocks_for(len) > free_after - (alone ? 0 : watermark)) break;
      free_after -= blocks_for(len);
      waiting.pop_front();
      slot[static_cast<std::size_t>(s)].emplace(
          Running{Sample{.sample_id = p.sample_id, .prompt = p.tokens, .response = p.response,
                         .logprobs = p.logprobs, .raw_logprobs = p.raw_logprobs},
                  SequenceSampler(opt_.sampling, p.sample_id, static_cast<std::int64_t>(p.response.size()))});
      joined[static_cast<std::size_t>(s)] = ++admissions;
      tokens.insert(tokens.end(), p.tokens.begin(), p.tokens.end());
      tokens.insert(tokens.end(), p.response.begin(), p.response.end());
      segments.push_back({s, len});
      segment_slot.push_back(s);
      prefilled += len;
      decode_only = false;
    }
    if (segments.empty()) break;

    // One logits row per segment. Each sequence draws from its own stream and its own
    // row, so the tokens do not depend on the batch; the finishing and callbacks below
    // stay in slot order.
    samplers.clear();
    for (const int s : segment_slot) samplers.push_back(&slot[static_cast<std::size_t>(s)]->sampler);
    sampled.resize(segments.size());
    const auto t0 = std::chrono::steady_clock::now();
    if (decode_only && graphs && graphs->step(tokens, segments, samplers, sampled)) {
      ++stats.graph_steps;
    } else {
      m_->forward_cached(tokens, segments, cache, acts);
      row_sampler.sample(acts.logits(), cfg.vocab_size, samplers, sampled);
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++stats.steps;
    stats.prefill_tokens += prefilled;
    stats.decode_tokens += static_cast<std::int64_t>(tokens.size()) - prefilled;
    (prefilled > 0 ? stats.prefill_seconds : stats.decode_seconds) += dt;
    stats.kv_peak_blocks = std::max(stats.kv_peak_blocks, cache.blocks() - cache.free_blocks());

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
          if (r) unfinished->push_back(as_continuation(std::move(r->sample)));
        }
        for (const Prompt* p : waiting) unfinished->push_back(*p);
        report(stats);
        return stats;
      }
    }
  }
  report(stats);
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
