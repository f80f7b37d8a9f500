// Hand-derived values and identities for the elementwise binary family: arithmetic, where,
// comparisons, logical and bitwise ops, the in-place / out= overloads, promotion, broadcasting,
// output layouts, errors and gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "opconform/core/autograd.h"
#include "opconform/core/fake_tensor.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;

template <typename T>
Tensor make(std::vector<T> values, std::vector<int64_t> sizes) {
  return from_vector<T>(values, sizes);
}
std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// ---- add, sub ----

TEST(ElementwiseBinary, AddWithAlphaAndBroadcasting) {
  // [[1], [2]] + 2 * [10, 20, 30] = [[21, 41, 61], [22, 42, 62]]
  Tensor r = call("aten::add.Tensor", {floats({1, 2}, {2, 1}), floats({10, 20, 30}, {3}), Scalar(int64_t{2})});
  EXPECT_EQ(sizes_of(r), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_EQ(values(r), (std::vector<double>{21, 41, 61, 22, 42, 62}));
}

TEST(ElementwiseBinary, AddReadsStridesAndLaysOutLikeItsInputs) {
  // A transposed view: its values are [[1, 3], [2, 4]] and the output keeps its memory order.
  Tensor base = floats({1, 2, 3, 4}, {2, 2});
  Tensor t = base.transpose(0, 1);
  Tensor r = call("aten::add.Tensor", {t, t.clone()});
  EXPECT_EQ(values(r), (std::vector<double>{2, 6, 4, 8}));
  EXPECT_EQ(strides_of(r), (std::vector<int64_t>{1, 2}));
  // A sliced view with a storage offset: [20, 40] + 1.
  Tensor sliced = floats({10, 20, 30, 40}, {4}).slice(0, 1, 4, 2);
  EXPECT_EQ(values(call("aten::add.Scalar", {sliced, Scalar(int64_t{1})})), (std::vector<double>{21, 41}));
}

TEST(ElementwiseBinary, AddPromotesAndWraps) {
  // int32 + float32 -> float32; a float Scalar makes an int tensor float32.
  EXPECT_EQ(call("aten::add.Tensor", {make<int32_t>({1}, {1}), floats({0.5f}, {1})}).dtype(), DType::Float32);
  Tensor r = call("aten::add.Scalar", {longs({1, 2}, {2}), Scalar(2.5)});
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_EQ(values(r), (std::vector<double>{3.5, 4.5}));
  // A 0-d float16 tensor + a Python float stays float16 (wrapped numbers do not promote within
  // a category); a dimensioned int64 tensor + a 0-d float64 tensor is float64.
  EXPECT_EQ(call("aten::add.Scalar", {scalar_tensor(Scalar(1.0), TensorOptions(DType::Float16)), Scalar(1.0)}).dtype(),
            DType::Float16);
  EXPECT_EQ(call("aten::add.Tensor", {longs({1}, {1}), scalar_tensor(Scalar(1.0), TensorOptions(DType::Float64))}).dtype(),
            DType::Float64);
  // int8: 100 + 100 wraps to -56.
  EXPECT_EQ(ints(call("aten::add.Tensor", {make<int8_t>({100}, {1}), make<int8_t>({100}, {1})})), (std::vector<int64_t>{-56}));
  // bool + bool is logical or, and a bool result takes alpha as a bool (-1 -> True).
  Tensor b = call("aten::add.Tensor", {bools({true, false, false}, {3}), bools({true, true, false}, {3}), Scalar(int64_t{-1})});
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(ints(b), (std::vector<int64_t>{1, 1, 0}));
}

TEST(ElementwiseBinary, AddChecksAlpha) {
  EXPECT_NE(error_of("aten::add.Tensor", {longs({1}, {1}), longs({1}, {1}), Scalar(0.5)}).find("aten::add.Tensor"), std::string::npos);
  EXPECT_NE(error_of("aten::add.Tensor", {floats({1}, {1}), floats({1}, {1}), Scalar(true)}).find("'alpha'"), std::string::npos);
  EXPECT_NE(error_of("aten::add.Tensor", {floats({1}, {1}), floats({1}, {1}), Scalar(complex128(1, 1))}).find("complex"),
            std::string::npos);
  EXPECT_NE(error_of("aten::add.Tensor", {floats({1, 2}, {2}), floats({1, 2, 3}, {3})}).find("do not broadcast"), std::string::npos);
}

TEST(ElementwiseBinary, Sub) {
  // [5, 7] - 2 * [1, 2] = [3, 3]; 4 - 0.5 * 3 = 2.5
  EXPECT_EQ(ints(call("aten::sub.Tensor", {longs({5, 7}, {2}), longs({1, 2}, {2}), Scalar(int64_t{2})})), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(values(call("aten::sub.Scalar", {doubles({4}, {1}), Scalar(int64_t{3}), Scalar(0.5)})), (std::vector<double>{2.5}));
  // bool is refused, even against a float tensor or as a Scalar.
  EXPECT_NE(error_of("aten::sub.Tensor", {bools({true}, {1}), floats({1}, {1})}).find("aten::sub.Tensor"), std::string::npos);
  EXPECT_NE(error_of("aten::sub.Scalar", {floats({1}, {1}), Scalar(true)}).find("'other'"), std::string::npos);
}

// ---- mul, div ----

TEST(ElementwiseBinary, Mul) {
  // [[1, 2], [3, 4]] * [10, 100] = [[10, 200], [30, 400]]
  EXPECT_EQ(values(call("aten::mul.Tensor", {doubles({1, 2, 3, 4}, {2, 2}), doubles({10, 100}, {2})})),
            (std::vector<double>{10, 200, 30, 400}));
  // uint8: 16 * 16 = 256 wraps to 0; bool * bool is logical and.
  EXPECT_EQ(ints(call("aten::mul.Tensor", {make<uint8_t>({16}, {1}), make<uint8_t>({16}, {1})})), (std::vector<int64_t>{0}));
  EXPECT_EQ(ints(call("aten::mul.Tensor", {bools({true, true}, {2}), bools({true, false}, {2})})),
            (std::vector<int64_t>{1, 0}));
  // An expanded (stride 0) input: [2] * [[1, 2, 3]] (other broadcast to [2, 3]).
  Tensor expanded = floats({1, 2, 3}, {1, 3}).expand({2, 3});
  EXPECT_EQ(values(call("aten::mul.Scalar", {expanded, Scalar(int64_t{2})})), (std::vector<double>{2, 4, 6, 2, 4, 6}));
  Tensor r = call("aten::mul.Scalar", {longs({3}, {1}), Scalar(0.5)});
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_EQ(values(r), (std::vector<double>{1.5}));
  // complex: (1 + 2i)(3 - i) = 5 + 5i
  Tensor z = call("aten::mul.Scalar", {make<complex128>({complex128(1, 2)}, {1}), Scalar(complex128(3, -1))});
  EXPECT_EQ(z.to_vector<complex128>()[0], complex128(5, 5));
}

TEST(ElementwiseBinary, TrueDivision) {
  // Integers divide as float32: [1, 3] / [2, 4] = [0.5, 0.75]; 1 / 0 = inf, 0 / 0 = NaN.
  Tensor r = call("aten::div.Tensor", {longs({1, 3, 1, 0}, {4}), longs({2, 4, 0, 0}, {4})});
  EXPECT_EQ(r.dtype(), DType::Float32);
  auto v = values(r);
  EXPECT_EQ(v[0], 0.5);
  EXPECT_EQ(v[1], 0.75);
  EXPECT_TRUE(std::isinf(v[2]) && v[2] > 0);
  EXPECT_TRUE(std::isnan(v[3]));
  EXPECT_EQ(values(call("aten::div.Scalar", {doubles({3}, {1}), Scalar(int64_t{2})})), (std::vector<double>{1.5}));
  EXPECT_EQ(call("aten::div.Tensor", {bools({true}, {1}), bools({true}, {1})}).dtype(), DType::Float32);
}

TEST(ElementwiseBinary, RoundedDivision) {
  const Stack ints_args{longs({-7, 7, -8}, {3}), longs({2, 2, 2}, {3})};
  auto divide = [&](const Stack& args, const char* mode) {
    Stack a = args;
    a.push_back(IValue(std::string(mode)));
    return call("aten::div.Tensor_mode", a);
  };
  Tensor trunc = divide(ints_args, "trunc"), floor = divide(ints_args, "floor");
  EXPECT_EQ(trunc.dtype(), DType::Int64);
  EXPECT_EQ(ints(trunc), (std::vector<int64_t>{-3, 3, -4}));
  EXPECT_EQ(ints(floor), (std::vector<int64_t>{-4, 3, -4}));
  // Floats: -7.5 / 2 = -3.75 -> trunc -3, floor -4; None is true division.
  const Stack float_args{doubles({-7.5}, {1}), doubles({2}, {1})};
  EXPECT_EQ(values(divide(float_args, "trunc")), (std::vector<double>{-3}));
  EXPECT_EQ(values(divide(float_args, "floor")), (std::vector<double>{-4}));
  EXPECT_EQ(values(call("aten::div.Tensor_mode", {doubles({-7.5}, {1}), doubles({2}, {1}), IValue()})), (std::vector<double>{-3.75}));
  // trunc sees the quotient in the dtype, as PyTorch's kernel: bf16 -6.3125 / 1.0546875 = -5.985
  // rounds to -6 in bfloat16, so -6 (not -5); in float16 3.125 / 1.04199219 = 2.99906 rounds to 3.
  const Tensor a16 = doubles({-6.3125}, {1}).to(DType::BFloat16), b16 = doubles({1.0546875}, {1}).to(DType::BFloat16);
  EXPECT_EQ(values(divide({a16, b16}, "trunc")), (std::vector<double>{-6}));
  const Tensor ah = doubles({3.125}, {1}).to(DType::Float16), bh = doubles({1.0 + 43.0 / 1024}, {1}).to(DType::Float16);
  EXPECT_EQ(values(divide({ah, bh}, "trunc")), (std::vector<double>{3}));
  // 0.9f / 0.1f is 8.99999963 exactly, 9.0f in float32: trunc gives 9.
  const Tensor a32 = floats({0.9f}, {1}), b32 = floats({0.1f}, {1});
  EXPECT_EQ(values(divide({a32, b32}, "trunc")), (std::vector<double>{9}));
  EXPECT_EQ(ints(call("aten::div.Scalar_mode", {longs({-7}, {1}), Scalar(int64_t{2}), IValue(std::string("floor"))})),
            (std::vector<int64_t>{-4}));
  // int64's minimum / -1 wraps instead of trapping.
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(ints(call("aten::div.Scalar_mode", {longs({lowest}, {1}), Scalar(int64_t{-1}), IValue(std::string("trunc"))})),
            (std::vector<int64_t>{lowest}));
  // Integer division by zero is an error naming the op; so is an unknown rounding mode.
  const std::string zero = error_of("aten::div.Tensor_mode", {longs({1}, {1}), longs({0}, {1}), IValue(std::string("floor"))});
  EXPECT_NE(zero.find("ZeroDivisionError"), std::string::npos) << zero;
  EXPECT_NE(zero.find("aten::div.Tensor_mode"), std::string::npos) << zero;
  EXPECT_NE(error_of("aten::div.Tensor_mode", {floats({1}, {1}), floats({1}, {1}), IValue(std::string("round"))}).find("'rounding_mode'"),
            std::string::npos);
  EXPECT_NE(error_of("aten::div.Tensor_mode", {bools({true}, {1}), bools({true}, {1}), IValue(std::string("trunc"))})
                .find("bool"),
            std::string::npos);
}

// ---- pow ----

TEST(ElementwiseBinary, Pow) {
  EXPECT_EQ(ints(call("aten::pow.Tensor_Tensor", {longs({2, 3, 2, 1, -1, -1}, {6}), longs({3, 2, -1, -3, -3, -2}, {6})})),
            (std::vector<int64_t>{8, 9, 0, 1, -1, 1}));  // negative integer powers as c10's powi
  EXPECT_EQ(values(call("aten::pow.Tensor_Tensor", {doubles({4, 8}, {2}), doubles({0.5, -1.0 / 3}, {2})}))[0], 2.0);
  EXPECT_EQ(ints(call("aten::pow.Tensor_Scalar", {longs({2, 3}, {2}), Scalar(int64_t{2})})), (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(values(call("aten::pow.Tensor_Scalar", {doubles({4, -0.0}, {2}), Scalar(-0.5)}))[0], 0.5);
  // bool ** 2 promotes to int64; an integral base with a negative integer exponent is an error.
  EXPECT_EQ(call("aten::pow.Tensor_Scalar", {bools({true}, {1}), Scalar(int64_t{2})}).dtype(), DType::Int64);
  EXPECT_NE(error_of("aten::pow.Tensor_Scalar", {longs({2}, {1}), Scalar(int64_t{-1})}).find("negative integer powers"),
            std::string::npos);
  // Scalar base: 2 ** [0, 1, 3] = [1, 2, 8] (int64); 2.0 ** int -> float32.
  EXPECT_EQ(ints(call("aten::pow.Scalar", {Scalar(int64_t{2}), longs({0, 1, 3}, {3})})), (std::vector<int64_t>{1, 2, 8}));
  EXPECT_EQ(call("aten::pow.Scalar", {Scalar(2.0), longs({1}, {1})}).dtype(), DType::Float32);
  // A base of 1 gives contiguous ones, even for NaN exponents and a transposed exponent.
  Tensor transposed = doubles({kNaN, 2, 3, 4}, {2, 2}).transpose(0, 1);
  Tensor ones = call("aten::pow.Scalar", {Scalar(int64_t{1}), transposed});
  EXPECT_EQ(values(ones), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(strides_of(ones), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(strides_of(call("aten::pow.Scalar", {Scalar(int64_t{2}), transposed})), (std::vector<int64_t>{1, 2}));
}

TEST(ElementwiseBinary, PowScalarBaseOneIsOneForEveryExponent) {
  // PyTorch's pow_Scalar_out fills the result with 1 for a base of 1: 1 ** nan is 1, and for a
  // complex exponent 1+0j even where the exponent has a NaN part (std::pow would give nan+nanj).
  expect_values(call("aten::pow.Scalar", {Scalar(1.0), doubles({kNaN, kInf, -kInf, 2.5}, {4})}), {1, 1, 1, 1});
  const double nan = kNaN;
  Tensor z = call("aten::pow.Scalar", {Scalar(int64_t{1}), make<complex128>({complex128(nan, 0), complex128(0, nan),
                                                                            complex128(nan, nan), complex128(2, 3)},
                                                                           {4})});
  EXPECT_EQ(z.dtype(), DType::Complex128);
  for (const complex128& v : z.to_vector<complex128>()) EXPECT_EQ(v, complex128(1, 0));
  // A complex base of 1+0j is the number 1 too.
  z = call("aten::pow.Scalar", {Scalar(complex128(1, 0)), make<complex128>({complex128(nan, 1)}, {1})});
  EXPECT_EQ(z.to_vector<complex128>()[0], complex128(1, 0));
  // d(1^e)/de = 1^e log(1) = 0, NaN exponents included.
  Tensor e = doubles({kNaN, 2}, {2}).set_requires_grad(true);
  expect_values(grad_of(call("aten::pow.Scalar", {Scalar(int64_t{1}), e}), e), {0, 0});
}

// ---- maximum, minimum, atan2, fmod, remainder ----

TEST(ElementwiseBinary, MaximumMinimumPropagateNaN) {
  Tensor a = doubles({1, kNaN, 3, -1}, {4}), b = doubles({2, 0, 3, kNaN}, {4});
  auto mx = values(call("aten::maximum", {a, b})), mn = values(call("aten::minimum", {a, b}));
  EXPECT_EQ(mx[0], 2);
  EXPECT_TRUE(std::isnan(mx[1]) && std::isnan(mx[3]));
  EXPECT_EQ(mx[2], 3);
  EXPECT_EQ(mn[0], 1);
  EXPECT_TRUE(std::isnan(mn[1]) && std::isnan(mn[3]));
  // Broadcast and promoted: maximum(int [[1], [5]], float [2.5, 3]) = [[2.5, 3], [5, 5]].
  Tensor r = call("aten::maximum", {longs({1, 5}, {2, 1}), floats({2.5f, 3}, {2})});
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_EQ(values(r), (std::vector<double>{2.5, 3, 5, 5}));
  EXPECT_NE(error_of("aten::maximum", {make<complex128>({1}, {1}), make<complex128>({1}, {1})}).find("aten::maximum"),
            std::string::npos);
}

TEST(ElementwiseBinary, Atan2) {
  auto v = values(call("aten::atan2", {doubles({1, 1, -1, 0}, {4}), doubles({1, -1, -1, -1}, {4})}));
  EXPECT_DOUBLE_EQ(v[0], std::numbers::pi / 4);
  EXPECT_DOUBLE_EQ(v[1], 3 * std::numbers::pi / 4);
  EXPECT_DOUBLE_EQ(v[2], -3 * std::numbers::pi / 4);
  EXPECT_DOUBLE_EQ(v[3], std::numbers::pi);
  EXPECT_EQ(call("aten::atan2", {longs({1}, {1}), longs({1}, {1})}).dtype(), DType::Float32);
}

TEST(ElementwiseBinary, Atan2OutWritesIntoOut) {
  Tensor out = doubles({0, 0}, {2});
  Tensor r = call("aten::atan2.out", {doubles({1, -1}, {2}), doubles({1, 1}, {2}), out});
  EXPECT_EQ(r.const_data_ptr(), out.const_data_ptr());
  expect_values(out, {std::atan2(1.0, 1.0), std::atan2(-1.0, 1.0)});
  // Integer inputs give a floating result: a float32 out takes it, an int64 one refuses it.
  Tensor f = floats({0}, {1});
  call("aten::atan2.out", {longs({1}, {1}), longs({0}, {1}), f});
  expect_values(f, {std::atan2(1.0f, 0.0f)}, 1e-7);
  EXPECT_NE(error_of("aten::atan2.out", {longs({1}, {1}), longs({0}, {1}), longs({0}, {1})}).find("can't be cast"),
            std::string::npos);
}

TEST(ElementwiseBinary, FmodAndRemainder) {
  // fmod keeps the dividend's sign, remainder the divisor's.
  Tensor a = longs({-7, 7, -7, 7}, {4}), b = longs({3, 3, -3, -3}, {4});
  EXPECT_EQ(ints(call("aten::fmod.Tensor", {a, b})), (std::vector<int64_t>{-1, 1, -1, 1}));
  EXPECT_EQ(ints(call("aten::remainder.Tensor", {a, b})), (std::vector<int64_t>{2, 1, -1, -2}));
  EXPECT_EQ(values(call("aten::fmod.Scalar", {doubles({7.5, -7.5}, {2}), Scalar(-2.0)})), (std::vector<double>{1.5, -1.5}));
  EXPECT_EQ(values(call("aten::remainder.Scalar", {doubles({7.5, -7.5}, {2}), Scalar(-2.0)})), (std::vector<double>{-0.5, -1.5}));
  EXPECT_TRUE(std::isnan(values(call("aten::remainder.Scalar", {doubles({1}, {1}), Scalar(0.0)}))[0]));
  EXPECT_NE(error_of("aten::fmod.Scalar", {longs({1}, {1}), Scalar(int64_t{0})}).find("ZeroDivisionError"), std::string::npos);
  EXPECT_NE(error_of("aten::remainder.Tensor", {longs({1}, {1}), longs({0}, {1})}).find("aten::remainder.Tensor"), std::string::npos);
}

// ---- where ----

TEST(ElementwiseBinary, Where) {
  // condition [[T], [F]] broadcasts over [1, 2] and [10, 20]; int and float promote to float32.
  Tensor r = call("aten::where.self", {bools({true, false}, {2, 1}), longs({1, 2}, {2}), floats({10, 20}, {2})});
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_EQ(sizes_of(r), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values(r), (std::vector<double>{1, 2, 10, 20}));
  EXPECT_NE(error_of("aten::where.self", {make<uint8_t>({1}, {1}), floats({1}, {1}), floats({2}, {1})}).find("'condition'"),
            std::string::npos);
}

// ---- comparisons, logical, bitwise ----

TEST(ElementwiseBinary, Comparisons) {
  Tensor x = doubles({1, 2, 3, kNaN}, {4});
  auto cmp = [&](const char* op) { return ints(call(std::string("aten::") + op + ".Scalar", {x, Scalar(int64_t{2})})); };
  EXPECT_EQ(cmp("eq"), (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(cmp("ne"), (std::vector<int64_t>{1, 0, 1, 1}));  // NaN != 2
  EXPECT_EQ(cmp("lt"), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(cmp("le"), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(cmp("gt"), (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ(cmp("ge"), (std::vector<int64_t>{0, 1, 1, 0}));
  // Tensor overloads broadcast and return bool: [[1], [3]] < [2, 4].
  Tensor lt = call("aten::lt.Tensor", {longs({1, 3}, {2, 1}), floats({2, 4}, {2})});
  EXPECT_EQ(lt.dtype(), DType::Bool);
  EXPECT_EQ(ints(lt), (std::vector<int64_t>{1, 1, 0, 1}));
  for (const char* op : {"eq", "ne", "le", "gt", "ge"}) {
    Tensor r = call(std::string("aten::") + op + ".Tensor", {longs({1, 3}, {2}), longs({3, 3}, {2})});
    EXPECT_EQ(r.dtype(), DType::Bool) << op;
  }
  EXPECT_EQ(ints(call("aten::eq.Tensor", {make<complex128>({complex128(1, 1)}, {1}), make<complex128>({complex128(1, 1)}, {1})})),
            (std::vector<int64_t>{1}));
  EXPECT_NE(error_of("aten::lt.Tensor", {make<complex128>({1}, {1}), make<complex128>({1}, {1})}).find("aten::lt.Tensor"),
            std::string::npos);
  // A float16 tensor compares with the Scalar cast to float16, as TensorIterator casts it.
  Tensor h = scalar_tensor(Scalar(0.1), TensorOptions(DType::Float16)).reshape({1});
  EXPECT_EQ(ints(call("aten::eq.Scalar", {h, Scalar(0.1)})), (std::vector<int64_t>{1}));
}

TEST(ElementwiseBinary, LogicalOps) {
  Tensor a = doubles({0, 1, 2, 0}, {4}), b = longs({0, 0, 5, 3}, {4});
  EXPECT_EQ(ints(call("aten::logical_and", {a, b})), (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ(ints(call("aten::logical_or", {a, b})), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(ints(call("aten::logical_xor", {a, b})), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(call("aten::logical_xor", {a, b}).dtype(), DType::Bool);
}

TEST(ElementwiseBinary, BitwiseOps) {
  Tensor a = longs({12}, {1}), b = longs({10}, {1});
  EXPECT_EQ(ints(call("aten::bitwise_and.Tensor", {a, b})), (std::vector<int64_t>{8}));
  EXPECT_EQ(ints(call("aten::bitwise_or.Tensor", {a, b})), (std::vector<int64_t>{14}));
  EXPECT_EQ(ints(call("aten::bitwise_xor.Tensor", {a, b})), (std::vector<int64_t>{6}));
  EXPECT_EQ(ints(call("aten::bitwise_and.Scalar", {make<uint8_t>({0xF0}, {1}), Scalar(int64_t{-1})})),
            (std::vector<int64_t>{0xF0}));  // -1 cast to uint8 is 0xFF
  EXPECT_EQ(ints(call("aten::bitwise_xor.Scalar", {bools({true, false}, {2}), Scalar(true)})), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ints(call("aten::bitwise_or.Scalar", {bools({true, false}, {2}), Scalar(int64_t{2})})),
            (std::vector<int64_t>{3, 2}));  // bool | int -> int64
  EXPECT_NE(error_of("aten::bitwise_and.Tensor", {floats({1}, {1}), floats({1}, {1})}).find("aten::bitwise_and.Tensor"),
            std::string::npos);
}

// ---- in-place and out= ----

TEST(ElementwiseBinary, InPlaceWritesSelfThroughItsStrides) {
  Tensor base = floats({1, 2, 3, 4}, {2, 2});
  Tensor self = base.transpose(0, 1);  // [[1, 3], [2, 4]]
  Tensor r = call("aten::add_.Tensor", {self, floats({10, 20}, {2}), Scalar(int64_t{1})});
  EXPECT_TRUE(r.is_same(self));
  EXPECT_EQ(values(base), (std::vector<double>{11, 12, 23, 24}));
  // x.mul_(x): the operand aliases the result.
  Tensor x = doubles({3, -2}, {2});
  EXPECT_TRUE(call("aten::mul_.Tensor", {x, x}).is_same(x));
  EXPECT_EQ(values(x), (std::vector<double>{9, 4}));
  // An int self cannot take a float result; self cannot grow by broadcasting.
  EXPECT_NE(error_of("aten::add_.Tensor", {longs({1}, {1}), floats({1}, {1})}).find("can't be cast"), std::string::npos);
  EXPECT_NE(error_of("aten::mul_.Tensor", {floats({1}, {1}), floats({1, 2}, {2})}).find("'self'"), std::string::npos);
  // An int self takes an int result of a float64-free promotion (int32 += int64 stays int32).
  Tensor small = make<int32_t>({5}, {1});
  call("aten::add_.Tensor", {small, longs({7}, {1})});
  EXPECT_EQ(small.dtype(), DType::Int32);
  EXPECT_EQ(ints(small), (std::vector<int64_t>{12}));
}

TEST(ElementwiseBinary, OutWritesAndReturnsOut) {
  Tensor out = empty({2}, TensorOptions(DType::Float64));
  Tensor r = call("aten::mul.out", {floats({1.5f, 2}, {2}), floats({2, 3}, {2}), out});
  EXPECT_TRUE(r.is_same(out));
  EXPECT_EQ(values(out), (std::vector<double>{3, 6}));
  // A wider out dtype: the sum is computed in float16 (the inputs' dtype) and then cast.
  Tensor half_out = empty({1}, TensorOptions(DType::Float64));
  Tensor h = scalar_tensor(Scalar(2048.0), TensorOptions(DType::Float16)).reshape({1});
  call("aten::add.out", {h, scalar_tensor(Scalar(1.0), TensorOptions(DType::Float16)).reshape({1}), Scalar(int64_t{1}), half_out});
  EXPECT_EQ(values(half_out), (std::vector<double>{2048}));  // 2049 is not a float16
  // The wrong shape and a float result into an int out are errors naming 'out'.
  EXPECT_NE(error_of("aten::add.out", {floats({1}, {1}), floats({1}, {1}), Scalar(int64_t{1}), empty({3})}).find("'out'"),
            std::string::npos);
  EXPECT_NE(error_of("aten::mul.out", {floats({1}, {1}), floats({1}, {1}), empty({1}, TensorOptions(DType::Int64))}).find("can't be cast"),
            std::string::npos);
}

TEST(ElementwiseBinary, OutRefusesAutogradAsPyTorch) {
  Tensor x = doubles({1, 2}, {2}), y = doubles({3, 4}, {2}).set_requires_grad(true), out = doubles({0, 0}, {2});
  const std::string add = error_of("aten::add.out", {y, x, Scalar(int64_t{1}), out});
  EXPECT_NE(add.find("'aten::add.out' is an out= operator"), std::string::npos) << add;
  EXPECT_NE(add.find("argument 'self' requires grad"), std::string::npos) << add;
  EXPECT_NE(error_of("aten::mul.out", {x, y, out}).find("argument 'other' requires grad"), std::string::npos);
  autograd::NoGradGuard no_grad;
  call("aten::mul.out", {x, y, out});
  EXPECT_EQ(values(out), (std::vector<double>{3, 8}));
}

TEST(ElementwiseBinary, FakeKernelsMatchTheRealLayout) {
  Tensor t = floats({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);  // [3, 2], strides [1, 3]
  Tensor v = floats({1, 2}, {2});
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor ft = mode.from_tensor(t);
  for (const char* op : {"aten::add.Tensor", "aten::atan2", "aten::lt.Tensor", "aten::div.Tensor"}) {
    Tensor r = call(op, {ft, ft});
    EXPECT_TRUE(r.is_fake()) << op;
    EXPECT_EQ(strides_of(r), (std::vector<int64_t>{1, 3})) << op;
  }
  EXPECT_EQ(call("aten::lt.Tensor", {ft, ft}).dtype(), DType::Bool);
  Tensor self = mode.from_tensor(v);
  EXPECT_TRUE(call("aten::add_.Tensor", {self, self}).is_same(self));
}

// ---- gradients ----

TEST(ElementwiseBinary, GradientsReduceBroadcastDims) {
  Tensor a = doubles({1, 2}, {2, 1}).set_requires_grad(true), b = doubles({3, 4, 5}, {3}).set_requires_grad(true);
  // d(a - 2b): a gets 3 (summed over b's dim), b gets -2 * 2 (summed over a's dim).
  auto g = grads_of(call("aten::sub.Tensor", {a, b, Scalar(int64_t{2})}), {a, b});
  EXPECT_EQ(values(g[0]), (std::vector<double>{3, 3}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{-4, -4, -4}));
  // d(a * b): a gets sum(b) = 12, b gets sum(a) = 3.
  g = grads_of(call("aten::mul.Tensor", {a, b}), {a, b});
  EXPECT_EQ(values(g[0]), (std::vector<double>{12, 12}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{3, 3, 3}));
  // d(a / b) by b: -a / b^2 summed over a: -(1 + 2) / 9 for b = 3.
  g = grads_of(call("aten::div.Tensor", {a, b}), {a, b});
  EXPECT_DOUBLE_EQ(values(g[1])[0], -3.0 / 9);
  EXPECT_DOUBLE_EQ(values(g[0])[0], 1.0 / 3 + 1.0 / 4 + 1.0 / 5);
}

TEST(ElementwiseBinary, GradientsOfPiecewiseOps) {
  Tensor a = doubles({1, 2, 3}, {3}).set_requires_grad(true), b = doubles({2, 2, 1}, {3}).set_requires_grad(true);
  // maximum: the larger one gets the gradient, a tie splits it.
  auto g = grads_of(call("aten::maximum", {a, b}), {a, b});
  EXPECT_EQ(values(g[0]), (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{1, 0.5, 0}));
  // where: the chosen side gets the gradient.
  Tensor c = bools({true, false, true}, {3});
  g = grads_of(call("aten::where.self", {c, a, b}), {a, b});
  EXPECT_EQ(values(g[0]), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{0, 1, 0}));
  // remainder(a, b) = a - floor(a / b) * b: d/db = -floor(a / b) = [-0, -1, -3].
  g = grads_of(call("aten::remainder.Tensor", {a, b}), {a, b});
  EXPECT_EQ(values(g[0]), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{0, -1, -3}));
  // Rounded division has zero gradients.
  g = grads_of(call("aten::div.Tensor_mode", {a, b, IValue(std::string("floor"))}), {a, b});
  EXPECT_EQ(values(g[0]), (std::vector<double>{0, 0, 0}));
}

TEST(ElementwiseBinary, GradientsOfPowAndAtan2) {
  Tensor x = doubles({2, 3}, {2}).set_requires_grad(true), e = doubles({3, 0}, {2}).set_requires_grad(true);
  // d(x^e)/dx = e x^(e-1) = [12, 0]; d/de = x^e ln x = [8 ln 2, ln 3].
  auto g = grads_of(call("aten::pow.Tensor_Tensor", {x, e}), {x, e});
  EXPECT_DOUBLE_EQ(values(g[0])[0], 12);
  EXPECT_DOUBLE_EQ(values(g[0])[1], 0);
  EXPECT_DOUBLE_EQ(values(g[1])[0], 8 * std::log(2.0));
  EXPECT_DOUBLE_EQ(values(g[1])[1], std::log(3.0));
  // d(2^e)/de = 2^e ln 2.
  g = grads_of(call("aten::pow.Scalar", {Scalar(int64_t{2}), e}), {e});
  EXPECT_DOUBLE_EQ(values(g[0])[0], 8 * std::log(2.0));
  // atan2(y, x) at (1, 1): d/dy = x / (x^2 + y^2) = 0.5, d/dx = -0.5.
  Tensor y1 = doubles({1}, {1}).set_requires_grad(true), x1 = doubles({1}, {1}).set_requires_grad(true);
  g = grads_of(call("aten::atan2", {y1, x1}), {y1, x1});
  EXPECT_DOUBLE_EQ(values(g[0])[0], 0.5);
  EXPECT_DOUBLE_EQ(values(g[1])[0], -0.5);
}

TEST(ElementwiseBinary, InPlaceGradientsUseSelfFromBeforeTheWrite) {
  Tensor x = leaf(doubles({2, 3}, {2})), other = leaf(doubles({5, 7}, {2}));
  Tensor self = call("aten::mul.Scalar", {x, Scalar(int64_t{1})});  // a non-leaf copy of [2, 3]
  Tensor r = call("aten::mul_.Tensor", {self, other});                  // self becomes [10, 21]
  EXPECT_TRUE(r.is_same(self));
  auto g = grads_of(r, {x, other});
  EXPECT_EQ(values(g[0]), (std::vector<double>{5, 7}));  // other
  EXPECT_EQ(values(g[1]), (std::vector<double>{2, 3}));  // self before the write
  // add_ with alpha: d/dother = alpha.
  Tensor s2 = call("aten::mul.Scalar", {x, Scalar(int64_t{1})});
  g = grads_of(call("aten::add_.Tensor", {s2, other, Scalar(int64_t{3})}), {x, other});
  EXPECT_EQ(values(g[0]), (std::vector<double>{1, 1}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{3, 3}));
  // An in-place write into a leaf that requires grad is an error.
  EXPECT_NE(error_of("aten::add_.Tensor", {x, other}).find("leaf"), std::string::npos);
}

// gradcheck and gradgradcheck on well-conditioned samples (no poles, kinks or ties).
TEST(ElementwiseBinary, FormulasPassGradcheckAndGradgradcheck) {
  auto variable = [](std::vector<double> v, std::vector<int64_t> s) { return leaf(doubles(std::move(v), std::move(s))); };
  struct Case {
    const char* op;
    Stack args;
  };
  const std::vector<Case> cases = {
      {"aten::add.Tensor", {variable({1, 2}, {2, 1}), variable({3, -4, 5}, {3}), Scalar(0.5)}},
      {"aten::sub.Scalar", {variable({1, 2}, {2}), Scalar(int64_t{3}), Scalar(int64_t{2})}},
      {"aten::mul.Tensor", {variable({1.5, -2}, {2, 1}), variable({3, 0.25}, {1, 2})}},
      {"aten::mul.Scalar", {variable({1.5, -2}, {2}), Scalar(-1.5)}},
      {"aten::div.Tensor", {variable({1.5, -2, 0.5}, {3}), variable({0.75}, {})}},
      {"aten::div.Scalar", {variable({1.5, -2}, {2}), Scalar(0.75)}},
      {"aten::div.Tensor_mode", {variable({1.5, -2}, {2}), variable({0.8, 1.3}, {2}), IValue()}},
      {"aten::pow.Tensor_Tensor", {variable({1.5, 2.5}, {2}), variable({-1.3, 0}, {2})}},
      {"aten::pow.Tensor_Scalar", {variable({1.5, -2.5}, {2}), Scalar(int64_t{3})}},
      {"aten::pow.Scalar", {Scalar(1.7), variable({-1.3, 2}, {2})}},
      {"aten::maximum", {variable({1.5, -2}, {2}), variable({0.5, 1}, {2})}},
      {"aten::minimum", {variable({1.5, -2}, {2}), variable({0.5}, {1})}},
      {"aten::atan2", {variable({1.5, -2}, {2}), variable({-0.5, 1}, {2})}},
      {"aten::fmod.Tensor", {variable({7.3, -7.3}, {2}), variable({2, 2.5}, {2})}},
      {"aten::remainder.Tensor", {variable({7.3, -7.3}, {2}), variable({2, 2.5}, {2})}},
      {"aten::remainder.Scalar", {variable({7.3, -7.3}, {2}), Scalar(-2.0)}},
      {"aten::where.self", {bools({true, false}, {2}), variable({1, 2}, {2}), variable({3}, {})}},
  };
  for (const auto& c : cases) expect_gradients_pass(c.op, c.args);
}

}  // namespace
}  // namespace opconform::reference
