#include "rl/sequence_layout.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace braid::rl {

void SequenceLayout::check(const char* what) const {
  if (offsets.size() != size() + 1 || offsets.front() != 0) {
    throw std::invalid_argument(fmt::format("{}: {} offsets for {} sequences (want one more, the first 0)", what,
                                            offsets.size(), size()));
  }
  for (std::size_t i = 0; i < size(); ++i) {
    if (offsets[i + 1] < offsets[i] || prompt_len[i] < 0 || offsets[i] + prompt_len[i] > offsets[i + 1]) {
      throw std::invalid_argument(fmt::format("{}: sequence {} has offsets [{}, {}) and a prompt of {} tokens", what,
                                              i, offsets[i], offsets[i + 1], prompt_len[i]));
    }
  }
}

void SequenceLayout::check_per_token(const char* what, const char* array, std::size_t per_token) const {
  if (per_token != token_count()) {
    throw std::invalid_argument(
        fmt::format("{}: {} has {} entries for {} tokens", what, array, per_token, token_count()));
  }
}

}  // namespace braid::rl
