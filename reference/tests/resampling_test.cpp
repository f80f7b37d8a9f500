// The resampling family (reflection_pad1d/2d/3d, replication_pad2d/3d, upsample_nearest2d.vec):
// hand-derived values, crops, errors, layouts and gradients (each input element's gradient is the
// sum over the outputs that read it).
#include <gtest/gtest.h>

#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;
using Ints = std::vector<int64_t>;

TEST(Padding, ReflectionMirrorsWithoutRepeatingTheEdge) {
  // [1 2 3] padded by 2 on the left and 1 on the right: [3 2 | 1 2 3 | 2].
  expect_values(call("aten::reflection_pad1d", {doubles({1, 2, 3}, {1, 3}), IValue(Ints{2, 1})}), {3, 2, 1, 2, 3, 2});
  // Negative pads crop: [1 2 3 4] with (-1, 1): [2 3 4 | 3].
  expect_values(call("aten::reflection_pad1d", {doubles({1, 2, 3, 4}, {1, 4}), IValue(Ints{-1, 1})}), {2, 3, 4, 3});
  // 2d: the last dim by (1, 0), the one before by (0, 1): rows [2 1 2], [4 3 4], then row 0 again.
  Tensor r = call("aten::reflection_pad2d", {doubles({1, 2, 3, 4}, {1, 2, 2}), IValue(Ints{1, 0, 0, 1})});
  EXPECT_EQ(sizes_of(r), (Ints{1, 3, 3}));
  expect_values(r, {2, 1, 2, 4, 3, 4, 2, 1, 2});
}

TEST(Padding, ReplicationRepeatsTheEdge) {
  Tensor r = call("aten::replication_pad2d", {doubles({1, 2, 3, 4}, {1, 2, 2}), IValue(Ints{2, 0, 1, 0})});
  EXPECT_EQ(sizes_of(r), (Ints{1, 3, 4}));
  expect_values(r, {1, 1, 1, 2, 1, 1, 1, 2, 3, 3, 3, 4});
  // Integers too, and a batch of none.
  EXPECT_EQ(sizes_of(call("aten::replication_pad3d", {iota({0, 1, 1, 1, 2}), IValue(Ints{1, 1, 0, 0, 0, 0})})),
            (Ints{0, 1, 1, 1, 4}));
}

TEST(Padding, ChecksNameTheOpAndWhatIsWrong) {
  EXPECT_NE(error_of("aten::reflection_pad1d", {doubles({1, 2}, {1, 2}), IValue(Ints{2, 0})}).find("less than the corresponding input dimension"),
            std::string::npos);
  EXPECT_NE(error_of("aten::reflection_pad2d", {doubles({1, 2}, {2}), IValue(Ints{0, 0, 0, 0})}).find("aten::reflection_pad2d: expected 3D or 4D"),
            std::string::npos);
  EXPECT_NE(error_of("aten::replication_pad2d", {doubles({1, 2}, {1, 1, 2}), IValue(Ints{-1, -1, 0, 0})}).find("too small"),
            std::string::npos);
  EXPECT_NE(error_of("aten::replication_pad3d", {iota({1, 1, 1, 1}), IValue(Ints{1, 1})}).find("expected to be 6"),
            std::string::npos);
  // Only the batch may be empty.
  EXPECT_NE(error_of("aten::reflection_pad1d", {doubles({}, {1, 0}), IValue(Ints{0, 0})}).find("non-zero dimensions"),
            std::string::npos);
}

TEST(Padding, AChannelsLastInputGivesAChannelsLastOutput) {
  Tensor x = iota({1, 2, 2, 3}).permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});  // channels-last 1x2x2x3
  Tensor r = call("aten::replication_pad2d", {x, IValue(Ints{1, 1, 1, 1})});
  EXPECT_EQ(sizes_of(r), (Ints{1, 2, 4, 5}));
  EXPECT_EQ(strides_of(r), (Ints{40, 1, 10, 2}));
  EXPECT_EQ(values(r), values(call("aten::replication_pad2d", {x.contiguous(), IValue(Ints{1, 1, 1, 1})})));
}

