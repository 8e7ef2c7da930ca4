// Where the CUDA backend stands on one GPU, by napkin math: each figure is the median of
// timed runs after a warm-up (the device synchronised around each), printed beside the
// rate it implies (TFLOP/s, tokens/s) so that it can be held against the GPU's ceilings and
// against PyTorch on the same GPU (bench/gpu/torch_gpu.py, docs/gpu.md).
//
//   bench_gpu [--device cuda] [--part ops,train,score] [--config 1b] [--batch 4] [--seq 2048]
//             [--repeats 10] [--steps 5] [--json]
//
// ops:   products at 4096³ (f32 exact; bf16 weights) and at the 1B model's weight-gradient
//        shape under bf16 precision; attention on 4 × 2048 tokens of the 1B model's heads
//        (32 / 4 of 64), exact f32 and under bf16 precision (the tensor-core kernels), forward
//        and backward (causal FLOPs: 4·T²/2·d per head forward, 2.5× that backward).
// train: training steps of the config in bf16 (bf16 weights, f32 masters, AdamW): forward,
//        chunked LM-head logprobs, NLL, backward, optimizer; tokens/s, model TFLOP/s and the
//        peak device memory. Model FLOPs per token: 6·N (N: the parameters of the products,
//        LM head included) + 6·L·H·hd·(T+1) for causal attention (3 × forward).
// score: braid-score's reference pass (forward + chunked LM-head logprobs) and critic pass
//        (forward + value head) on two bf16 models of the config, over --batch sequences of
//        --seq tokens: tokens/s of both passes together and their model TFLOP/s.
// With --json each figure is also printed as one JSON object (run.sh's summary reads them).
#include "backend/registry.hpp"
#include "bench/model/shapes.hpp"
#include "core/cli.hpp"
#include "core/rng.hpp"
#include "io/sample_batch.hpp"
#include "model/model.hpp"
#include "optim/adamw.hpp"
#include "rl/chunked_lm_head.hpp"
#include "score/model_passes.hpp"

#ifdef BRAID_HAVE_CUDA
#include "backend/cuda/cuda_backend.hpp"
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <sstream>
#include <vector>

using namespace braid;
namespace be = braid::backend;

