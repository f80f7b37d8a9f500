// Hand-derived values and identities for the activation family. Expected values come from the
// definitions (relu(-1) = 0, gelu(1) = Phi(1), softmax of [1, 2, 3] = e^k / (e + e^2 + e^3)),
// computed outside the kernels.
#include <gtest/gtest.h>

#include <cmath>

#include "opconform/conformance/gradcheck.h"
#include "opconform/core/autograd.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;

// d(sum(out * ones))/dx for a one-output op whose first argument is x.
Tensor gradient_of(const char* op, Stack args) {
  Tensor x = leaf(args[0].to_tensor());
  args[0] = IValue(x);
  return grad_of(call(op, args), x);
}

const double phi1 = 0.8413447460685429;  // Phi(1), the standard normal CDF at 1

TEST(Activation, ReluKeepsPositivesAndNaN) {
  expect_values(call("aten::relu", {doubles({-2, 0, 3, kNaN, -kInf}, {5})}), {0, 0, 3, kNaN, 0});
  // Transposed input: the values follow the logical layout.
  Tensor x = doubles({-1, 2, 3, -4}, {2, 2}).transpose(0, 1);  // [[-1, 3], [2, -4]]
  expect_values(call("aten::relu", {x}), {0, 3, 2, 0});
  Tensor ints = from_vector<int8_t>({-5, 7}, {2});
  Tensor r = call("aten::relu", {ints});
  EXPECT_EQ(r.dtype(), DType::Int8);
  expect_values(r, {0, 7});
  EXPECT_THROW(call("aten::relu", {from_vector<bool>({true}, {1})}), Error);
}

TEST(Activation, ReluInPlaceAndOut) {
  Tensor x = doubles({-1, 2}, {2});
  Tensor same = call("aten::relu_", {x});
  EXPECT_TRUE(same.is_same(x));
  expect_values(x, {0, 2});

  Tensor out = empty({2}, TensorOptions(DType::Float32));
  Tensor returned = call("aten::relu.out", {doubles({3, -3}, {2}), out});
  EXPECT_TRUE(returned.is_same(out));
  expect_values(out, {3, 0});
  EXPECT_THROW(call("aten::relu.out", {doubles({3, -3}, {2}), empty({3}, TensorOptions(DType::Float64))}), Error);
  // out= overloads refuse autograd, as PyTorch's.
  Tensor needs_grad = leaf(doubles({3, -3}, {2}));
  EXPECT_NE(error_of("aten::relu.out", {needs_grad, out}).find("argument 'self' requires grad"), std::string::npos);
  EXPECT_NE(error_of("aten::clamp.out", {needs_grad, IValue(0.0), IValue(), empty({2}, TensorOptions(DType::Float64))})
                .find("does not support automatic differentiation"),
            std::string::npos);
}

TEST(Activation, GeluExactAndTanh) {
  expect_values(call("aten::gelu", {doubles({0, 1, -1}, {3}), IValue("none")}), {0, phi1, -1 + phi1});
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) at +-1
  expect_values(call("aten::gelu", {doubles({1, -1}, {2}), IValue("tanh")}), {0.8411919906082768, -0.15880800939172324});
  EXPECT_THROW(call("aten::gelu", {doubles({1}, {1}), IValue("erf")}), Error);
  EXPECT_THROW(call("aten::gelu", {from_vector<int64_t>({1}, {1}), IValue("none")}), Error);
}

TEST(Activation, LeakyReluHardtanhElu) {
  expect_values(call("aten::leaky_relu", {doubles({-2, 3, 0}, {3}), IValue(0.5)}), {-1, 3, 0});
  expect_values(call("aten::hardtanh", {doubles({-2, 0.5, 3, kNaN}, {4}), IValue(-1.0), IValue(1.0)}), {-1, 0.5, 1, kNaN});
  // Integer tensors take the bounds truncated to integers, and keep their dtype.
  Tensor h = call("aten::hardtanh", {from_vector<int32_t>({-5, 1, 5}, {3}), IValue(-2.7), IValue(2.7)});
  EXPECT_EQ(h.dtype(), DType::Int32);
  expect_values(h, {-2, 1, 2});
  EXPECT_THROW(call("aten::hardtanh", {from_vector<uint8_t>({1}, {1}), IValue(-1.0), IValue(1.0)}), Error);
  // elu: scale * x above 0, scale * alpha * (e^(input_scale x) - 1) at or below.
  expect_values(call("aten::elu", {doubles({-1, 2, 0}, {3}), IValue(1.0), IValue(1.0), IValue(1.0)}),
                {-0.6321205588285577, 2, 0});
  expect_values(call("aten::elu", {doubles({-1, 2}, {2}), IValue(0.5), IValue(2.0), IValue(3.0)}),
                {-0.950212931632136, 4});
}

