// The distance family (_cdist_forward, _pdist_forward): hand-derived distances for each special
// p (0, 1, 2, inf) and the general formula, batch broadcasting, PyTorch's dtype, NaN and error
// rules, layouts and symbolic fake sizes, pdist as the upper triangle of cdist(x, x), and
// hand-derived gradients (PyTorch's conventions at ties and zero differences) with gradcheck.
#include <gtest/gtest.h>

#include "opconform/core/fake_tensor.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;
using Ints = std::vector<int64_t>;

constexpr const char* kCdist = "aten::_cdist_forward";
constexpr const char* kPdist = "aten::_pdist_forward";

Tensor cdist(const Tensor& x1, const Tensor& x2, double p, IValue mode = IValue()) {
  return call(kCdist, {x1, x2, IValue(p), std::move(mode)});
}
Tensor pdist(const Tensor& self, double p) { return call(kPdist, {self, IValue(p)}); }

// x's rows against y's: the differences are
//   x0 - y0 = [-1 0 2], x0 - y1 = [0 1 2], x0 - y2 = [-2 4 -2],
//   x1 - y0 = [2 4 -1], x1 - y1 = [3 5 -1], x1 - y2 = [1 8 -5].
Tensor x_rows() { return doubles({0, 1, 2, 3, 5, -1}, {2, 3}); }
Tensor y_rows() { return doubles({1, 1, 0, 0, 0, 0, 2, -3, 4}, {3, 3}); }

TEST(Cdist, EachSpecialPAndTheGeneralFormula) {
  // p = 0 counts the non-zero differences, 1 sums them, inf takes the largest.
  expect_values(cdist(x_rows(), y_rows(), 0), {2, 2, 3, 3, 3, 3});
  expect_values(cdist(x_rows(), y_rows(), 1), {3, 3, 8, 7, 9, 14});
  expect_values(cdist(x_rows(), y_rows(), kInf), {2, 2, 4, 4, 5, 8});
  expect_values(cdist(x_rows(), y_rows(), 2),
                {std::sqrt(5.0), std::sqrt(5.0), std::sqrt(24.0), std::sqrt(21.0), std::sqrt(35.0), std::sqrt(90.0)});
  expect_values(cdist(x_rows(), y_rows(), 3),
                {std::cbrt(9.0), std::cbrt(9.0), std::cbrt(80.0), std::cbrt(73.0), std::cbrt(153.0), std::cbrt(638.0)});
  // p = 1/2: (sum sqrt|d|)^2, e.g. (1 + 0 + sqrt 2)^2 for x0 - y0.
  const double r2 = std::sqrt(2.0), r3 = std::sqrt(3.0), r5 = std::sqrt(5.0), r8 = std::sqrt(8.0);
  expect_values(cdist(x_rows(), y_rows(), 0.5),
                {(1 + r2) * (1 + r2), (1 + r2) * (1 + r2), (r2 + 2 + r2) * (r2 + 2 + r2), (r2 + 2 + 1) * (r2 + 2 + 1),
                 (r3 + r5 + 1) * (r3 + r5 + 1), (1 + r8 + r5) * (1 + r8 + r5)},
                1e-12);
}

TEST(Cdist, TheModePicksPyTorchsAlgorithmNotTheValue) {
  // Every mode gives the exact distance (PyTorch's mode 1 would compute |x|^2 - 2 x.y + |y|^2).
  const Tensor want = cdist(x_rows(), y_rows(), 2, IValue(int64_t{2}));
  for (IValue mode : {IValue(), IValue(int64_t{0}), IValue(int64_t{1})})
    EXPECT_EQ(values(cdist(x_rows(), y_rows(), 2, mode)), values(want));
}

