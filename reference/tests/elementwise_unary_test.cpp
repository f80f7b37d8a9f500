// Hand-derived values and identities for the elementwise unary family. Expected values come
// from the math (exact points such as sin(pi/2) = 1, log(e^2) = 2), not from the kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;

constexpr double pi = std::numbers::pi;

TEST(ElementwiseUnary, ExactPointsOfTheElementaryFunctions) {
  expect_values(call("aten::sin", {doubles({0, pi / 2, pi / 6}, {3})}), {0, 1, 0.5});
  expect_values(call("aten::cos", {doubles({0, pi, pi / 3}, {3})}), {1, -1, 0.5});
  expect_values(call("aten::tan", {doubles({0, pi / 4}, {2})}), {0, 1});
  expect_values(call("aten::exp", {doubles({0, 1, -kInf}, {3})}), {1, std::numbers::e, 0});
  expect_values(call("aten::log", {doubles({1, std::exp(2.0), 0}, {3})}), {0, 2, -kInf});
  expect_values(call("aten::log2", {doubles({1, 8, 0.25}, {3})}), {0, 3, -2});
  expect_values(call("aten::log10", {doubles({1, 1000, 0.01}, {3})}), {0, 3, -2});
  expect_values(call("aten::sqrt", {doubles({0, 4, 2.25, -1}, {4})}), {0, 2, 1.5, NAN});
  expect_values(call("aten::rsqrt", {doubles({4, 0.25}, {2})}), {0.5, 2});
  expect_values(call("aten::reciprocal", {doubles({4, -0.5}, {2})}), {0.25, -2});
  expect_values(call("aten::tanh", {doubles({0, kInf, -kInf}, {3})}), {0, 1, -1});
  expect_values(call("aten::sigmoid", {doubles({0, kInf, -kInf}, {3})}), {0.5, 1, 0});
  expect_values(call("aten::asin", {doubles({1, 0.5}, {2})}), {pi / 2, pi / 6});
  expect_values(call("aten::acos", {doubles({1, 0.5}, {2})}), {0, pi / 3});
  expect_values(call("aten::atan", {doubles({1, -kInf}, {2})}), {pi / 4, -pi / 2});
  expect_values(call("aten::sinh", {doubles({0}, {1})}), {0});
  expect_values(call("aten::cosh", {doubles({0}, {1})}), {1});
  expect_values(call("aten::asinh", {doubles({0}, {1})}), {0});
  expect_values(call("aten::acosh", {doubles({1}, {1})}), {0});
  expect_values(call("aten::atanh", {doubles({0, 1}, {2})}), {0, kInf});
  expect_values(call("aten::erf", {doubles({0, kInf, -kInf}, {3})}), {0, 1, -1});
}

TEST(ElementwiseUnary, AccurateNearZero) {
  // expm1 and log1p keep the relative precision that exp(x) - 1 and log(1 + x) lose.
  const double x = 1e-12;
  EXPECT_NEAR(call("aten::expm1", {doubles({x}, {1})}).to_vector<double>()[0] / x, 1.0, 1e-9);
  EXPECT_NEAR(call("aten::log1p", {doubles({x}, {1})}).to_vector<double>()[0] / x, 1.0, 1e-9);
}

TEST(ElementwiseUnary, IdentitiesHoldElementwise) {
  // sin^2 + cos^2 = 1 and cosh^2 - sinh^2 = 1 on arbitrary values.
  Tensor x = doubles({-3.5, -1, 0, 0.25, 2, 7}, {2, 3});
  auto s = call("aten::sin", {x}).to_vector<double>(), c = call("aten::cos", {x}).to_vector<double>();
  auto sh = call("aten::sinh", {x}).to_vector<double>(), ch = call("aten::cosh", {x}).to_vector<double>();
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_NEAR(s[i] * s[i] + c[i] * c[i], 1.0, 1e-12);
    EXPECT_NEAR(ch[i] * ch[i] - sh[i] * sh[i], 1.0, 1e-9);
  }
}

TEST(ElementwiseUnary, RoundingFunctionsAgreeOnHalves) {
  Tensor x = doubles({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.7}, {7});
  expect_values(call("aten::round", {x}), {-2, -2, -0, 0, 2, 2, 3});  // ties to even
  expect_values(call("aten::floor", {x}), {-3, -2, -1, 0, 1, 2, 2});
  expect_values(call("aten::ceil", {x}), {-2, -1, -0, 1, 2, 3, 3});
  expect_values(call("aten::trunc", {x}), {-2, -1, -0, 0, 1, 2, 2});
  expect_values(call("aten::sign", {x}), {-1, -1, -1, 1, 1, 1, 1});
}

