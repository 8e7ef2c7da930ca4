#include "score/text_reward.hpp"

#include "core/error.hpp"
#include "core/json.hpp"
#include "score/math_expr.hpp"
#include "score/rule_reward.hpp"

#include <fmt/format.h>

#include <set>

namespace braid::score {

std::vector<std::string> TextReward::problems(std::span<const TextSample>) const { return {}; }

namespace {

class RuleText final : public TextReward {
 public:
  explicit RuleText(const RuleReward& rule) : rule_(&rule) {}
  json config() const override { return {{"rule", rule_->spec()}}; }
  std::vector<double> score(std::span<const TextSample> samples) override {
    std::vector<double> out;
    for (const auto& s : samples) out.push_back((*rule_)(s.response));
    return out;
  }

 private:
  const RuleReward* rule_;
};

class OwnedRule final : public TextReward {
 public:
  explicit OwnedRule(RuleReward rule) : rule_(std::move(rule)), text_(rule_) {}
  json config() const override { return text_.config(); }
  std::vector<double> score(std::span<const TextSample> samples) override { return text_.score(samples); }

 private:
  RuleReward rule_;
  RuleText text_;
};

// Prompt lines are shared by a prompt's samples: each problem once.
void add_once(std::vector<std::string>& out, std::set<std::string>& seen, std::string problem) {
  if (seen.insert(problem).second) out.push_back(std::move(problem));
}

class MathRule final : public TextReward {
 public:
  json config() const override { return {{"rule", "math"}}; }

  std::vector<std::string> problems(std::span<const TextSample> samples) const override {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (const auto& s : samples) {
      if (!s.has_origin) {
        add_once(out, seen,
                 "/prompt/extra: is missing: --reward-rule math needs each sample's \"answer\" from its prompt line, "
                 "which braid-generate keeps in the shard (this one was written without it)");
        continue;
      }
      std::string problem;
      if (!expected_answer(s.extra, &problem)) add_once(out, seen, fmt::format("{}: answer: {}", s.where, problem));
    }
    return out;
  }

  std::vector<double> score(std::span<const TextSample> samples) override {
    std::vector<double> out;
    for (const auto& s : samples) {
      std::string problem;
      const auto expected = expected_answer(s.extra, &problem);
      if (!expected) throw InputError(s.where, "answer", problem);  // problems() let it through: a bug of the caller
      out.push_back(math_reward(s.response, *expected));
    }
    return out;
  }
};

class CommandReward final : public TextReward {
 public:
  explicit CommandReward(const ScorerOptions& opt) : process_(opt) {}
  json config() const override { return {{"command", process_.command()}}; }

  std::vector<double> score(std::span<const TextSample> samples) override {
    std::vector<std::string> lines, names;
    for (const auto& s : samples) {
      lines.push_back(scorer_line(s));
      names.push_back(s.where);
    }
    return process_.exchange(lines, names);
  }
  void finish() override { process_.finish(); }

 private:
  ScorerProcess process_;
};


}  // namespace

std::unique_ptr<TextReward> make_rule_reward(const std::string& spec) {
  if (spec == "math") return std::make_unique<MathRule>();
  return std::make_unique<OwnedRule>(RuleReward::parse(spec));
}

std::unique_ptr<TextReward> wrap_rule_reward(const RuleReward& rule) { return std::make_unique<RuleText>(rule); }

std::unique_ptr<TextReward> make_command_reward(const ScorerOptions& opt) { return std::make_unique<CommandReward>(opt); }

std::string scorer_line(const TextSample& s) {
  ordered_json line;
  line["prompt"] = s.prompt;
  line["response"] = s.response;
  line["sample_id"] = s.sample_id;
  for (const auto& [key, value] : s.extra.items()) {
    if (line.contains(key)) {
      throw InputError(s.where, key,
                       fmt::format("clashes with the \"{}\" that braid puts in each line for --reward-cmd; rename the "
                                   "prompt file's field",
                                   key));
    }
    line[key] = value;
  }
  // Invalid UTF-8 in a decoded response (a byte-level model can emit any byte) becomes U+FFFD.
  return line.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::vector<std::string> math_prompt_problems(std::string_view text, const std::string& origin, std::int64_t limit) {
  std::vector<std::string> out;
  for_each_jsonl_line(text, limit, [&](std::int64_t line_no, std::string_view line) {
    const json obj = parse_json_or_discarded(line);
    std::string problem;
    if (obj.is_object() && !expected_answer(obj, &problem)) {
      out.push_back(fmt::format("{}:{}: answer: {}", origin, line_no, problem));
    }
  });
  return out;
}

}  // namespace braid::score
