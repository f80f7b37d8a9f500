// The grid sampling family (grid_sampler_2d): hand-derived values for each interpolation and
// padding mode, nearest's ties to even, identity grids, errors, empty and symbolic shapes, layouts
// and gradients (the input's gradient spreads each output's over its taps; the grid's is the
// slope of the sampled image, 0 where padding clips and for nearest sampling).
#include <gtest/gtest.h>

#include "opconform/core/fake_tensor.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;
using Ints = std::vector<int64_t>;

constexpr int64_t kBilinear = 0, kNearest = 1, kBicubic = 2;
constexpr int64_t kZeros = 0, kBorder = 1, kReflection = 2;

Tensor sample(const Tensor& input, const Tensor& grid, int64_t interpolation, int64_t padding, bool align_corners) {
  return call("aten::grid_sampler_2d", {input, grid, IValue(interpolation), IValue(padding), IValue(align_corners)});
}

// One point (x, y) as a [1, 1, 1, 2] grid.
Tensor point(double x, double y) { return doubles({x, y}, {1, 1, 1, 2}); }

// The 3 x 4 image 4 * row + column: bilinear (and bicubic) sampling of a linear image inside it
// is the same linear function of the pixel coordinates.
Tensor ramp() { return iota({1, 1, 3, 4}); }

TEST(GridSampler, BilinearInterpolatesTheFourPixelsAroundThePoint) {
  // Without align_corners, x -> ((x + 1) * 4 - 1) / 2, y -> ((y + 1) * 3 - 1) / 2:
  // (0.1, -0.3) is pixel (1.7, 0.55), (0.7, 0.2) is (2.9, 1.3).
  const Tensor grid = doubles({0.1, -0.3, 0.7, 0.2}, {1, 1, 2, 2});
  Tensor r = sample(ramp(), grid, kBilinear, kZeros, false);
  EXPECT_EQ(sizes_of(r), (Ints{1, 1, 1, 2}));
  expect_values(r, {4 * 0.55 + 1.7, 4 * 1.3 + 2.9});
  // With align_corners, x -> (x + 1) / 2 * 3, y -> (y + 1) / 2 * 2: (0.1, -0.3) is (1.65, 0.7).
  expect_values(sample(ramp(), point(0.1, -0.3), kBilinear, kZeros, true), {4 * 0.7 + 1.65});
  // Not linear: the four weights (0.3 * 0.45, 0.7 * 0.45, 0.3 * 0.55, 0.7 * 0.55) of pixels
  // (1, 0), (2, 0), (1, 1), (2, 1) holding 1, 10, 100, 1000.
  Tensor x = doubles({0, 1, 10, 0, 0, 100, 1000, 0, 0, 0, 0, 0}, {1, 1, 3, 4});
  expect_values(sample(x, point(0.1, -0.3), kBilinear, kZeros, false), {0.135 + 3.15 + 16.5 + 385});
}

TEST(GridSampler, PaddingDecidesWhatPointsOutsideTheInputRead) {
  // Row 1 (y = 0 is pixel row 1 without align_corners) at x = -1: pixel -0.5, between the
  // outside -1 and pixel 0 (holding 4): zeros reads half of it, border and reflection all.
  expect_values(sample(ramp(), point(-1, 0), kBilinear, kZeros, false), {2});
  expect_values(sample(ramp(), point(-1, 0), kBilinear, kBorder, false), {4});
  expect_values(sample(ramp(), point(-1, 0), kBilinear, kReflection, false), {4});
  // x = 1.35 is pixel 4.2: zeros reads nothing, border clips to 3 (7), reflection mirrors at 3.5
  // to 2.8 (6.8).
  expect_values(sample(ramp(), point(1.35, 0), kBilinear, kZeros, false), {0});
  expect_values(sample(ramp(), point(1.35, 0), kBilinear, kBorder, false), {7});
  expect_values(sample(ramp(), point(1.35, 0), kBilinear, kReflection, false), {6.8});
  // With align_corners x = 1.8 is pixel 4.2, mirrored at 3 to 1.8; y = 0 is row 1.
  expect_values(sample(ramp(), point(1.8, 0), kBilinear, kReflection, true), {5.8});
  // Far out, reflection folds again: pixel 4.2 + 8 (one period of [-0.5, 3.5]) is 4.2 again.
  expect_values(sample(ramp(), point(1.35 + 4, 0), kBilinear, kReflection, false), {6.8});
  // A single column with align_corners: every x is its centre.
  expect_values(sample(doubles({5, 6}, {1, 1, 2, 1}), point(0.9, 1), kBilinear, kReflection, true), {6});
}

