// Decoding on one GPU through braid-generate's engine (gen::Generator: paged KV cache,
// continuous batching, decode steps as CUDA graphs, sampling on the device), by napkin
// math (docs/gpu.md):
//
//   bench_gpu_decode [--device cuda] [--dtype bf16] [--batches 1,64,256] [--prompt 512]
//                    [--steps 128] [--long-tail 512] [--long-max 2048] [--no-graphs]
//
// copy: the device's measured device-to-device copy bandwidth (bytes read + written per
//   second, a 2 GiB buffer, median of 10), the ceiling a decode step is held against.
// decode: for each batch B, B prompts of --prompt random tokens decode --steps tokens
//   each; a step is timed from one step's end to the next once all B sequences decode
//   (host work, graph launch and the sampled tokens' trip back included), the first 4
//   such steps left out (graph capture). tokens/s = B / step time. Effective bandwidth =
//   (weights read per step + keys and values read per step) / step time, where the
//   weights are every parameter but the embedding table (a decode step reads B rows of
//   it) and the keys and values are B sequences × their mean context during the steps.
// long tail: --long-tail prompts of 32–256 tokens, up to --long-max new tokens each,
//   ended by vocabulary/256 stop ids drawn at random (with the random model's flat
//   distribution, lengths fall off geometrically, mean ≈ 256): the run's total time and
//   the share spent after 90% of the samples had finished (what stage fusion works on).
//
// The model is the ~1B Llama of the GPU benchmarks (hidden 2048, 16 layers, 32 heads /
// 8 kv heads of 64, MLP 8192, vocabulary 32000), random weights; bf16 weights store a
// bf16 KV cache. bench/gpu/hf_decode.py runs transformers' generate on the same shapes.
#include "backend/registry.hpp"
#include "backend/dtype_option.hpp"
#include "core/cli.hpp"
#include "core/log.hpp"
#include "core/rng.hpp"
#include "generate/generate.hpp"
#include "model/model.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace braid;
namespace be = braid::backend;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string device = "cuda";
  be::DType dtype = be::DType::bf16;
  std::vector<int> batches{1, 64, 256};
  std::int64_t prompt = 512;
  std::int64_t steps = 128;
  int long_tail = 512;
  std::int64_t long_max = 2048;
  bool graphs = true;
  std::string config = "1b";
  std::int64_t copy_mb = 2048;
};

