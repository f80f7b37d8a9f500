// Tests of DType: sizes, names, PyTorch's promotion table, the float16/bfloat16 conversions
// (exact round to nearest even from float and from double, checked against a slow reference),
// and convert_scalar's rules.
#include "opconform/core/dtype.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>

namespace opconform {
namespace {

constexpr DType kAll[] = {DType::Bool,    DType::UInt8,    DType::Int8,    DType::Int16,
                          DType::Int32,   DType::Int64,    DType::Float16, DType::BFloat16,
                          DType::Float32, DType::Float64,  DType::Complex64, DType::Complex128};

// ---------------------------------------------------------------- sizes and names

TEST(DType, Itemsize) {
  EXPECT_EQ(itemsize(DType::Bool), 1u);
  EXPECT_EQ(itemsize(DType::UInt8), 1u);
  EXPECT_EQ(itemsize(DType::Int8), 1u);
  EXPECT_EQ(itemsize(DType::Int16), 2u);
  EXPECT_EQ(itemsize(DType::Int32), 4u);
  EXPECT_EQ(itemsize(DType::Int64), 8u);
  EXPECT_EQ(itemsize(DType::Float16), 2u);
  EXPECT_EQ(itemsize(DType::BFloat16), 2u);
  EXPECT_EQ(itemsize(DType::Float32), 4u);
  EXPECT_EQ(itemsize(DType::Float64), 8u);
  EXPECT_EQ(itemsize(DType::Complex64), 8u);
  EXPECT_EQ(itemsize(DType::Complex128), 16u);
  // The C++ types agree.
  for (DType t : kAll) {
    size_t cpp = visit_dtype(t, [](auto tag) { return sizeof(typename decltype(tag)::type); });
    EXPECT_EQ(cpp, itemsize(t)) << t;
  }
}

TEST(DType, NamesAndParse) {
  const std::map<DType, std::string> names = {
      {DType::Bool, "bool"},       {DType::UInt8, "uint8"},         {DType::Int8, "int8"},
      {DType::Int16, "int16"},     {DType::Int32, "int32"},         {DType::Int64, "int64"},
      {DType::Float16, "float16"}, {DType::BFloat16, "bfloat16"},   {DType::Float32, "float32"},
      {DType::Float64, "float64"}, {DType::Complex64, "complex64"}, {DType::Complex128, "complex128"},
  };
  ASSERT_EQ(names.size(), static_cast<size_t>(kNumDTypes));
  for (const auto& [t, n] : names) {
    EXPECT_EQ(name(t), n);
    EXPECT_EQ(parse_dtype(n), t) << n;
    EXPECT_EQ(parse_dtype("torch." + n), t) << n;
    std::ostringstream out;
    out << t;
    EXPECT_EQ(out.str(), n);
  }
  EXPECT_EQ(parse_dtype("float"), DType::Float32);
  EXPECT_EQ(parse_dtype("double"), DType::Float64);
  EXPECT_EQ(parse_dtype("half"), DType::Float16);
  EXPECT_EQ(parse_dtype("long"), DType::Int64);
  EXPECT_EQ(parse_dtype("int"), DType::Int32);
  EXPECT_EQ(parse_dtype("short"), DType::Int16);
  EXPECT_EQ(parse_dtype("byte"), DType::UInt8);
  EXPECT_EQ(parse_dtype("char"), DType::Int8);
  EXPECT_EQ(parse_dtype("cfloat"), DType::Complex64);
  EXPECT_EQ(parse_dtype("cdouble"), DType::Complex128);
  EXPECT_EQ(parse_dtype("f32"), DType::Float32);
  EXPECT_EQ(parse_dtype("bf16"), DType::BFloat16);
  EXPECT_EQ(parse_dtype("torch.float"), DType::Float32);
  EXPECT_EQ(parse_dtype(""), std::nullopt);
  EXPECT_EQ(parse_dtype("float128"), std::nullopt);
  EXPECT_EQ(parse_dtype("Float32"), std::nullopt);
  EXPECT_EQ(parse_dtype("torch."), std::nullopt);
  EXPECT_EQ(parse_dtype("float32 "), std::nullopt);
}

TEST(DType, Categories) {
  EXPECT_TRUE(is_floating(DType::Float16));
  EXPECT_TRUE(is_floating(DType::BFloat16));
  EXPECT_FALSE(is_floating(DType::Complex64));
  EXPECT_FALSE(is_floating(DType::Int64));
  EXPECT_TRUE(is_complex(DType::Complex128));
  EXPECT_FALSE(is_complex(DType::Float64));
  EXPECT_TRUE(is_integral(DType::UInt8));
  EXPECT_TRUE(is_integral(DType::Int64));
  EXPECT_FALSE(is_integral(DType::Bool));
  EXPECT_TRUE(is_integral(DType::Bool, /*include_bool=*/true));
  EXPECT_FALSE(is_integral(DType::Float16, true));
  EXPECT_FALSE(is_signed(DType::UInt8));
  EXPECT_FALSE(is_signed(DType::Bool));
  EXPECT_TRUE(is_signed(DType::Int8));
  EXPECT_EQ(to_real(DType::Complex64), DType::Float32);
  EXPECT_EQ(to_real(DType::Complex128), DType::Float64);
  EXPECT_EQ(to_real(DType::Int32), DType::Int32);
  EXPECT_EQ(to_complex(DType::Float32), DType::Complex64);
  EXPECT_EQ(to_complex(DType::Float64), DType::Complex128);
  EXPECT_EQ(to_complex(DType::Complex128), DType::Complex128);
}

// ---------------------------------------------------------------- promotion

// torch.promote_types(row, column), written out from PyTorch's behaviour.
TEST(DType, PromoteTypesMatchesPyTorch) {
  const char* expected[kNumDTypes][kNumDTypes] = {
      // bool      uint8      int8       int16      int32      int64      float16    bfloat16   float32    float64    complex64    complex128
      {"bool",     "uint8",   "int8",    "int16",   "int32",   "int64",   "float16", "bfloat16","float32", "float64", "complex64", "complex128"},  // bool
      {"uint8",    "uint8",   "int16",   "int16",   "int32",   "int64",   "float16", "bfloat16","float32", "float64", "complex64", "complex128"},  // uint8
      {"int8",     "int16",   "int8",    "int16",   "int32",   "int64",   "float16", "bfloat16","float32", "float64", "complex64", "complex128"},  // int8
      {"int16",    "int16",   "int16",   "int16",   "int32",   "int64",   "float16", "bfloat16","float32", "float64", "complex64", "complex128"},  // int16
      {"int32",    "int32",   "int32",   "int32",   "int32",   "int64",   "float16", "bfloat16","float32", "float64", "complex64", "complex128"},  // int32
      {"int64",    "int64",   "int64",   "int64",   "int64",   "int64",   "float16", "bfloat16","float32", "float64", "complex64", "complex128"},  // int64
      {"float16",  "float16", "float16", "float16", "float16", "float16", "float16", "float32", "float32", "float64", "complex64", "complex128"},  // float16
      {"bfloat16", "bfloat16","bfloat16","bfloat16","bfloat16","bfloat16","float32", "bfloat16","float32", "float64", "complex64", "complex128"},  // bfloat16
      {"float32",  "float32", "float32", "float32", "float32", "float32", "float32", "float32", "float32", "float64", "complex64", "complex128"},  // float32
      {"float64",  "float64", "float64", "float64", "float64", "float64", "float64", "float64", "float64", "float64", "complex128","complex128"},  // float64
      {"complex64","complex64","complex64","complex64","complex64","complex64","complex64","complex64","complex64","complex128","complex64","complex128"},  // complex64
      {"complex128","complex128","complex128","complex128","complex128","complex128","complex128","complex128","complex128","complex128","complex128","complex128"},
  };
  for (int a = 0; a < kNumDTypes; ++a) {
    for (int b = 0; b < kNumDTypes; ++b) {
      EXPECT_EQ(name(promote_types(kAll[a], kAll[b])), expected[a][b]) << kAll[a] << " + " << kAll[b];
    }
  }
  // The rules the table is made of, spelled out.
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int8), DType::Int16);
  EXPECT_EQ(promote_types(DType::Float16, DType::BFloat16), DType::Float32);
  EXPECT_EQ(promote_types(DType::Complex64, DType::Float64), DType::Complex128);
  EXPECT_EQ(promote_types(DType::Int64, DType::Float16), DType::Float16);
}

