// braid eval's and braid synth's options, declared once (core/option_schema.hpp):
// tools/braid/cmd_eval.cpp and cmd_synth.cpp add them, the run file's "eval" section is read
// by braid eval's with a key (with its own `every`, lib/driver/run_file.cpp), and
// `braid options braid-eval` / `braid-synth` print them.
#pragma once

#include "core/option_schema.hpp"
#include "eval/eval.hpp"
#include "eval/synth.hpp"

namespace braid::eval {

// The command line of braid eval: a policy's options, or a reward model's / DPO policy's
// on pairs (--pairs, with --ref a DPO policy).
struct EvalOptions {
  PolicyEvalOptions policy;
  std::string pairs;
  std::string ref;
  double beta = 0.1;
  bool length_normalize = false;
  std::string out = "-";

  PairEvalOptions pair_options() const {
    return {.model = policy.model, .pairs = pairs, .ref = ref, .beta = beta, .length_normalize = length_normalize};
  }
};

// The options of a policy's evaluation (the run file's "eval" keys among them).
const cli::OptionSchema<PolicyEvalOptions>& policy_schema();
// braid eval's: the policy's, and those of pairs.
const cli::OptionSchema<EvalOptions>& eval_schema();

// The flags of each kind of evaluation alone, refused with the others (--beta with --prompts).
inline constexpr const char* kPolicyOnly[] = {"--reward-rule", "--reward-cmd", "--reward-cmd-dir", "--reward-cmd-timeout",
                                              "--samples", "--temperature", "--top-p", "--top-k", "--seed",
                                              "--max-new-tokens", "--max-batch", "--limit", "--correct-at", "--by", "--k"};
inline constexpr const char* kPairsOnly[] = {"--ref", "--beta", "--length-normalize", "--micro-tokens"};

// braid synth's command line.
struct SynthCommand {
  std::vector<std::string> tasks = {"sort"};   // parse_synth_task's names
  std::string format = "plain";                // parse_synth_format's
  SynthOptions opt;
  SynthCounts counts;
  std::string out;
};

const cli::OptionSchema<SynthCommand>& synth_schema();

}  // namespace braid::eval