TEST(Cdist, BatchDimsBroadcast) {
  // x1 [2, 1, 2, 3] (x and 2x), x2 [3, 3, 3] (y, y + 1, -y): [2, 3, 2, 3], each block the 2-D
  // distances of its slices.
  const Tensor x1 = doubles({0, 1, 2, 3, 5, -1, 0, 2, 4, 6, 10, -2}, {2, 1, 2, 3});
  const Tensor y = y_rows();
  const Tensor x2 = doubles({1, 1, 0, 0, 0, 0, 2, -3, 4, 2, 2, 1, 1, 1, 1, 3, -2, 5, -1, -1, 0, 0, 0, 0, -2, 3, -4},
                            {3, 3, 3});
  const Tensor r = cdist(x1, x2, 1);
  EXPECT_EQ(sizes_of(r), (Ints{2, 3, 2, 3}));
  EXPECT_EQ(strides_of(r), (Ints{18, 6, 3, 1}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      EXPECT_EQ(values(r.select(0, a).select(0, b)), values(cdist(x1.select(0, a).select(0, 0), x2.select(0, b), 1)))
          << a << ", " << b;
  // x against y + 1: every difference drops by one, x0 - y0 - 1 = [-2 -1 1] sums to 4.
  expect_values(cdist(x1.select(0, 0), x2.select(0, 1), 1), {4, 2, 9, 6, 8, 13});
  // A rank-2 operand broadcasts against any batch.
  EXPECT_EQ(sizes_of(cdist(x1, y, 2)), (Ints{2, 1, 2, 3}));
}

TEST(Cdist, AnyLayoutRowMajorResult) {
  const Tensor xt = doubles({0, 3, 1, 5, 2, -1}, {3, 2}).transpose(0, 1);  // x_rows(), strides [1, 2]
  const Tensor r = cdist(xt, y_rows(), 1);
  EXPECT_EQ(strides_of(r), (Ints{3, 1}));
  expect_values(r, {3, 3, 8, 7, 9, 14});
  // An expanded (stride-0) operand: one row repeated.
  expect_values(cdist(doubles({1, 1, 0}, {1, 3}).expand({2, 3}), y_rows(), 1), {0, 2, 9, 0, 2, 9});
}

TEST(Cdist, EmptyAndColumnlessInputs) {
  EXPECT_EQ(sizes_of(cdist(doubles({}, {0, 3}), y_rows(), 2)), (Ints{0, 3}));
  EXPECT_EQ(sizes_of(cdist(doubles({}, {2, 0, 3}), y_rows(), 2)), (Ints{2, 0, 3}));
  const Tensor batchless = cdist(doubles({}, {0, 2, 3}), y_rows(), 1);
  EXPECT_EQ(sizes_of(batchless), (Ints{0, 2, 3}));
  EXPECT_EQ(strides_of(batchless), (Ints{6, 3, 1}));
  // No columns: every distance is 0 (for each p).
  for (double p : {0.0, 1.0, 2.0, 0.5, kInf}) expect_values(cdist(doubles({}, {2, 0}), doubles({}, {3, 0}), p), {0, 0, 0, 0, 0, 0});
}

TEST(Cdist, LowPrecisionOnlyOnTheMatrixProductPath) {
  // float16 / bfloat16: p = 2 with mode 1, or mode 0 / None with more than 25 rows.
  for (DType d : {DType::Float16, DType::BFloat16}) {
    const Tensor r = cdist(x_rows().to(d), y_rows().to(d), 2, IValue(int64_t{1}));
    EXPECT_EQ(r.dtype(), d);
    // sqrt(5) rounded once: 2.236328125 in float16, 2.234375 in bfloat16.
    EXPECT_EQ(values(r)[0], d == DType::Float16 ? 2.236328125 : 2.234375);
    EXPECT_EQ(sizes_of(cdist(zeros({26, 2}, d), zeros({1, 2}, d), 2)), (Ints{26, 1}));
    // The direct kernel has float32 and float64 alone.
    const std::string e = error_of(kCdist, {x_rows().to(d), y_rows().to(d), IValue(1.0), IValue()});
    EXPECT_NE(e.find("aten::_cdist_forward: argument 'x1' has dtype"), std::string::npos) << e;
    try {
      cdist(x_rows().to(d), y_rows().to(d), 2, IValue(int64_t{2}));
      ADD_FAILURE() << "mode 2 took " << name(d);
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), ErrorCode::kNotImplemented);
    }
    // Empty and columnless inputs run no kernel: any floating dtype.
    EXPECT_EQ(cdist(zeros({0, 3}, d), zeros({2, 3}, d), 1).dtype(), d);
    expect_values(cdist(zeros({2, 0}, d), zeros({1, 0}, d), 3), {0, 0});
  }
}

