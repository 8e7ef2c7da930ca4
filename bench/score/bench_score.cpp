// Throughput of braid-score's three model passes on the CPU backend: the reference
// pass (forward + chunked LM-head logprobs), the critic pass (forward + value head at
// every token) and the reward-model pass (forward + value head at the last token),
// over a batch of random sequences packed into --micro-tokens micro-batches. Each
// figure is tokens/s, mean ± sd over --repeats timed runs after one warm-up.
#include "backend/backend.hpp"
#include "bench/model/shapes.hpp"
#include "bench/model/throughput.hpp"
#include "core/rng.hpp"
#include "io/sample_batch.hpp"
#include "model/model.hpp"
#include "score/model_passes.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <numeric>
#include <vector>

using namespace braid;

namespace {

struct Options {
  std::string config = "tiny";
  int threads = 2;
  int repeats = 3;
  int sequences = 16, prompt_len = 64, response_len = 192;
  std::int64_t micro_tokens = 4096;
  bool json = false;
};

using bench::Stat;
using bench::measure;

model::ModelConfig config_of(const std::string& name) {
  if (std::filesystem::exists(name)) return model::load_config(name);
  return bench::bench_config(name);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tokens/s of braid-score's reference, critic and reward-model passes", "bench_score"};
  Options o;
  app.add_option("--config", o.config, "tiny, 100m (bench/model/shapes.hpp) or a config.json")->capture_default_str();
  app.add_option("--threads", o.threads, "CPU backend threads")->capture_default_str();
  app.add_option("--repeats", o.repeats, "Timed runs per figure")->capture_default_str();
  app.add_option("--sequences", o.sequences, "Sequences in the batch")->capture_default_str();
  app.add_option("--prompt-len", o.prompt_len, "Prompt tokens per sequence")->capture_default_str();
  app.add_option("--response-len", o.response_len, "Response tokens per sequence")->capture_default_str();
  app.add_option("--micro-tokens", o.micro_tokens, "Tokens per forward (as braid-score --micro-tokens)")
      ->capture_default_str();
  app.add_flag("--json", o.json, "Also print one JSON object per figure");
  CLI11_PARSE(app, argc, argv);

  const model::ModelConfig cfg = config_of(o.config);
  auto be = backend::make_cpu_backend(o.threads);
  model::Model policy(cfg, {.lm_head = true}, *be);
  model::Model critic(cfg, {.lm_head = false, .value_head = true}, *be);
  policy.init_random(1);
  critic.init_random(2);

  Rng rng(3);
  io::SampleBatch b;
  std::vector<std::int32_t> seq(std::size_t(o.prompt_len + o.response_len));
  for (int i = 0; i < o.sequences; ++i) {
    for (auto& t : seq) t = std::int32_t(rng.below(std::uint64_t(cfg.vocab_size)));
    b.add(seq, o.prompt_len, i);
  }
  const double tokens = double(b.token_count());

  score::ReferencePass ref(policy, o.micro_tokens);
  score::ValuePass values(critic, o.micro_tokens);
  score::RewardModelPass reward(critic, o.micro_tokens);
  const std::vector<std::pair<std::string, std::function<void()>>> passes{
      {"ref_inf", [&] { ref.logprobs(b); }},
      {"critic_inf", [&] { values.values(b); }},
      {"reward_inf", [&] { reward.rewards(b); }},
  };

  fmt::print("bench_score: config {} (D {}, L {}, V {}), {} threads, {} sequences x ({} + {}) tokens, "
             "micro-tokens {}\n",
             o.config, cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size, be->threads(), o.sequences,
             o.prompt_len, o.response_len, o.micro_tokens);
  fmt::print("{:<12} {:>16}\n", "pass", "tokens/s");
  for (const auto& [name, run] : passes) {
    const Stat s = measure(o.repeats, tokens, run);
    fmt::print("{:<12} {:>9.0f} ± {:<6.0f}\n", name, s.mean, s.sd);
    if (o.json) {
      fmt::print("{{\"bench\":\"score\",\"pass\":\"{}\",\"config\":\"{}\",\"threads\":{},\"tokens\":{},"
                 "\"tokens_per_second\":{:.1f},\"sd\":{:.1f}}}\n",
                 name, o.config, be->threads(), b.token_count(), s.mean, s.sd);
    }
  }
  return 0;
}
