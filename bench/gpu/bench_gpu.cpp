// Where the CUDA backend stands on one GPU, by napkin math: each figure is the median of
// --repeats timed runs after a warm-up (the device synchronised around each), printed
// beside the rate it implies (TFLOP/s for products and attention, tokens/s for a training
// step) so that it can be held against the GPU's ceilings (docs/gpu.md).
//
//   bench_gpu [--device cuda] [--repeats 10] [--config 100m] [--json]
//
// gemm: M = N = K = 4096, f32 (plain FP32, no TF32) and with bf16 weights (tensor cores).
// attention: 4 sequences × 2048 tokens, 16 heads / 8 kv heads of 128, forward and backward
// (causal FLOPs: 2·2·T²/2·d per head forward, 2.5× that backward).
// train step: forward + chunked LM-head logprobs + NLL + backward + AdamW on a bench config
// (bench/model/shapes.hpp) at 4 × 512 tokens; peak device memory after it.
// Runs on the CPU too (--device cpu) with smaller shapes' worth of patience.
#include "backend/registry.hpp"
#include "bench/model/shapes.hpp"
#include "core/rng.hpp"
#include "model/model.hpp"
#include "optim/adamw.hpp"
#include "rl/chunked_lm_head.hpp"

#ifdef BRAID_HAVE_CUDA
#include "backend/cuda/cuda_backend.hpp"
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

using namespace braid;
namespace be = braid::backend;

