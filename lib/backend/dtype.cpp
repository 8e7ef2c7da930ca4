#include "backend/dtype.hpp"

namespace braid::backend {

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "f32" || s == "float32") return DType::f32;
  if (s == "f64" || s == "float64") return DType::f64;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "f16" || s == "float16") return DType::f16;
  return std::nullopt;
}

std::uint16_t float_to_f16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x0200u : 0u));
  }
  if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds past 65504
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): a subnormal or zero
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);  // below half the smallest subnormal
    const std::uint32_t exp = abs >> 23;
    const std::uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126 - exp;  // 14 + (127 - exp) - 1 ... places the value in 10 bits
    const std::uint32_t half_mant = mant >> shift;
    const std::uint32_t rest = mant & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    std::uint32_t h = half_mant;
    if (rest > halfway || (rest == halfway && (half_mant & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa to 10 bits, nearest even.
  const std::uint32_t rebased = abs - (112u << 23);
  const std::uint32_t rounding = 0xFFFu + ((rebased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rebased + rounding) >> 13));
}

}  // namespace braid::backend
