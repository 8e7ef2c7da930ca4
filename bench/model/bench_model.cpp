// Engine throughput on the CPU backend: training tokens/s (forward + chunked LM-head
// logprobs + backward + AdamW), prefill tokens/s, and decode tokens/s at given batch
// sizes. Each figure is the mean ± sd over --repeats timed runs after one warm-up.
// Prints a table, and one JSON object per figure with --json (for bench/model/compare.sh).
#include "backend/dtype_option.hpp"
#include "bench/model/shapes.hpp"
#include "bench/model/throughput.hpp"
#include "model/model.hpp"
#include "optim/adamw.hpp"
#include "rl/chunked_lm_head.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

using namespace braid;

namespace {

struct Options {
  std::string config = "tiny";
  int threads = 2;
  int repeats = 3;
  int train_batch = 4, train_len = 128;
  int prefill_batch = 4, prefill_len = 128;
  std::vector<int> decode_batches{1, 32};
  int decode_context = 64, decode_steps = 16;
  bool json = false;
  backend::DType dtype = backend::DType::f32;   // storage of the weights
};

using bench::Stat;
using bench::measure;
using bench::measure_timed;

void report(const Options& o, const std::string& what, const std::string& shape, Stat s) {
  if (o.json)
    fmt::print("{{\"engine\": \"braid\", \"config\": \"{}\", \"threads\": {}, \"dtype\": \"{}\", \"measure\": \"{}\", "
               "\"shape\": \"{}\", \"tokens_per_s\": {:.2f}, \"sd\": {:.2f}}}\n",
               o.config, o.threads, backend::dtype_name(o.dtype), what, shape, s.mean, s.sd);
  else
    fmt::print("braid  {:5} {:>2} threads {:4}  {:8} {:14} {:10.1f} ± {:.1f} tokens/s\n", o.config, o.threads,
               backend::dtype_name(o.dtype), what, shape, s.mean, s.sd);
  std::fflush(stdout);
}

std::vector<std::int32_t> tokens_for(std::int64_t n, int vocab, std::uint32_t seed) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) { seed = seed * 1664525u + 1013904223u; x = std::int32_t((seed >> 8) % std::uint32_t(vocab)); }
  return t;
}

