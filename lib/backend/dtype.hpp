// Element types of device memory, and the conversions between them.
//
// A tensor's type says how its elements are stored; ops compute in f32 (f64 on the CPU
// for finite-difference checks) whatever the storage. bf16 and f16 are storage types:
// weights kept in bf16 halve weight memory and bandwidth, with an f32 master copy where
// they are trained.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace braid::backend {

enum class DType { f32, f64, bf16, f16 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16:
    case DType::f16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
  }
  return "?";
}

// "f32", "f64", "bf16", "f16" (also "float32", "float64", "bfloat16", "float16"); nullopt otherwise.
std::optional<DType> parse_dtype(std::string_view s);

// bfloat16: the upper half of an IEEE float32.
struct bf16 {
  std::uint16_t bits = 0;
};
// IEEE float16.
struct f16 {
  std::uint16_t bits = 0;
};

inline float bf16_to_float(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, as PyTorch's .to(torch.bfloat16) does; NaN stays NaN.
inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  std::uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // ±0
  } else {
    // Subnormal half: shift the mantissa up until it is normal.
    exp = 113;
    while ((mant & 0x400u) == 0) { mant <<= 1; --exp; }
    bits = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even; overflow goes to ±inf, NaN stays NaN, tiny values to subnormals or ±0.
std::uint16_t float_to_f16(float f);

inline float to_float(bf16 x) { return bf16_to_float(x.bits); }
inline float to_float(f16 x) { return f16_to_float(x.bits); }

}  // namespace braid::backend
