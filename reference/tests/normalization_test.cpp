// Hand-derived values and identities for the normalization family: rows whose mean and variance
// are known ([1, 3]: mean 2, variance 1), batch norm with given running statistics, dropout's
// edge probabilities and its seeded mask.
#include <gtest/gtest.h>

#include <cmath>

#include "opconform/core/autograd.h"
#include "opconform/core/device_semantics.h"
#include "opconform/core/generator.h"
#include "opconform/core/vmap.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;

TEST(Normalization, LayerNormOfKnownRows) {
  // Rows [1, 3] and [2, 6]: means 2 and 4, variances 1 and 4 (eps 0): both normalize to [-1, 1].
  Stack out = call_all("aten::native_layer_norm", {doubles({1, 3, 2, 6}, {2, 2}), IValue(std::vector<int64_t>{2}), IValue(),
                                               IValue(), IValue(0.0)});
  expect_values(out[0].to_tensor(), {-1, 1, -1, 1});
  EXPECT_EQ(sizes_of(out[1].to_tensor()), (std::vector<int64_t>{2, 1}));
  expect_values(out[1].to_tensor(), {2, 4});
  expect_values(out[2].to_tensor(), {1, 0.5});
  // The same rows read through a transposed view, with weight and bias.
  Tensor t = doubles({1, 2, 3, 6}, {2, 2}).transpose(0, 1);
  Stack affine = call_all("aten::native_layer_norm", {t, IValue(std::vector<int64_t>{2}), doubles({2, 3}, {2}),
                                                  doubles({0, 10}, {2}), IValue(0.0)});
  expect_values(affine[0].to_tensor(), {-2, 13, -2, 13});
  // [1, 2, 3, 4]: mean 2.5, variance 1.25.
  Stack whole = call_all("aten::native_layer_norm", {doubles({1, 2, 3, 4}, {2, 2}), IValue(std::vector<int64_t>{2, 2}), IValue(),
                                                 IValue(), IValue(0.0)});
  const double s = 1 / std::sqrt(1.25);
  expect_values(whole[0].to_tensor(), {-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s});
  EXPECT_EQ(sizes_of(whole[1].to_tensor()), (std::vector<int64_t>{1, 1}));
  EXPECT_THROW(call_all("aten::native_layer_norm", {doubles({1, 2}, {2}), IValue(std::vector<int64_t>{3}), IValue(), IValue(),
                                                IValue(0.0)}),
               Error);
}

TEST(Normalization, GroupNormOfKnownGroups) {
  // N=1, C=4, HxW=1, 2 groups: channels (1, 3) and (2, 6).
  Tensor x = doubles({1, 3, 2, 6}, {1, 4, 1});
  Stack out = call_all("aten::native_group_norm", {x, doubles({1, 2, 3, 4}, {4}), doubles({0, 0, 0, 1}, {4}), IValue(int64_t{1}),
                                               IValue(int64_t{4}), IValue(int64_t{1}), IValue(int64_t{2}), IValue(0.0)});
  expect_values(out[0].to_tensor(), {-1, 2, -3, 5});
  EXPECT_EQ(sizes_of(out[1].to_tensor()), (std::vector<int64_t>{1, 2}));
  expect_values(out[1].to_tensor(), {2, 4});
  expect_values(out[2].to_tensor(), {1, 0.5});
  // One group of 2 channels x 2 positions: [0, 2, 4, 6] has mean 3 and variance 5.
  Stack one = call_all("aten::native_group_norm", {doubles({0, 2, 4, 6}, {1, 2, 2}), IValue(), IValue(), IValue(int64_t{1}),
                                               IValue(int64_t{2}), IValue(int64_t{2}), IValue(int64_t{1}), IValue(0.0)});
  const double s = 1 / std::sqrt(5.0);
  expect_values(one[0].to_tensor(), {-3 * s, -s, s, 3 * s});
  EXPECT_THROW(call_all("aten::native_group_norm", {x, IValue(), IValue(), IValue(int64_t{1}), IValue(int64_t{4}), IValue(int64_t{1}),
                                                IValue(int64_t{3}), IValue(0.0)}),
               Error);
}

