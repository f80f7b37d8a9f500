// float16 and bfloat16 as C++ value types.
//
// Conversions to these types round to nearest, ties to even, exactly as IEEE 754 and PyTorch do,
// from float *and* from double: a double is first narrowed to float with round-to-odd, which makes
// the second rounding exact (no double-rounding error), see Note [Round to odd].
// Conversions from these types to float are exact. Arithmetic goes through float.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace opconform {

namespace detail {

// Note [Round to odd]: narrowing double -> float with round-to-odd (inexact results get an odd
// last bit) keeps enough information that a later round-to-nearest-even to a format with at
// least two fewer significand bits gives the correctly rounded result of the original double.
inline float narrow_round_to_odd(double d) {
  float f = static_cast<float>(d);
  if (!std::isfinite(f) || static_cast<double>(f) == d) return f;
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 1u) == 0) {
    // f was rounded; step one ulp towards d so the last bit becomes odd.
    bool rounded_away = std::fabs(static_cast<double>(f)) > std::fabs(d);
    bits = rounded_away ? bits - 1 : bits + 1;
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t float_to_half_bits(float value) {
  uint32_t f = std::bit_cast<uint32_t>(value);
  uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000u);
  uint32_t abs = f & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN
    return sign | (abs > 0x7F800000u ? 0x7E00u : 0x7C00u);
  }
  if (abs >= 0x477FF000u) {  // rounds to >= 65520: overflow to inf
    return sign | 0x7C00u;
  }
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    // Add 0.5 (as float) so the FPU does the rounding of the low bits, ties to even.
    float shifted = std::bit_cast<float>(abs) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - 0x3F000000u);
  }
  uint32_t mantissa_odd = (abs >> 13) & 1u;
  abs += 0xC8000FFFu + mantissa_odd;  // rebias exponent (-112 << 23) and round to nearest even
  return sign | static_cast<uint16_t>(abs >> 13);
}

inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) {
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    // zero or subnormal: mantissa * 2^-24, exact in float
    float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t float_to_bfloat16_bits(float value) {
  uint32_t f = std::bit_cast<uint32_t>(value);
  if ((f & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: keep it quiet and signed
    return static_cast<uint16_t>((f >> 16) | 0x0040u);
  }
  uint32_t rounding_bias = 0x7FFFu + ((f >> 16) & 1u);
  return static_cast<uint16_t>((f + rounding_bias) >> 16);
}

inline float bfloat16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

}  // namespace detail

// IEEE 754 binary16.
struct Half {
  uint16_t bits = 0;

  Half() = default;
  Half(float v) : bits(detail::float_to_half_bits(v)) {}
  Half(double v) : bits(detail::float_to_half_bits(detail::narrow_round_to_odd(v))) {}
  template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
  Half(I v) : Half(static_cast<double>(v)) {}
  static Half from_bits(uint16_t b) { Half h; h.bits = b; return h; }
  operator float() const { return detail::half_bits_to_float(bits); }
};

// bfloat16: the top half of a binary32.
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  BFloat16(float v) : bits(detail::float_to_bfloat16_bits(v)) {}
  BFloat16(double v) : bits(detail::float_to_bfloat16_bits(detail::narrow_round_to_odd(v))) {}
  template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
  BFloat16(I v) : BFloat16(static_cast<double>(v)) {}
  static BFloat16 from_bits(uint16_t b) { BFloat16 h; h.bits = b; return h; }
  operator float() const { return detail::bfloat16_bits_to_float(bits); }
};

}  // namespace opconform
