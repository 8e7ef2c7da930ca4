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
#include "data/prompts.hpp"
#include "data/text_examples.hpp"
#include "generate/generate.hpp"
#include "rl/reference_logprobs.hpp"
#include "score/math_expr.hpp"
#include "score/model_passes.hpp"
#include "score/text_reward.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace braid::eval {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::unique_ptr<score::TextReward> make_reward(const PolicyEvalOptions& o) {
  if (o.reward_rule.empty() == o.reward_cmd.empty()) {
    throw UsageError("give exactly one of --reward-rule and --reward-cmd");
  }
  if (!o.reward_rule.empty()) {
    // A scorer command's settings where no command runs are refused, not ignored.
    if (!o.reward_cmd_dir.empty()) throw UsageError("--reward-cmd-dir: only with --reward-cmd");
    if (o.reward_cmd_timeout) throw UsageError("--reward-cmd-timeout: only with --reward-cmd");
    return score::make_rule_reward(o.reward_rule);
  }
  score::ScorerOptions s{.command = o.reward_cmd, .dir = o.reward_cmd_dir};
  if (o.reward_cmd_timeout) s.timeout_seconds = *o.reward_cmd_timeout;
  return score::make_command_reward(s);
}

// What one prompt's samples came to.
struct PromptResult {
  int right = 0;
  double reward = 0;
  std::int64_t response_tokens = 0;
  std::vector<std::optional<std::string>> keys;  // each sample's final answer, for maj@k
  std::vector<bool> correct;
};

struct Totals {
  std::int64_t prompts = 0, samples = 0, response_tokens = 0;
  double reward = 0;
  std::vector<double> pass, maj;  // Σ over prompts of pass@k and maj@k, k = 1..n