TEST(Cdist, ChecksNameTheOpAndTheArgument) {
  auto error = [](Tensor x1, Tensor x2, double p, IValue mode) { return error_of(kCdist, {x1, x2, IValue(p), mode}); };
  const IValue none;
  EXPECT_NE(error(doubles({1, 2, 3}, {3}), y_rows(), 2, none).find("'x1' got: 1D"), std::string::npos);
  EXPECT_NE(error(x_rows(), doubles({1, 2, 3}, {3}), 2, none).find("'x2' got: 1D"), std::string::npos);
  EXPECT_NE(error(x_rows(), doubles({1, 2}, {1, 2}), 2, none).find("same number of columns, got 3 and 2"), std::string::npos);
  EXPECT_NE(error(x_rows().to(DType::Int64), y_rows(), 2, none).find("floating-point dtypes, argument 'x1' got: int64"),
            std::string::npos);
  EXPECT_NE(error(x_rows(), y_rows().to(DType::Int32), 2, none).find("argument 'x2' got: int32"), std::string::npos);
  EXPECT_NE(error(x_rows(), y_rows(), -1, none).find("'p' must be non-negative"), std::string::npos);
  EXPECT_NE(error(x_rows(), y_rows(), kNaN, none).find("'p' must be non-negative"), std::string::npos);
  for (int64_t mode : {-1, 3})
    EXPECT_NE(error(x_rows(), y_rows(), 2, IValue(mode)).find("'compute_mode' must be None, 0, 1 or 2"), std::string::npos);
  EXPECT_NE(error(zeros({2, 2, 3}), zeros({3, 4, 3}), 1, none).find("do not broadcast"), std::string::npos);
  // Two dtypes: refused where a kernel runs (PyTorch's data_ptr / mm checks), not on empty inputs.
  EXPECT_NE(error(x_rows().to(DType::Float32), y_rows(), 1, none).find("must have the same dtype, got float32 and float64"),
            std::string::npos);
  EXPECT_NE(error(x_rows().to(DType::Float32), y_rows(), 2, IValue(int64_t{1})).find("same dtype"), std::string::npos);
  EXPECT_EQ(cdist(zeros({0, 3}), y_rows(), 1).dtype(), DType::Float32);
}

TEST(Cdist, NaNRulesFollowTheCpuKernel) {
  // [NaN 1] and [inf 1] against [0 0] and [inf 5].
  const Tensor a = doubles({kNaN, 1, kInf, 1}, {2, 2}), b = doubles({0, 0, kInf, 5}, {2, 2});
  expect_values(cdist(a, b, 0), {kNaN, kNaN, 2, kNaN});
  expect_values(cdist(a, b, 1), {kNaN, kNaN, kInf, kNaN});
  expect_values(cdist(a, b, 2), {kNaN, kNaN, kInf, kNaN});
  // The inf norm drops NaN differences (a scalar max from 0): inf - inf counts for nothing.
  expect_values(cdist(a, b, kInf), {1, 4, kInf, 4});
}

