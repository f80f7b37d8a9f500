// Hand-derived values and identities for the elementwise unary family. Expected values come
// from the math (exact points such as sin(pi/2) = 1, log(e^2) = 2), not from the kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "opconform/reference.h"

namespace opconform::reference {
namespace {

Registry& registry() {
  static ReferenceRegistration registration = register_reference_ops(Registry::global());
  return Registry::global();
}

Tensor call1(const char* op, const Tensor& x) {
  Stack s{IValue(x)};
  registry().get(op).call_boxed(s);
  return s.at(0).to_tensor();
}

Tensor doubles(std::vector<double> v, std::vector<int64_t> sizes) { return from_vector<double>(v, sizes); }

void expect_values(const Tensor& t, std::vector<double> want, double tol = 1e-12) {
  auto got = t.to(DType::Float64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    else if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << "element " << i;
    else EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

constexpr double pi = std::numbers::pi;
constexpr double inf = std::numeric_limits<double>::infinity();

TEST(ElementwiseUnary, ExactPointsOfTheElementaryFunctions) {
  expect_values(call1("aten::sin", doubles({0, pi / 2, pi / 6}, {3})), {0, 1, 0.5});
  expect_values(call1("aten::cos", doubles({0, pi, pi / 3}, {3})), {1, -1, 0.5});
  expect_values(call1("aten::tan", doubles({0, pi / 4}, {2})), {0, 1});
  expect_values(call1("aten::exp", doubles({0, 1, -inf}, {3})), {1, std::numbers::e, 0});
  expect_values(call1("aten::log", doubles({1, std::exp(2.0), 0}, {3})), {0, 2, -inf});
  expect_values(call1("aten::log2", doubles({1, 8, 0.25}, {3})), {0, 3, -2});
  expect_values(call1("aten::log10", doubles({1, 1000, 0.01}, {3})), {0, 3, -2});
  expect_values(call1("aten::sqrt", doubles({0, 4, 2.25, -1}, {4})), {0, 2, 1.5, NAN});
  expect_values(call1("aten::rsqrt", doubles({4, 0.25}, {2})), {0.5, 2});
  expect_values(call1("aten::reciprocal", doubles({4, -0.5}, {2})), {0.25, -2});
  expect_values(call1("aten::tanh", doubles({0, inf, -inf}, {3})), {0, 1, -1});
  expect_values(call1("aten::sigmoid", doubles({0, inf, -inf}, {3})), {0.5, 1, 0});
  expect_values(call1("aten::asin", doubles({1, 0.5}, {2})), {pi / 2, pi / 6});
  expect_values(call1("aten::acos", doubles({1, 0.5}, {2})), {0, pi / 3});
  expect_values(call1("aten::atan", doubles({1, -inf}, {2})), {pi / 4, -pi / 2});
  expect_values(call1("aten::sinh", doubles({0}, {1})), {0});
  expect_values(call1("aten::cosh", doubles({0}, {1})), {1});
  expect_values(call1("aten::asinh", doubles({0}, {1})), {0});
  expect_values(call1("aten::acosh", doubles({1}, {1})), {0});
  expect_values(call1("aten::atanh", doubles({0, 1}, {2})), {0, inf});
  expect_values(call1("aten::erf", doubles({0, inf, -inf}, {3})), {0, 1, -1});
}

TEST(ElementwiseUnary, AccurateNearZero) {
  // expm1 and log1p keep the relative precision that exp(x) - 1 and log(1 + x) lose.
  const double x = 1e-12;
  EXPECT_NEAR(call1("aten::expm1", doubles({x}, {1})).to_vector<double>()[0] / x, 1.0, 1e-9);
  EXPECT_NEAR(call1("aten::log1p", doubles({x}, {1})).to_vector<double>()[0] / x, 1.0, 1e-9);
}

TEST(ElementwiseUnary, IdentitiesHoldElementwise) {
  // sin^2 + cos^2 = 1 and cosh^2 - sinh^2 = 1 on arbitrary values.
  Tensor x = doubles({-3.5, -1, 0, 0.25, 2, 7}, {2, 3});
  auto s = call1("aten::sin", x).to_vector<double>(), c = call1("aten::cos", x).to_vector<double>();
  auto sh = call1("aten::sinh", x).to_vector<double>(), ch = call1("aten::cosh", x).to_vector<double>();
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_NEAR(s[i] * s[i] + c[i] * c[i], 1.0, 1e-12);
    EXPECT_NEAR(ch[i] * ch[i] - sh[i] * sh[i], 1.0, 1e-9);
  }
}

TEST(ElementwiseUnary, RoundingFunctionsAgreeOnHalves) {
  Tensor x = doubles({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.7}, {7});
  expect_values(call1("aten::round", x), {-2, -2, -0, 0, 2, 2, 3});  // ties to even
  expect_values(call1("aten::floor", x), {-3, -2, -1, 0, 1, 2, 2});
  expect_values(call1("aten::ceil", x), {-2, -1, -0, 1, 2, 3, 3});
  expect_values(call1("aten::trunc", x), {-2, -1, -0, 0, 1, 2, 2});
  expect_values(call1("aten::sign", x), {-1, -1, -1, 1, 1, 1, 1});
}

TEST(ElementwiseUnary, DtypeRules) {
  Tensor ints = from_vector<int64_t>({-3, 0, 4}, {3});
  EXPECT_EQ(call1("aten::exp", ints).dtype(), DType::Float32);  // integers compute in float32
  EXPECT_EQ(call1("aten::abs", ints).dtype(), DType::Int64);
  expect_values(call1("aten::abs", ints), {3, 0, 4});
  expect_values(call1("aten::neg", ints), {3, 0, -4});
  expect_values(call1("aten::bitwise_not", ints), {2, -1, -5});  // ~x = -x - 1
  EXPECT_EQ(call1("aten::isnan", ints).dtype(), DType::Bool);
  Tensor z = from_vector<complex128>({complex128(3, 4)}, {1});
  Tensor a = call1("aten::abs", z);
  EXPECT_EQ(a.dtype(), DType::Float64);  // the modulus is real
  expect_values(a, {5});
  Tensor b = from_vector<bool>({true, false}, {2});
  EXPECT_EQ(call1("aten::bitwise_not", b).to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ(call1("aten::logical_not", ints).to_vector<bool>(), (std::vector<bool>{false, true, false}));
}

TEST(ElementwiseUnary, PredicatesSeeSpecialValues) {
  Tensor x = doubles({0, NAN, inf, -inf, 1e308}, {5});
  EXPECT_EQ(call1("aten::isnan", x).to_vector<bool>(), (std::vector<bool>{false, true, false, false, false}));
  EXPECT_EQ(call1("aten::isinf", x).to_vector<bool>(), (std::vector<bool>{false, false, true, true, false}));
}

TEST(ElementwiseUnary, FollowsStridesOfTheInput) {
  // A transposed input gives a transposed output (TensorIterator's layout), same values.
  Tensor x = doubles({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
  Tensor y = call1("aten::neg", x);
  EXPECT_EQ(std::vector<int64_t>(y.strides().begin(), y.strides().end()), (std::vector<int64_t>{1, 3}));
  expect_values(y.contiguous(), {-1, -4, -2, -5, -3, -6});
  // A sliced (non-dense) input gives a contiguous output.
  Tensor s = doubles({1, 2, 3, 4, 5, 6}, {6}).slice(0, 0, std::nullopt, 2);
  Tensor e = call1("aten::exp", s);
  EXPECT_TRUE(e.is_contiguous());
  expect_values(e, {std::exp(1.0), std::exp(3.0), std::exp(5.0)});
}

TEST(ElementwiseUnary, EmptyAndZeroDimInputs) {
  Tensor empty_t = empty({0, 3}, TensorOptions(DType::Float32));
  Tensor r = call1("aten::sin", empty_t);
  EXPECT_EQ(r.numel(), 0);
  EXPECT_EQ(r.size(1), 3);
  Tensor scalar = scalar_tensor(Scalar(0.25), TensorOptions(DType::Float64));
  Tensor q = call1("aten::sqrt", scalar);
  EXPECT_EQ(q.dim(), 0);
  expect_values(q, {0.5});
}

TEST(ElementwiseUnary, RefusesDtypesOutsideItsDomain) {
  Tensor z = from_vector<complex128>({complex128(1, 1)}, {1});
  try {
    call1("aten::erf", z);
    FAIL() << "erf accepted a complex tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aten::erf"), std::string::npos) << e.what();
  }
  EXPECT_THROW(call1("aten::bitwise_not", doubles({1}, {1})), Error);
}

TEST(ElementwiseUnary, GradientsOfTheFormulas) {
  // d/dx sin = cos, d/dx log = 1/x, d/dx sigmoid = s(1-s), at hand-picked points.
  Tensor x = doubles({0.5, 2.0}, {2});
  x.set_requires_grad(true);
  Tensor y = call1("aten::sin", x);
  y.backward(doubles({1, 1}, {2}));
  expect_values(x.grad(), {std::cos(0.5), std::cos(2.0)});
  Tensor x2 = doubles({0.5, 2.0}, {2});
  x2.set_requires_grad(true);
  call1("aten::log", x2).backward(doubles({1, 3}, {2}));
  expect_values(x2.grad(), {2.0, 1.5});
}

}  // namespace
}  // namespace opconform::reference
