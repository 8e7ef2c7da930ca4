// braid synth -o DIR: the synthetic verifiable task with long-tailed lengths
// (lib/eval/synth): RL prompts with answers, SFT examples, preference pairs and
// held-out prompts and pairs, seeded and deterministic. Prints a summary (JSON).
#include <iostream>
#include <memory>

#include "core/error.hpp"
#include "eval/synth.hpp"
#include "verbs.hpp"

namespace braid::driver {
namespace {

struct SynthCli {
  std::vector<std::string> tasks = {"sort"};
  std::string format = "plain";
  eval::SynthOptions opt;
  eval::SynthCounts counts;
  std::string out;
};

int run_synth(SynthCli& o) {
  o.opt.tasks.clear();
  for (const auto& t : o.tasks) o.opt.tasks.push_back(eval::parse_synth_task(t));
  o.opt.format = eval::parse_synth_format(o.format);
  const ordered_json summary = eval::write_synth(o.opt, o.counts, o.out);
  std::cout << summary.dump() << '\n';
  return 0;
}

}  // namespace

void add_synth_command(CLI::App& app, Verbs& verbs) {
  auto o = std::make_shared<SynthCli>();
  auto* sub = app.add_subcommand(
      "synth", "Write a synthetic verifiable task (sort / reverse / add digit strings, lengths from a Pareto tail): "
               "prompts.jsonl with answers, sft.jsonl, pairs.jsonl, heldout.jsonl, heldout-pairs.jsonl");
  sub->add_option("-o,--output", o->out, "Output folder")->required();
  sub->add_option("--task", o->tasks, "sort, reverse, add or frac (several: the items cycle through them)")
      ->capture_default_str()->delimiter(',');
  sub->add_option("--format", o->format, "The files' shape: plain (prompt/answer), gsm8k (question, answer ending "
                                         "\"#### N\") or math (problem, solution with \\boxed{N})")
      ->capture_default_str();
  sub->add_option("--min-digits", o->opt.min_digits, "Fewest digits")->capture_default_str();
  sub->add_option("--max-digits", o->opt.max_digits, "Most digits (answers stay within the verifier's 18)")->capture_default_str();
  sub->add_option("--tail", o->opt.tail, "Pareto shape of the digit count: P(n >= k) = (min/k)^tail")->capture_default_str();
  sub->add_option("--seed", o->opt.seed, "Seed (the same seed and options give the same files)")->capture_default_str();
  sub->add_option("--prompts", o->counts.prompts, "RL prompts")->capture_default_str();
  sub->add_option("--sft", o->counts.sft, "SFT examples")->capture_default_str();
  sub->add_option("--pairs", o->counts.pairs, "Preference pairs")->capture_default_str();
  sub->add_option("--heldout", o->counts.heldout, "Held-out prompts (and pairs)")->capture_default_str();
  verbs.add(sub, [o] { return run_synth(*o); });
}

}  // namespace braid::driver