namespace {

struct Options {
  std::string device = "cuda";
  std::vector<std::string> parts{"ops", "train", "score"};
  std::string config = "1b";
  std::string dtype = "bf16";
  int batch = 4;
  std::int64_t seq = 2048;
  int repeats = 10;
  int steps = 5;
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

// One figure: the table line, and with --json the same as a JSON object.
struct Figure {
  std::string part, measure, shape;
  double seconds = 0, rate = 0;
  const char* unit = "";
  std::optional<double> tokens_per_s, tflops, flop_per_token, peak_mib;
};

void report(const Options& o, const Figure& f) {
  fmt::print("{:<30} {:<30} {:10.3f} ms {:12.2f} {}\n", f.measure, f.shape, f.seconds * 1e3, f.rate, f.unit);
  if (o.json) {
    std::ostringstream j;
    j << fmt::format(R"({{"engine": "braid", "device": "{}", "part": "{}", "measure": "{}", "shape": "{}", "ms": {:.4f})",
                     o.device, f.part, f.measure, f.shape, f.seconds * 1e3);
    if (f.tokens_per_s) j << fmt::format(R"(, "tokens_per_s": {:.1f})", *f.tokens_per_s);
    if (f.tflops) j << fmt::format(R"(, "tflops": {:.2f})", *f.tflops);
    if (f.flop_per_token) j << fmt::format(R"(, "flop_per_token": {:.6g})", *f.flop_per_token);
    if (f.peak_mib) j << fmt::format(R"(, "peak_mib": {:.0f})", *f.peak_mib);
    j << "}";
    fmt::print("{}\n", j.str());
  }
  std::fflush(stdout);
}

std::optional<double> peak_mib(be::Backend& b) {
#ifdef BRAID_HAVE_CUDA
  if (auto mem = be::device_memory_stats(b)) return double(mem->peak) / double(1 << 20);
#else
  (void)b;
#endif
  return std::nullopt;
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

be::DType dtype_of(const Options& o) {
  if (o.dtype == "bf16") return be::DType::bf16;
  if (o.dtype == "f32") return be::DType::f32;
  throw std::invalid_argument("--dtype " + o.dtype + " (f32 or bf16)");
}

// The model FLOPs per token of a forward: 2·N over the products (LM head when `lm_head`,
// the 1-wide value head otherwise) and causal attention over sequences of `seq` tokens.
double forward_flop_per_token(const model::ModelConfig& c, std::int64_t seq, bool lm_head) {
  const double D = c.hidden_size, I = c.intermediate_size, L = c.num_hidden_layers, hd = c.head_dim();
  const double H = c.num_attention_heads, qkv = c.qkv_dim();
  const double layer = D * qkv + H * hd * D + 3 * D * I;
  const double head = lm_head ? double(c.vocab_size) * D : D;
  return 2 * (L * layer + head) + 2 * L * H * hd * double(seq + 1);
}

void bench_ops(const Options& o, be::Backend& b) {
  auto& ops = b.ops<float>();
  {
    const std::int64_t n = 4096;
    auto a = random_buffer<float>(b, std::size_t(n * n), 1), w = random_buffer<float>(b, std::size_t(n * n), 2);
    be::Buffer<float> c(b, std::size_t(n * n));
    const double flop = 2.0 * double(n) * double(n) * double(n);
    double s = median_seconds(b, o.repeats, [&] {
      ops.gemm(false, true, n, n, n, 1.0f, a.data(), n, w.data(), n, 0.0f, c.data(), n);
    });
    report(o, {"ops", "gemm f32", "4096x4096x4096 NT", s, flop / s / 1e12, "TFLOP/s"});
    if (b.supports(be::Op::gemm, be::DType::bf16)) {
      be::Buffer<std::uint16_t> w16(b, std::size_t(n * n));
      ops.convert(n * n, w.data(), be::DType::f32, w16.data(), be::DType::bf16);
      s = median_seconds(b, o.repeats, [&] {
        ops.gemm(false, true, n, n, n, 1.0f, a.data(), n, be::Weights(w16.data(), be::DType::bf16), n, 0.0f, c.data(),
                 n);
      });
      report(o, {"ops", "gemm bf16 weights", "4096x4096x4096 NT", s, flop / s / 1e12, "TFLOP/s"});
    }
  }
  {
    // The 1B model's largest weight gradient: d_gate_up[2I × D] += d_gate_upᵀ · ln2, over 8192 rows.
    const std::int64_t m = 2 * 5632, n = 2048, k = 8192;
    auto da = random_buffer<float>(b, std::size_t(k * m), 3), x = random_buffer<float>(b, std::size_t(k * n), 4);
    be::Buffer<float> g(b, std::size_t(m * n));
    be::PrecisionScope precision(b, be::DType::bf16);
    const double s = median_seconds(b, o.repeats, [&] {
      ops.gemm(true, false, m, n, k, 1.0f, da.data(), m, x.data(), n, 1.0f, g.data(), n);
    });
    report(o, {"ops", "gemm bf16 precision (dW)", "11264x2048x8192 TN", s, 2.0 * m * n * k / s / 1e12, "TFLOP/s"});
  }
  {
    const int heads = 32, kv = 4, hd = 64, seqs = 4;
    const std::int64_t T = 2048, rows = seqs * T;
    const be::AttentionDims dims{.n_heads = heads, .n_kv_heads = kv, .head_dim = hd, .q_stride = heads * hd,
                                 .kv_stride = kv * hd};
    std::vector<be::AttentionSegment> segs;
    for (int s = 0; s < seqs; ++s) segs.push_back({.q_begin = s * T, .q_len = T, .kv_begin = s * T, .past = 0});
    auto q = random_buffer<float>(b, std::size_t(rows * heads * hd), 5);
    auto k = random_buffer<float>(b, std::size_t(rows * kv * hd), 6);
    auto v = random_buffer<float>(b, std::size_t(rows * kv * hd), 7);
    auto d_out = random_buffer<float>(b, std::size_t(rows * heads * hd), 8);
    be::Buffer<float> out(b, std::size_t(rows * heads * hd)), lse(b, std::size_t(rows * heads));
    be::Buffer<float> dq(b, q.size()), dk(b, k.size()), dv(b, v.size());
    const double flop = 4.0 * double(T) * double(T) / 2 * hd * heads * seqs;  // causal: half the pairs
    const std::string shape = fmt::format("{}x{} h{}/{} d{}", seqs, T, heads, kv, hd);
    for (const be::DType precision : {be::DType::f32, be::DType::bf16}) {
      be::PrecisionScope scope(b, precision);
      const std::string tag = precision == be::DType::bf16 ? "bf16 precision" : "f32 exact";
      const int repeats = precision == be::DType::f32 ? std::min(o.repeats, 3) : o.repeats;  // the exact kernels are slow
      double s = median_seconds(b, repeats, [&] {
        ops.attention_forward(dims, segs, q.data(), k.data(), v.data(), out.data(), lse.data());
      });
      report(o, {"ops", "attention forward " + tag, shape, s, flop / s / 1e12, "TFLOP/s"});
      s = median_seconds(b, repeats, [&] {
        ops.attention_backward(dims, segs, q.data(), k.data(), v.data(), out.data(), lse.data(), d_out.data(),
                               dq.data(), dk.data(), dv.data());
      });
      report(o, {"ops", "attention backward " + tag, shape, s, 2.5 * flop / s / 1e12, "TFLOP/s"});
    }
  }
}

std::vector<std::int32_t> random_tokens(std::int64_t n, std::int64_t vocab, std::uint64_t seed) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  Rng rng(seed, 2);
  for (auto& t : tokens) t = std::int32_t(rng.below(std::uint64_t(vocab)));
  return tokens;
}

void bench_train(const Options& o, be::Backend& b) {
  auto cfg = bench::bench_config(o.config);
  cfg.max_position_embeddings = std::max<int>(cfg.max_position_embeddings, int(o.seq));
  model::Model m(cfg, {.dtype = dtype_of(o)}, b);
  m.init_random(1);
  const std::int64_t n = std::int64_t(o.batch) * o.seq;
  const auto tokens = random_tokens(n, cfg.vocab_size, 2);
  std::vector<std::int64_t> offsets;
  for (int s = 0; s <= o.batch; ++s) offsets.push_back(std::int64_t(s) * o.seq);
  const model::Batch mb{tokens, offsets};
  const auto targets_host = rl::next_token_targets(mb);
  std::vector<float> weight(targets_host.size());
  for (std::size_t r = 0; r < weight.size(); ++r) weight[r] = targets_host[r] >= 0 ? 1.0f : 0.0f;
  be::Buffer<std::int32_t> targets(b, targets_host.size());
  b.copy_to_device(targets.data(), targets_host.data(), targets_host.size() * sizeof(std::int32_t));
  be::Buffer<float> lp(b, std::size_t(n)), d(b, std::size_t(n)), w(b, std::size_t(n));
  b.copy_to_device(w.data(), weight.data(), weight.size() * sizeof(float));
  auto acts = m.make_activations({.max_tokens = n, .max_sequences = o.batch, .training = true});
  rl::ChunkedLmHead<float> head(b, cfg.vocab_size, cfg.hidden_size, std::min<std::int64_t>(n, 2048));
  optim::AdamW opt(b, m.tensors(), {.weight_decay = 0.1});
  const double s = median_seconds(b, o.steps, [&] {
    m.zero_grad();
    m.forward(mb, acts);
    rl::token_logprobs(m, acts, head, targets.data(), lp.data(), static_cast<float*>(nullptr));
    b.ops<float>().nll_loss(n, lp.data(), w.data(), 1.0 / double(n - o.batch), d.data());
    rl::token_logprobs_backward(m, acts, head, targets.data(), d.data(), static_cast<const float*>(nullptr));
    m.backward(acts);
    opt.step(1e-5);
  });
  const double fpt = 3 * forward_flop_per_token(cfg, o.seq, true);
  const std::string shape = fmt::format("{} {} b{}xT{} ({:.0f}M)", o.config, o.dtype, o.batch, o.seq,
                                        double(m.parameter_count()) / 1e6);
  Figure f{"train", "train step", shape, s, double(n) / s, "tokens/s"};
  f.tokens_per_s = double(n) / s;
  f.tflops = fpt * double(n) / s / 1e12;
  f.flop_per_token = fpt;
  f.peak_mib = peak_mib(b);
  report(o, f);
  fmt::print("{:<30} {:<30} {:>13} {:12.2f} TFLOP/s (model FLOPs, {:.3g} a token)\n", "", "", "", *f.tflops, fpt);
  if (f.peak_mib) fmt::print("peak device memory {:.0f} MiB\n", *f.peak_mib);
}

void bench_score(const Options& o, be::Backend& b) {
  auto cfg = bench::bench_config(o.config);
  cfg.max_position_embeddings = std::max<int>(cfg.max_position_embeddings, int(o.seq));
  const be::DType dtype = dtype_of(o);
  model::Model reference(cfg, {.dtype = dtype}, b);
  model::Model critic(cfg, {.lm_head = false, .value_head = true, .dtype = dtype}, b);
  reference.init_random(3);
  critic.init_random(4);
  io::SampleBatch batch;
  for (int s = 0; s < o.batch; ++s) {
    const auto seq = random_tokens(o.seq, cfg.vocab_size, 10 + std::uint64_t(s));
    batch.add(seq, std::int32_t(std::min<std::int64_t>(128, o.seq / 2)), s);
  }
  const std::int64_t micro = std::int64_t(o.batch) * o.seq;
  score::ReferencePass ref(reference, micro);
  score::ValuePass val(critic, micro);
  const double s = median_seconds(b, o.steps, [&] {
    (void)ref.logprobs(batch);
    (void)val.values(batch);
  });
  const double n = double(micro);
  const double fpt = forward_flop_per_token(cfg, o.seq, true) + forward_flop_per_token(cfg, o.seq, false);
  Figure f{"score", "score reference + critic",
           fmt::format("{} {} b{}xT{}", o.config, o.dtype, o.batch, o.seq), s, n / s, "tokens/s"};
  f.tokens_per_s = n / s;
  f.tflops = fpt * n / s / 1e12;
  f.flop_per_token = fpt;
  f.peak_mib = peak_mib(b);
  report(o, f);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The CUDA backend's products, attention, a training step and the scoring passes, timed", "bench_gpu"};
  Options o;
  app.add_option("--device", o.device, "cuda[:N] or cpu")->capture_default_str();
  app.add_option("--part", o.parts, "what to time: ops, train, score (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"ops", "train", "score"}))
      ->capture_default_str();
  app.add_option("--config", o.config, "model shape of train and score: tiny, 100m or 1b")
      ->check(CLI::IsMember({"tiny", "100m", "1b"}))
      ->capture_default_str();
  app.add_option("--dtype", o.dtype, "weights of train and score: bf16 or f32")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  app.add_option("--batch", o.batch, "sequences a step (train, score)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seq", o.seq, "tokens a sequence (train, score)")->check(CLI::Range(2, 1 << 20))->capture_default_str();
  app.add_option("--repeats", o.repeats, "timed runs per ops figure (median; after one warm-up)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--steps", o.steps, "timed steps of train and score (median; after one warm-up)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--json", o.json, "also print each figure as one JSON object");
  // Bad flags exit 2 like the tools' (cli::run), and so does anything the run throws.
  return braid::cli::run(app, argc, argv, [&] {
    auto b = be::make_backend(o.device, 0);
    fmt::print("# bench_gpu on {}: {}\n", b->name(), fmt::join(o.parts, ", "));
    std::fflush(stdout);
    for (const std::string& part : o.parts) {
      if (part == "ops") bench_ops(o, *b);
      if (part == "train") bench_train(o, *b);
      if (part == "score") bench_score(o, *b);
    }
    return 0;
  });
}