TEST(ElementwiseUnary, DtypeRules) {
  Tensor ints = from_vector<int64_t>({-3, 0, 4}, {3});
  EXPECT_EQ(call("aten::exp", {ints}).dtype(), DType::Float32);  // integers compute in float32
  EXPECT_EQ(call("aten::abs", {ints}).dtype(), DType::Int64);
  expect_values(call("aten::abs", {ints}), {3, 0, 4});
  expect_values(call("aten::neg", {ints}), {3, 0, -4});
  expect_values(call("aten::bitwise_not", {ints}), {2, -1, -5});  // ~x = -x - 1
  EXPECT_EQ(call("aten::isnan", {ints}).dtype(), DType::Bool);
  Tensor z = from_vector<complex128>({complex128(3, 4)}, {1});
  Tensor a = call("aten::abs", {z});
  EXPECT_EQ(a.dtype(), DType::Float64);  // the modulus is real
  expect_values(a, {5});
  Tensor b = from_vector<bool>({true, false}, {2});
  EXPECT_EQ(call("aten::bitwise_not", {b}).to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ(call("aten::logical_not", {ints}).to_vector<bool>(), (std::vector<bool>{false, true, false}));
}

TEST(ElementwiseUnary, PredicatesSeeSpecialValues) {
  Tensor x = doubles({0, NAN, kInf, -kInf, 1e308}, {5});
  EXPECT_EQ(call("aten::isnan", {x}).to_vector<bool>(), (std::vector<bool>{false, true, false, false, false}));
  EXPECT_EQ(call("aten::isinf", {x}).to_vector<bool>(), (std::vector<bool>{false, false, true, true, false}));
}

TEST(ElementwiseUnary, FollowsStridesOfTheInput) {
  // A transposed input gives a transposed output (TensorIterator's layout), same values.
  Tensor x = doubles({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
  Tensor y = call("aten::neg", {x});
  EXPECT_EQ(std::vector<int64_t>(y.strides().begin(), y.strides().end()), (std::vector<int64_t>{1, 3}));
  expect_values(y.contiguous(), {-1, -4, -2, -5, -3, -6});
  // A sliced (non-dense) input gives a contiguous output.
  Tensor s = doubles({1, 2, 3, 4, 5, 6}, {6}).slice(0, 0, std::nullopt, 2);
  Tensor e = call("aten::exp", {s});
  EXPECT_TRUE(e.is_contiguous());
  expect_values(e, {std::exp(1.0), std::exp(3.0), std::exp(5.0)});
}

TEST(ElementwiseUnary, EmptyAndZeroDimInputs) {
  Tensor empty_t = empty({0, 3}, TensorOptions(DType::Float32));
  Tensor r = call("aten::sin", {empty_t});
  EXPECT_EQ(r.numel(), 0);
  EXPECT_EQ(r.size(1), 3);
  Tensor scalar = scalar_tensor(Scalar(0.25), TensorOptions(DType::Float64));
  Tensor q = call("aten::sqrt", {scalar});
  EXPECT_EQ(q.dim(), 0);
  expect_values(q, {0.5});
}

TEST(ElementwiseUnary, RefusesDtypesOutsideItsDomain) {
  Tensor z = from_vector<complex128>({complex128(1, 1)}, {1});
  try {
    call("aten::erf", {z});
    FAIL() << "erf accepted a complex tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aten::erf"), std::string::npos) << e.what();
  }
  EXPECT_THROW(call("aten::bitwise_not", {doubles({1}, {1})}), Error);
}

TEST(ElementwiseUnary, GradientsOfTheFormulas) {
  // d/dx sin = cos, d/dx log = 1/x, d/dx sigmoid = s(1-s), at hand-picked points.
  Tensor x = doubles({0.5, 2.0}, {2});
  x.set_requires_grad(true);
  Tensor y = call("aten::sin", {x});
  y.backward(doubles({1, 1}, {2}));
  expect_values(x.grad(), {std::cos(0.5), std::cos(2.0)});
  Tensor x2 = doubles({0.5, 2.0}, {2});
  x2.set_requires_grad(true);
  call("aten::log", {x2}).backward(doubles({1, 3}, {2}));
  expect_values(x2.grad(), {2.0, 1.5});
}

}  // namespace
}  // namespace opconform::reference