int run(const Options& o) {
  const auto cfg = bench::bench_config(o.config);
  auto be = backend::make_cpu_backend(o.threads);
  model::Model m(cfg, {.dtype = o.dtype}, *be);
  m.init_random(1);
  const int V = cfg.vocab_size;
  if (!o.json)
    fmt::print("# {} config: {} parameters ({:.1f} MB of {} weights), {} threads\n", o.config, m.parameter_count(),
               double(m.parameter_bytes()) / 1e6, backend::dtype_name(m.dtype()), be->threads());

  {  // training step
    const std::int64_t n = std::int64_t(o.train_batch) * o.train_len;
    const auto tokens = tokens_for(n, V, 1);
    std::vector<std::int64_t> offsets;
    for (int s = 0; s <= o.train_batch; ++s) offsets.push_back(std::int64_t(s) * o.train_len);
    const model::Batch batch{tokens, offsets};
    const auto targets = rl::next_token_targets(batch);
    auto acts = m.make_activations({.max_tokens = n, .max_sequences = o.train_batch, .training = true});
    rl::ChunkedLmHead<float> head(*be, V, cfg.hidden_size, 256);
    optim::AdamW opt(*be, m.tensors(), {.weight_decay = 0.1});
    // The SFT loss as braid-train runs it: the mean NLL of every next token (the last row
    // of each sequence has none), through the backend's nll_loss op.
    std::vector<float> weight(static_cast<std::size_t>(n));
    for (std::size_t r = 0; r < weight.size(); ++r) weight[r] = targets[r] >= 0 ? 1.0f : 0.0f;
    backend::Buffer<float> lp(*be, static_cast<std::size_t>(n)), d(*be, static_cast<std::size_t>(n)),
        w(*be, static_cast<std::size_t>(n));
    be->copy_to_device(w.data(), weight.data(), weight.size() * sizeof(float));
    const double units = double(n - o.train_batch);
    const Stat s = measure(o.repeats, double(n), [&] {
      m.zero_grad();
      m.forward(batch, acts);
      rl::token_logprobs(m, acts, head, targets.data(), lp.data(), static_cast<float*>(nullptr));
      be->ops<float>().nll_loss(n, lp.data(), w.data(), 1.0 / units, d.data());
      rl::token_logprobs_backward(m, acts, head, targets.data(), d.data(), static_cast<const float*>(nullptr));
      m.backward(acts);
      opt.step(1e-5);
    });
    report(o, "train", fmt::format("b{}xT{}", o.train_batch, o.train_len), s);
  }
  {  // prefill: prompts into an empty cache, logits of each last token
    const std::int64_t n = std::int64_t(o.prefill_batch) * o.prefill_len;
    auto cache = m.make_kv_cache(o.prefill_batch, o.prefill_len);
    auto acts = m.make_activations({.max_tokens = n, .max_sequences = o.prefill_batch});
    const auto tokens = tokens_for(n, V, 2);
    std::vector<model::Segment> segs;
    for (int s = 0; s < o.prefill_batch; ++s) segs.push_back({s, o.prefill_len});
    const Stat s = measure(o.repeats, double(n), [&] {
      for (int k = 0; k < o.prefill_batch; ++k) cache.clear(k);
      m.forward_cached(tokens, segs, cache, acts);
    });
    report(o, "prefill", fmt::format("pp{}xb{}", o.prefill_len, o.prefill_batch), s);
  }
  for (int b : o.decode_batches) {  // decode: one token per sequence per step after a prompt
    auto cache = m.make_kv_cache(b, o.decode_context + o.decode_steps);
    auto acts = m.make_activations({.max_tokens = std::int64_t(b) * o.decode_context, .max_sequences = b});
    const auto prompt = tokens_for(std::int64_t(b) * o.decode_context, V, 3);
    std::vector<model::Segment> prefill, step;
    for (int s = 0; s < b; ++s) { prefill.push_back({s, o.decode_context}); step.push_back({s, 1}); }
    std::vector<std::int32_t> next(static_cast<std::size_t>(b));
    // Only the decode steps are timed; the prompt's prefill before them is not.
    const Stat s = measure_timed(o.repeats, double(b) * o.decode_steps, [&] {
      for (int k = 0; k < b; ++k) cache.clear(k);
      m.forward_cached(prompt, prefill, cache, acts);
      const auto t0 = std::chrono::steady_clock::now();
      for (int t = 0; t < o.decode_steps; ++t) {
        for (int k = 0; k < b; ++k) {  // greedy: keeps the benchmark about the engine, not sampling
          const float* row = acts.logits() + std::int64_t(k) * V;
          next[std::size_t(k)] = std::int32_t(std::max_element(row, row + V) - row);
        }
        m.forward_cached(next, step, cache, acts);
      }
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    report(o, "decode", fmt::format("tg{}@ctx{}xb{}", o.decode_steps, o.decode_context, b), s);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Engine throughput on the CPU backend (training, prefill, decode)", "bench_model"};
  Options o;
  app.add_option("--config", o.config, "model shape: tiny or 100m")->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads (OpenBLAS and OpenMP)")->capture_default_str();
  backend::add_dtype_option(app, o.dtype);
  app.add_option("--repeats", o.repeats, "timed runs per figure (after one warm-up)")->capture_default_str();
  app.add_option("--train-batch", o.train_batch, "sequences per training step")->capture_default_str();
  app.add_option("--train-len", o.train_len, "tokens per training sequence")->capture_default_str();
  app.add_option("--prefill-batch", o.prefill_batch, "prompts per prefill")->capture_default_str();
  app.add_option("--prefill-len", o.prefill_len, "tokens per prompt")->capture_default_str();
  app.add_option("--decode-batches", o.decode_batches, "decode batch sizes")->capture_default_str();
  app.add_option("--decode-context", o.decode_context, "prompt tokens before decoding")->capture_default_str();
  app.add_option("--decode-steps", o.decode_steps, "decode steps timed")->capture_default_str();
  app.add_flag("--json", o.json, "one JSON object per figure instead of the table");
  CLI11_PARSE(app, argc, argv);
  return run(o);
}