TEST(Normalization, BatchNormWithRunningStatistics) {
  // Channel 0: mean 1, var 4; channel 1: mean 10, var 100 (eps 0), then weight and bias.
  Tensor x = doubles({1, 10, 3, 20}, {2, 2});
  Stack out = call_all("aten::_native_batch_norm_legit_no_training",
                   {x, doubles({2, 3}, {2}), doubles({1, -1}, {2}), doubles({1, 10}, {2}), doubles({4, 100}, {2}),
                    IValue(0.1), IValue(0.0)});
  expect_values(out[0].to_tensor(), {1, -1, 3, 2});
  EXPECT_EQ(out[1].to_tensor().numel(), 0);
  EXPECT_EQ(out[2].to_tensor().numel(), 0);
  // Channels on dim 1 of a 3-d input, non-contiguous.
  Tensor y = doubles({0, 4, 8, 12}, {2, 2, 1}).transpose(0, 1);  // [[0, 8], [4, 12]]: channels [0, 4] and [8, 12]
  Stack three = call_all("aten::_native_batch_norm_legit_no_training",
                     {y, IValue(), IValue(), doubles({0, 0}, {2}), doubles({4, 16}, {2}), IValue(0.1), IValue(0.0)});
  expect_values(three[0].to_tensor(), {0, 2, 2, 3});
  EXPECT_THROW(call_all("aten::_native_batch_norm_legit_no_training",
                    {x, IValue(), IValue(), doubles({0, 0, 0}, {3}), doubles({1, 1, 1}, {3}), IValue(0.1), IValue(0.0)}),
               Error);
}

TEST(Normalization, DropoutEdgeProbabilitiesAndSeededMask) {
  Tensor x = doubles({1, -2, 3, 4}, {2, 2});
  Stack keep_all = call_all("aten::native_dropout", {x, IValue(0.0), IValue(true)});
  expect_values(keep_all[0].to_tensor(), {1, -2, 3, 4});
  EXPECT_EQ(keep_all[1].to_tensor().dtype(), DType::Bool);
  expect_values(keep_all[1].to_tensor(), {1, 1, 1, 1});
  Stack drop_all = call_all("aten::native_dropout", {x, IValue(1.0), IValue()});
  expect_values(drop_all[0].to_tensor(), {0, 0, 0, 0});
  expect_values(drop_all[1].to_tensor(), {0, 0, 0, 0});
  Stack eval = call_all("aten::native_dropout", {x, IValue(0.9), IValue(false)});
  expect_values(eval[0].to_tensor(), {1, -2, 3, 4});
  expect_values(eval[1].to_tensor(), {1, 1, 1, 1});
  EXPECT_THROW(call_all("aten::native_dropout", {x, IValue(1.5), IValue(true)}), Error);

  // p = 0.5: kept elements are doubled, the rest zero; the same seed gives the same mask; about
  // half of 4000 elements survive.
  Tensor big = full({4000}, 1.0, TensorOptions(DType::Float64));
  manual_seed(7);
  Stack first = call_all("aten::native_dropout", {big, IValue(0.5), IValue(true)});
  manual_seed(7);
  Stack second = call_all("aten::native_dropout", {big, IValue(0.5), IValue(true)});
  auto values = first[0].to_tensor().to_vector<double>();
  auto mask = first[1].to_tensor().to_vector<double>();
  EXPECT_EQ(mask, second[1].to_tensor().to_vector<double>());
  double kept = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(values[i], mask[i] * 2);
    kept += mask[i];
  }
  EXPECT_GT(kept, 1800);
  EXPECT_LT(kept, 2200);
}