model::ModelConfig shape(const std::string& name) {
  model::ModelConfig c;
  if (name == "tiny") {  // a smoke test of this program (any device)
    c.hidden_size = 128;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.intermediate_size = 256;
    c.vocab_size = 1024;
    c.max_position_embeddings = 4096;
    return c;
  }
  if (name != "1b") throw std::invalid_argument("--config: 1b or tiny, not " + name);
  c.hidden_size = 2048;
  c.num_hidden_layers = 16;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.intermediate_size = 8192;
  c.vocab_size = 32000;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  return c;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Device-to-device copy: bytes read + written per second.
double copy_bandwidth(be::Backend& b, std::int64_t mb) {
  const std::size_t bytes = std::size_t(mb) << 20;
  be::Buffer<std::byte> src(b, bytes), dst(b, bytes);
  std::vector<double> t;
  for (int r = 0; r < 11; ++r) {
    b.synchronize();
    const auto t0 = Clock::now();
    b.copy(dst.data(), src.data(), bytes);
    b.synchronize();
    if (r > 0) t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return 2.0 * double(bytes) / t[t.size() / 2];
}

std::vector<gen::Prompt> random_prompts(int n, std::int64_t lo, std::int64_t hi, std::int32_t vocab, std::uint64_t seed) {
  Rng rng(seed, 1);
  std::vector<gen::Prompt> ps;
  for (int i = 0; i < n; ++i) {
    gen::Prompt p{.sample_id = std::uint64_t(i)};
    const std::int64_t len = lo + std::int64_t(rng.uniform() * double(hi - lo + 1));
    for (std::int64_t k = 0; k < std::min(len, hi); ++k) p.tokens.push_back(std::int32_t(rng.uniform() * vocab));
    ps.push_back(std::move(p));
  }
  return ps;
}

void decode(const model::Model& m, const Options& o, int batch, double copy_bw) {
  const auto& c = m.config();
  const auto prompts = random_prompts(batch, o.prompt, o.prompt, c.vocab_size, 7);
  constexpr int kSkip = 4;
  gen::GenerateOptions g{.sampling = {.temperature = 1.0, .seed = 1}, .max_batch = batch,
                         .max_new_tokens = o.steps + kSkip + 2, .prefill_tokens = 16384, .graphs = o.graphs};
  std::vector<double> step_s;
  std::int64_t decoding = 0;
  auto last = Clock::now();
  std::vector<gen::Prompt> unused;
  const gen::StepHook hook = [&](const gen::StepInfo& i, std::vector<gen::Prompt>&) {
    const auto now = Clock::now();
    if (i.waiting == 0 && i.running == batch && i.sampled == batch) {
      if (++decoding > kSkip && std::int64_t(step_s.size()) < o.steps)
        step_s.push_back(std::chrono::duration<double>(now - last).count());
    }
    last = now;
    return false;
  };
  const auto t0 = Clock::now();
  const gen::GenerateStats st = gen::Generator(m, g).run(prompts, [](gen::Sample&&) {}, hook, &unused);
  const double total = seconds_since(t0);
  if (step_s.empty()) {
    fmt::print("decode b{}: no pure decode steps measured ({} steps in all)\n", batch, st.steps);
    return;
  }
  std::sort(step_s.begin(), step_s.end());
  const double step = step_s[step_s.size() / 2];
  const double mean_ctx = double(o.prompt) + kSkip + 1 + double(step_s.size()) / 2;
  const double weights = double(m.parameter_bytes()) -
                         double(c.vocab_size) * c.hidden_size * double(be::dtype_size(m.dtype()));
  const be::DType kv = m.dtype() == be::DType::bf16 ? be::DType::bf16 : be::DType::f32;
  const double kv_read = double(batch) * mean_ctx * double(m.kv_block_bytes(1, kv));
  const double bw = (weights + kv_read) / step;
  fmt::print("decode b{} ctx {}: step {:.3f} ms (median of {}), {:.0f} tok/s; weights {:.2f} GB + KV {:.2f} GB per step "
             "-> {:.0f} GB/s effective = {:.0f}% of copy; {} of {} steps as graphs, {} preemptions, KV pool {:.1f} GiB, "
             "run {:.1f} s\n",
             batch, o.prompt, step * 1e3, step_s.size(), double(batch) / step, weights / 1e9, kv_read / 1e9, bw / 1e9,
             100.0 * bw / copy_bw, st.graph_steps, st.steps, st.preemptions, double(st.kv_bytes) / double(1 << 30),
             total);
}

void long_tail(const model::Model& m, const Options& o) {
  const auto& c = m.config();
  const auto prompts = random_prompts(o.long_tail, 32, 256, c.vocab_size, 11);
  gen::GenerateOptions g{.sampling = {.temperature = 1.0, .seed = 2}, .max_batch = 256, .max_new_tokens = o.long_max,
                         .prefill_tokens = 16384, .graphs = o.graphs};
  Rng rng(5, 3);
  for (int i = 0; i < std::max(1, c.vocab_size / 256); ++i) g.stop_tokens.push_back(std::int32_t(rng.uniform() * c.vocab_size));
  std::vector<double> done_at;
  std::vector<std::int64_t> lengths;
  const auto t0 = Clock::now();
  const gen::GenerateStats st = gen::Generator(m, g).run(prompts, [&](gen::Sample&& s) {
    done_at.push_back(seconds_since(t0));
    lengths.push_back(std::int64_t(s.response.size()));
  });
  const double total = seconds_since(t0);
  std::sort(lengths.begin(), lengths.end());
  const std::size_t n90 = (done_at.size() * 9 + 9) / 10;  // the sample that completes 90%
  const double at90 = done_at[std::min(done_at.size(), n90) - 1];
  std::int64_t tokens = 0;
  for (auto l : lengths) tokens += l;
  fmt::print("long tail: {} prompts, responses p50 {} p90 {} p99 {} max {} ({} tokens): total {:.1f} s, "
             "{:.0f} tok/s; 90% of samples done at {:.1f} s, the last 10% took {:.1f} s = {:.0f}% of the run; "
             "{} steps ({} as graphs), {} preemptions\n",
             done_at.size(), lengths[lengths.size() / 2], lengths[lengths.size() * 9 / 10],
             lengths[lengths.size() * 99 / 100], lengths.back(), tokens, total, double(tokens) / total, at90,
             total - at90, 100.0 * (total - at90) / total, st.steps, st.graph_steps, st.preemptions);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Decode throughput and the long tail on one GPU (docs/gpu.md)", "bench_gpu_decode"};
  app.add_option("--device", o.device)->capture_default_str();
  be::add_dtype_option(app, o.dtype);
  app.add_option("--batches", o.batches)->delimiter(',')->capture_default_str();
  app.add_option("--prompt", o.prompt, "prompt tokens of the decode runs")->capture_default_str();
  app.add_option("--steps", o.steps, "decode steps timed per batch")->capture_default_str();
  app.add_option("--long-tail", o.long_tail, "prompts of the long-tailed run (0: skip it)")->capture_default_str();
  app.add_option("--long-max", o.long_max, "most new tokens in the long-tailed run")->capture_default_str();
  app.add_flag("!--no-graphs", o.graphs, "decode without CUDA graphs");
  app.add_option("--config", o.config, "model shape: 1b, or tiny (a smoke test)")
      ->check(CLI::IsMember({"1b", "tiny"}))
      ->capture_default_str();
  app.add_option("--copy-mb", o.copy_mb, "buffer of the copy-bandwidth measurement")->capture_default_str();
  return braid::cli::run(app, argc, argv, [&] {
    log::set_level(log::Level::warn);
    auto b = be::make_backend(o.device, 0);
    model::Model m(shape(o.config), {.dtype = o.dtype}, *b);
    const auto t0 = Clock::now();
    m.init_random(1);
    b->synchronize();
    fmt::print("model: {:.2f} B parameters, {} weights ({:.2f} GB); {} ({:.0f} s to initialise)\n",
               double(m.parameter_count()) / 1e9, be::dtype_name(o.dtype), double(m.parameter_bytes()) / 1e9, b->name(),
               seconds_since(t0));
    const double copy_bw = copy_bandwidth(*b, o.copy_mb);
    fmt::print("copy: {:.0f} GB/s device-to-device (read + write, {} MiB)\n", copy_bw / 1e9, o.copy_mb);
    std::fflush(stdout);
    for (int batch : o.batches) {
      decode(m, o, batch, copy_bw);
      std::fflush(stdout);
    }
    if (o.long_tail > 0) long_tail(m, o);
    return 0;
  });
}