TEST(Pdist, TheRowPairsInRowMajorOrder) {
  // Rows s0..s3: pairs (0,1) (0,2) (0,3) (1,2) (1,3) (2,3) differ by
  // [-3 -4 3], [-1 0 2], [-2 4 -2], [2 4 -1], [1 8 -5], [-1 4 -4].
  const Tensor s = doubles({0, 1, 2, 3, 5, -1, 1, 1, 0, 2, -3, 4}, {4, 3});
  expect_values(pdist(s, 2), {std::sqrt(34.0), std::sqrt(5.0), std::sqrt(24.0), std::sqrt(21.0), std::sqrt(90.0), std::sqrt(33.0)});
  expect_values(pdist(s, 0), {3, 2, 3, 3, 3, 3});
  expect_values(pdist(s, 1), {10, 3, 8, 7, 14, 9});
  expect_values(pdist(s, kInf), {4, 2, 4, 4, 8, 4});
  EXPECT_EQ(values(call(kPdist, {s})), values(pdist(s, 2)));  // p defaults to 2
  // Negative p (only torch.pdist refuses it): the general formula; a zero difference gives 0.
  expect_values(pdist(s, -1), {1 / (1 / 3.0 + 1 / 4.0 + 1 / 3.0), 0, 1 / (1 / 2.0 + 1 / 4.0 + 1 / 2.0),
                               1 / (1 / 2.0 + 1 / 4.0 + 1.0), 1 / (1.0 + 1 / 8.0 + 1 / 5.0), 1 / (1.0 + 1 / 4.0 + 1 / 4.0)});
}

TEST(Pdist, IsTheUpperTriangleOfCdistOfSelf) {
  const Tensor s = doubles({0.5, -1, 2, 3, 1.25, 0, -2, 4, 1, 1, 1, 1, 7, -3, 0.25}, {5, 3});
  for (double p : {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, kInf}) {
    const std::vector<double> full = values(cdist(s, s, p)), pairs = values(pdist(s, p));
    std::vector<double> upper;
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = i + 1; j < 5; ++j) upper.push_back(full[static_cast<size_t>(i * 5 + j)]);
    EXPECT_EQ(pairs, upper) << "p = " << p;
  }
}

TEST(Pdist, EdgesDtypesAndErrors) {
  EXPECT_EQ(sizes_of(pdist(doubles({1, 2}, {1, 2}), 2)), (Ints{0}));
  EXPECT_EQ(sizes_of(pdist(doubles({}, {0, 2}), 2)), (Ints{0}));
  expect_values(pdist(doubles({}, {3, 0}), 2), {0, 0, 0});
  expect_values(pdist(doubles({}, {3, 0}), -1), {0, 0, 0});  // no columns: zeros whatever p
  // Another dtype only where no kernel runs (PyTorch's kernel has float32 and float64).
  EXPECT_EQ(pdist(longs({1, 2}, {1, 2}), 2).dtype(), DType::Int64);
  EXPECT_EQ(pdist(zeros({3, 0}, DType::Float16), 2).dtype(), DType::Float16);
  EXPECT_NE(error_of(kPdist, {floats({1, 2, 3, 4}, {2, 2}, DType::Float16), IValue(2.0)}).find("aten::_pdist_forward: argument 'self' has dtype float16"),
            std::string::npos);
  EXPECT_NE(error_of(kPdist, {longs({1, 2, 3, 4}, {2, 2}), IValue(2.0)}).find("has dtype int64"), std::string::npos);
  EXPECT_NE(error_of(kPdist, {doubles({1, 2}, {2}), IValue(2.0)}).find("'self' must be a 2-D"), std::string::npos);
  EXPECT_NE(error_of(kPdist, {iota({2, 2, 2}), IValue(2.0)}).find("'self' must be a 2-D"), std::string::npos);
  // Any layout (PyTorch's _pdist_forward wants a contiguous self; torch.pdist makes it one).
  const Tensor s = iota({3, 2});
  EXPECT_EQ(values(pdist(s.transpose(0, 1), 1)), values(pdist(s.transpose(0, 1).contiguous(), 1)));
  expect_values(pdist(s.transpose(0, 1), 1), {3});
  // The NaN of a difference propagates, the inf norm's too (a vector maximum).
  expect_values(pdist(doubles({kNaN, 1, 0, 0, 1, 3}, {3, 2}), kInf), {kNaN, kNaN, 3});
}