TEST(Padding, EachInputGradientSumsTheOutputsThatReadIt) {
  // reflection (2, 1) over [a b c] reads c b a b c b: a once, b three times, c twice.
  Tensor x = leaf(doubles({1, 2, 3}, {1, 3}));
  expect_values(grad_of(call("aten::reflection_pad1d", {x, IValue(Ints{2, 1})}), x), {1, 3, 2});
  // replication (2, 0, 1, 0) of a 2x2: the first column is read 3 times per row, the top row twice.
  Tensor y = leaf(doubles({1, 2, 3, 4}, {1, 2, 2}));
  expect_values(grad_of(call("aten::replication_pad2d", {y, IValue(Ints{2, 0, 1, 0})}), y), {6, 2, 3, 1});
  for (const char* op : {"aten::reflection_pad1d", "aten::reflection_pad2d", "aten::reflection_pad3d",
                         "aten::replication_pad2d", "aten::replication_pad3d"})
    expect_generated_gradients_pass(op, false, 6);  // few: the conformance suite runs more
}

TEST(UpsampleNearest, EachOutputReadsFloorOfItsScaledPosition) {
  const Tensor x = doubles({1, 2, 3, 4}, {1, 1, 2, 2});
  // 2 -> 3: the scale is 2/3 in float; o = 0, 1, 2 read 0, 0, 1.
  Tensor r = call("aten::upsample_nearest2d.vec", {x, IValue(Ints{3, 3}), IValue()});
  EXPECT_EQ(sizes_of(r), (Ints{1, 1, 3, 3}));
  expect_values(r, {1, 1, 2, 1, 1, 2, 3, 3, 4});
  // Scale factors (2, 1): rows doubled (o >> 1), columns kept.
  expect_values(call("aten::upsample_nearest2d.vec", {x, IValue(), IValue(std::vector<double>{2.0, 1.0})}),
                {1, 2, 1, 2, 3, 4, 3, 4});
  // Downsampling 4 -> 3 reads 0, 1, 2 (scale 4/3: floor(0), floor(1.33), floor(2.67)).
  expect_values(call("aten::upsample_nearest2d.vec", {doubles({1, 2, 3, 4}, {1, 1, 1, 4}), IValue(Ints{1, 3}), IValue()}),
                {1, 2, 3});
}

TEST(UpsampleNearest, ChecksNameTheOpAndWhatIsWrong) {
  const Tensor x = doubles({1, 2, 3, 4}, {1, 1, 2, 2});
  EXPECT_NE(error_of("aten::upsample_nearest2d.vec", {x, IValue(), IValue()}).find("exactly one of output_size and scale_factors"),
            std::string::npos);
  EXPECT_NE(error_of("aten::upsample_nearest2d.vec", {doubles({1, 2}, {1, 2}), IValue(Ints{2, 2}), IValue()}).find("non-empty 4D"),
            std::string::npos);
  EXPECT_NE(error_of("aten::upsample_nearest2d.vec", {x, IValue(Ints{0, 2}), IValue()}).find("greater than 0"),
            std::string::npos);
}

TEST(UpsampleNearest, EachInputGradientSumsTheOutputsThatReadIt) {
  // 2x2 -> 3x3 reads rows 0, 0, 1 and columns 0, 0, 1.
  Tensor x = leaf(doubles({1, 2, 3, 4}, {1, 1, 2, 2}));
  expect_values(grad_of(call("aten::upsample_nearest2d.vec", {x, IValue(Ints{3, 3}), IValue()}), x), {4, 2, 2, 1});
  expect_generated_gradients_pass("aten::upsample_nearest2d.vec", false, 6);
}