TEST(GridSampler, NearestRoundsHalfToEven) {
  // Row 1, x = -0.5, 0, 0.5 are pixels 0.5, 1.5, 2.5: nearbyint gives 0, 2, 2.
  const Tensor grid = doubles({-0.5, 0, 0, 0, 0.5, 0}, {1, 1, 3, 2});
  expect_values(sample(ramp(), grid, kNearest, kZeros, false), {4, 6, 6});
  // Outside: zeros reads 0, border the edge, reflection the mirror (pixel 4.2 -> 2.8 -> 3).
  expect_values(sample(ramp(), point(1.35, 0), kNearest, kZeros, false), {0});
  expect_values(sample(ramp(), point(1.35, 0), kNearest, kBorder, false), {7});
  expect_values(sample(ramp(), point(1.35, 0), kNearest, kReflection, false), {7});
  expect_values(sample(ramp(), point(1.6, 0), kNearest, kReflection, false), {6});  // 4.7 -> 2.3 -> 2
}

TEST(GridSampler, BicubicWeightsTheFourByFourPixelsAroundThePoint) {
  // One row: y picks it (weights 0, 1, 0, 0 at t = 0). At pixel x = 1.5 the cubic convolution
  // weights (A = -0.75) of taps 0..3 are -0.09375, 0.59375, 0.59375, -0.09375.
  const Tensor row = doubles({1, 2, 4, 8}, {1, 1, 1, 4});
  expect_values(sample(row, point(0, 0), kBicubic, kZeros, false), {-0.09375 + 0.59375 * 6 - 0.75});
  // At pixel 0.5 (x = -0.5) tap -1 is padded: zeros reads 0, border and reflection (mirrored at
  // -0.5) pixel 0; with align_corners (x = -2/3) reflection mirrors at 0 to pixel 1.
  expect_values(sample(row, point(-0.5, 0), kBicubic, kZeros, false), {0.59375 * 3 - 0.375});
  expect_values(sample(row, point(-0.5, 0), kBicubic, kBorder, false), {-0.09375 + 0.59375 * 3 - 0.375});
  expect_values(sample(row, point(-0.5, 0), kBicubic, kReflection, false), {-0.09375 + 0.59375 * 3 - 0.375});
  expect_values(sample(row, point(-2.0 / 3, 0), kBicubic, kReflection, true), {-0.1875 + 0.59375 * 3 - 0.375}, 1e-12);
  // At pixel 1.25 (x = -0.125) the weights of taps 0..3 are -0.10546875, 0.87890625, 0.26171875,
  // -0.03515625.
  expect_values(sample(row, point(-0.125, 0), kBicubic, kZeros, false),
                {-0.10546875 + 0.87890625 * 2 + 0.26171875 * 4 - 0.03515625 * 8});
  // Symmetric weights keep the centre of a linear image: 4 * 1.5 + 1.5 at pixel (1.5, 1.5) of the
  // 4 x 4 ramp 4 * row + column.
  expect_values(sample(iota({1, 1, 4, 4}), point(0, 0), kBicubic, kReflection, false), {7.5});
}

