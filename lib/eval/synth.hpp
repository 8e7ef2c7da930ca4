// A synthetic verifiable task with long-tailed lengths, for experiments that must show
// learning on a small model: each item is a string of digits and an operation on it,
//
//   sort     "sort 5183=" -> "8531"     the digits in descending order
//   reverse  "rev 5183="  -> "3815"     the digits backwards
//   add      "add 51+83=" -> "134"      the sum of two numbers
//   frac     "frac 6/8="  -> "\frac{3}{4}"  the fraction in lowest terms, as LaTeX (an integer
//                                       when it is one): MATH-like answers that are no integers
//
// The number of digits n is drawn from a Pareto (power-law) tail clipped to
// [min_digits, max_digits]: P(n >= k) = (min_digits / k)^tail. Most items are short, a few
// are long, so the responses' lengths are long-tailed too (what stage fusion's migration
// of the tail is for). Digits are 1-9 (no zero, so a response never starts with one and
// the math verifier, which compares numbers, sees exactly the string); answers have at
// most 18 digits, the verifier's limit. Every draw comes from Rng(seed, stream): the same
// options give the same items on every machine.
//
// What the items become (write_synth): prompt lines {"id","prompt","answer","task","digits"}
// for braid-generate and `--reward-rule math`, SFT lines {"prompt","response"}, and
// preference pairs {"prompt","chosen","rejected"} for braid-train rm / dpo, whose rejected
// completion is the answer with one mistake (a digit changed, two swapped, one dropped or
// doubled). In a dataset's own shape (SynthFormat) the prompt lines are GSM8K's
// {"question", "answer": "<worked>\n#### <answer>"} or MATH's {"problem", "solution":
// "<worked> \boxed{<answer>}"}, and responses end the same way ("#### 134", "\boxed{134}"),
// as a model trained on those datasets answers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "core/rng.hpp"

namespace braid::eval {

enum class SynthTask { sort, reverse, add, frac };
// "sort" | "reverse" | "add" | "frac"; UsageError naming --task otherwise.
SynthTask parse_synth_task(const std::string& name);
const char* to_string(SynthTask t);

// The files' shape: braid's own keys, or a dataset's (above).
enum class SynthFormat { plain, gsm8k, math };
// "plain" | "gsm8k" | "math"; UsageError naming --format otherwise.
SynthFormat parse_synth_format(const std::string& name);

struct SynthOptions {
  std::vector<SynthTask> tasks = {SynthTask::sort};  // items cycle through them
  SynthFormat format = SynthFormat::plain;
  int min_digits = 1;
  int max_digits = 12;     // at most 18 (the verifier's limit); add: the longer operand's digits + 1 <= 18
  double tail = 1.5;       // Pareto shape: smaller is a heavier tail
  std::uint64_t seed = 0;
};

struct SynthItem {
  SynthTask task = SynthTask::sort;
  int digits = 0;          // of the operand (add: the longer operand)
  std::string prompt;      // "sort 5183="
  std::string answer;      // "8531"
};

// UsageError naming the option when the bounds are wrong.
void validate(const SynthOptions& o);

// `count` items of the stream `stream` (use different streams for disjoint draws: training
// items, held-out items).
std::vector<SynthItem> synth_items(const SynthOptions& o, std::uint64_t stream, std::int64_t count);

// The answer with one mistake, never equal to it as a number (deterministic in rng).
std::string corrupt_answer(const std::string& answer, Rng& rng);

// The JSON Lines forms of items in a format; `id_prefix` names them ("train-", "heldout-").
std::string prompt_lines(const std::vector<SynthItem>& items, const std::string& id_prefix,
                         SynthFormat format = SynthFormat::plain);
std::string sft_lines(const std::vector<SynthItem>& items, SynthFormat format = SynthFormat::plain);
std::string pair_lines(const std::vector<SynthItem>& items, std::uint64_t seed, SynthFormat format = SynthFormat::plain);

struct SynthCounts {
  std::int64_t prompts = 256;   // RL prompts (prompts.jsonl)
  std::int64_t sft = 2048;      // SFT examples (sft.jsonl)
  std::int64_t pairs = 2048;    // preference pairs (pairs.jsonl)
  std::int64_t heldout = 128;   // held-out prompts and pairs (heldout.jsonl, heldout-pairs.jsonl)
};

// Writes DIR/prompts.jsonl, sft.jsonl, pairs.jsonl, heldout.jsonl, heldout-pairs.jsonl
// (each drawn from its own stream, so changing one count leaves the others' items as they
// were) and returns a summary: files, counts, and the digit-length histogram of the prompts.
ordered_json write_synth(const SynthOptions& o, const SynthCounts& counts, const std::filesystem::path& dir);

}  // namespace braid::eval