TEST(UpsampleBilinear, InterpolatesTheTwoNearestInputsPerDim) {
  const Tensor x = doubles({1, 2, 3, 4}, {1, 1, 2, 2});
  // align_corners: the corners stay; 2 -> 3 puts the middle halfway.
  expect_values(call("aten::upsample_bilinear2d.vec", {x, IValue(Ints{3, 3}), IValue(true), IValue()}),
                {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  // Half-pixel centres (align_corners false), 2 -> 4 along W: sources -0.25 (0), 0.25, 0.75, 1.25 (1).
  expect_values(call("aten::upsample_bilinear2d.vec", {doubles({1, 2}, {1, 1, 1, 2}), IValue(Ints{1, 4}), IValue(false), IValue()}),
                {1, 1.25, 1.75, 2});
  // A scale factor of 2 is the same as output size 4.
  expect_values(call("aten::upsample_bilinear2d.vec", {doubles({1, 2}, {1, 1, 1, 2}), IValue(), IValue(false),
                                                        IValue(std::vector<double>{1.0, 2.0})}),
                {1, 1.25, 1.75, 2});
  Tensor y = leaf(doubles({1, 2}, {1, 1, 1, 2}));
  // d/dx of the four outputs' sum: 1 + 0.75 + 0.25 + 0 for x0, the rest for x1.
  expect_values(grad_of(call("aten::upsample_bilinear2d.vec", {y, IValue(Ints{1, 4}), IValue(false), IValue()}), y), {2, 2});
  expect_generated_gradients_pass("aten::upsample_bilinear2d.vec", false, 6);
}

TEST(AdaptiveAvgPool, EachOutputIsTheMeanOfItsWindow) {
  // 5 -> 3 along W: windows [0, 2), [1, 4), [3, 5).
  expect_values(call("aten::_adaptive_avg_pool2d", {doubles({1, 2, 3, 4, 5}, {1, 1, 5}), IValue(Ints{1, 3})}),
                {1.5, 3, 4.5});
  // 2x2 -> 1x1 is the mean; 2x2 -> 3x3 repeats (windows of one element).
  expect_values(call("aten::_adaptive_avg_pool2d", {doubles({1, 2, 3, 4}, {1, 2, 2}), IValue(Ints{1, 1})}), {2.5});
  expect_values(call("aten::_adaptive_avg_pool2d", {doubles({1, 2, 3, 4}, {1, 2, 2}), IValue(Ints{3, 3})}),
                {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  EXPECT_EQ(sizes_of(call("aten::_adaptive_avg_pool3d", {iota({2, 1, 3, 3, 3}).to(DType::Float32), IValue(Ints{2, 0, 1})})),
            (Ints{2, 1, 2, 0, 1}));
  EXPECT_NE(error_of("aten::_adaptive_avg_pool2d", {doubles({}, {1, 0, 2}), IValue(Ints{1, 1})}).find("non-zero size"),
            std::string::npos);
  EXPECT_NE(error_of("aten::_adaptive_avg_pool3d", {doubles({1}, {1, 1}), IValue(Ints{1, 1, 1})}).find("expected 4D or 5D"),
            std::string::npos);
}

// The backward op and the forward's autograd formula are the same map: a test ties them.
TEST(AdaptiveAvgPool, TheBackwardOpIsTheForwardsGradient) {
  for (const Ints& out : {Ints{3, 2}, Ints{1, 1}, Ints{4, 5}, Ints{2, 3}}) {
    Tensor x = leaf(iota({2, 3, 4}).to(DType::Float64));
    Tensor y = call("aten::_adaptive_avg_pool2d", {x, IValue(out)});
    Tensor w = iota(sizes_of(y)).to(DType::Float64);
    const Tensor by_formula = grad_of(y, x, w);
    const Tensor by_op = call("aten::_adaptive_avg_pool2d_backward", {w, x.detach()});
    EXPECT_EQ(sizes_of(by_op), sizes_of(x));
    expect_values(by_op, values(by_formula));
  }
  expect_generated_gradients_pass("aten::_adaptive_avg_pool2d", false, 6);
  expect_generated_gradients_pass("aten::_adaptive_avg_pool3d", false, 6);
  expect_generated_gradients_pass("aten::_adaptive_avg_pool2d_backward", false, 6);
}

}  // namespace
}  // namespace opconform::reference