TEST(DistanceFake, SameLayoutAndSymbolicSizes) {
  FakeTensorMode mode;
  Tensor x = mode.from_tensor(doubles({0, 1, 2, 3, 4, 5}, {2, 3}), /*dynamic=*/true, "x");  // [s0, s1]
  Tensor batched = mode.from_tensor(zeros({4, 1, 3}, DType::Float64));
  Tensor y = mode.from_tensor(iota({3, 3}).transpose(0, 1));
  Tensor single = mode.from_tensor(zeros({2, 3}));
  FakeTensorModeGuard guard(mode);
  Tensor r = cdist(batched, y, 2);
  EXPECT_TRUE(r.is_fake());
  EXPECT_EQ(sizes_of(r), (Ints{4, 1, 3}));
  EXPECT_EQ(strides_of(r), (Ints{3, 3, 1}));
  EXPECT_EQ(sizes_at_5_7(call(kPdist, {x, IValue(1.0)})), (Ints{10}));  // 5 rows: 10 pairs
  // The dtype rules hold on fakes too.
  EXPECT_NE(error_of(kCdist, {single, y, IValue(1.0), IValue()}).find("same dtype"), std::string::npos);
}

// ---- gradients ----

// z1's rows against z2's differ by [0 -2 3], [1 2 3], [-1 -4 0] and [0 0 0] (a zero distance);
// the weights of the four distances are 1, 2, 3, 4.
struct GradCase {
  Tensor z1 = leaf(doubles({1, 2, 3, 0, 0, 0}, {2, 3}));
  Tensor z2 = leaf(doubles({1, 4, 0, 0, 0, 0}, {2, 3}));
  std::vector<Tensor> grads(double p) {
    return grads_of(cdist(z1, z2, p, IValue(int64_t{2})), {z1, z2}, doubles({1, 2, 3, 4}, {2, 2}));
  }
};

TEST(DistanceGradients, SpecialPsFollowPyTorchsConventions) {
  GradCase c;
  // p = 1: weight * sign(diff); sign(0) = 0.
  auto g = c.grads(1);
  expect_values(g[0], {0 + 2, -1 + 2, 1 + 2, -3, -3, 0});
  expect_values(g[1], {3, 4, -1, -2, -2, -2});
  // p = 2: weight * diff / dist; the zero distance gives 0.
  g = c.grads(2);
  const double s13 = std::sqrt(13.0), s14 = std::sqrt(14.0), s17 = std::sqrt(17.0);
  expect_values(g[0], {2 / s14, -2 / s13 + 4 / s14, 3 / s13 + 6 / s14, -3 / s17, -12 / s17, 0});
  expect_values(g[1], {3 / s17, 2 / s13 + 12 / s17, -3 / s13, -2 / s14, -4 / s14, -6 / s14});
  // p = inf: the weight goes to the largest difference (3, 3 and -4).
  g = c.grads(kInf);
  expect_values(g[0], {0, 0, 3, 0, -3, 0});
  expect_values(g[1], {0, 3, -1, 0, 0, -2});
  // p = 0: piecewise constant.
  g = c.grads(0);
  expect_values(g[0], {0, 0, 0, 0, 0, 0});
  expect_values(g[1], {0, 0, 0, 0, 0, 0});
}

TEST(DistanceGradients, GeneralPAndTies) {
  GradCase c;
  // p = 3: weight * sign(d) (|d| / dist)^2 with dist = cbrt(35), cbrt(36), cbrt(65) (PyTorch
  // 2.11 gives 0.18344, 0.35993, 2.49209 for z1's first row).
  const double a = std::cbrt(35.0), b = std::cbrt(36.0), e = std::cbrt(65.0);
  auto g = c.grads(3);
  expect_values(g[0], {2 / (b * b), -4 / (a * a) + 2 * 4 / (b * b), 9 / (a * a) + 2 * 9 / (b * b), -3 / (e * e),
                       -3 * 16 / (e * e), 0});
  EXPECT_NEAR(values(g[0])[0], 0.1834404027163682, 1e-12);
  // p = 1/2 (PyTorch 2.11's values): the zero difference gets 0, not |0|^(-1/2).
  expect_values(c.grads(0.5)[0], {8.292528739883945, 3.638958433764684, 6.604190281162429, -9.0, -4.5, 0.0});
  // Tied largest differences each get the whole weight (as PyTorch's kernel).
  Tensor t = leaf(doubles({2, -2, 1}, {1, 3}));
  expect_values(grad_of(cdist(t, doubles({0, 0, 0}, {1, 3}), kInf), t), {1, -1, 0});
}