TEST(GridSampler, NonFinitePointsFollowTheCpuKernel) {
  // Row 1 at x = NaN, inf, -inf, 1e30, -1e30, 5 (pixel 11.5). Clipping sends NaN to 0 and infinities
  // to the edges; reflection folds inf to NaN, then 0. Unclipped, the weights of a non-finite
  // point are NaN and taps outside read 0 (0 * NaN); 1e30 reads outside (zeros) or the edges.
  const double nan = kNaN;
  const Tensor grid = doubles({nan, 0, kInf, 0, -kInf, 0, 1e30, 0, -1e30, 0, 5, 0}, {1, 1, 6, 2});
  for (bool align_corners : {false, true}) {
    expect_values(sample(ramp(), grid, kBilinear, kZeros, align_corners), {nan, nan, nan, 0, 0, 0});
    expect_values(sample(ramp(), grid, kNearest, kZeros, align_corners), {0, 0, 0, 0, 0, 0});
    expect_values(sample(ramp(), grid, kBicubic, kZeros, align_corners), {nan, nan, nan, 0, 0, 0});
    for (int64_t mode : {kBilinear, kNearest}) {
      expect_values(sample(ramp(), grid, mode, kBorder, align_corners), {4, 7, 4, 7, 4, 7});
      expect_values(sample(ramp(), grid, mode, kReflection, align_corners), {4, 4, 4, 4, 4, 7});
    }
    // Bicubic pads the taps, not the point: its weights stay NaN.
    expect_values(sample(ramp(), grid, kBicubic, kBorder, align_corners), {nan, nan, nan, 7, 4, 7});
  }
  // Pixel 11.5 without align_corners: taps 10..13 mirror to 2, 3, 3, 2 (weights -0.09375,
  // 0.59375, 0.59375, -0.09375); with align_corners x = 5 is pixel 9, mirrored to 3.
  expect_values(sample(ramp(), grid, kBicubic, kReflection, false),
                {nan, nan, nan, 4, 4, 4 + 0.59375 * 6 - 0.09375 * 4});
  expect_values(sample(ramp(), grid, kBicubic, kReflection, true), {nan, nan, nan, 4, 4, 7});
}

TEST(GridSampler, AGridOfPixelCentresGivesTheInputBack) {
  // Two batches, two channels, 3 x 4 pixels; the grid of each pixel's centre, per align_corners.
  const Tensor x = iota({2, 2, 3, 4});
  for (bool align_corners : {false, true}) {
    std::vector<double> g;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 4; ++j) {
          g.push_back(align_corners ? -1 + 2.0 * j / 3 : -1 + (2.0 * j + 1) / 4);
          g.push_back(align_corners ? -1 + 2.0 * i / 2 : -1 + (2.0 * i + 1) / 3);
        }
    const Tensor grid = doubles(g, {2, 3, 4, 2});
    for (int64_t mode : {kBilinear, kNearest, kBicubic})
      for (int64_t padding : {kZeros, kBorder, kReflection})
        expect_values(sample(x, grid, mode, padding, align_corners), values(x), 1e-12);
  }
}

TEST(GridSampler, ChecksNameTheOpAndWhatIsWrong) {
  const Tensor x = ramp(), g = point(0, 0);
  auto error = [](const Tensor& input, const Tensor& grid, int64_t mode = 0, int64_t padding = 0) {
    return error_of("aten::grid_sampler_2d", {input, grid, IValue(mode), IValue(padding), IValue(false)});
  };
  EXPECT_NE(error(iota({1, 3, 4}), g).find("aten::grid_sampler_2d: expected 4D"), std::string::npos);
  EXPECT_NE(error(x, doubles({0, 0}, {1, 1, 2})).find("expected 4D"), std::string::npos);
  EXPECT_NE(error(iota({2, 1, 3, 4}), g).find("same batch size"), std::string::npos);
  EXPECT_NE(error(x, doubles({0, 0, 0}, {1, 1, 1, 3})).find("size 2 in its last dimension"), std::string::npos);
  EXPECT_NE(error(doubles({}, {1, 1, 0, 4}), g).find("non-empty spatial dimensions"), std::string::npos);
  EXPECT_NE(error(x, g.to(DType::Float32)).find("expected 'grid' to have the dtype of 'input' (float64)"), std::string::npos);
  EXPECT_NE(error(longs({1}, {1, 1, 1, 1}), longs({0, 0}, {1, 1, 1, 2})).find("argument 'input' has dtype int64"),
            std::string::npos);
  EXPECT_NE(error(x, g, 3).find("argument 'interpolation_mode'"), std::string::npos);
  EXPECT_NE(error(x, g, 0, -1).find("argument 'padding_mode'"), std::string::npos);
}

