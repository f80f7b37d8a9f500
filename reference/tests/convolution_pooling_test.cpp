// Hand-derived values and identities for convolution, col2im and pooling: small 1-d and 2-d cases worked
// out by hand, the adjoint identity <conv(x, w), y> = <x, conv_transpose(y, w)>, and pooling
// windows whose maxima and means are read off the input.
#include <gtest/gtest.h>

#include <cmath>

#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;
using Ints = std::vector<int64_t>;

Tensor conv(const Tensor& x, const Tensor& w, IValue bias, Ints stride, Ints padding, Ints dilation, bool transposed = false,
            Ints output_padding = {0}, int64_t groups = 1) {
  return call_all("aten::convolution", {x, w, std::move(bias), IValue(stride), IValue(padding), IValue(dilation), IValue(transposed),
                                    IValue(output_padding), IValue(groups)})[0]
      .to_tensor();
}

double dot(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

TEST(Convolution, OneDimensionalByHand) {
  Tensor x = doubles({1, 2, 3, 4}, {1, 1, 4}), w = doubles({1, 0, -1}, {1, 1, 3});
  expect_values(conv(x, w, IValue(), {1}, {0}, {1}), {-2, -2});                       // x[j] - x[j + 2]
  expect_values(conv(x, w, doubles({1}, {1}), {1}, {0}, {1}), {-1, -1});              // plus the bias
  expect_values(conv(x, w, IValue(), {1}, {1}, {1}), {-2, -2, -2, 3});                // zero padding
  // Stride 2, dilation 2 on [1..5] with [1, -1]: x[2j] - x[2j + 2].
  expect_values(conv(doubles({1, 2, 3, 4, 5}, {1, 1, 5}), doubles({1, -1}, {1, 1, 2}), IValue(), {2}, {0}, {2}), {-2, -2});
}

TEST(Convolution, TwoDimensionalGroupedAndTransposed) {
  // 2x2 box sums of 0..8 laid out 3x3.
  Tensor y = conv(iota({1, 1, 3, 3}), full({1, 1, 2, 2}, 1.0, TensorOptions(DType::Float64)), IValue(), {1, 1}, {0, 0}, {1, 1});
  EXPECT_EQ(sizes_of(y), (Ints{1, 1, 2, 2}));
  expect_values(y, {8, 12, 20, 24});
  // Two groups of one channel: each channel scaled by its own weight.
  expect_values(conv(doubles({1, 2, 3, 4}, {1, 2, 2}), doubles({2, 10}, {2, 1, 1}), IValue(), {1}, {0}, {1}, false, {0}, 2),
                {2, 4, 30, 40});
  // Transposed: every input scatters x[i] * w into positions i * stride + k.
  Tensor x = doubles({1, 2}, {1, 1, 2}), w = doubles({1, 10}, {1, 1, 2});
  expect_values(conv(x, w, IValue(), {2}, {0}, {1}, true), {1, 10, 2, 20});
  expect_values(conv(x, w, IValue(), {1}, {0}, {1}, true), {1, 12, 20});
  expect_values(conv(x, w, IValue(), {2}, {0}, {1}, true, {1}), {1, 10, 2, 20, 0});  // output_padding adds a row
  EXPECT_THROW(conv(x, doubles({1, 1}, {1, 2, 1}), IValue(), {1}, {0}, {1}), Error);  // 2 input channels expected
  EXPECT_THROW(conv(x, w, IValue(), {1}, {0}, {1}, true, {1}), Error);                // output_padding >= stride, dilation
}

TEST(Convolution, TransposedIsTheAdjoint) {
  // <conv(x, w), y> == <x, conv_transpose(y, w)> with matching stride, padding, dilation, groups.
  Tensor x = iota({2, 4, 5, 4}), w = doubles({0.5, -1, 2, 0.25, 1, -0.5, 3, 1.5, -2, 0.75, 1, -1, 0.5, 2, -0.25, 1}, {4, 2, 2, 1});
  Tensor y = conv(x, w, IValue(), {2, 1}, {1, 0}, {2, 1}, false, {0}, 2);
  Tensor probe = doubles(std::vector<double>(static_cast<size_t>(y.numel()), 0.0), sizes_of(y));
  for (int64_t i = 0; i < probe.numel(); ++i) probe.reshape({-1}).set({i}, Scalar(std::sin(static_cast<double>(i))));
  // x's height 5 is reached from the output height 3 with output_padding 0: (3-1)*2 - 2 + 2*1 + 1 = 5.
  Tensor back = conv(probe, w, IValue(), {2, 1}, {1, 0}, {2, 1}, true, {0, 0}, 2);
  ASSERT_EQ(sizes_of(back), sizes_of(x));
  EXPECT_NEAR(dot(y, probe), dot(x, back), 1e-9);
}

TEST(Convolution, FormulasPassGradcheckAndGradgradcheck) {
  Tensor x = doubles({0.3, -1.2, 2.5, 0.7, -0.4, 1.9, 3.1, -2.2, 0.05, 1.4, -0.9, 0.6, 0.2, -0.3, 1.1, 0.8}, {1, 2, 2, 4});
  Tensor w = doubles({1.5, -0.5, 0.25, 2, -1, 0.75, 0.5, 1.25}, {2, 1, 2, 2});
  // Grouped, strided, padded, dilated.
  expect_gradients_pass("aten::convolution", {leaf(x), leaf(w), leaf(doubles({0.1, -0.2}, {2})), IValue(Ints{1, 2}),
                                              IValue(Ints{1, 1}), IValue(Ints{1, 2}), IValue(false), IValue(Ints{0, 0}),
                                              IValue(int64_t{2})});
  // Transposed with output_padding.
  expect_gradients_pass("aten::convolution", {leaf(x), leaf(w), IValue(), IValue(Ints{2, 2}), IValue(Ints{0, 1}),
                                              IValue(Ints{1, 1}), IValue(true), IValue(Ints{1, 0}), IValue(int64_t{2})});
}

TEST(Pooling, MaxPoolValuesAndIndices) {
  Tensor x = doubles({1, 5, 2, 7, 3, 8, 4, 9, 6}, {1, 1, 3, 3});
  Stack out = call_all("aten::max_pool2d_with_indices", {x, IValue(Ints{2}), IValue(Ints{1}), IValue(Ints{0}), IValue(Ints{1}),
                                                     IValue(false)});
  expect_values(out[0].to_tensor(), {7, 8, 9, 9});
  EXPECT_EQ(out[1].to_tensor().dtype(), DType::Int64);
  expect_values(out[1].to_tensor(), {3, 5, 7, 7});
  // Ties keep the first; a NaN wins (the last one).
  Stack ties = call_all("aten::max_pool2d_with_indices", {doubles({4, 4, 4, 4}, {1, 2, 2}), IValue(Ints{2}), IValue(Ints{}),
                                                      IValue(Ints{0}), IValue(Ints{1}), IValue(false)});
  expect_values(ties[1].to_tensor(), {0});
  Stack nans = call_all("aten::max_pool2d_with_indices", {doubles({1, kNaN, kNaN, 2}, {1, 2, 2}), IValue(Ints{2}), IValue(Ints{}),
                                                      IValue(Ints{0}), IValue(Ints{1}), IValue(false)});
  expect_values(nans[0].to_tensor(), {kNaN});
  expect_values(nans[1].to_tensor(), {2});
  // Dilation 2 along the width of [0..4]: windows (0, 2), (1, 3), (2, 4).
  Stack dilated = call_all("aten::max_pool2d_with_indices", {iota({1, 1, 5}), IValue(Ints{1, 2}), IValue(Ints{1, 1}),
                                                         IValue(Ints{0, 0}), IValue(Ints{1, 2}), IValue(false)});
  expect_values(dilated[0].to_tensor(), {2, 3, 4});
  // ceil_mode: height 4, kernel 2, stride 3 gives a second window over the last row only.
  Stack ceil = call_all("aten::max_pool2d_with_indices", {iota({1, 4, 1}), IValue(Ints{2, 1}), IValue(Ints{3, 1}),
                                                      IValue(Ints{0}), IValue(Ints{1}), IValue(true)});
  expect_values(ceil[0].to_tensor(), {1, 3});
  // Padding 1 with dilation 2 around a single element: the window holds only padding.
  Stack padding_only = call_all("aten::max_pool2d_with_indices", {doubles({5}, {1, 1, 1}), IValue(Ints{2}), IValue(Ints{1}),
                                                              IValue(Ints{1}), IValue(Ints{2}), IValue(false)});
  expect_values(padding_only[0].to_tensor(), {-kInf});
  expect_values(padding_only[1].to_tensor(), {2});
  EXPECT_THROW(call_all("aten::max_pool2d_with_indices", {x, IValue(Ints{2}), IValue(Ints{1}), IValue(Ints{2}), IValue(Ints{1}),
                                                      IValue(false)}),
               Error);  // padding above kernel / 2
}

TEST(Pooling, AvgPoolDivisors) {
  auto avg = [](const Tensor& x, Ints k, Ints s, Ints p, bool ceil, bool include_pad, IValue divisor) {
    return call_all("aten::avg_pool2d", {x, IValue(k), IValue(s), IValue(p), IValue(ceil), IValue(include_pad), std::move(divisor)})[0]
        .to_tensor();
  };
  expect_values(avg(iota({1, 1, 3, 3}), {2}, {1}, {0}, false, true, IValue()), {2, 3, 5, 6});
  // Padding 1 around [[1, 2], [3, 4]], kernel 2, stride 2: each window holds one element.
  Tensor x = doubles({1, 2, 3, 4}, {1, 2, 2});
  expect_values(avg(x, {2}, {2}, {1}, false, true, IValue()), {0.25, 0.5, 0.75, 1});
  expect_values(avg(x, {2}, {2}, {1}, false, false, IValue()), {1, 2, 3, 4});
  expect_values(avg(x, {2}, {2}, {1}, false, true, IValue(int64_t{2})), {0.5, 1, 1.5, 2});
  // ceil_mode windows past the input count only what lies inside it (and its padding).
  expect_values(avg(iota({1, 3, 3}), {2}, {2}, {0}, true, true, IValue()), {2, 3.5, 6.5, 8});
  EXPECT_THROW(avg(x, {2}, {2}, {0}, false, true, IValue(int64_t{0})), Error);
}

TEST(Pooling, HandDerivedGradients) {
  // max pool: each output's gradient lands on its maximum (position 7 is the max of two windows).
  Tensor x = leaf(doubles({1, 5, 2, 7, 3, 8, 4, 9, 6}, {1, 1, 3, 3}));
  Tensor y = call_all("aten::max_pool2d_with_indices", {x, IValue(Ints{2}), IValue(Ints{1}), IValue(Ints{0}), IValue(Ints{1}),
                                                    IValue(false)})[0]
                 .to_tensor();
  expect_values(autograd::grad({y}, {x}, {ones({1, 1, 2, 2}, y.options())})[0], {0, 0, 0, 1, 0, 1, 0, 2, 0});
  // An output over padding only is constant: no gradient reaches the input.
  Tensor lone = leaf(doubles({5}, {1, 1, 1}));
  Tensor over_padding = call_all("aten::max_pool2d_with_indices", {lone, IValue(Ints{2}), IValue(Ints{1}), IValue(Ints{1}),
                                                               IValue(Ints{2}), IValue(false)})[0]
                            .to_tensor();
  expect_values(autograd::grad({over_padding}, {lone}, {ones({1, 1, 1}, lone.options())})[0], {0});
  // avg pool 2x2 stride 1 on 3x3: each input gets (windows containing it) / 4.
  Tensor a = leaf(iota({1, 3, 3}));
  Tensor m = call_all("aten::avg_pool2d", {a, IValue(Ints{2}), IValue(Ints{1}), IValue(Ints{0}), IValue(false), IValue(true),
                                      IValue()})[0]
                 .to_tensor();
  expect_values(autograd::grad({m}, {a}, {ones({1, 2, 2}, m.options())})[0], {0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25});
}

TEST(Pooling, FormulasPassGradcheckAndGradgradcheck) {
  Tensor x = doubles({0.3, -1.2, 2.5, 0.7, -0.4, 1.9, 3.1, -2.2, 0.05, 1.4, -0.9, 0.6, 0.2, -0.3, 1.1, 0.8, 2.2, -1.7}, {2, 3, 3});
  expect_gradients_pass("aten::max_pool2d_with_indices",
                        {leaf(x), IValue(Ints{2}), IValue(Ints{1}), IValue(Ints{1}), IValue(Ints{1}), IValue(true)});
  expect_gradients_pass("aten::avg_pool2d",
                        {leaf(x), IValue(Ints{2, 3}), IValue(Ints{2, 1}), IValue(Ints{1, 1}), IValue(true), IValue(false), IValue()});
}

// avg_pool2d_backward is avg_pool2d's gradient: the op and the forward's formula agree, over the
// divisor rules, padding and ceil_mode.
TEST(Pooling, AvgPoolBackwardOpIsTheForwardsGradient) {
  struct Args {
    Ints kernel, stride, padding;
    bool ceil_mode, count_include_pad;
    std::optional<int64_t> divisor;
  };
  for (const Args& a : {Args{{2, 2}, {2, 2}, {0, 0}, false, true, std::nullopt}, Args{{3, 2}, {1, 2}, {1, 1}, true, false, std::nullopt},
                        Args{{2, 3}, {2, 1}, {1, 0}, false, true, int64_t{5}}}) {
    Tensor x = leaf(iota({2, 5, 4}).to(DType::Float64));
    const IValue divisor = a.divisor ? IValue(*a.divisor) : IValue();
    Tensor y = call("aten::avg_pool2d", {x, IValue(a.kernel), IValue(a.stride), IValue(a.padding), IValue(a.ceil_mode),
                                         IValue(a.count_include_pad), divisor});
    const Tensor w = iota(sizes_of(y)).to(DType::Float64);
    const Tensor by_op = call("aten::avg_pool2d_backward", {w, x.detach(), IValue(a.kernel), IValue(a.stride), IValue(a.padding),
                                                            IValue(a.ceil_mode), IValue(a.count_include_pad), divisor});
    EXPECT_EQ(sizes_of(by_op), sizes_of(x));
    expect_values(by_op, values(grad_of(y, x, w)));
  }
  EXPECT_NE(error_of("aten::avg_pool2d_backward", {doubles({1}, {1, 1, 1}), iota({1, 4, 4}).to(DType::Float64), IValue(Ints{2, 2}),
                                                   IValue(Ints{2, 2}), IValue(Ints{0, 0}), IValue(false), IValue(true), IValue()})
                .find("pooled shape"),
            std::string::npos);
  expect_generated_gradients_pass("aten::avg_pool2d_backward", false, 6);
}

// max_pool2d_with_indices_backward is max pooling's gradient: the op and the forward's formula
// agree, dilation, padding and ceil_mode included.
TEST(Pooling, MaxPoolBackwardOpIsTheForwardsGradient) {
  for (const auto& [kernel, stride, padding, dilation, ceil_mode] :
       {std::tuple{Ints{2, 2}, Ints{2, 2}, Ints{0, 0}, Ints{1, 1}, false}, std::tuple{Ints{3, 2}, Ints{1, 2}, Ints{1, 1}, Ints{1, 2}, true},
        std::tuple{Ints{2, 3}, Ints{2, 1}, Ints{1, 0}, Ints{2, 1}, false}}) {
    Tensor x = leaf(doubles({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4}, {1, 5, 4}));
    auto out = call_all("aten::max_pool2d_with_indices",
                        {x, IValue(kernel), IValue(stride), IValue(padding), IValue(dilation), IValue(ceil_mode)});
    const Tensor y = out.at(0).to_tensor(), indices = out.at(1).to_tensor();
    const Tensor w = iota(sizes_of(y)).to(DType::Float64);
    const Tensor by_op = call("aten::max_pool2d_with_indices_backward",
                              {w, x.detach(), IValue(kernel), IValue(stride), IValue(padding), IValue(dilation),
                               IValue(ceil_mode), indices});
    expect_values(by_op, values(grad_of(y, x, w)));
  }
  expect_generated_gradients_pass("aten::max_pool2d_with_indices_backward", false, 6);
}

// convolution_backward is convolution's gradient: its CPU kernel (loops) agrees with the
// gradients of convolution's formula, plain, grouped-strided-padded-dilated and transposed, and
// output_mask leaves out what it does not ask for.
TEST(Convolution, BackwardOpIsTheForwardsGradient) {
  struct Args {
    Ints stride, padding, dilation;
    bool transposed;
    Ints output_padding;
    int64_t groups;
  };
  Tensor x0 = doubles({0.3, -1.2, 2.5, 0.7, -0.4, 1.9, 3.1, -2.2, 0.05, 1.4, -0.9, 0.6, 0.2, -0.3, 1.1, 0.8}, {1, 2, 2, 4});
  Tensor w0 = doubles({1.5, -0.5, 0.25, 2, -1, 0.75, 0.5, 1.25}, {2, 1, 2, 2});
  for (const Args& a : {Args{{1, 1}, {0, 0}, {1, 1}, false, {0, 0}, 1}, Args{{1, 2}, {1, 1}, {1, 2}, false, {0, 0}, 2},
                        Args{{2, 2}, {0, 1}, {1, 1}, true, {1, 0}, 2}}) {
    Tensor x = leaf(a.groups == 1 ? x0.reshape({1, 2, 2, 4}) : x0), w = leaf(a.groups == 1 ? w0.reshape({2, 2, 1, 2}) : w0);
    Tensor b = leaf(doubles({0.1, -0.2}, {2}));
    auto forward = [&] { return conv(x, w, b, a.stride, a.padding, a.dilation, a.transposed, a.output_padding, a.groups); };
    const Tensor g = iota(sizes_of(forward())).to(DType::Float64);
    const Stack by_op = call_all("aten::convolution_backward",
                                 {g, x.detach(), w.detach(), IValue(sizes_of(b)), IValue(a.stride), IValue(a.padding),
                                  IValue(a.dilation), IValue(a.transposed), IValue(a.output_padding), IValue(a.groups),
                                  IValue(std::vector<bool>{true, true, true})});
    expect_values(by_op.at(0).to_tensor(), values(grad_of(forward(), x, g)));
    expect_values(by_op.at(1).to_tensor(), values(grad_of(forward(), w, g)));
    expect_values(by_op.at(2).to_tensor(), values(grad_of(forward(), b, g)));
    const Stack some = call_all("aten::convolution_backward",
                                {g, x.detach(), w.detach(), IValue(), IValue(a.stride), IValue(a.padding), IValue(a.dilation),
                                 IValue(a.transposed), IValue(a.output_padding), IValue(a.groups),
                                 IValue(std::vector<bool>{false, true, false})});
    EXPECT_FALSE(some.at(0).to_tensor().defined());
    EXPECT_TRUE(some.at(1).to_tensor().defined());
    EXPECT_FALSE(some.at(2).to_tensor().defined());
  }
  expect_generated_gradients_pass("aten::convolution_backward", false, 6);
}

Tensor col2im(const Tensor& self, Ints output_size, Ints kernel, Ints dilation, Ints padding, Ints stride) {
  return call("aten::col2im", {self, IValue(output_size), IValue(kernel), IValue(dilation), IValue(padding), IValue(stride)});
}

// col2im sums each block's column into the image: worked out by hand, and its gradient (im2col)
// reads every block's kernel positions back out of the (padded) image.
TEST(Col2im, FoldsBlocksByHand) {
  // One channel, 2x2 kernel, stride 1 over a 2x3 image: 2 blocks [[a b], [c d]] at columns 0 and 1.
  Tensor cols = doubles({1, 10, 2, 20, 3, 30, 4, 40}, {4, 2});  // rows: kernel (0,0), (0,1), (1,0), (1,1)
  expect_values(col2im(cols, {2, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1}), {1, 12, 20, 3, 34, 40});
  // Padding 1, stride 2, a 1x1 kernel on a 2x2 image: blocks at (-1,-1), (-1,1), (1,-1), (1,1):
  // only the last lands inside, at (1, 1).
  expect_values(col2im(doubles({5, 6, 7, 8}, {1, 1, 4}), {2, 2}, {1, 1}, {1, 1}, {1, 1}, {2, 2}), {0, 0, 0, 8});
  // im2col of the gradient: block b's column k reads the image at its kernel position k.
  Tensor x = leaf(doubles({1, 10, 2, 20, 3, 30, 4, 40}, {4, 2}));
  Tensor y = col2im(x, {2, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1});
  expect_values(grad_of(y, x, doubles({1, 2, 3, 4, 5, 6}, {1, 2, 3})), {1, 2, 2, 3, 4, 5, 5, 6});
  expect_gradients_pass("aten::col2im", {leaf(iota({2, 8, 4}).to(DType::Float64)), IValue(Ints{3, 4}), IValue(Ints{2, 2}),
                                         IValue(Ints{1, 2}), IValue(Ints{1, 0}), IValue(Ints{2, 1})});
  // The block count must match: a 2x3 image holds 2 blocks of a 2x2 kernel, not 3.
  EXPECT_NE(error_of("aten::col2im", {doubles({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3}), IValue(Ints{2, 3}),
                                      IValue(Ints{2, 2}), IValue(Ints{1, 1}), IValue(Ints{0, 0}), IValue(Ints{1, 1})})
                .find("sliding blocks"),
            std::string::npos);
  EXPECT_THROW(col2im(doubles({1, 2, 3}, {3, 1}), {1, 1}, {2, 1}, {1, 1}, {0, 0}, {1, 1}), Error);  // 3 % 2 != 0
}

// 3-d pooling is 2-d pooling's rules over one more dim: windows over (t, h, w), indices
// (t * H + h) * W + w within a plane, the divisor counting the clipped 3-d window.
TEST(Pooling, ThreeDimensionalByHand) {
  // 0..15 as [1, 2, 2, 4]: 2x2x2 windows with stride 2 hold {0,1,4,5,8,9,12,13} and {2,3,6,7,10,11,14,15}.
  Tensor x = iota({1, 2, 2, 4}).to(DType::Float64);
  auto out = call_all("aten::max_pool3d_with_indices", {x, IValue(Ints{2}), IValue(Ints{2}), IValue(Ints{0}), IValue(Ints{1}), IValue(false)});
  expect_values(out.at(0).to_tensor(), {13, 15});
  EXPECT_EQ(out.at(1).to_tensor().to_vector<int64_t>(), (std::vector<int64_t>{13, 15}));
  expect_values(call("aten::avg_pool3d", {x, IValue(Ints{2}), IValue(Ints{2}), IValue(Ints{0}), IValue(false), IValue(true), IValue()}),
                {6.5, 8.5});
  // Padding 1 with a 3x1x1 kernel along t only: the clipped window [0, 2) along t; count_include_pad
  // divides by 3, without it by 2.
  const Stack args{x, IValue(Ints{3, 1, 1}), IValue(Ints{2, 2, 4}), IValue(Ints{1, 0, 0})};
  auto avg = [&](bool include_pad) {
    Stack a = args;
    a.insert(a.end(), {IValue(false), IValue(include_pad), IValue()});
    return call("aten::avg_pool3d", a);
  };
  expect_values(avg(true), {8.0 / 3});   // (0 + 8) / 3
  expect_values(avg(false), {4});         // (0 + 8) / 2
  EXPECT_THROW(call("aten::max_pool3d_with_indices", {iota({2, 3, 3}).to(DType::Float64), IValue(Ints{2}), IValue(Ints{}),
                                                      IValue(Ints{0}), IValue(Ints{1}), IValue(false)}),
               Error);  // 3-d input: (C, H, W) is not enough
  Tensor y = doubles({0.3, -1.2, 2.5, 0.7, -0.4, 1.9, 3.1, -2.2, 0.05, 1.4, -0.9, 0.6, 0.2, -0.3, 1.1, 0.8, 2.2, -1.7}, {1, 2, 3, 3});
  expect_gradients_pass("aten::max_pool3d_with_indices",
                        {leaf(y), IValue(Ints{2}), IValue(Ints{1}), IValue(Ints{1}), IValue(Ints{1, 1, 2}), IValue(true)});
  expect_gradients_pass("aten::avg_pool3d", {leaf(y), IValue(Ints{2, 3, 2}), IValue(Ints{1, 2, 1}), IValue(Ints{1, 1, 1}),
                                             IValue(true), IValue(false), IValue()});
}

}  // namespace
}  // namespace opconform::reference
