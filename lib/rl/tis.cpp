#include "rl/tis.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace braid::rl {

TisSummary truncated_importance_sampling(const SequenceLayout& layout, std::span<const float> proximal,
                                         std::span<const float> behaviour, double cap, std::span<float> advantages) {
  constexpr const char* what = "truncated_importance_sampling";
  layout.check(what);
  layout.check_per_token(what, "proximal", proximal.size());
  layout.check_per_token(what, "behaviour", behaviour.size());
  layout.check_per_token(what, "advantages", advantages.size());
  if (!(cap > 0)) throw std::invalid_argument("truncated_importance_sampling: the cap must be > 0");
  TisSummary s;
  double sum = 0;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    for (std::size_t t = layout.response_begin(i); t < layout.end(i); ++t) {
      const double log_ratio = double(proximal[t]) - double(behaviour[t]);
      const double w = std::min(std::exp(log_ratio), cap);
      if (w == cap) ++s.truncated;
      advantages[t] = static_cast<float>(w * double(advantages[t]));
      sum += w;
      s.max_abs_log_ratio = std::max(s.max_abs_log_ratio, std::abs(log_ratio));
      ++s.tokens;
    }
  }
  if (s.tokens > 0) s.mean_weight = sum / double(s.tokens);
  return s;
}

}  // namespace braid::rl