TEST(GridSampler, EmptyBatchChannelsOrOutputs) {
  EXPECT_EQ(sizes_of(sample(doubles({}, {0, 2, 3, 4}), doubles({}, {0, 2, 5, 2}), kBilinear, kZeros, false)),
            (Ints{0, 2, 2, 5}));
  EXPECT_EQ(sizes_of(sample(doubles({}, {1, 0, 3, 4}), doubles(std::vector<double>(20, 0.5), {1, 2, 5, 2}), kBicubic, kZeros, false)),
            (Ints{1, 0, 2, 5}));
  EXPECT_EQ(sizes_of(sample(iota({1, 2, 3, 4}), doubles({}, {1, 0, 5, 2}), kNearest, kBorder, true)), (Ints{1, 2, 0, 5}));
  // Their gradients are zeros shaped like the inputs.
  Tensor x = leaf(iota({1, 2, 3, 4})), g = leaf(doubles({}, {1, 3, 0, 2}));
  std::vector<Tensor> grads = grads_of(sample(x, g, kBilinear, kZeros, false), {x, g});
  EXPECT_EQ(sizes_of(grads[0]), (Ints{1, 2, 3, 4}));
  expect_values(grads[0], std::vector<double>(24, 0.0));
  EXPECT_EQ(sizes_of(grads[1]), (Ints{1, 3, 0, 2}));
}

TEST(GridSampler, TheOutputIsContiguousInTheInputsDtype) {
  // A channels-last input and a transposed grid still give a row-major [N, C, H_out, W_out].
  const Tensor x = iota({2, 3, 4, 5}).permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  const Tensor g = doubles(std::vector<double>(24, 0.25), {2, 2, 3, 2}).transpose(1, 2);
  Tensor r = sample(x, g, kBilinear, kBorder, false);
  EXPECT_EQ(sizes_of(r), (Ints{2, 3, 3, 2}));
  EXPECT_EQ(strides_of(r), (Ints{18, 6, 2, 1}));
  EXPECT_EQ(values(r), values(sample(x.contiguous(), g.contiguous(), kBilinear, kBorder, false)));
  // float32, float16 and bfloat16 give the float64 result of the same values, rounded once.
  for (DType d : {DType::Float32, DType::Float16, DType::BFloat16}) {
    Tensor low = sample(ramp().to(d), point(0.1, -0.3).to(d), kBilinear, kZeros, false);
    EXPECT_EQ(low.dtype(), d);
    EXPECT_EQ(values(low), values(sample(ramp(), point(0.1, -0.3).to(d).to(DType::Float64), kBilinear, kZeros, false).to(d)));
  }
}

TEST(GridSampler, FakeOutputsHaveSymbolicSizes) {
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(iota({2, 3, 4, 5}), /*dynamic=*/true, "x");                   // s0..s3
  Tensor g = mode.from_tensor(doubles(std::vector<double>(168, 0), {2, 6, 7, 2}), true, "g");  // s4..s7
  FakeTensorModeGuard guard(mode);
  Tensor r = sample(x, g, kBicubic, kReflection, true);
  EXPECT_EQ(sizes_of(r), (Ints{2, 3, 6, 7}));
  EXPECT_EQ(sizes_at(r, {{"s0", 9}, {"s1", 8}, {"s2", 7}, {"s3", 6}, {"s4", 9}, {"s5", 4}, {"s6", 3}, {"s7", 2}}),
            (Ints{9, 8, 4, 3}));
}

