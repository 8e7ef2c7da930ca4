// braid synth -o DIR: the synthetic verifiable task with long-tailed lengths
// (lib/eval/synth): RL prompts with answers, SFT examples, preference pairs and
// held-out prompts and pairs, seeded and deterministic (its options: lib/eval/option_schema).
// Prints a summary (JSON).
#include <iostream>
#include <memory>

#include "core/error.hpp"
#include "eval/option_schema.hpp"
#include "verbs.hpp"

namespace braid::driver {
namespace {

int run_synth(eval::SynthCommand& o) {
  o.opt.tasks.clear();
  for (const auto& t : o.tasks) o.opt.tasks.push_back(eval::parse_synth_task(t));
  o.opt.format = eval::parse_synth_format(o.format);
  const ordered_json summary = eval::write_synth(o.opt, o.counts, o.out);
  std::cout << summary.dump() << '\n';
  return 0;
}

}  // namespace

void add_synth_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<eval::SynthCommand>();
  auto* sub = app.add_subcommand(
      "synth", "Write a synthetic verifiable task (sort / reverse / add digit strings, lengths from a Pareto tail): "
               "prompts.jsonl with answers, sft.jsonl, pairs.jsonl, heldout.jsonl, heldout-pairs.jsonl");
  cli::add_schema_options(*sub, *o, eval::synth_schema());
  verbs.add(sub, [o] { return run_synth(*o); });
}

}  // namespace braid::driver