rc::Gen<DType> gen_dtype() {
  return rc::gen::map(rc::gen::inRange(0, kNumDTypes), [](int i) { return static_cast<DType>(i); });
}

RC_GTEST_PROP(DTypeProperty, PromoteTypesIsSymmetricIdempotentAndBoolIsIdentity, ()) {
  DType a = *gen_dtype();
  DType b = *gen_dtype();
  DType c = *gen_dtype();
  RC_ASSERT(promote_types(a, b) == promote_types(b, a));
  RC_ASSERT(promote_types(a, a) == a);
  RC_ASSERT(promote_types(DType::Bool, a) == a);
  // Associative, and the result holds both kinds (complex beats floating beats integral).
  RC_ASSERT(promote_types(promote_types(a, b), c) == promote_types(a, promote_types(b, c)));
  DType p = promote_types(a, b);
  if (is_complex(a) || is_complex(b)) RC_ASSERT(is_complex(p));
  if (is_floating(a) || is_floating(b)) RC_ASSERT(is_floating(p) || is_complex(p));
}

// ---------------------------------------------------------------- float16 / bfloat16

// A 16-bit floating format described independently of half.h.
struct Format16 {
  int mantissa_bits;  // 10 for float16, 7 for bfloat16
  int exponent_bias;  // 15, 127
  uint16_t max_finite;  // 0x7BFF, 0x7F7F
  uint16_t inf;         // 0x7C00, 0x7F80

