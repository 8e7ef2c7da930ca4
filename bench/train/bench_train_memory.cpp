// The memory braid-train sft predicts for a checkpoint (train::steps::training_memory: the
// model, its gradients, AdamW, the activations of --micro-tokens, the LM-head chunk, the
// loss arrays), as it would check it on a GPU, here for the CPU backend (the host's 128-row
// LM-head chunk): the figure bench/train/memory_1b.sh sets beside the peak resident memory it
// measures. Prints each part and the total, in bytes and MiB.
//
//   bench_train_memory base.h5 --micro-tokens 1024 [--lora-rank 16] [--recompute 1] [--dtype bf16]
#include "backend/backend.hpp"
#include "backend/dtype.hpp"
#include "train/command_steps.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

using namespace braid;

int main(int argc, char** argv) {
  CLI::App app{"braid-train sft's memory prediction for a checkpoint on the CPU backend", "bench_train_memory"};
  std::string checkpoint, dtype = "f32";
  train::CommonTrainOptions c;
  app.add_option("checkpoint", checkpoint, "The policy checkpoint (a base, for LoRA)")->required();
  app.add_option("--micro-tokens", c.micro_tokens, "As braid-train --micro-tokens")->capture_default_str();
  app.add_option("--lora-rank", c.lora.rank, "As braid-train --lora-rank (every module)")->capture_default_str();
  app.add_option("--lora-dropout", c.lora.dropout, "As braid-train --lora-dropout")->capture_default_str();
  app.add_option("--recompute", c.recompute, "As braid-train --recompute")->capture_default_str();
  app.add_option("--dtype", dtype, "As braid-train --dtype (f32 or bf16)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const auto parsed = backend::parse_dtype(dtype);
  if (!parsed) {
    fmt::print(stderr, "bench_train_memory: --dtype {}: f32 or bf16\n", dtype);
    return 2;
  }
  c.dtype = *parsed;
  const auto be = backend::make_cpu_backend(1);
  const memory::Prediction p =
      train::steps::training_memory(*be, c, {{checkpoint, "policy", train::steps::ObjectiveKind::sft}});
  for (const memory::Part& part : p.parts) {
    if (part.bytes > 0) fmt::print("{:<60} {:>14} bytes {:>11.1f} MiB\n", part.name, part.bytes, double(part.bytes) / (1 << 20));
  }
  fmt::print("{:<60} {:>14} bytes {:>11.1f} MiB\n", "total", p.total(), double(p.total()) / (1 << 20));
  return 0;
}
