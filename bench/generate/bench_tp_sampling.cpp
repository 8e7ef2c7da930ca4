// The cost of sampling under tensor parallelism: each decode step gathers the
// vocabulary-parallel logits rows ([running sequences × V/tp] from every tp rank) so
// that every rank samples the same tokens from the full rows (model::lm_logits). This
// times a greedy generation at tp = the job's ranks, then the same all-gathers alone
// (as many as the run's steps, of its rows), and prints both (docs/parallel.md):
//
//   mpirun -np 2 bench_tp_sampling --vocab 32000 --hidden 512 --sequences 16 --steps 32
#include "backend/registry.hpp"
#include "comm/communicator.hpp"
#include "comm/mpi.hpp"
#include "generate/generate.hpp"
#include "model/model.hpp"
#include "model/tensor_parallel.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <vector>

using namespace braid;

int main(int argc, char** argv) {
  comm::MpiRuntime mpi(&argc, &argv);
  auto world = comm::mpi_world();
  int vocab = 32000, hidden = 512, layers = 4, sequences = 16, steps = 32, threads = 1;
  CLI::App app{"Sampling under tensor parallelism: decode steps against their logits all-gathers"};
  app.add_option("--vocab", vocab)->capture_default_str();
  app.add_option("--hidden", hidden)->capture_default_str();
  app.add_option("--layers", layers)->capture_default_str();
  app.add_option("--sequences", sequences, "Sequences decoding together")->capture_default_str();
  app.add_option("--steps", steps, "Tokens each sequence generates")->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const int tp = world->size(), rank = world->rank();
  const model::ModelConfig cfg{.hidden_size = hidden, .num_hidden_layers = layers, .num_attention_heads = 8,
                               .num_key_value_heads = 4, .intermediate_size = hidden * 8 / 3, .vocab_size = vocab,
                               .rms_norm_eps = 1e-5, .max_position_embeddings = 512};
  auto be = backend::make_backend("cpu", threads);
  model::Model m(cfg, {.tp = {tp, rank, tp > 1 ? world.get() : nullptr}}, *be);
  m.init_random(1);

  std::vector<gen::Prompt> prompts;
  for (int i = 0; i < sequences; ++i) prompts.push_back({.sample_id = std::uint64_t(i), .tokens = {1, 2, 3, 4}});
  gen::GenerateStats stats;
  world->barrier();
  gen::generate(m, prompts, {.sampling = {.temperature = 0}, .max_batch = sequences, .max_new_tokens = steps}, &stats);

  // The same all-gathers alone: one per step of the run, of `sequences` rows.
  std::vector<std::size_t> counts;
  for (int r = 0; r < tp; ++r) {
    const auto [b, e] = model::split_range(vocab, tp, r);
    counts.push_back(std::size_t(sequences) * std::size_t(e - b));
  }
  std::vector<float> rows(std::size_t(sequences) * std::size_t(vocab), 1.0f);
  world->barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t s = 0; s < stats.steps; ++s) {
    if (tp > 1) world->all_gather_varying(std::span<float>(rows), counts);
  }
  const double gather = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rank == 0) {
    const double step_ms = 1e3 * (stats.prefill_seconds + stats.decode_seconds) / double(stats.steps);
    const double gather_ms = 1e3 * gather / double(stats.steps);
    std::printf("tp %d  V %d  D %d  L %d  rows %d: %lld steps, %.3f ms a step, all-gather of %.2f MB %.3f ms a step "
                "(%.1f%% of the step)\n",
                tp, vocab, hidden, layers, sequences, static_cast<long long>(stats.steps), step_ms,
                4.0 * sequences * vocab / 1e6, gather_ms, 100.0 * gather_ms / step_ms);
  }
  return 0;
}