  void add(const PromptResult& r, int n) {
    ++prompts;
    samples += n;
    reward += r.reward;
    response_tokens += r.response_tokens;
    pass.resize(static_cast<std::size_t>(n), 0.0);
    maj.resize(static_cast<std::size_t>(n), 0.0);
    for (int k = 1; k <= n; ++k) {
      pass[static_cast<std::size_t>(k - 1)] += pass_at_k(n, r.right, k);
      maj[static_cast<std::size_t>(k - 1)] += maj_at_k(r.keys, r.correct, k);
    }
  }
  ordered_json figures(int n, const std::vector<int>& ks) const {
    const double p = prompts > 0 ? static_cast<double>(prompts) : 1.0;
    const double s = samples > 0 ? static_cast<double>(samples) : 1.0;
    std::vector<double> pass_k, maj_k;
    for (std::size_t k = 0; k < pass.size(); ++k) {
      pass_k.push_back(pass[k] / p);
      maj_k.push_back(maj[k] / p);
    }
    ordered_json j;
    j["prompts"] = prompts;
    j["mean_reward"] = reward / s;
    j["pass@1"] = pass_k.empty() ? 0.0 : pass_k.front();
    j[fmt::format("pass@{}", n)] = pass_k.empty() ? 0.0 : pass_k.back();
    for (const int k : ks) {
      j[fmt::format("pass@{}", k)] = pass_k[static_cast<std::size_t>(k - 1)];
      j[fmt::format("maj@{}", k)] = maj_k[static_cast<std::size_t>(k - 1)];
    }
    j["pass_at_k"] = pass_k;
    j["maj_at_k"] = maj_k;
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

// What a reward model's or a DPO policy's scores of the chosen and the rejected completions
// of each pair come to.
struct PairTotals {
  std::int64_t pairs = 0, right = 0;
  double margin = 0, chosen = 0, rejected = 0;

  void add(double c, double r, const char* score) {
    ++pairs;
    require_finite(c, fmt::format("the {} of pair {}'s chosen completion", score, pairs));
    require_finite(r, fmt::format("the {} of pair {}'s rejected completion", score, pairs));
    right += c > r ? 1 : 0;
    margin += c - r;
    chosen += c;
    rejected += r;
  }
  // The document's head and these figures.
  ordered_json document(const char* kind, const std::string& checkpoint, std::int64_t step) const {
    const double n = static_cast<double>(pairs);
    ordered_json out;
    out["format"] = kEvalFormat;
    out["version"] = kEvalVersion;
    out["kind"] = kind;
    out["checkpoint"] = checkpoint;
    out["step"] = step;
    out["pairs"] = pairs;
    out["accuracy"] = static_cast<double>(right) / n;
    out["mean_margin"] = margin / n;
    out["mean_chosen"] = chosen / n;
    out["mean_rejected"] = rejected / n;
    return out;
  }
};

}  // namespace

double maj_at_k(const std::vector<std::optional<std::string>>& keys, const std::vector<bool>& right, int k) {
  const auto n = static_cast<int>(keys.size());
  if (k <= 0 || k > n) return 0;
  const int blocks = n / k;
  int won = 0;
  for (int b = 0; b < blocks; ++b) {
    std::map<std::string, int> votes;
    std::optional<std::string> best;
    int best_votes = 0;
    bool best_right = false;
    for (int i = b * k; i < (b + 1) * k; ++i) {
      if (!keys[static_cast<std::size_t>(i)]) continue;
      const int v = ++votes[*keys[static_cast<std::size_t>(i)]];
      if (v > best_votes) {  // strictly more: a tie stays with the answer that got there first
        best = keys[static_cast<std::size_t>(i)];
        best_votes = v;
        best_right = right[static_cast<std::size_t>(i)];
      } else if (best && *best == *keys[static_cast<std::size_t>(i)]) {
        best_right = best_right || right[static_cast<std::size_t>(i)];
      }
    }
    won += best && best_right ? 1 : 0;
  }
  return double(won) / double(blocks);
}

double pass_at_k(int n, int c, int k) {
  if (n <= 0 || k <= 0) return 0;
  if (n - c < k) return 1.0;
  // 1 - prod_{i = n-c+1}^{n} (1 - k / i), the stable form of 1 - C(n-c, k) / C(n, k).
  double miss = 1.0;
  for (int i = n - c + 1; i <= n; ++i) miss *= 1.0 - static_cast<double>(k) / i;
  return 1.0 - miss;
}

std::optional<std::string> k_problem(const std::vector<int>& k, int samples) {
  for (const int x : k) {
    if (x < 1) return fmt::format("k = {} is not a number of samples (k >= 1)", x);
    if (x > samples) {
      return fmt::format("k = {} is above the {} sample{} per prompt: pass@k and maj@k need k <= n", x, samples,
                         samples == 1 ? "" : "s");
    }
  }
  return std::nullopt;
}

ordered_json evaluate_policy(const PolicyEvalOptions& o) {
  if (o.samples < 1) throw UsageError(fmt::format("--samples must be at least 1, got {}", o.samples));
  if (auto problem = k_problem(o.k, o.samples)) throw UsageError("--k: " + *problem);
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
  const auto lines = data::read_prompts(o.prompts, {.tokenizer = tokenizer.get(),
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
  const bool math = o.reward_rule == "math";
  for (std::size_t p = 0; p < lines.size(); ++p) {
    PromptResult r;
    for (int k = 0; k < o.samples; ++k) {
      const std::size_t i = p * static_cast<std::size_t>(o.samples) + static_cast<std::size_t>(k);
      require_finite(rewards[i], fmt::format("the reward of {}", texts[i].where));
      r.reward += rewards[i];
      const bool right = rewards[i] >= o.correct_at;
      r.right += right ? 1 : 0;
      r.correct.push_back(right);
      // A vote is the final answer's value (math), else the whole response.
      r.keys.push_back(math ? score::answer_key(texts[i].response) : std::optional(std::string(trim(texts[i].response))));
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
  const ordered_json f = all.figures(o.samples, o.k);
  out["prompts"] = f["prompts"];
  out["mean_reward"] = f["mean_reward"];
  out["accuracy"] = f["pass@1"];
  for (const auto& [k, v] : f.items()) {
    if (k.starts_with("pass@") || k.starts_with("maj@")) out[k] = v;
  }
  out["pass_at_k"] = f["pass_at_k"];
  out["maj_at_k"] = f["maj_at_k"];
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
    for (const auto& [k, t] : order) by["groups"][k] = t->figures(o.samples, o.k);
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
  const io::SampleBatch batch = data::read_preference_jsonl(o.pairs, *tokenizer, cfg.vocab_size,
                                                             cfg.max_position_embeddings, o.model.tokenizer, chat);
  const std::size_t pairs = batch.size() / 2;
  if (pairs == 0) throw InputError(o.pairs, "", "holds no preference pairs");
  score::RewardModelPass pass(*rm.model, o.model.micro_tokens);
  const auto r = pass.rewards(batch);
  PairTotals totals;
  for (std::size_t i = 0; i < pairs; ++i) totals.add(r[2 * i], r[2 * i + 1], "reward");
  ordered_json out = totals.document("reward_model", o.model.checkpoint, rm.step);
  out["pairs_file"] = o.pairs;
  out["seconds"] = since(t0);
  return out;
}

ordered_json evaluate_dpo_policy(const PairEvalOptions& o) {
  if (o.ref.empty()) throw UsageError("a policy on preference pairs needs --ref (its implicit reward is against it)");
  if (!(o.beta > 0)) throw UsageError(fmt::format("--beta must be > 0, got {}", o.beta));
  const auto t0 = Clock::now();
  const tok::ChatDefaults chat = tok::chat_defaults(o.model.tools, o.model.chat_template_kwargs);
  auto be = backend::make_backend(o.model.device, o.model.threads);
  auto tokenizer = tok::load_tokenizer(o.model.tokenizer);
  auto policy = checkpoint::open_model(o.model.checkpoint, *be, {}, /*need_lm_head=*/true, false, o.model.dtype);
  const auto& cfg = policy.model->config();
  // The pairs as braid-train dpo reads them: conversations by the tokenizer's template.
  const io::SampleBatch batch = data::read_preference_jsonl(o.pairs, *tokenizer, cfg.vocab_size,
                                                             cfg.max_position_embeddings, o.model.tokenizer, chat);
  const std::size_t pairs = batch.size() / 2;
  if (pairs == 0) throw InputError(o.pairs, "", "holds no preference pairs");
  const std::vector<float> lp = rl::reference_logprobs(*policy.model, batch.tokens, batch.offsets, o.model.micro_tokens);
  policy.model.reset();  // one model at a time
  auto ref = checkpoint::open_model(o.ref, *be, {}, /*need_lm_head=*/true, false, o.model.dtype);
  if (ref.model->config().vocab_size != cfg.vocab_size) {
    throw InputError(o.ref, "vocab_size", fmt::format("is {}, the policy's ({}) {}", ref.model->config().vocab_size,
                                                      o.model.checkpoint, cfg.vocab_size));
  }
  const std::vector<float> ref_lp = rl::reference_logprobs(*ref.model, batch.tokens, batch.offsets, o.model.micro_tokens);
  // π of a completion: Σ (or mean) over its response tokens, as braid-train dpo takes it.
  const auto logp = [&](const std::vector<float>& per_token, std::size_t i) {
    const auto r = batch.response_of(per_token, i);
    double sum = 0;
    for (float x : r) sum += x;
    return o.length_normalize && !r.empty() ? sum / double(r.size()) : sum;
  };
  PairTotals totals;
  std::int64_t logp_right = 0;
  double loss = 0;
  for (std::size_t i = 0; i < pairs; ++i) {
    const double pc = logp(lp, 2 * i), pr = logp(lp, 2 * i + 1);
    const double rc = o.beta * (pc - logp(ref_lp, 2 * i)), rr = o.beta * (pr - logp(ref_lp, 2 * i + 1));
    totals.add(rc, rr, "implicit reward");
    logp_right += pc > pr ? 1 : 0;
    const double m = rc - rr;  // −log σ(m), without overflow
    loss += m > 0 ? std::log1p(std::exp(-m)) : -m + std::log1p(std::exp(m));
  }
  const double n = static_cast<double>(pairs);
  ordered_json out = totals.document("dpo_policy", o.model.checkpoint, policy.step);
  out["ref"] = o.ref;
  out["beta"] = o.beta;
  out["length_normalize"] = o.length_normalize;
  out["pairs_file"] = o.pairs;
  out["loss"] = loss / n;
  out["logp_accuracy"] = static_cast<double>(logp_right) / n;
  out["seconds"] = since(t0);
  return out;
}

}  // namespace braid::eval
