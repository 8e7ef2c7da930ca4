#include "eval/eval.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "backend/registry.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "generate/generate.hpp"
#include "generate/prompts.hpp"
#include "score/model_passes.hpp"
#include "score/text_reward.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/train_inputs.hpp"

namespace braid::eval {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::unique_ptr<score::TextReward> make_reward(const PolicyEvalOptions& o) {
  if (o.reward_rule.empty() == o.reward_cmd.empty()) {
    throw UsageError("give exactly one of --reward-rule and --reward-cmd");
  }
  if (!o.reward_rule.empty()) return score::make_rule_reward(o.reward_rule);
  score::ScorerOptions s{.command = o.reward_cmd, .dir = o.reward_cmd_dir};
  if (o.reward_cmd_timeout) s.timeout_seconds = *o.reward_cmd_timeout;
  return score::make_command_reward(s);
}

// What one prompt's samples came to.
struct PromptResult {
  int right = 0;
  double reward = 0;
  std::int64_t response_tokens = 0;
};

struct Totals {
  std::int64_t prompts = 0, samples = 0, right_prompts = 0, response_tokens = 0;
  double reward = 0, pass1 = 0;

  void add(const PromptResult& r, int n) {
    ++prompts;
    samples += n;
    reward += r.reward;
    pass1 += pass_at_k(n, r.right, 1);
    right_prompts += r.right > 0 ? 1 : 0;
    response_tokens += r.response_tokens;
  }
  ordered_json figures(int n) const {
    const double p = prompts > 0 ? static_cast<double>(prompts) : 1.0;
    const double s = samples > 0 ? static_cast<double>(samples) : 1.0;
    ordered_json j;
    j["prompts"] = prompts;
    j["mean_reward"] = reward / s;
    j["pass@1"] = pass1 / p;
    j[fmt::format("pass@{}", n)] = static_cast<double>(right_prompts) / p;
    j["mean_response_length"] = static_cast<double>(response_tokens) / s;
    return j;
  }
};

// A prompt field's value as a group name: a string as it is, anything else as its JSON.
std::string group_of(const json& extra, const std::string& field) {
  const auto it = extra.find(field);
  if (it == extra.end()) return "(none)";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

void require_finite(double v, const std::string& what) {
  if (!std::isfinite(v)) throw std::runtime_error(fmt::format("braid eval: {} is not finite ({})", what, v));
}

}  // namespace

double pass_at_k(int n, int c, int k) {
  if (n <= 0 || k <= 0) return 0;
  if (n - c < k) return 1.0;
  // 1 - prod_{i = n-c+1}^{n} (1 - k / i), the stable form of 1 - C(n-c, k) / C(n, k).
  double miss = 1.0;
  for (int i = n - c + 1; i <= n; ++i) miss *= 1.0 - static_cast<double>(k) / i;
  return 1.0 - miss;
}

ordered_json evaluate_policy(const PolicyEvalOptions& o) {
  if (o.samples < 1) throw UsageError(fmt::format("--samples must be at least 1, got {}", o.samples));
  if (o.max_new_tokens < 1) throw UsageError(fmt::format("--max-new-tokens must be at least 1, got {}", o.max_new_tokens));
  const auto t0 = Clock::now();
  gen::SamplingParams sampling{.temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p, .seed = o.seed};
  gen::validate(sampling);
  auto reward = make_reward(o);
  const tok::ChatDefaults chat = tok::chat_defaults(o.model.tools, o.model.chat_template_kwargs);
  auto be = backend::make_backend(o.model.device, o.model.threads);
  auto tokenizer = tok::load_tokenizer(o.model.tokenizer);
  auto policy = checkpoint::open_model(o.model.checkpoint, *be, {}, /*need_lm_head=*/true, false, o.model.dtype);
  const auto& cfg = policy.model->config();
  const auto lines = gen::read_prompts(o.prompts, {.tokenizer = tokenizer.get(),
                                                   .vocab_size = cfg.vocab_size,
                                                   .max_tokens = cfg.max_position_embeddings,
                                                   .limit = o.limit,
                                                   .chat_template_from = o.model.tokenizer,
                                                   .chat = chat});
  if (lines.empty()) throw InputError(o.prompts, "", "holds no prompts");

  std::vector<gen::Prompt> prompts;
  for (std::size_t p = 0; p < lines.size(); ++p) {
    for (int k = 0; k < o.samples; ++k) {
      prompts.push_back({.sample_id = static_cast<std::uint64_t>(p * o.samples + k), .tokens = lines[p].tokens});
    }
  }
  std::vector<std::int32_t> stop;
  if (auto eos = tokenizer->eos()) stop.push_back(*eos);
  const gen::GenerateOptions gopt{.sampling = sampling, .max_batch = o.max_batch, .max_new_tokens = o.max_new_tokens,
                                  .stop_tokens = stop};
  log::info("evaluating {} on {} prompts x {} {} samples", o.model.checkpoint, lines.size(), o.samples,
            sampling.greedy() ? "greedy" : "sampled");
  const auto samples = gen::generate(*policy.model, prompts, gopt);

  std::vector<score::TextSample> texts;
  texts.reserve(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& line = lines[i / static_cast<std::size_t>(o.samples)];
    texts.push_back({.sample_id = static_cast<std::int64_t>(i),
                     .prompt = tokenizer->decode(samples[i].prompt, true),
                     .response = tokenizer->decode(samples[i].response, true),
                     .extra = parse_json_text(line.extra, o.prompts),
                     .has_origin = true,
                     .where = fmt::format("{}:{}", o.prompts, line.line)});
  }
  if (auto problems = reward->problems(texts); !problems.empty()) throw InputError(o.prompts, std::move(problems));
  const auto rewards = reward->score(texts);
  reward->finish();

  Totals all;
  std::map<std::string, Totals> groups;
  for (std::size_t p = 0; p < lines.size(); ++p) {
    PromptResult r;
    for (int k = 0; k < o.samples; ++k) {
      const std::size_t i = p * static_cast<std::size_t>(o.samples) + static_cast<std::size_t>(k);
      require_finite(rewards[i], fmt::format("the reward of {}", texts[i].where));
      r.reward += rewards[i];
      r.right += rewards[i] >= o.correct_at ? 1 : 0;
      r.response_tokens += static_cast<std::int64_t>(samples[i].response.size());
    }
    all.add(r, o.samples);
    if (!o.by.empty()) groups[group_of(texts[p * static_cast<std::size_t>(o.samples)].extra, o.by)].add(r, o.samples);
  }

  ordered_json out;
  out["format"] = kEvalFormat;
  out["version"] = kEvalVersion;
  out["kind"] = "policy";
  out["checkpoint"] = o.model.checkpoint;
  out["step"] = policy.step;
  out["prompts_file"] = o.prompts;
  out["reward"] = reward->config();
  out["samples_per_prompt"] = o.samples;
  out["greedy"] = sampling.greedy();
  if (!sampling.greedy()) {
    out["temperature"] = o.temperature;
    out["seed"] = o.seed;
  }
  out["correct_at"] = o.correct_at;
  const ordered_json f = all.figures(o.samples);
  out["prompts"] = f["prompts"];
  out["mean_reward"] = f["mean_reward"];
  out["accuracy"] = f["pass@1"];
  for (const auto& [k, v] : f.items()) {
    if (k.starts_with("pass@")) out[k] = v;
  }
  out["mean_response_length"] = f["mean_response_length"];
  if (!o.by.empty()) {
    ordered_json by;
    by["field"] = o.by;
    by["groups"] = ordered_json::object();
    // Numeric groups in numeric order ("2" before "10").
    std::vector<std::pair<std::string, const Totals*>> order;
    for (const auto& [k, t] : groups) order.emplace_back(k, &t);
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      const bool an = !a.first.empty() && a.first.find_first_not_of("0123456789") == std::string::npos;
      const bool bn = !b.first.empty() && b.first.find_first_not_of("0123456789") == std::string::npos;
      if (an && bn) return a.first.size() != b.first.size() ? a.first.size() < b.first.size() : a.first < b.first;
      return an && !bn;
    });
    for (const auto& [k, t] : order) by["groups"][k] = t->figures(o.samples);
    out["by"] = by;
  }
  out["seconds"] = since(t0);
  return out;
}