TEST(DistanceGradients, BroadcastBatchesSumBack) {
  // x1 [2, 1, 1, 2] (rows [1 2] and [3 4]) against x2 [3, 1, 2]: a [2, 3, 1, 1] result.
  Tensor x1b = leaf(doubles({1, 2, 3, 4}, {2, 1, 1, 2}));
  Tensor x2 = leaf(doubles({0, 0, 1, 1, 5, 5}, {3, 1, 2}));
  auto g = grads_of(cdist(x1b, x2, 1), {x1b, x2});
  EXPECT_EQ(sizes_of(g[0]), (Ints{2, 1, 1, 2}));
  EXPECT_EQ(sizes_of(g[1]), (Ints{3, 1, 2}));
  // Row [1 2] against [0 0], [1 1], [5 5]: signs [1 1], [0 1], [-1 -1]; row [3 4]: [1 1] x 2, [-1 -1].
  expect_values(g[0], {0, 1, 1, 1});
  expect_values(g[1], {-2, -2, -1, -2, 2, 2});
}

TEST(DistanceGradients, PdistSpreadsEachPairToItsRows) {
  // Weights 1..6 for the pairs (0,1) (0,2) (0,3) (1,2) (1,3) (2,3) of the rows of Pdist's test;
  // p = 1: row 0 = -[1 1 -1] - 2 [1 0 -1] - 3 [1 -1 1] = [-6 2 0].
  Tensor s = leaf(doubles({0, 1, 2, 3, 5, -1, 1, 1, 0, 2, -3, 4}, {4, 3}));
  const Tensor w = doubles({1, 2, 3, 4, 5, 6}, {6});
  expect_values(grad_of(pdist(s, 1), s, w), {-6, 2, 0, 10, 10, -10, -8, 2, -4, 4, -14, 14});
  expect_values(grad_of(pdist(s, kInf), s, w), {0, 2, 2, 0, 10, 0, 0, 2, -8, 0, -14, 6});
  expect_values(grad_of(pdist(s, 0), s, w), std::vector<double>(12, 0.0));
  // The same as cdist(s, s)'s gradient with the weights on the upper triangle.
  Tensor full = doubles(std::vector<double>(16, 0.0), {4, 4});
  const int64_t pairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
  for (int64_t k = 0; k < 6; ++k) full.set({pairs[k][0], pairs[k][1]}, Scalar(static_cast<double>(k + 1)));
  for (double p : {0.5, 2.0, 3.0}) {
    Tensor a = leaf(s), b = leaf(s);
    auto g = grads_of(cdist(a, b, p), {a, b}, full);
    const std::vector<double> want = values(call("aten::add.Tensor", {g[0], g[1]}));
    expect_values(grad_of(pdist(s, p), s, w), want, 1e-12);
  }
}

TEST(DistanceGradients, GradcheckAndGradgradcheck) {
  // (p = 0's zero gradient is checked above: an all-zero Jacobian proves nothing to gradcheck.)
  for (double p : {0.5, 1.0, 1.5, 2.0, 3.0, kInf}) {
    expect_gradients_pass(kCdist, {leaf(doubles({0.5, -1.25, 2, 3, 0.75, -0.5}, {2, 3})),
                                   leaf(doubles({1.5, 0.25, -1, -2, 1, 0.125, 0.3, 0.2, 0.1}, {3, 3})), IValue(p), IValue()});
    expect_gradients_pass(kPdist, {leaf(doubles({0.5, -1.25, 2, 3, 0.75, -0.5, 1.5, 0.25, -1}, {3, 3})), IValue(p)});
  }
  expect_generated_gradients_pass(kCdist, false, 8);  // few: the conformance suite runs more
  expect_generated_gradients_pass(kPdist, false, 8);
}

}  // namespace
}  // namespace opconform::reference
