#include "io/finite.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "core/error.hpp"
#include "io/sample_batch.hpp"

namespace braid::io {

namespace {

// A float is NaN or ±Inf exactly when its exponent bits are all ones. Integer
// bit tests keep the answer right under -ffast-math (where isfinite may fold to
// true) and vectorise: OR a block's flags, and look closer only at a bad block.
constexpr std::uint32_t kExponent = 0x7f800000u;

bool block_has_non_finite(const float* p, std::size_t n) {
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < n; ++i) {
    any |= static_cast<std::uint32_t>((std::bit_cast<std::uint32_t>(p[i]) & kExponent) == kExponent);
  }
  return any != 0;
}

}  // namespace

std::size_t first_non_finite(std::span<const float> values) {
  constexpr std::size_t kBlock = 4096;
  for (std::size_t begin = 0; begin < values.size(); begin += kBlock) {
    const std::size_t n = std::min(kBlock, values.size() - begin);
    if (!block_has_non_finite(values.data() + begin, n)) continue;
    for (std::size_t i = begin; i < begin + n; ++i) {
      if ((std::bit_cast<std::uint32_t>(values[i]) & kExponent) == kExponent) return i;
    }
  }
  return values.size();
}

void require_finite(std::span<const float> values, const std::string& file, const std::string& field,
                    std::string_view context) {
  const std::size_t i = first_non_finite(values);
  if (i == values.size()) return;
  throw InputError(file, field,
                   fmt::format("value {} of {} is {} ({}); NaN and Inf are refused", i, values.size(),
                               std::isnan(values[i]) ? "nan" : (values[i] > 0 ? "inf" : "-inf"), context));
}

void require_finite(const SampleBatch& batch, const std::string& file, std::string_view context) {
  if (batch.reward) require_finite(*batch.reward, file, "/reward", context);
  for (const auto& field : token_array_fields()) {
    if (const auto& arr = batch.*field.member) require_finite(*arr, file, std::string("/") + field.path, context);
  }
}

}  // namespace braid::io