TEST(Normalization, DropoutUnderVmapFollowsTheRandomnessMode) {
  auto dropout = [](const std::vector<Tensor>& xs) {
    Stack out = call_all("aten::native_dropout", {xs[0], IValue(0.5), IValue(true)});
    return std::vector<Tensor>{out[0].to_tensor(), out[1].to_tensor()};
  };
  Tensor rows = full({3, 64}, 1.0, TensorOptions(DType::Float64));
  // "same": one mask for every sample.
  auto same = vmap(dropout, {int64_t{0}}, {int64_t{0}}, Randomness::Same)({rows});
  auto mask = same[1].to_vector<double>();
  for (size_t i = 0; i < 64; ++i) {
    EXPECT_EQ(mask[i], mask[64 + i]);
    EXPECT_EQ(mask[i], mask[128 + i]);
  }
  expect_values(same[0], [&] {
    std::vector<double> v;
    for (double m : mask) v.push_back(2 * m);
    return v;
  }());
  // "different": independent masks (equal rows of 64 fair coins would be a 2^-64 event).
  auto different = vmap(dropout, {int64_t{0}}, {int64_t{0}}, Randomness::Different)({rows});
  auto masks = different[1].to_vector<double>();
  EXPECT_NE(std::vector<double>(masks.begin(), masks.begin() + 64), std::vector<double>(masks.begin() + 64, masks.begin() + 128));
  // "error": random in training mode is refused, as functorch does; eval mode is not random.
  EXPECT_THROW(vmap(dropout, {int64_t{0}}, {int64_t{0}})({rows}), Error);
  auto eval = vmap([](const std::vector<Tensor>& xs) {
                     Stack out = call_all("aten::native_dropout", {xs[0], IValue(0.5), IValue(false)});
                     return std::vector<Tensor>{out[0].to_tensor()};
                   },
                   {int64_t{0}}, {int64_t{0}})({rows});
  expect_values(eval[0], std::vector<double>(192, 1.0));
}

TEST(Normalization, HandDerivedGradients) {
  // batch norm: d/dx = weight / sqrt(var + eps).
  Tensor x = leaf(doubles({1, 10, 3, 20}, {2, 2}));
  Stack out = call_all("aten::_native_batch_norm_legit_no_training",
                   {x, doubles({2, 3}, {2}), IValue(), doubles({1, 10}, {2}), doubles({4, 100}, {2}), IValue(0.1), IValue(0.0)});
  Tensor y = out[0].to_tensor();
  expect_values(autograd::grad({y}, {x}, {ones({2, 2}, y.options())})[0], {1, 0.3, 1, 0.3});
  // layer norm: shifting a row does not change it, so the gradient of any function of the output
  // sums to zero along each normalized row.
  Tensor z = leaf(doubles({0.5, -1, 2, 4, 1, 0}, {2, 3}));
  Tensor normalized = call_all("aten::native_layer_norm", {z, IValue(std::vector<int64_t>{3}), IValue(), IValue(), IValue(1e-5)})[0].to_tensor();
  auto g = autograd::grad({normalized}, {z}, {doubles({1, 2, 3, -1, 0.5, 4}, {2, 3})})[0].to_vector<double>();
  EXPECT_NEAR(g[0] + g[1] + g[2], 0, 1e-12);
  EXPECT_NEAR(g[3] + g[4] + g[5], 0, 1e-12);
  // dropout: the gradient is mask * scale.
  Tensor d = leaf(doubles({1, 2, 3, 4}, {4}));
  Stack dropped = call_all("aten::native_dropout", {d, IValue(0.5), IValue(true)});
  auto gd = autograd::grad({dropped[0].to_tensor()}, {d}, {ones({4}, d.options())})[0].to_vector<double>();
  auto m = dropped[1].to_tensor().to_vector<double>();
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(gd[i], 2 * m[i]);
}

TEST(Normalization, FormulasPassGradcheckAndGradgradcheck) {
  Tensor x = doubles({0.3, -1.2, 2.5, 0.7, -0.4, 1.9, 3.1, -2.2, 0.05, 1.4, -0.9, 0.6}, {2, 2, 3});
  // layer norm: all three outputs (out, mean, rstd) are differentiated.
  expect_gradients_pass("aten::native_layer_norm",
                        {leaf(x), IValue(std::vector<int64_t>{2, 3}), leaf(doubles({1, 2, 0.5, -1, 1.5, 0.25}, {2, 3})),
                         leaf(doubles({0, 1, -1, 2, 0.5, 0}, {2, 3})), IValue(1e-5)});
  expect_gradients_pass("aten::native_group_norm",
                        {leaf(x.transpose(1, 2)), leaf(doubles({1.5, -0.5, 2}, {3})), leaf(doubles({0.1, 0.2, 0.3}, {3})),
                         IValue(int64_t{2}), IValue(int64_t{3}), IValue(int64_t{2}), IValue(int64_t{3}), IValue(1e-3)});
  expect_gradients_pass("aten::_native_batch_norm_legit_no_training",
                        {leaf(x), leaf(doubles({1.5, -0.5}, {2})), leaf(doubles({0.1, 0.2}, {2})), leaf(doubles({0.3, -0.2}, {2})),
                         leaf(doubles({1.5, 0.7}, {2})), IValue(0.1), IValue(1e-3)});
  expect_gradients_pass("aten::native_dropout", {leaf(x), IValue(0.3), IValue(true)});
}

