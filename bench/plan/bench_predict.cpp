// Does a profile of single layers predict whole-model passes on this machine?
// ReaL's estimator (and braid-meshplan's) adds up per-layer profiled costs;
// this benchmark measures a profile of one model with braid's engine, predicts
// a whole forward, forward + backward and decode step on one device (tp = pp =
// 1) from it, then times those passes on the engine's full model (with the LM
// head as the stage tools run it: chunked logits, log-softmax of the next
// tokens and the entropy) and prints predicted, measured and their ratio.
//
//   bench_predict CONFIG.json [THREADS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.hpp"
#include "core/json.hpp"
#include "model/model.hpp"
#include "plan/engine_runner.hpp"
#include "plan/measure.hpp"
#include "rl/chunked_lm_head.hpp"

using namespace braid;
using namespace braid::plan;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_predict CONFIG.json [THREADS]\n");
    return 2;
  }
  const json cfg_doc = load_json_file(argv[1]);
  Checker c(argv[1]);
  ModelShape shape = shape_from_hf_config(cfg_doc, c, "");
  c.check();
  shape.name = "model";
  auto be = backend::make_cpu_backend(argc > 2 ? std::stoi(argv[2]) : 0);

  MeasureOptions mo;
  mo.repeats = 5;
  mo.grids.tokens = pow2_grid(16, 2048);
  mo.grids.seq_len = pow2_grid(64, 512);
  mo.grids.batch = pow2_grid(1, 128);
  mo.grids.kv_len = pow2_grid(64, 512);
  RunnerLimits lim{2048, 512, 128, 512};
  auto runner = make_engine_runner(shape, *be, lim);
  const ModelProfile p = measure_model(shape, *runner, 4, mo);
  runner.reset();

  const model::ModelConfig cfg = model::parse_config(cfg_doc, argv[1]);
  model::Model m(cfg, {.layers = {0, cfg.num_hidden_layers}, .lm_head = true}, *be);
  m.init_random(1);
  const double L = static_cast<double>(shape.layers);
  fmt::print("# {}: h {} i {} layers {} heads {}/{} vocab {}; {} backend threads; medians of {} runs\n", argv[1],
             shape.hidden, shape.intermediate, shape.layers, shape.heads, shape.kv_heads, shape.vocab, be->threads(),
             mo.repeats);
  fmt::print("# pass                          predicted_ms  measured_ms  predicted/measured\n");

  // Whole-sequence passes: B sequences of S tokens.
  for (auto [seqs, seq] : {std::pair{4, 128}, {4, 256}, {2, 512}, {8, 192}}) {
    const int n = seqs * seq;
    auto acts = m.make_activations({.max_tokens = n, .max_sequences = seqs, .max_seq_len = seq, .training = true});
    std::vector<std::int32_t> toks(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) toks[static_cast<std::size_t>(i)] = i * 31 % cfg.vocab_size;
    std::vector<std::int64_t> offs;
    for (int s = 0; s <= seqs; ++s) offs.push_back(static_cast<std::int64_t>(s) * seq);
    rl::ChunkedLmHead<float> head(*be, cfg.vocab_size, cfg.hidden_size);
    const model::Batch batch{toks, offs};
    const std::vector<std::int32_t> targets = rl::next_token_targets(batch);
    backend::Buffer<std::int32_t> targets_dev(*be, targets.size());
    be->copy_to_device(targets_dev.data(), targets.data(), targets.size() * sizeof(std::int32_t));
    backend::Buffer<float> logprob(*be, targets.size()), entropy(*be, targets.size()), ones(*be, targets.size());
    const std::vector<float> one_values(targets.size(), 1.0f);
    be->copy_to_device(ones.data(), one_values.data(), one_values.size() * sizeof(float));
    auto fwd = [&] {
      m.forward(batch, acts);
      rl::token_logprobs<float>(m, acts, head, targets_dev.data(), logprob.data(), entropy.data());
    };
    const double pf = L * p.layer_fwd.at(n, seq) + p.embed_fwd.at(n) + p.head_fwd.at(n);
    const double mf = time_repeated(fwd, mo.repeats, now).median;
    // Backward: the head's, then the model's own, after a forward.
    std::vector<double> tb;
    for (int r = 0; r <= mo.repeats; ++r) {
      fwd();
      const double t0 = now();
      rl::token_logprobs_backward<float>(m, acts, head, targets_dev.data(), ones.data(), ones.data());
      m.backward(acts);
      if (r > 0) tb.push_back(now() - t0);
    }
    std::sort(tb.begin(), tb.end());
    const double pb = L * p.layer_bwd.at(n, seq) + p.embed_bwd.at(n) + p.head_bwd.at(n);
    const double mb = tb[tb.size() / 2];
    fmt::print("forward      {:>3} x {:<4} tokens  {:12.2f}  {:11.2f}  {:6.2f}\n", seqs, seq, pf * 1e3, mf * 1e3, pf / mf);
    fmt::print("fwd+bwd      {:>3} x {:<4} tokens  {:12.2f}  {:11.2f}  {:6.2f}\n", seqs, seq, (pf + pb) * 1e3,
               (mf + mb) * 1e3, (pf + pb) / (mf + mb));
  }
  // Decode steps: b sequences with k cached tokens each.
  for (auto [b, k] : {std::pair{1, 128}, {8, 256}, {16, 384}, {32, 448}, {64, 96}, {128, 96}, {128, 128}}) {
    auto cache = m.make_kv_cache(b, k + 1);
    auto acts = m.make_activations({.max_tokens = static_cast<std::int64_t>(b) * k, .max_sequences = b, .max_seq_len = k + 1});
    std::vector<model::Segment> fill, step;
    for (int s = 0; s < b; ++s) {
      fill.push_back({s, k});
      step.push_back({s, 1});
    }
    std::vector<std::int32_t> toks(static_cast<std::size_t>(b) * static_cast<std::size_t>(k), 3), one(static_cast<std::size_t>(b), 5);
    m.forward_cached(toks, fill, cache, acts);
    const double md = time_repeated(
                          [&] {
                            m.forward_cached(one, step, cache, acts);
                            for (int s = 0; s < b; ++s) cache.truncate(s, k);
                          },
                          mo.repeats, now)
                          .median;
    const double pd = L * p.layer_decode.at(b, k) + p.embed_fwd.at(b) + p.head_fwd.at(b);
    fmt::print("decode step  b {:<3} kv {:<5}       {:12.3f}  {:11.3f}  {:6.2f}\n", b, k, pd * 1e3, md * 1e3, pd / md);
  }
  return 0;
}