TEST(Activation, ClampPromotesIntegerTensorsWithFloatBounds) {
  Tensor x = from_vector<int64_t>({-3, 0, 4}, {3});
  Tensor c = call("aten::clamp", {x, IValue(0.5), IValue()});
  EXPECT_EQ(c.dtype(), DType::Float32);
  expect_values(c, {0.5, 0.5, 4});
  Tensor i = call("aten::clamp", {x, IValue(int64_t{-1}), IValue(int64_t{2})});
  EXPECT_EQ(i.dtype(), DType::Int64);
  expect_values(i, {-1, 0, 2});
  // min > max: every element becomes max; NaN stays NaN.
  expect_values(call("aten::clamp", {doubles({-9, 0, 9, kNaN}, {4}), IValue(3.0), IValue(1.0)}), {1, 1, 1, kNaN});
  EXPECT_THROW(call("aten::clamp", {x, IValue(), IValue()}), Error);
  EXPECT_THROW(call("aten::clamp", {from_vector<int8_t>({1}, {1}), IValue(int64_t{1000}), IValue()}), Error);
}

TEST(Activation, ClampInPlaceAndOut) {
  Tensor x = doubles({-3, 0.5, 4}, {3});
  EXPECT_TRUE(call("aten::clamp_", {x, IValue(-1.0), IValue(1.0)}).is_same(x));
  expect_values(x, {-1, 0.5, 1});
  // An in-place clamp may not promote: an integer tensor with a float bound is an error.
  EXPECT_THROW(call("aten::clamp_", {from_vector<int64_t>({1}, {1}), IValue(0.5), IValue()}), Error);

  Tensor out = full({2, 2}, 7.0, TensorOptions(DType::Float64)).transpose(0, 1);  // non-contiguous out
  Tensor returned = call("aten::clamp.out", {doubles({-5, 5, 0.25, 2}, {2, 2}), IValue(), IValue(1.0), out});
  EXPECT_TRUE(returned.is_same(out));
  expect_values(out, {-5, 1, 0.25, 1});
  EXPECT_THROW(call("aten::clamp.out", {doubles({1}, {1}), IValue(0.0), IValue(), empty({1}, TensorOptions(DType::Float32))}),
               Error);
}

TEST(Activation, ClampTensorBroadcastsThreeWays) {
  Tensor x = doubles({-5, 0, 5, -1, 1, 9}, {2, 3});
  Tensor lo = doubles({-2, 0.5, 0}, {3});  // per column
  Tensor hi = doubles({3}, {});           // 0-d
  expect_values(call("aten::clamp.Tensor", {x, lo, hi}), {-2, 0.5, 3, -1, 1, 3});
  expect_values(call("aten::clamp.Tensor", {x, IValue(), hi}), {-5, 0, 3, -1, 1, 3});
  // A 0-d float64 bound does not promote a float32 tensor (0-d tensors rank below dimensioned ones).
  Tensor f = call("aten::clamp.Tensor", {x.to(DType::Float32), lo.to(DType::Float32), hi});
  EXPECT_EQ(f.dtype(), DType::Float32);
  // min > max elementwise: max wins.
  expect_values(call("aten::clamp.Tensor", {doubles({0}, {1}), doubles({2}, {1}), doubles({1}, {1})}), {1});
  EXPECT_THROW(call("aten::clamp.Tensor", {x, IValue(), IValue()}), Error);
}