// native_layer_norm_backward and native_group_norm_backward are the norms' gradients through
// their output: each agrees with the forward's formula (grad_outputs w for out, none for mean and
// rstd) for input, weight and bias, output_mask leaves results undefined, and the ops' own
// formulas pass gradcheck and gradgradcheck (every input, mean and rstd included).
TEST(Normalization, BackwardOpsAreTheForwardsGradients) {
  using Ints = std::vector<int64_t>;
  const Tensor x = doubles({0.3, -1.2, 2.5, 0.7, -0.4, 1.9, 3.1, -2.2, 0.05, 1.4, -0.9, 0.6}, {2, 2, 3});
  const Tensor w = doubles({1, -2, 0.5, 3, -1, 2, 0.25, 1.5, -0.5, 2, 1, -3}, {2, 2, 3});
  {
    Tensor in = leaf(x), weight = leaf(doubles({1, 2, 0.5, -1, 1.5, 0.25}, {2, 3})), bias = leaf(doubles({0, 1, -1, 2, 0.5, 0}, {2, 3}));
    Stack fwd = call_all("aten::native_layer_norm", {in, IValue(Ints{2, 3}), weight, bias, IValue(1e-5)});
    const std::vector<Tensor> want = grads_of(fwd[0].to_tensor(), {in, weight, bias}, w);
    Stack by_op = call_all("aten::native_layer_norm_backward",
                           {w, x, IValue(Ints{2, 3}), fwd[1].to_tensor().detach(), fwd[2].to_tensor().detach(), weight.detach(),
                            bias.detach(), IValue(std::vector<bool>{true, true, true})});
    for (size_t i = 0; i < 3; ++i) expect_values(by_op[i].to_tensor(), values(want[i]), 1e-10);
    Stack masked = call_all("aten::native_layer_norm_backward",
                            {w, x, IValue(Ints{2, 3}), fwd[1].to_tensor().detach(), fwd[2].to_tensor().detach(), weight.detach(),
                             bias.detach(), IValue(std::vector<bool>{false, true, false})});
    EXPECT_FALSE(masked[0].to_tensor().defined());
    expect_values(masked[1].to_tensor(), values(want[1]), 1e-10);
    EXPECT_FALSE(masked[2].to_tensor().defined());
    expect_gradients_pass("aten::native_layer_norm_backward",
                          {leaf(w), leaf(x), IValue(Ints{3}), leaf(doubles({0.1, -0.2, 0.3, 0.4}, {2, 2, 1})),
                           leaf(doubles({1.5, 0.7, 2.0, 1.1}, {2, 2, 1})), leaf(doubles({1, 2, 0.5}, {3})), IValue(),
                           IValue(std::vector<bool>{true, true, true})});
  }
  {
    Tensor in = leaf(x), weight = leaf(doubles({1.5, -0.5}, {2}));
    Tensor bias = leaf(doubles({0.1, 0.2}, {2}));
    Stack fwd = call_all("aten::native_group_norm", {in, weight, bias, IValue(int64_t{2}), IValue(int64_t{2}), IValue(int64_t{3}),
                                               IValue(int64_t{1}), IValue(1e-3)});
    const std::vector<Tensor> want = grads_of(fwd[0].to_tensor(), {in, weight, bias}, w);
    Stack by_op = call_all("aten::native_group_norm_backward",
                           {w, x, fwd[1].to_tensor().detach(), fwd[2].to_tensor().detach(), weight.detach(), IValue(int64_t{2}),
                            IValue(int64_t{2}), IValue(int64_t{3}), IValue(int64_t{1}), IValue(std::vector<bool>{true, true, true})});
    for (size_t i = 0; i < 3; ++i) expect_values(by_op[i].to_tensor(), values(want[i]), 1e-10);
    expect_gradients_pass("aten::native_group_norm_backward",
                          {leaf(w), leaf(x), leaf(doubles({0.1, -0.2, 0.3, 0.4}, {2, 2})), leaf(doubles({1.5, 0.7, 2.0, 1.1}, {2, 2})),
                           leaf(doubles({1.5, -0.5}, {2})), IValue(int64_t{2}), IValue(int64_t{2}), IValue(int64_t{3}),
                           IValue(int64_t{2}), IValue(std::vector<bool>{true, true, true})});
  }
  expect_generated_gradients_pass("aten::native_layer_norm_backward", false, 8);
  expect_generated_gradients_pass("aten::native_group_norm_backward", false, 8);
}

