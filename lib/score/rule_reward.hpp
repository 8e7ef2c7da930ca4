// Rewards by rule on a response's text, for runs without a reward model (tests, demos,
// verifiable tasks). A rule is named on the command line (--reward-rule):
//
//   digits     the fraction of the response's characters that are ASCII digits 0-9
//   chars:SET  the fraction of its characters that occur in SET (taken literally, UTF-8)
//   length:N   1 - |characters - N| / N, floored at 0 (N a positive integer)
//   regex:RE   1 when RE (ECMAScript syntax) matches somewhere in the response, else 0;
//              anchor it (^...$) to match the whole response
//
// Characters are Unicode code points of the UTF-8 text (a byte that is not valid UTF-8
// counts as one character). An empty response scores 0 under the fraction rules.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace braid::score {

class RuleReward {
 public:
  // InputError naming --reward-rule for an unknown rule or a bad argument.
  static RuleReward parse(const std::string& spec);

  double operator()(std::string_view response) const;
  const std::string& spec() const { return spec_; }

  ~RuleReward();
  RuleReward(RuleReward&&) noexcept;
  RuleReward& operator=(RuleReward&&) noexcept;

 private:
  struct Impl;
  explicit RuleReward(std::string spec, std::unique_ptr<Impl> impl);
  std::string spec_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid::score