  // The exact value of a non-negative finite bit pattern (or, for `inf`, the value the next
  // binade would start at: 2^(emax+1), used as the upper neighbour of max_finite).
  double value(uint16_t bits) const {
    int exponent = bits >> mantissa_bits;
    int mantissa = bits & ((1 << mantissa_bits) - 1);
    if (exponent == 0) return std::ldexp(static_cast<double>(mantissa), 1 - exponent_bias - mantissa_bits);
    return std::ldexp(static_cast<double>(mantissa + (1 << mantissa_bits)), exponent - exponent_bias - mantissa_bits);
  }
  bool is_nan(uint16_t bits) const {
    return (bits & 0x7FFF) > inf;
  }
};

constexpr Format16 kHalf{10, 15, 0x7BFF, 0x7C00};
constexpr Format16 kBF16{7, 127, 0x7F7F, 0x7F80};

// The correctly rounded (nearest, ties to even) bits of x, by search over the bit patterns:
// slow and obviously right. x must not be NaN.
uint16_t reference_round(const Format16& f, double x) {
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(x);
  // Largest pattern b in [0, inf] whose value is <= a (value(inf) = 2^(emax+1)).
  uint32_t lo = 0, hi = f.inf;
  if (a >= f.value(f.inf)) return sign | f.inf;
  while (lo < hi) {  // invariant: value(lo) <= a
    uint32_t mid = (lo + hi + 1) / 2;
    if (f.value(static_cast<uint16_t>(mid)) <= a) lo = mid;
    else hi = mid - 1;
  }
  uint16_t below = static_cast<uint16_t>(lo);
  if (f.value(below) == a) return sign | below;
  uint16_t above = below + 1;
  // The midpoint has one more significant bit than the format: exact in double.
  double midpoint = (f.value(below) + f.value(above)) / 2;
  uint16_t pick;
  if (a < midpoint) pick = below;
  else if (a > midpoint) pick = above;
  else pick = (below & 1) ? above : below;
  return sign | pick;
}

uint16_t half_bits(float v) { return Half(v).bits; }
uint16_t half_bits(double v) { return Half(v).bits; }
uint16_t bf16_bits(float v) { return BFloat16(v).bits; }
uint16_t bf16_bits(double v) { return BFloat16(v).bits; }

TEST(Half, ReferenceSelfCheck) {
  // The reference itself, on values known by heart.
  EXPECT_EQ(reference_round(kHalf, 1.0), 0x3C00);
  EXPECT_EQ(reference_round(kHalf, -2.0), 0xC000);
  EXPECT_EQ(reference_round(kHalf, 65504.0), 0x7BFF);
  EXPECT_EQ(reference_round(kHalf, 65520.0), 0x7C00);
  EXPECT_EQ(reference_round(kHalf, 0x1p-24), 0x0001);
  EXPECT_EQ(reference_round(kHalf, 0x1p-25), 0x0000);
  EXPECT_EQ(reference_round(kHalf, 0.1), 0x2E66);
  EXPECT_EQ(reference_round(kBF16, 1.0), 0x3F80);
  EXPECT_EQ(reference_round(kBF16, 3.140625), 0x4049);
}