// Training-mode batch norm normalizes each channel (dim 1) with the batch's own statistics: hand
// values, the same output as inference with those statistics as running ones, its formula
// (through the mean and rstd outputs too), and no evaluation without running statistics.
TEST(Normalization, BatchNormWithoutRunningStatisticsUsesTheBatchs) {
  const double eps = 1e-5, s = 1 / std::sqrt(1 + eps);
  const Tensor x = doubles({1, 2, 3, 4}, {2, 2});  // channel 0: {1, 3}, channel 1: {2, 4}; variance 1 each
  const Stack out = call_all("aten::_native_batch_norm_legit.no_stats", {x, IValue(), IValue(), IValue(true), IValue(0.1), IValue(eps)});
  expect_values(out[0].to_tensor(), {-s, -s, s, s});
  expect_values(out[1].to_tensor(), {2, 3});
  expect_values(out[2].to_tensor(), {s, s});
  const Tensor w = doubles({2, -1}, {2}), b = doubles({0.5, 0}, {2});
  const Stack trained = call_all("aten::_native_batch_norm_legit.no_stats", {x, w, b, IValue(true), IValue(0.1), IValue(eps)});
  const Stack inferred = call_all("aten::_native_batch_norm_legit_no_training",
                                  {x, w, b, doubles({2, 3}, {2}), doubles({1, 1}, {2}), IValue(0.1), IValue(eps)});
  expect_values(trained[0].to_tensor(), values(inferred[0].to_tensor()));
  EXPECT_THROW(call_all("aten::_native_batch_norm_legit.no_stats", {x, IValue(), IValue(), IValue(false), IValue(0.1), IValue(eps)}),
               Error);
  const Tensor y = doubles({0.3, -1.2, 2.5, 0.7, -0.4, 1.9, 3.1, -2.2, 0.05, 1.4, -0.9, 0.6}, {2, 3, 2});
  expect_gradients_pass("aten::_native_batch_norm_legit.no_stats",
                        {leaf(y), leaf(doubles({1.5, -0.5, 2}, {3})), leaf(doubles({0.1, 0.2, 0.3}, {3})), IValue(true),
                         IValue(0.1), IValue(1e-3)});
}