TEST(GridSampler, TheInputsGradientSpreadsEachOutputsOverItsTaps) {
  // Bilinear at pixel (1.7, 0.55): weights 0.135, 0.315 on row 0, 0.165, 0.385 on row 1.
  Tensor x = leaf(ramp());
  expect_values(grad_of(sample(x, point(0.1, -0.3), kBilinear, kZeros, false), x),
                {0, 0.135, 0.315, 0, 0, 0.165, 0.385, 0, 0, 0, 0, 0});
  // Nearest: each output's gradient to the one pixel it read: pixels (1.5, 1) and (2.5, 1) round
  // to (2, 1), (0.5, -0.5) to (0, 0).
  Tensor y = leaf(ramp());
  expect_values(grad_of(sample(y, doubles({0, 0, 0.5, 0, -0.5, -1}, {1, 1, 3, 2}), kNearest, kZeros, false), y),
                {1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0});
}

TEST(GridSampler, TheGridsGradientIsTheSlopeOfTheSampledImage) {
  // On the ramp 4 * y + x: d/dx = dpixel/dx = W / 2 = 2, d/dy = 4 * H / 2 = 6 (align_corners:
  // (W - 1) / 2 = 1.5 and 4 * (H - 1) / 2 = 4).
  for (bool align_corners : {false, true}) {
    Tensor g = leaf(point(0.1, -0.3));
    expect_values(grad_of(sample(ramp(), g, kBilinear, kZeros, align_corners), g),
                  align_corners ? std::vector<double>{1.5, 4} : std::vector<double>{2, 6});
  }
  // Border clips pixel 4.2 to 3: no slope in x; reflection mirrors it: the slope turns.
  Tensor b = leaf(point(1.35, -0.3));
  expect_values(grad_of(sample(ramp(), b, kBilinear, kBorder, false), b), {0, 6});
  Tensor f = leaf(point(1.35, -0.3));
  expect_values(grad_of(sample(ramp(), f, kBilinear, kReflection, false), f), {-2, 6});
  // Bicubic at pixel (1.5, 1.5) of the 4 x 4 ramp: sum over taps k of w_k(t) k has slope 0.75 at
  // t = 0.5 (A = -0.75: -far'(1.5) - near'(0.5) - 2 far'(1.5) = -0.1875 + 1.3125 - 0.375), times
  // 4 / 2 in x and 4 * 4 / 2 in y.
  Tensor c = leaf(point(0, 0));
  expect_values(grad_of(sample(iota({1, 1, 4, 4}), c, kBicubic, kZeros, false), c), {1.5, 6});
  // Nearest sampling is flat between pixels: zeros, not an undefined gradient.
  Tensor n = leaf(point(0.1, -0.3));
  Tensor gn = grad_of(sample(ramp(), n, kNearest, kReflection, false), n);
  ASSERT_TRUE(gn.defined());
  expect_values(gn, {0, 0});
}

TEST(GridSampler, GradientsPassGradcheckAndGradgradcheck) {
  // Points off the kinks (the samples keep pixel coordinates 0.1 from integers and half-integers).
  for (int64_t mode : {kBilinear, kNearest, kBicubic})
    for (int64_t padding : {kZeros, kBorder, kReflection})
      for (bool align_corners : {false, true}) {
        const Tensor x = leaf(doubles({0.3, -1.2, 2.5, 0.7, 1.1, -0.4, 0.9, 2.2, -1.7, 0.6, 1.4, -0.8}, {1, 2, 2, 3}));
        const Tensor g = leaf(doubles({0.13, -0.71, 1.17, 0.42, -1.09, 1.21}, {1, 1, 3, 2}));
        expect_gradients_pass("aten::grid_sampler_2d",
                              {x, g, IValue(mode), IValue(padding), IValue(align_corners)});
      }
  expect_generated_gradients_pass("aten::grid_sampler_2d", false, 12);  // few: the conformance suite runs more
}

}  // namespace
}  // namespace opconform::reference