TEST(Half, ExhaustiveBitsRoundTrip) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    float f = Half::from_bits(bits);
    if (kHalf.is_nan(bits)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_TRUE(kHalf.is_nan(half_bits(f))) << std::hex << b;
      ASSERT_TRUE(kHalf.is_nan(half_bits(static_cast<double>(f)))) << std::hex << b;
      continue;
    }
    // half -> float is exact: compare with the value computed from the bits.
    double expected = (bits & 0x8000 ? -1.0 : 1.0) *
                      ((bits & 0x7FFF) == kHalf.inf ? std::numeric_limits<double>::infinity()
                                                     : kHalf.value(bits & 0x7FFF));
    ASSERT_EQ(static_cast<double>(f), expected) << std::hex << b;
    ASSERT_EQ(std::signbit(f), (bits & 0x8000) != 0) << std::hex << b;
    ASSERT_EQ(half_bits(f), bits) << std::hex << b;
    ASSERT_EQ(half_bits(static_cast<double>(f)), bits) << std::hex << b;
  }
}

// Every rounding boundary of the format: just below, at and just above each midpoint between
// neighbouring values, from float and from double (nextafter in each type), both signs.
template <typename Convert>
void check_all_midpoints(const Format16& fmt, Convert convert) {
  for (uint32_t b = 0; b <= fmt.max_finite; ++b) {
    uint16_t below = static_cast<uint16_t>(b), above = static_cast<uint16_t>(b + 1);
    double mid = (fmt.value(below) + fmt.value(above)) / 2;
    uint16_t tie = (below & 1) ? above : below;
    for (double sign : {1.0, -1.0}) {
      uint16_t s = sign < 0 ? 0x8000 : 0;
      double m = sign * mid;
      float mf = static_cast<float>(m);
      ASSERT_EQ(static_cast<double>(mf), m) << "midpoint not exact in float";
      const float inf = std::numeric_limits<float>::infinity();
      ASSERT_EQ(convert(mf), s | tie) << std::hex << b << " sign " << sign;
      ASSERT_EQ(convert(std::nextafter(mf, 0.0f)), s | below) << std::hex << b;
      ASSERT_EQ(convert(std::nextafter(mf, sign * inf)), s | above) << std::hex << b;
      ASSERT_EQ(convert(m), s | tie) << std::hex << b;
      ASSERT_EQ(convert(std::nextafter(m, 0.0)), s | below) << std::hex << b;
      ASSERT_EQ(convert(std::nextafter(m, sign * static_cast<double>(inf))), s | above) << std::hex << b;
    }
  }
}

TEST(Half, AllRoundingBoundaries) {
  check_all_midpoints(kHalf, [](auto v) { return half_bits(v); });
}