// _native_batch_norm_legit: training normalizes with the batch's statistics and moves the running
// ones toward them (the variance with Bessel's correction); eval is inference with the running ones.
TEST(Normalization, BatchNormLegitUpdatesTheRunningStatisticsInTraining) {
  const double eps = 1e-5, s = 1 / std::sqrt(1 + eps);
  const Tensor x = doubles({1, 2, 3, 4}, {2, 2});  // channel means {2, 3}, biased variance 1, unbiased 2
  Tensor running_mean = doubles({0, 1}, {2}), running_var = doubles({1, 1}, {2});
  const Stack trained = call_all("aten::_native_batch_norm_legit",
                                 {x, IValue(), IValue(), running_mean, running_var, IValue(true), IValue(0.25), IValue(eps)});
  expect_values(trained[0].to_tensor(), {-s, -s, s, s});
  expect_values(trained[1].to_tensor(), {2, 3});
  expect_values(running_mean, {0.5, 1.5});   // 0.75 r + 0.25 mean
  expect_values(running_var, {1.25, 1.25});  // 0.75 r + 0.25 * 2
  const Stack evaluated = call_all("aten::_native_batch_norm_legit",
                                   {x, IValue(), IValue(), running_mean, running_var, IValue(false), IValue(0.25), IValue(eps)});
  const Stack inferred = call_all("aten::_native_batch_norm_legit_no_training",
                                  {x, IValue(), IValue(), running_mean, running_var, IValue(0.25), IValue(eps)});
  expect_values(evaluated[0].to_tensor(), values(inferred[0].to_tensor()));
  EXPECT_EQ(evaluated[1].to_tensor().numel(), 0);
  expect_values(running_mean, {0.5, 1.5});  // eval leaves them
  const Tensor y = doubles({0.3, -1.2, 2.5, 0.7, -0.4, 1.9, 3.1, -2.2, 0.05, 1.4, -0.9, 0.6}, {2, 3, 2});
  for (bool training : {true, false}) {
    expect_gradients_pass("aten::_native_batch_norm_legit",
                          {leaf(y), leaf(doubles({1.5, -0.5, 2}, {3})), leaf(doubles({0.1, 0.2, 0.3}, {3})),
                           doubles({0.3, -0.2, 0.1}, {3}), doubles({1.5, 0.7, 2}, {3}), IValue(training), IValue(0.1),
                           IValue(1e-3)});
  }
}

// Note [Device-dependent semantics]: with CUDA's semantics (the guard a check sets when it
// compares a CUDA kernel on host copies), the statistics follow PyTorch's CUDA kernels: float32
// for a bfloat16 input, and batch norm's eval mode returns the running statistics (checked against
// torch 2.11 CUDA by the OpInfo replay). Without the guard, CPU's: the input's dtype, empty.
TEST(Normalization, StatisticsFollowTheSemanticDevice) {
  const Tensor x = doubles({1, 3, 2, 6}, {2, 2}).to(DType::BFloat16);
  auto layer_norm = [&] {
    return call_all("aten::native_layer_norm", {x, IValue(std::vector<int64_t>{2}), IValue(), IValue(), IValue(0.0)});
  };
  EXPECT_EQ(layer_norm()[1].to_tensor().dtype(), DType::BFloat16);
  const Tensor rm = doubles({1, 10}, {2}), rv = doubles({4, 16}, {2});
  auto eval = [&](const Tensor& input) {
    return call_all("aten::_native_batch_norm_legit_no_training",
                    {input, IValue(), IValue(), rm.to(input.dtype()), rv.to(input.dtype()), IValue(0.1), IValue(0.0)});
  };
  EXPECT_EQ(eval(doubles({1, 10, 3, 20}, {2, 2}))[1].to_tensor().numel(), 0);
  {
    SemanticDeviceGuard as_cuda(Device::cuda());
    const Stack ln = layer_norm();
    EXPECT_EQ(ln[1].to_tensor().dtype(), DType::Float32);
    EXPECT_EQ(ln[2].to_tensor().dtype(), DType::Float32);
    expect_values(ln[1].to_tensor(), {2, 4});
    const Stack bn = eval(doubles({1, 10, 3, 20}, {2, 2}).to(DType::Float16));
    EXPECT_EQ(bn[1].to_tensor().dtype(), DType::Float32);
    expect_values(bn[1].to_tensor(), {1, 10});
    expect_values(bn[2].to_tensor(), {0.5, 0.25});
    // _native_batch_norm_legit in eval mode is the same inference.
    const Stack legit = call_all("aten::_native_batch_norm_legit", {doubles({1, 10, 3, 20}, {2, 2}), IValue(), IValue(), rm.clone(),
                                                                   rv.clone(), IValue(false), IValue(0.1), IValue(0.0)});
    expect_values(legit[2].to_tensor(), {0.5, 0.25});
  }
  EXPECT_EQ(layer_norm()[1].to_tensor().dtype(), DType::BFloat16);  // the guard is gone
}

}  // namespace
}  // namespace opconform::reference
