#include "score/rule_reward.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <regex>
#include <vector>

namespace braid::score {
namespace {

constexpr const char* kRewardRule = "--reward-rule";

// Code points of UTF-8 text; a byte that starts no valid sequence stands for itself.
std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (!ok) {
      out.push_back(b);
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? b : b & (0xFF >> (len + 1));
    for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

}  // namespace

struct RuleReward::Impl {
  enum class Kind { digits, chars, length, regex } kind = Kind::digits;
  std::vector<char32_t> set;
  std::int64_t length = 0;
  std::regex re;
};

RuleReward::RuleReward(std::string spec, std::unique_ptr<Impl> impl) : spec_(std::move(spec)), impl_(std::move(impl)) {}
RuleReward::~RuleReward() = default;
RuleReward::RuleReward(RuleReward&&) noexcept = default;
RuleReward& RuleReward::operator=(RuleReward&&) noexcept = default;

RuleReward RuleReward::parse(const std::string& spec) {
  auto impl = std::make_unique<Impl>();
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const bool has_arg = colon != std::string::npos;
  if (name == "digits") {
    if (has_arg) throw InputError("", kRewardRule, fmt::format("'{}': the digits rule takes no argument", spec));
    impl->kind = Impl::Kind::digits;
  } else if (name == "chars") {
    if (arg.empty()) throw InputError("", kRewardRule, fmt::format("'{}': chars needs a set of characters, as chars:abc", spec));
    impl->kind = Impl::Kind::chars;
    impl->set = code_points(arg);
  } else if (name == "length") {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), n);
    if (arg.empty() || ec != std::errc{} || end != arg.data() + arg.size() || n <= 0) {
      throw InputError("", kRewardRule, fmt::format("'{}': length needs a positive whole number of characters, as length:32", spec));
    }
    impl->kind = Impl::Kind::length;
    impl->length = n;
  } else if (name == "regex") {
    if (arg.empty()) throw InputError("", kRewardRule, fmt::format("'{}': regex needs an expression, as regex:^[0-9]+$", spec));
    impl->kind = Impl::Kind::regex;
    try {
      impl->re = std::regex(arg, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw InputError("", kRewardRule, fmt::format("'{}': not a valid ECMAScript regular expression ({})", spec, e.what()));
    }
  } else {
    throw InputError("", kRewardRule, fmt::format("unknown rule '{}' (rules: digits, chars:SET, length:N, regex:RE, math)", spec));
  }
  return RuleReward(spec, std::move(impl));
}

double RuleReward::operator()(std::string_view response) const {
  const Impl& r = *impl_;
  if (r.kind == Impl::Kind::regex) {
    return std::regex_search(response.begin(), response.end(), r.re) ? 1.0 : 0.0;
  }
  const std::vector<char32_t> cps = code_points(response);
  const auto n = static_cast<double>(cps.size());
  switch (r.kind) {
    case Impl::Kind::digits:
      if (cps.empty()) return 0.0;
      return double(std::count_if(cps.begin(), cps.end(), [](char32_t c) { return c >= U'0' && c <= U'9'; })) / n;
    case Impl::Kind::chars:
      if (cps.empty()) return 0.0;
      return double(std::count_if(cps.begin(), cps.end(), [&](char32_t c) {
               return std::find(r.set.begin(), r.set.end(), c) != r.set.end();
             })) / n;
    case Impl::Kind::length: {
      const double want = double(r.length);
      return std::max(0.0, 1.0 - std::abs(n - want) / want);
    }
    case Impl::Kind::regex:
      break;
  }
  return 0.0;
}

}  // namespace braid::score