TEST(Activation, SoftmaxAndLogSoftmaxOfOneTwoThree) {
  const std::vector<double> p{0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
  expect_values(call("aten::_softmax", {doubles({1, 2, 3}, {3}), IValue(int64_t{0}), IValue(false)}), p);
  expect_values(call("aten::_log_softmax", {doubles({1, 2, 3}, {3}), IValue(int64_t{-1}), IValue(false)}),
                {std::log(p[0]), std::log(p[1]), std::log(p[2])});
  // Along dim 0 of a transposed input: columns [1, 2, 3] and [0, 0, 0].
  Tensor t = doubles({1, 2, 3, 0, 0, 0}, {2, 3}).transpose(0, 1);
  Tensor s = call("aten::_softmax", {t, IValue(int64_t{0}), IValue(false)});
  EXPECT_TRUE(s.is_contiguous());
  expect_values(s, {p[0], 1.0 / 3, p[1], 1.0 / 3, p[2], 1.0 / 3});
  // A shift does not change softmax; a NaN poisons its slice only.
  expect_values(call("aten::_softmax", {doubles({101, 102, 103, kNaN, 0, 0}, {2, 3}), IValue(int64_t{1}), IValue(false)}),
                {p[0], p[1], p[2], kNaN, kNaN, kNaN});
  // 0-d: a slice of one element.
  expect_values(call("aten::_softmax", {doubles({7}, {}), IValue(int64_t{0}), IValue(false)}), {1});
  EXPECT_THROW(call("aten::_softmax", {doubles({1}, {1}).to(DType::Float16), IValue(int64_t{0}), IValue(true)}), Error);
  EXPECT_THROW(call("aten::_softmax", {doubles({1}, {1}), IValue(int64_t{1}), IValue(false)}), Error);
}

TEST(Activation, HandDerivedGradients) {
  expect_values(gradient_of("aten::relu", {doubles({-1, 2}, {2})}), {0, 1});
  // gelu'(1) = Phi(1) + phi(1)
  expect_values(gradient_of("aten::gelu", {doubles({1}, {1}), IValue("none")}), {1.0833154705876864}, 1e-12);
  expect_values(gradient_of("aten::leaky_relu", {doubles({-1, 2}, {2}), IValue(0.25)}), {0.25, 1});
  expect_values(gradient_of("aten::hardtanh", {doubles({-2, 0, 2}, {3}), IValue(-1.0), IValue(1.0)}), {0, 1, 0});
  // clamp: the subgradient 1 at the bounds themselves.
  expect_values(gradient_of("aten::clamp", {doubles({-2, -1, 0, 1, 2}, {5}), IValue(-1.0), IValue(1.0)}), {0, 1, 1, 1, 0});
  // softmax of equal logits with grad_output 1: the rows sum to 1, so the gradient is 0.
  expect_values(gradient_of("aten::_softmax", {doubles({0.5, 0.5}, {2}), IValue(int64_t{0}), IValue(false)}), {0, 0});
}

TEST(Activation, InPlaceGradientsUseTheOriginalValues) {
  // clamp_ on a non-leaf: 1 where min <= x <= max of the values before the call, bounds included
  // (a formula reading the clamped result could not tell x = 1 from x = 2).
  Tensor a = doubles({-2, -1, 0, 1, 2}, {5}).set_requires_grad(true);
  Tensor b = call("aten::mul.Scalar", {a, IValue(1.0)});
  call("aten::clamp_", {b, IValue(-1.0), IValue(1.0)});
  expect_values(grad_of(b, a), {0, 1, 1, 1, 0});
  Tensor c = call("aten::mul.Scalar", {a, IValue(1.0)});
  call("aten::relu_", {c});
  expect_values(grad_of(c, a), {0, 0, 0, 1, 1});
  // A leaf that requires grad cannot be written in place.
  EXPECT_THROW(call("aten::clamp_", {a, IValue(0.0), IValue()}), Error);
}

TEST(Activation, FormulasPassGradcheckAndGradgradcheck) {
  Tensor x = doubles({-1.5, -0.3, 0.7, 2.1, -2.6, 0.4}, {2, 3});
  expect_gradients_pass("aten::gelu", {leaf(x), IValue("none")});
  expect_gradients_pass("aten::gelu", {leaf(x), IValue("tanh")});
  expect_gradients_pass("aten::elu", {leaf(x), IValue(0.7), IValue(1.5), IValue(0.5)});
  expect_gradients_pass("aten::leaky_relu", {leaf(x), IValue(0.1)});
  expect_gradients_pass("aten::_softmax", {leaf(x), IValue(int64_t{1}), IValue(false)});
  expect_gradients_pass("aten::_log_softmax", {leaf(x.transpose(0, 1)), IValue(int64_t{0}), IValue(false)});
  expect_gradients_pass("aten::clamp", {leaf(x), IValue(-1.0), IValue(1.0)});
  // clamp.Tensor: gradients reach self and both (broadcast) bounds.
  Tensor lo = doubles({-1, 0, 0.5}, {3}).set_requires_grad(true), hi = doubles({1.0}, {}).set_requires_grad(true);
  auto result = conformance::gradcheck(registry().get("aten::clamp.Tensor"), {leaf(x), lo, hi});
  EXPECT_EQ(result.outcome, conformance::Outcome::passed) << result.message;
}

}  // namespace
}  // namespace opconform::reference