TEST(BFloat16, AllRoundingBoundaries) {
  check_all_midpoints(kBF16, [](auto v) { return bf16_bits(v); });
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(half_bits(65504.0f), 0x7BFF);
  EXPECT_EQ(half_bits(65520.0f), 0x7C00);
  EXPECT_EQ(half_bits(65519.99f), 0x7BFF);
  EXPECT_EQ(half_bits(-65520.0f), 0xFC00);
  EXPECT_EQ(half_bits(1e10f), 0x7C00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::max()), 0x7C00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_TRUE(kHalf.is_nan(half_bits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(kHalf.is_nan(half_bits(std::numeric_limits<double>::quiet_NaN())));
  // A NaN whose payload lives only in the low float bits stays NaN.
  EXPECT_TRUE(kHalf.is_nan(half_bits(std::bit_cast<float>(0x7F800001u))));
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(-0.0), 0x8000);
  // Subnormals.
  EXPECT_EQ(half_bits(0x1p-24f), 0x0001);     // smallest subnormal
  EXPECT_EQ(half_bits(0x1p-25f), 0x0000);     // tie between 0 and 2^-24: to even (0)
  EXPECT_EQ(half_bits(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(half_bits(0x3p-25f), 0x0002);     // tie between 1 and 2 units: to even (2)
  EXPECT_EQ(half_bits(0x5p-25f), 0x0002);     // tie between 2 and 3 units: to even (2)
  EXPECT_EQ(half_bits(0x1p-14f), 0x0400);     // smallest normal
  EXPECT_EQ(half_bits(0x1.ff8p-15f), 0x03FF); // largest subnormal
  EXPECT_EQ(half_bits(0x1.ffcp-15f), 0x0400); // largest subnormal + half unit: ties up to the normal
  EXPECT_EQ(half_bits(-0x1p-24f), 0x8001);
  EXPECT_EQ(half_bits(1e-30f), 0x0000);
  EXPECT_EQ(half_bits(-1e-30), 0x8000);
  EXPECT_EQ(half_bits(1e-300), 0x0000);
  EXPECT_EQ(half_bits(1e300), 0x7C00);
  // Ties to even between normals.
  EXPECT_EQ(half_bits(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(half_bits(1.0f + 0x3p-11f), 0x3C02);
  EXPECT_EQ(half_bits(2049.0f), 0x6800);  // 2048 + 1: tie, 2048 even
  EXPECT_EQ(half_bits(2051.0f), 0x6802);  // 2050 + 1: tie, 2052 even
  EXPECT_EQ(static_cast<float>(Half(0.1f)), 0.0999755859375f);
}

TEST(Half, DoubleHasNoDoubleRounding) {
  // 1 + 2^-11 + 2^-40 rounds to float as exactly 1 + 2^-11 (a half tie point), which would then
  // go to even (1.0); the double is above the tie, so the correct half is 1 + 2^-10.
  const double above_tie = 1.0 + 0x1p-11 + 0x1p-40;
  ASSERT_EQ(static_cast<float>(above_tie), 1.0f + 0x1p-11f);
  EXPECT_EQ(half_bits(above_tie), 0x3C01);
  const double below_tie = 1.0 + 0x3p-11 - 0x1p-40;  // float rounds up to the tie 1 + 3*2^-11
  ASSERT_EQ(static_cast<float>(below_tie), 1.0f + 0x3p-11f);
  EXPECT_EQ(half_bits(below_tie), 0x3C01);
  EXPECT_EQ(half_bits(-above_tie), 0xBC01);
  // Overflow threshold from double: just below 65520 stays finite.
  EXPECT_EQ(half_bits(65520.0 - 0x1p-30), 0x7BFF);
  EXPECT_EQ(half_bits(65520.0), 0x7C00);
  // Subnormal tie point, approached from double.
  EXPECT_EQ(half_bits(0x1p-25 + 0x1p-60), 0x0001);
  EXPECT_EQ(half_bits(0x1p-25 - 0x1p-60), 0x0000);
  // Integers go through double.
  EXPECT_EQ(Half(2049).bits, 0x6800);
  EXPECT_EQ(Half(int64_t(65519)).bits, 0x7BFF);
  EXPECT_EQ(Half(int64_t(1) << 40).bits, 0x7C00);
}

TEST(BFloat16, SpecialValues) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xC000);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7F80);  // above the last midpoint
  EXPECT_EQ(bf16_bits(0x1.fep127f), 0x7F7F);                         // bf16 max
  EXPECT_TRUE(kBF16.is_nan(bf16_bits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(kBF16.is_nan(bf16_bits(std::bit_cast<float>(0x7F800001u))));
  EXPECT_TRUE(kBF16.is_nan(bf16_bits(std::bit_cast<float>(0xFF800001u))));
  EXPECT_TRUE(kBF16.is_nan(bf16_bits(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16_bits(1.0f + 0x1p-8f), 0x3F80);   // tie: even
  EXPECT_EQ(bf16_bits(1.0f + 0x3p-8f), 0x3F82);   // tie: even
  EXPECT_EQ(bf16_bits(1.0 + 0x1p-8 + 0x1p-40), 0x3F81);  // no double rounding
  EXPECT_EQ(bf16_bits(1.0 + 0x3p-8 - 0x1p-40), 0x3F81);
  EXPECT_EQ(bf16_bits(0x1p-133f), 0x0001);  // float subnormals are bf16 subnormals
  EXPECT_EQ(bf16_bits(1e-300), 0x0000);
  EXPECT_EQ(bf16_bits(1e300), 0x7F80);
  EXPECT_EQ(bf16_bits(-1e300), 0xFF80);
}

TEST(BFloat16, ExhaustiveBitsRoundTrip) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    float f = BFloat16::from_bits(bits);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), b << 16);  // the top half of a binary32
    if (kBF16.is_nan(bits)) {
      ASSERT_TRUE(kBF16.is_nan(bf16_bits(f))) << std::hex << b;
      ASSERT_TRUE(kBF16.is_nan(bf16_bits(static_cast<double>(f)))) << std::hex << b;
      continue;
    }
    ASSERT_EQ(bf16_bits(f), bits) << std::hex << b;
    ASSERT_EQ(bf16_bits(static_cast<double>(f)), bits) << std::hex << b;
  }
}

// Random floats and doubles of every magnitude, against the reference.
TEST(Half, ManyRandomValuesMatchReference) {
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 300000; ++i) {
    float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(half_bits(f), reference_round(kHalf, f)) << f;
    ASSERT_EQ(bf16_bits(f), reference_round(kBF16, f)) << f;
    double d = std::bit_cast<double>(rng());
    if (std::isnan(d)) continue;
    ASSERT_EQ(half_bits(d), reference_round(kHalf, d)) << d;
    ASSERT_EQ(bf16_bits(d), reference_round(kBF16, d)) << d;
  }
}

// A double near a rounding boundary of the format: a midpoint (or value) plus a small offset of
// random sign and size, the case where rounding through float would go wrong.
double near_boundary(const Format16& fmt, uint16_t below, bool at_value, int offset_exp, bool up, bool negative) {
  double v = at_value ? fmt.value(below) : (fmt.value(below) + fmt.value(below + 1)) / 2;
  double ulp = fmt.value(below + 1) - fmt.value(below);
  double offset = std::ldexp(ulp, -offset_exp);
  double x = up ? v + offset : v - offset;
  return negative ? -x : x;
}

RC_GTEST_PROP(HalfProperty, FloatConversionPicksNearestHalf, ()) {
  uint32_t bits = *rc::gen::inRange<uint64_t>(0, uint64_t(1) << 32);
  float f = std::bit_cast<float>(bits);
  RC_PRE(!std::isnan(f));
  RC_ASSERT(half_bits(f) == reference_round(kHalf, f));
  RC_ASSERT(bf16_bits(f) == reference_round(kBF16, f));
}

RC_GTEST_PROP(HalfProperty, DoubleConversionNearBoundariesIsCorrectlyRounded, ()) {
  auto below = static_cast<uint16_t>(*rc::gen::inRange<int>(0, kHalf.max_finite + 1));
  bool at_value = *rc::gen::arbitrary<bool>();
  int offset_exp = *rc::gen::inRange(1, 45);
  bool up = *rc::gen::arbitrary<bool>();
  bool negative = *rc::gen::arbitrary<bool>();
  double x = near_boundary(kHalf, below, at_value, offset_exp, up, negative);
  RC_ASSERT(half_bits(x) == reference_round(kHalf, x));
  auto below_bf = static_cast<uint16_t>(*rc::gen::inRange<int>(0, kBF16.max_finite + 1));
  double y = near_boundary(kBF16, below_bf, at_value, offset_exp, up, negative);
  RC_ASSERT(bf16_bits(y) == reference_round(kBF16, y));
}

TEST(Half, ArithmeticGoesThroughFloat) {
  Half a = 1.5f, b = 2.25f;
  EXPECT_EQ(static_cast<float>(a) + static_cast<float>(b), 3.75f);
  BFloat16 c = 3.0f;
  EXPECT_EQ(static_cast<float>(c) * 2, 6.0f);
}

// ---------------------------------------------------------------- convert_scalar

TEST(ConvertScalar, ComplexToRealTakesTheRealPart) {
  EXPECT_EQ((convert_scalar<double>(complex128(2.5, -7.0))), 2.5);
  EXPECT_EQ((convert_scalar<float>(complex64(-1.5f, 3.0f))), -1.5f);
  EXPECT_EQ((convert_scalar<int32_t>(complex128(3.9, 100.0))), 3);
  EXPECT_EQ((convert_scalar<Half>(complex128(0.5, 9.0))).bits, Half(0.5f).bits);
  EXPECT_EQ((convert_scalar<complex64>(complex128(1.0, -2.0))), complex64(1.0f, -2.0f));
  EXPECT_EQ((convert_scalar<complex128>(int64_t(-4))), complex128(-4.0, 0.0));
  EXPECT_EQ((convert_scalar<complex64>(Half(0.25f))), complex64(0.25f, 0.0f));
}

TEST(ConvertScalar, NaNToIntegralIsZero) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(convert_scalar<int64_t>(nan), 0);
  EXPECT_EQ(convert_scalar<int32_t>(nan), 0);
  EXPECT_EQ(convert_scalar<uint8_t>(nan), 0);
  EXPECT_EQ(convert_scalar<int8_t>(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(convert_scalar<int16_t>(Half::from_bits(0x7E00)), 0);
  EXPECT_EQ(convert_scalar<int64_t>(complex128(nan, 1.0)), 0);
}

TEST(ConvertScalar, OutOfRangeSaturates) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(convert_scalar<int64_t>(1e30), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(convert_scalar<int64_t>(-1e30), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(convert_scalar<int64_t>(0x1p63), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(convert_scalar<int64_t>(-0x1p63), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(convert_scalar<int64_t>(0x1p62), int64_t(1) << 62);
  EXPECT_EQ(convert_scalar<int32_t>(inf), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(convert_scalar<int32_t>(-inf), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(convert_scalar<int32_t>(3e9), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(convert_scalar<int8_t>(200.0f), 127);
  EXPECT_EQ(convert_scalar<int8_t>(-200.0f), -128);
  EXPECT_EQ(convert_scalar<uint8_t>(300.0), 255);
  EXPECT_EQ(convert_scalar<uint8_t>(-1.0), 0);
  EXPECT_EQ(convert_scalar<int16_t>(Half(65504.0f)), 32767);
  // In range: truncation towards zero.
  EXPECT_EQ(convert_scalar<int32_t>(-2.9), -2);
  EXPECT_EQ(convert_scalar<int32_t>(2.9f), 2);
  EXPECT_EQ(convert_scalar<uint8_t>(254.99), 254);
  // Integral to integral wraps, as C and PyTorch.
  EXPECT_EQ(convert_scalar<uint8_t>(int64_t(257)), 1);
  EXPECT_EQ(convert_scalar<int8_t>(int32_t(-129)), 127);
}

TEST(ConvertScalar, AnythingToBoolIsNonZero) {
  EXPECT_FALSE(convert_scalar<bool>(0.0));
  EXPECT_FALSE(convert_scalar<bool>(-0.0));
  EXPECT_TRUE(convert_scalar<bool>(0.1));
  EXPECT_TRUE(convert_scalar<bool>(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_TRUE(convert_scalar<bool>(-std::numeric_limits<float>::infinity()));
  EXPECT_TRUE(convert_scalar<bool>(int64_t(256)));  // not truncated to a byte first
  EXPECT_FALSE(convert_scalar<bool>(uint8_t(0)));
  EXPECT_TRUE(convert_scalar<bool>(complex128(0.0, 1.0)));  // imaginary part counts
  EXPECT_FALSE(convert_scalar<bool>(complex64(0.0f, -0.0f)));
  EXPECT_TRUE(convert_scalar<bool>(Half(1e-7f)));  // a subnormal half
  EXPECT_FALSE(convert_scalar<bool>(Half::from_bits(0x8000)));
  EXPECT_TRUE(convert_scalar<bool>(BFloat16::from_bits(0x0001)));
}

TEST(ConvertScalar, FloatingConversions) {
  EXPECT_EQ(convert_scalar<Half>(1.0 + 0x1p-11 + 0x1p-40).bits, 0x3C01);  // exact from double
  EXPECT_EQ(convert_scalar<BFloat16>(1.0 + 0x1p-8 + 0x1p-40).bits, 0x3F81);
  EXPECT_EQ(convert_scalar<Half>(int64_t(2049)).bits, 0x6800);
  EXPECT_EQ(convert_scalar<Half>(BFloat16(3.0f)).bits, Half(3.0f).bits);
  EXPECT_EQ(convert_scalar<BFloat16>(Half(0.1f)).bits, BFloat16(static_cast<float>(Half(0.1f))).bits);
  EXPECT_EQ(convert_scalar<float>(Half::from_bits(0x0001)), 0x1p-24f);
  EXPECT_EQ(convert_scalar<double>(BFloat16::from_bits(0x3F81)), 1.0 + 0x1p-7);
  EXPECT_EQ(convert_scalar<float>(int64_t(16777217)), 16777216.0f);
  EXPECT_EQ(convert_scalar<double>(true), 1.0);
  EXPECT_EQ(convert_scalar<int64_t>(true), 1);
  EXPECT_EQ(convert_scalar<Half>(true).bits, 0x3C00);
}

}  // namespace
}  // namespace opconform
