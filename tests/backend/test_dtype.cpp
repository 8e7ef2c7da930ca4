// The element types' conversions (backend/dtype.hpp): round trips, rounding to nearest
// even, and the edge cases (NaN, ±Inf, overflow, subnormals, signed zero).
#define BOOST_TEST_MODULE backend_dtype
#include <boost/test/unit_test.hpp>

#include "backend/dtype.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace be = braid::backend;

namespace {

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

}  // namespace

BOOST_AUTO_TEST_CASE(names_sizes_and_parsing) {
  for (auto t : {be::DType::f32, be::DType::f64, be::DType::bf16, be::DType::f16}) {
    BOOST_TEST((be::parse_dtype(be::dtype_name(t)) == t));
  }
  BOOST_TEST(be::dtype_size(be::DType::bf16) == 2u);
  BOOST_TEST(be::dtype_size(be::DType::f16) == 2u);
  BOOST_TEST(be::dtype_size(be::DType::f32) == 4u);
  BOOST_TEST(be::dtype_size(be::DType::f64) == 8u);
  BOOST_TEST((be::parse_dtype("bfloat16") == be::DType::bf16));
  BOOST_TEST(!be::parse_dtype("fp8").has_value());
  BOOST_TEST(!be::parse_dtype("").has_value());
}

// Every one of the 65536 bf16 and f16 patterns that is not NaN survives float and back.
BOOST_AUTO_TEST_CASE(every_16_bit_value_round_trips) {
  int nan_bf16 = 0, nan_f16 = 0;
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float b = be::bf16_to_float(bits);
    if (std::isnan(b)) {
      ++nan_bf16;
      BOOST_TEST(std::isnan(be::bf16_to_float(be::float_to_bf16(b))));
    } else {
      BOOST_REQUIRE_EQUAL(be::float_to_bf16(b), bits);
    }
    const float f = be::f16_to_float(bits);
    if (std::isnan(f)) {
      ++nan_f16;
      BOOST_TEST(std::isnan(be::f16_to_float(be::float_to_f16(f))));
    } else {
      BOOST_REQUIRE_EQUAL(be::float_to_f16(f), bits);
    }
  }
  // 2 signs × (2^7 − 1) NaN mantissas for bf16, 2 × (2^10 − 1) for f16.
  BOOST_TEST(nan_bf16 == 2 * 127);
  BOOST_TEST(nan_f16 == 2 * 1023);
}

BOOST_AUTO_TEST_CASE(bf16_rounds_to_nearest_even) {
  // 1 + 2^-8 lies halfway between bf16's 1 (even) and 1 + 2^-7 (odd): to 1.
  BOOST_TEST(be::float_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80u);
  // 1 + 3·2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  BOOST_TEST(be::float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82u);
  // Just above halfway rounds up, just below down.
  BOOST_TEST(be::float_to_bf16(from_bits(0x3F808001u)) == 0x3F81u);
  BOOST_TEST(be::float_to_bf16(from_bits(0x3F807FFFu)) == 0x3F80u);
  // The largest finite float rounds past bf16's largest finite value: to +Inf.
  BOOST_TEST(be::float_to_bf16(std::numeric_limits<float>::max()) == 0x7F80u);
  BOOST_TEST(be::float_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80u);
  // A signalling-looking NaN whose payload sits in the low bits stays NaN (not Inf).
  BOOST_TEST(std::isnan(be::bf16_to_float(be::float_to_bf16(from_bits(0x7F800001u)))));
  // Signed zero and float subnormals (bf16 keeps float's exponent range).
  BOOST_TEST(be::float_to_bf16(-0.0f) == 0x8000u);
  BOOST_TEST(be::float_to_bf16(from_bits(0x00010000u)) == 0x0001u);
  BOOST_TEST(be::bf16_to_float(0x0001u) == from_bits(0x00010000u));
}

BOOST_AUTO_TEST_CASE(f16_rounds_to_nearest_even_and_saturates_to_inf) {
  // 1 + 2^-11 is halfway between f16's 1 (even) and 1 + 2^-10 (odd): to 1.
  BOOST_TEST(be::float_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00u);
  BOOST_TEST(be::float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02u);
  BOOST_TEST(be::float_to_f16(from_bits(bits_of(1.0f + std::ldexp(1.0f, -11)) + 1)) == 0x3C01u);
  BOOST_TEST(be::float_to_f16(65504.0f) == 0x7BFFu);  // largest finite half
  BOOST_TEST(be::float_to_f16(65519.0f) == 0x7BFFu);  // below the halfway point to 65536
  BOOST_TEST(be::float_to_f16(65520.0f) == 0x7C00u);  // halfway, rounds to even: Inf
  BOOST_TEST(be::float_to_f16(-1e6f) == 0xFC00u);
  BOOST_TEST(be::float_to_f16(std::numeric_limits<float>::infinity()) == 0x7C00u);
  BOOST_TEST(std::isnan(be::f16_to_float(be::float_to_f16(std::nanf("")))));
  BOOST_TEST(std::isinf(be::f16_to_float(0x7C00u)));
}

BOOST_AUTO_TEST_CASE(f16_subnormals_and_underflow) {
  const float smallest = std::ldexp(1.0f, -24);  // the smallest f16 subnormal
  BOOST_TEST(be::float_to_f16(smallest) == 0x0001u);
  BOOST_TEST(be::f16_to_float(0x0001u) == smallest);
  BOOST_TEST(be::f16_to_float(0x03FFu) == std::ldexp(1023.0f, -24));  // largest subnormal
  BOOST_TEST(be::float_to_f16(std::ldexp(1.0f, -14)) == 0x0400u);     // smallest normal
  // Half the smallest subnormal is a tie between 0 (even) and 2^-24: to 0; a bit more goes up.
  BOOST_TEST(be::float_to_f16(std::ldexp(1.0f, -25)) == 0x0000u);
  BOOST_TEST(be::float_to_f16(std::ldexp(1.5f, -25)) == 0x0001u);
  // 1.5 · 2^-24 is a tie between 2^-24 (odd) and 2·2^-24 (even): up to 2.
  BOOST_TEST(be::float_to_f16(std::ldexp(1.5f, -24)) == 0x0002u);
  BOOST_TEST(be::float_to_f16(std::ldexp(1.0f, -40)) == 0x0000u);
  BOOST_TEST(be::float_to_f16(-std::ldexp(1.0f, -40)) == 0x8000u);  // the sign stays
  BOOST_TEST(std::signbit(be::f16_to_float(0x8000u)));
}

BOOST_AUTO_TEST_CASE(typed_wrappers) {
  BOOST_TEST(be::to_float(be::bf16{be::float_to_bf16(2.5f)}) == 2.5f);
  BOOST_TEST(be::to_float(be::f16{be::float_to_f16(-0.125f)}) == -0.125f);
}
