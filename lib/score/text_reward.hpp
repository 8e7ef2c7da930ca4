// Rewards computed from a sample's text instead of by a reward model:
//
//   a rule        --reward-rule digits | chars:SET | length:N | regex:RE  (rule_reward.hpp)
//   the verifier  --reward-rule math: the response's final answer against the prompt
//                 line's "answer" (math_answer.hpp)
//   a scorer      --reward-cmd 'CMD': the user's program, one JSON line per sample in,
//                 one reward per line out (scorer_process.hpp)
//
// Each sees the prompt and the response decoded by the tokenizer (special tokens
// skipped) and the extra fields of the sample's prompt line (io::PromptOrigin), and
// scores a whole batch at once (a scorer process gets the batch's lines together).
#pragma once

#include "core/json.hpp"
#include "score/scorer_process.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace braid::score {

class RuleReward;

struct TextSample {
  std::int64_t sample_id = 0;
  std::string prompt;    // decoded
  std::string response;  // decoded
  json extra = json::object();  // the prompt line's extra fields
  bool has_origin = false;      // false: the shard kept no prompt origins (extra is empty)
  std::string where;     // "prompts.jsonl:4" (its prompt line), else "gen-00001.h5: sample 7"
};

class TextReward {
 public:
  virtual ~TextReward() = default;
  // What it is, for logs and meta.config: {"rule": "math"} or {"command": "..."}.
  virtual json config() const = 0;
  // Every sample whose prompt line lacks what this reward needs, as "WHERE: FIELD:
  // PROBLEM" (one per prompt line; "/prompt/extra: ..." once for samples without an
  // origin, the shard being named by the caller); checked before anything is scored.
  virtual std::vector<std::string> problems(std::span<const TextSample> samples) const;
  // One reward per sample, each finite. InputError for a scorer that fails.
  virtual std::vector<double> score(std::span<const TextSample> samples) = 0;
  // The end of the run (a scorer process is told and waited for).
  virtual void finish() {}
};

// --reward-rule SPEC: the rules of rule_reward.hpp and "math". InputError naming
// --reward-rule for an unknown rule or a bad argument.
std::unique_ptr<TextReward> make_rule_reward(const std::string& spec);
// A rule already parsed, used as a TextReward (not owned; must outlive it).
std::unique_ptr<TextReward> wrap_rule_reward(const RuleReward& rule);
// --reward-cmd CMD (with --reward-cmd-dir, --reward-cmd-timeout). Starts nothing yet.
std::unique_ptr<TextReward> make_command_reward(const ScorerOptions& opt);

// The line a scorer process reads for a sample: {"prompt", "response", "sample_id",
// then the extra fields}. InputError naming the sample's prompt line and the field
// when an extra field is called "response" or "sample_id".
std::string scorer_line(const TextSample& s);

// The math rule's check of a prompt file before anything runs (braid run): every
// prompt line (blank lines skipped; the first `limit` prompts, 0: all) that is a JSON
// object must carry an "answer" that is a number. Each problem "FILE:LINE: answer: ...";
// lines that are not JSON objects are left to braid-generate to report.
std::vector<std::string> math_prompt_problems(std::string_view text, const std::string& origin, std::int64_t limit = 0);

}  // namespace braid::score