namespace {

struct Options {
  std::string device = "cuda";
  std::string config = "100m";
  int repeats = 10;
  bool json = false;
};

// Median seconds of `run` over repeats, after one warm-up; the device is synchronised so
// that the host clock measures the device's work.
double median_seconds(be::Backend& b, int repeats, const std::function<void()>& run) {
  run();
  b.synchronize();
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    b.synchronize();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void report(const Options& o, const std::string& what, const std::string& shape, double seconds, double rate,
            const char* unit) {
  if (o.json) {
    fmt::print("{{\"engine\": \"braid\", \"device\": \"{}\", \"measure\": \"{}\", \"shape\": \"{}\", \"ms\": {:.4f}, "
               "\"{}\": {:.3f}}}\n",
               o.device, what, shape, seconds * 1e3, unit, rate);
  } else {
    fmt::print("{:<22} {:<26} {:10.3f} ms {:12.2f} {}\n", what, shape, seconds * 1e3, rate, unit);
  }
  std::fflush(stdout);
}

template <typename T>
be::Buffer<T> random_buffer(be::Backend& b, std::size_t n, std::uint64_t seed, double scale = 1.0) {
  Rng rng(seed, 1);
  std::vector<T> h(n);
  for (auto& x : h) x = T(scale * (2 * rng.uniform() - 1));
  be::Buffer<T> buf(b, n);
  b.copy_to_device(buf.data(), h.data(), n * sizeof(T));
  return buf;
}

void bench_gemm(const Options& o, be::Backend& b) {
  const std::int64_t n = 4096;
  auto a = random_buffer<float>(b, std::size_t(n * n), 1), w = random_buffer<float>(b, std::size_t(n * n), 2);
  be::Buffer<float> c(b, std::size_t(n * n));
  auto& ops = b.ops<float>();
  const double flop = 2.0 * double(n) * double(n) * double(n);
  double s = median_seconds(b, o.repeats, [&] {
    ops.gemm(false, true, n, n, n, 1.0f, a.data(), n, w.data(), n, 0.0f, c.data(), n);
  });
  report(o, "gemm f32", "4096x4096x4096 NT", s, flop / s / 1e12, "TFLOP/s");
  if (!b.supports(be::Op::gemm, be::DType::bf16)) return;
  be::Buffer<std::uint16_t> w16(b, std::size_t(n * n));
  ops.convert(n * n, w.data(), be::DType::f32, w16.data(), be::DType::bf16);
  s = median_seconds(b, o.repeats, [&] {
    ops.gemm(false, true, n, n, n, 1.0f, a.data(), n, be::Weights(w16.data(), be::DType::bf16), n, 0.0f, c.data(), n);
  });
  report(o, "gemm bf16 weights", "4096x4096x4096 NT", s, flop / s / 1e12, "TFLOP/s");
}

void bench_attention(const Options& o, be::Backend& b) {
  const int heads = 16, kv = 8, hd = 128, seqs = 4;
  const std::int64_t T = 2048, rows = seqs * T;
  const be::AttentionDims dims{.n_heads = heads, .n_kv_heads = kv, .head_dim = hd, .q_stride = heads * hd,
                               .kv_stride = kv * hd};
  std::vector<be::AttentionSegment> segs;
  for (int s = 0; s < seqs; ++s) segs.push_back({.q_begin = s * T, .q_len = T, .kv_begin = s * T, .past = 0});
  auto q = random_buffer<float>(b, std::size_t(rows * heads * hd), 3);
  auto k = random_buffer<float>(b, std::size_t(rows * kv * hd), 4);
  auto v = random_buffer<float>(b, std::size_t(rows * kv * hd), 5);
  auto d_out = random_buffer<float>(b, std::size_t(rows * heads * hd), 6);
  be::Buffer<float> out(b, std::size_t(rows * heads * hd)), lse(b, std::size_t(rows * heads));
  be::Buffer<float> dq(b, q.size()), dk(b, k.size()), dv(b, v.size());
  auto& ops = b.ops<float>();
  const double flop = 4.0 * double(T) * double(T) / 2 * hd * heads * seqs;  // causal: half the pairs
  const std::string shape = fmt::format("{}x{} h{}/{} d{}", seqs, T, heads, kv, hd);
  double s = median_seconds(b, o.repeats, [&] {
    ops.attention_forward(dims, segs, q.data(), k.data(), v.data(), out.data(), lse.data());
  });
  report(o, "attention forward", shape, s, flop / s / 1e12, "TFLOP/s");
  s = median_seconds(b, o.repeats, [&] {
    ops.attention_backward(dims, segs, q.data(), k.data(), v.data(), out.data(), lse.data(), d_out.data(), dq.data(),
                           dk.data(), dv.data());
  });
  report(o, "attention backward", shape, s, 2.5 * flop / s / 1e12, "TFLOP/s");
}

void bench_train_step(const Options& o, be::Backend& b) {
  const auto cfg = bench::bench_config(o.config);
  model::Model m(cfg, {}, b);
  m.init_random(1);
  const int batch = 4, len = 512;
  const std::int64_t n = std::int64_t(batch) * len;
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  Rng rng(2, 2);
  for (auto& t : tokens) t = std::int32_t(rng.below(std::uint64_t(cfg.vocab_size)));
  std::vector<std::int64_t> offsets;
  for (int s = 0; s <= batch; ++s) offsets.push_back(std::int64_t(s) * len);
  const model::Batch mb{tokens, offsets};
  const auto targets_host = rl::next_token_targets(mb);
  std::vector<float> weight(targets_host.size());
  for (std::size_t r = 0; r < weight.size(); ++r) weight[r] = targets_host[r] >= 0 ? 1.0f : 0.0f;
  be::Buffer<std::int32_t> targets(b, targets_host.size());
  b.copy_to_device(targets.data(), targets_host.data(), targets_host.size() * sizeof(std::int32_t));
  be::Buffer<float> lp(b, std::size_t(n)), d(b, std::size_t(n)), w(b, std::size_t(n));
  b.copy_to_device(w.data(), weight.data(), weight.size() * sizeof(float));
  auto acts = m.make_activations({.max_tokens = n, .max_sequences = batch, .training = true});
  rl::ChunkedLmHead<float> head(b, cfg.vocab_size, cfg.hidden_size, 512);
  optim::AdamW opt(b, m.tensors(), {.weight_decay = 0.1});
  const double s = median_seconds(b, o.repeats, [&] {
    m.zero_grad();
    m.forward(mb, acts);
    rl::token_logprobs(m, acts, head, targets.data(), lp.data(), static_cast<float*>(nullptr));
    b.ops<float>().nll_loss(n, lp.data(), w.data(), 1.0 / double(n - batch), d.data());
    rl::token_logprobs_backward(m, acts, head, targets.data(), d.data(), static_cast<const float*>(nullptr));
    m.backward(acts);
    opt.step(1e-5);
  });
  const std::string shape = fmt::format("{} b{}xT{} ({:.0f}M)", o.config, batch, len, double(m.parameter_count()) / 1e6);
  report(o, "train step f32", shape, s, double(n) / s, "tokens/s");
  // 6 · parameters · tokens (+ attention) as the model FLOPs of a step.
  report(o, "train step f32 (6ND)", shape, s, 6.0 * double(m.parameter_count()) * double(n) / s / 1e12, "TFLOP/s");
#ifdef BRAID_HAVE_CUDA
  if (auto mem = be::device_memory_stats(b)) {
    if (!o.json) fmt::print("peak device memory {:.1f} MiB (reserved {:.1f} MiB)\n", double(mem->peak) / (1 << 20),
                            double(mem->reserved) / (1 << 20));
  }
#endif
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The CUDA backend's ops and a training step, timed (napkin math beside each)", "bench_gpu"};
  Options o;
  app.add_option("--device", o.device, "cuda[:N] or cpu")->capture_default_str();
  app.add_option("--config", o.config, "model shape of the training step: tiny or 100m")->capture_default_str();
  app.add_option("--repeats", o.repeats, "timed runs per figure (median; after one warm-up)")->capture_default_str();
  app.add_flag("--json", o.json, "one JSON object per figure instead of the table");
  CLI11_PARSE(app, argc, argv);
  try {
    auto b = be::make_backend(o.device, 0);
    if (!o.json) fmt::print("# bench_gpu on {}, median of {} runs\n", b->name(), o.repeats);
    bench_gemm(o, *b);
    bench_attention(o, *b);
    bench_train_step(o, *b);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_gpu: {}\n", e.what());
    return 2;
  }
  return 0;
}