ordered_json evaluate_reward_model(const PairEvalOptions& o) {
  const auto t0 = Clock::now();
  const tok::ChatDefaults chat = tok::chat_defaults(o.model.tools, o.model.chat_template_kwargs);
  auto be = backend::make_backend(o.model.device, o.model.threads);
  auto tokenizer = tok::load_tokenizer(o.model.tokenizer);
  auto rm = checkpoint::open_model(o.model.checkpoint, *be, {}, false, /*need_value_head=*/true, o.model.dtype);
  const auto& cfg = rm.model->config();
  const io::SampleBatch batch = train::read_preference_jsonl(o.pairs, *tokenizer, cfg.vocab_size,
                                                             cfg.max_position_embeddings, o.model.tokenizer, chat);
  const std::size_t pairs = batch.size() / 2;
  if (pairs == 0) throw InputError(o.pairs, "", "holds no preference pairs");
  score::RewardModelPass pass(*rm.model, o.model.micro_tokens);
  const auto r = pass.rewards(batch);
  std::int64_t right = 0;
  double margin = 0, chosen = 0, rejected = 0;
  for (std::size_t i = 0; i < pairs; ++i) {
    const double c = r[2 * i], j = r[2 * i + 1];
    require_finite(c, fmt::format("the reward of pair {}'s chosen completion", i + 1));
    require_finite(j, fmt::format("the reward of pair {}'s rejected completion", i + 1));
    right += c > j ? 1 : 0;
    margin += c - j;
    chosen += c;
    rejected += j;
  }
  const double n = static_cast<double>(pairs);
  ordered_json out;
  out["format"] = kEvalFormat;
  out["version"] = kEvalVersion;
  out["kind"] = "reward_model";
  out["checkpoint"] = o.model.checkpoint;
  out["step"] = rm.step;
  out["pairs_file"] = o.pairs;
  out["pairs"] = static_cast<std::int64_t>(pairs);
  out["accuracy"] = static_cast<double>(right) / n;
  out["mean_margin"] = margin / n;
  out["mean_chosen"] = chosen / n;
  out["mean_rejected"] = rejected / n;
  out["seconds"] = since(t0);
  return out;
}

}  // namespace braid::eval
