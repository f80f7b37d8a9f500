// The fft family (_fft_r2c, _fft_c2r): hand-derived transforms, the inverse pair, PyTorch's CPU
// layouts, the errors, and the gradients tied to the forward ops (each backward is the adjoint of
// its forward, and the double backward is the forward again). The project's gradcheck takes real
// tensors only, so these ties are what check the complex side of the formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>

#include "opconform/core/fake_tensor.h"
#include "opconform/reference/detail/op_support.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace testing;
using Ints = std::vector<int64_t>;
using C = complex128;

constexpr const char* kR2c = "aten::_fft_r2c";
constexpr const char* kC2r = "aten::_fft_c2r";

Tensor r2c(const Tensor& x, Ints dim, int64_t normalization, bool onesided) {
  return call(kR2c, {x, IValue(std::move(dim)), IValue(normalization), IValue(onesided)});
}
Tensor c2r(const Tensor& h, Ints dim, int64_t normalization, int64_t last_dim_size) {
  return call(kC2r, {h, IValue(std::move(dim)), IValue(normalization), IValue(last_dim_size)});
}

Tensor complexes(const std::vector<C>& v, const Ints& sizes) { return from_vector<C>(v, sizes); }

void expect_complex(const Tensor& t, const std::vector<C>& want, double tol = 1e-12) {
  const std::vector<C> got = t.to_vector<C>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i].real(), want[i].real(), tol) << "element " << i;
    EXPECT_NEAR(got[i].imag(), want[i].imag(), tol) << "element " << i;
  }
}

// Distinct, irregular values (the transforms are linear: only a pattern-free input shows a wrong
// index).
std::vector<double> wiggle(int64_t n, double phase = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(1.3 * static_cast<double>(i) + phase) + 0.1 * static_cast<double>(i);
  return v;
}
std::vector<C> cwiggle(int64_t n) {
  const std::vector<double> re = wiggle(n), im = wiggle(n, 2.0);
  std::vector<C> v;
  for (size_t i = 0; i < re.size(); ++i) v.emplace_back(re[i], im[i]);
  return v;
}
int64_t numel_of(const Ints& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

const double kRoot3 = std::sqrt(3.0);

TEST(FftR2c, OneDimByHand) {
  // [1 2 3 4]: X_k = sum_n x_n (-i)^(nk): 10, 1 - 2i - 3 + 4i = -2 + 2i, 1 - 2 + 3 - 4 = -2.
  const Tensor x = doubles({1, 2, 3, 4}, {4});
  Tensor y = r2c(x, {0}, 0, true);
  EXPECT_EQ(y.dtype(), DType::Complex128);
  expect_complex(y, {C(10, 0), C(-2, 2), C(-2, 0)});
  // Two-sided: X_3 = conj(X_1); by 1/sqrt(4) and 1/4.
  expect_complex(r2c(x, {0}, 1, false), {C(5, 0), C(-1, 1), C(-1, 0), C(-1, -1)});
  expect_complex(r2c(x, {0}, 2, true), {C(2.5, 0), C(-0.5, 0.5), C(-0.5, 0)});
  // float32 in, complex64 out; an odd length N = 5 keeps N / 2 + 1 = 3 entries.
  Tensor f = r2c(floats({1, 0, 0, 0, 0}, {5}), {0}, 0, true);
  EXPECT_EQ(f.dtype(), DType::Complex64);
  expect_complex(f, {C(1, 0), C(1, 0), C(1, 0)});
}

TEST(FftR2c, SeveralDimsInAnyOrder) {
  // x = [[1 2 0] [3 -1 2]]. Along dim 1 (N = 3, w = exp(-2 pi i / 3) = -1/2 - i sqrt(3)/2):
  // row 0: 3, 1 + 2w = -i sqrt(3); row 1: 4, 3 - w + 2w^2 = 5/2 + i 3 sqrt(3)/2 (and conjugates).
  // Then along dim 0 (N = 2): sums and differences of the rows.
  const Tensor x = doubles({1, 2, 0, 3, -1, 2}, {2, 3});
  // Onesided along dim 1 (the last listed): 3 / 2 + 1 = 2 entries.
  Tensor y = r2c(x, {0, 1}, 0, true);
  EXPECT_EQ(sizes_of(y), (Ints{2, 2}));
  expect_complex(y, {C(7, 0), C(2.5, kRoot3 / 2), C(-1, 0), C(-2.5, -5 * kRoot3 / 2)});
  // Onesided along dim 0 instead (2 / 2 + 1 = 2 entries: all of them), dim 1 two-sided.
  Tensor z = r2c(x, {1, 0}, 0, true);
  EXPECT_EQ(sizes_of(z), (Ints{2, 3}));
  expect_complex(z, {C(7, 0), C(2.5, kRoot3 / 2), C(2.5, -kRoot3 / 2), C(-1, 0), C(-2.5, -5 * kRoot3 / 2),
                     C(-2.5, 5 * kRoot3 / 2)});
  // Only dim 0: the sum and the difference of the rows.
  expect_complex(r2c(x, {0}, 0, true), {C(4, 0), C(1, 0), C(2, 0), C(-2, 0), C(3, 0), C(-2, 0)});
}

TEST(FftR2c, TheOnesidedSpectrumIsHalfOfAHermitianOne) {
  const Ints sizes{3, 4, 5};
  const Tensor x = doubles(wiggle(60), sizes);
  for (const Ints& dim : {Ints{2}, Ints{0, 1}, Ints{2, 0, 1}, Ints{1, 2}}) {
    const int64_t last = dim.back(), n = sizes[static_cast<size_t>(last)];
    const Tensor full = r2c(x, dim, 1, false), half = r2c(x, dim, 1, true);
    EXPECT_EQ(half.size(last), n / 2 + 1);
    expect_complex(half, full.narrow(last, 0, n / 2 + 1).to_vector<C>());
    // X[k] = conj(X[-k]) (k negated mod the size along every transformed dim).
    const std::vector<C> f = full.to_vector<C>();
    detail::for_each_index(sizes, [&](const std::vector<int64_t>& k) {
      Ints mirror = k;
      for (int64_t d : dim) mirror[static_cast<size_t>(d)] = (sizes[static_cast<size_t>(d)] - k[static_cast<size_t>(d)]) % sizes[static_cast<size_t>(d)];
      const C a = f[static_cast<size_t>((k[0] * 4 + k[1]) * 5 + k[2])];
      const C b = f[static_cast<size_t>((mirror[0] * 4 + mirror[1]) * 5 + mirror[2])];
      EXPECT_NEAR(std::abs(a - std::conj(b)), 0, 1e-12);
    });
  }
}

TEST(FftC2r, OneDimByHand) {
  // h = [1+2i, 3+4i, 5+6i], N = 4: y_n = Re(h_0 + 2 h_1 i^n + h_2 (-1)^n) = 12, -12, 0, 4.
  const Tensor h = complexes({C(1, 2), C(3, 4), C(5, 6)}, {3});
  Tensor y = c2r(h, {0}, 0, 4);
  EXPECT_EQ(y.dtype(), DType::Float64);
  expect_values(y, {12, -12, 0, 4});
  // N = 5 (the same three entries, none a Nyquist one): y_n = 1 + 2 Re(h_1 w^n) + 2 Re(h_2 w^2n).
  std::vector<double> want;
  for (int n = 0; n < 5; ++n) {
    const double t = 2 * std::numbers::pi * n / 5;
    want.push_back(1 + 2 * (3 * std::cos(t) - 4 * std::sin(t)) + 2 * (5 * std::cos(2 * t) - 6 * std::sin(2 * t)));
  }
  expect_values(c2r(h, {0}, 0, 5), want);
  // The imaginary parts of the DC and Nyquist entries are not read; by 1/4.
  expect_values(c2r(complexes({C(1, 5), C(0, 0), C(2, 7)}, {3}), {0}, 2, 4), {0.75, -0.25, 0.75, -0.25});
  // complex64 in, float32 out.
  Tensor f = c2r(complexes({C(1, 0), C(1, 0), C(1, 0)}, {3}).to(DType::Complex64), {0}, 0, 5);
  EXPECT_EQ(f.dtype(), DType::Float32);
  expect_values(f, {5, 0, 0, 0, 0}, 1e-6);
}

TEST(FftC2r, SeveralDims) {
  // h = [[1+2i 3+4i 5+6i] [7-i 2+3i -1-i]] over dims (0, 1), N = 4: the inverse along dim 0 gives
  // rows [8+i 5+7i 4+5i] and [-6+3i 1+i 6+7i], then each row as in OneDimByHand.
  const Tensor h = complexes({C(1, 2), C(3, 4), C(5, 6), C(7, -1), C(2, 3), C(-1, -1)}, {2, 3});
  Tensor y = c2r(h, {0, 1}, 0, 4);
  EXPECT_EQ(sizes_of(y), (Ints{2, 4}));
  expect_values(y, {22, -10, 2, 18, 2, -14, -2, -10});
  // A full spectrum of last_dim_size entries is taken too: only its first N/2 + 1 are read.
  const Tensor full = complexes({C(1, 2), C(3, 4), C(5, 6), C(100, 100)}, {4});
  expect_values(c2r(full, {0}, 0, 4), {12, -12, 0, 4});
}

TEST(FftC2r, InvertsR2cForEachPairOfScales) {
  const Ints sizes{2, 3, 4};
  const Tensor x = doubles(wiggle(24), sizes);
  for (const Ints& dim : {Ints{2}, Ints{1}, Ints{2, 0}, Ints{0, 1, 2}, Ints{1, 2, 0}}) {
    const int64_t n = sizes[static_cast<size_t>(dim.back())];
    // (r2c, c2r) normalizations whose scales multiply to 1 / (the product of the signal sizes).
    for (auto [forward, backward] : {std::pair{0, 2}, std::pair{1, 1}, std::pair{2, 0}}) {
      expect_values(c2r(r2c(x, dim, forward, true), dim, backward, n), values(x), 1e-12);
    }
  }
}

// The strides PyTorch 2.11's CPU kernel (MKL's _exec_fft) gave for these calls.
TEST(FftLayout, TheOutputIsLaidOutAsPyTorchsCpuKernelLaysItOut) {
  const Tensor x = iota({2, 3, 4});
  EXPECT_EQ(strides_of(r2c(x, {2}, 0, true)), (Ints{9, 3, 1}));
  EXPECT_EQ(strides_of(r2c(x, {0}, 0, true)), (Ints{1, 8, 2}));  // the other dims outermost
  EXPECT_EQ(strides_of(r2c(x, {0, 1}, 0, true)), (Ints{2, 1, 4}));
  EXPECT_EQ(strides_of(r2c(x, {1, 0}, 0, false)), (Ints{1, 2, 6}));  // the onesided dim innermost
  const Tensor p = x.permute({2, 0, 1});  // [4, 2, 3] with strides [1, 12, 4]
  EXPECT_EQ(strides_of(r2c(p, {1, 0}, 0, true)), (Ints{1, 3, 6}));
  EXPECT_EQ(strides_of(r2c(p, {0, 2}, 0, true)), (Ints{2, 8, 1}));
  // Equal strides keep the order std::partition left: a stride-0 input.
  EXPECT_EQ(strides_of(r2c(doubles({1, 2, 3}, {3, 1}).expand({3, 4}), {0}, 0, true)), (Ints{1, 2}));
  EXPECT_EQ(strides_of(r2c(iota({1, 3, 1, 4}), {3, 1}, 0, true)), (Ints{8, 1, 8, 2}));
  // c2r: the other transformed dims' complex transform first, laid out the same way.
  const Tensor h = complexes(cwiggle(27), {3, 3, 3}).permute({2, 0, 1});  // strides [1, 9, 3]
  EXPECT_EQ(strides_of(c2r(h, {0, 1, 2}, 0, 4)), (Ints{4, 12, 1}));
  EXPECT_EQ(strides_of(c2r(h, {1, 0}, 0, 4)), (Ints{1, 4, 12}));
  EXPECT_EQ(strides_of(c2r(h, {2, 1}, 0, 5)), (Ints{15, 1, 5}));
  // Values do not depend on the input's layout.
  expect_complex(r2c(p, {1, 0}, 1, true), r2c(p.contiguous(), {1, 0}, 1, true).to_vector<C>());
  expect_values(c2r(h, {1, 0}, 2, 4), values(c2r(h.contiguous(), {1, 0}, 2, 4)));
}

TEST(FftLayout, FakesHaveTheSameLayoutAndSymbolicSizes) {
  FakeTensorMode mode;
  Tensor p = mode.from_tensor(iota({2, 3, 4}).permute({2, 0, 1}));
  Tensor h = mode.from_tensor(complexes(cwiggle(27), {3, 3, 3}).permute({2, 0, 1}));
  Tensor x = mode.from_tensor(doubles(wiggle(6), {2, 3}), /*dynamic=*/true, "x");  // [s0, s1]
  FakeTensorModeGuard guard(mode);
  Tensor a = r2c(p, {1, 0}, 0, true);
  EXPECT_TRUE(a.is_fake());
  EXPECT_EQ(sizes_of(a), (Ints{3, 2, 3}));
  EXPECT_EQ(strides_of(a), (Ints{1, 3, 6}));
  EXPECT_EQ(a.dtype(), DType::Complex128);
  Tensor b = c2r(h, {0, 1, 2}, 0, 4);
  EXPECT_EQ(strides_of(b), (Ints{4, 12, 1}));
  EXPECT_EQ(b.dtype(), DType::Float64);
  // s0 = 5, s1 = 7: onesided along dim 0 gives 5 / 2 + 1 = 3 entries.
  EXPECT_EQ(sizes_at_5_7(r2c(x, {0}, 0, true)), (Ints{3, 7}));
  EXPECT_EQ(sizes_at_5_7(r2c(x, {1, 0}, 0, false)), (Ints{5, 7}));
}

TEST(Fft, ChecksNameTheOpAndWhatIsWrong) {
  const Tensor x = doubles({1, 2, 3, 4}, {2, 2});
  const Tensor h = complexes({C(1, 0), C(2, 0)}, {1, 2});
  auto r2c_error = [](const Tensor& t, Ints dim) {
    return error_of(kR2c, {t, IValue(std::move(dim)), IValue(int64_t{0}), IValue(true)});
  };
  auto c2r_error = [](const Tensor& t, Ints dim, int64_t n) {
    return error_of(kC2r, {t, IValue(std::move(dim)), IValue(int64_t{0}), IValue(n)});
  };
  EXPECT_NE(r2c_error(x.to(DType::Float16), {1}).find("aten::_fft_r2c: argument 'self' must be float32 or float64"), std::string::npos);
  EXPECT_NE(r2c_error(h, {1}).find("must be float32 or float64, got complex128"), std::string::npos);
  EXPECT_NE(c2r_error(x, {1}, 2).find("aten::_fft_c2r: argument 'self' must be complex64 or complex128"), std::string::npos);
  EXPECT_NE(r2c_error(x, {}).find("argument 'dim' must name at least one dim"), std::string::npos);
  // PyTorch's kernels do not wrap dims (a negative one breaks them), nor take one twice.
  EXPECT_NE(r2c_error(x, {-1}).find("they are not wrapped"), std::string::npos);
  EXPECT_NE(r2c_error(x, {2}).find("in [0, 2)"), std::string::npos);
  EXPECT_NE(c2r_error(h, {1, 1}, 2).find("names dim 1 twice"), std::string::npos);
  EXPECT_NE(r2c_error(doubles({3}, {}), {0}).find("rank 0"), std::string::npos);
  // No empty input (MKL refuses it), even in a dim not transformed.
  EXPECT_NE(r2c_error(doubles({}, {0, 4}), {1}).find("at least one element"), std::string::npos);
  // c2r: last_dim_size / 2 + 1 entries (or last_dim_size) along the last dim listed.
  EXPECT_NE(c2r_error(h, {1}, 4).find("must hold last_dim_size / 2 + 1 = 3 entries"), std::string::npos);
  EXPECT_NE(c2r_error(h, {1}, 0).find("'last_dim_size' must be positive"), std::string::npos);
  EXPECT_EQ(c2r_error(h, {1}, 2), "");
  EXPECT_EQ(c2r_error(h, {1}, 3), "");
}

// ---- gradients (PyTorch's convention: a complex gradient is dL/dRe + i dL/dIm) ----

// r2c's gradient with grad_output g is x -> Re(sum_k conj(g_k) d y_k / d x), y linear in x: each
// element's is Re(<g, r2c(e_j)>), e_j the j-th unit tensor.
void expect_r2c_gradient_is_its_adjoint(const Ints& sizes, const Ints& dim, int64_t normalization, bool onesided) {
  SCOPED_TRACE(::testing::Message() << "r2c of " << shape_string(sizes) << " over " << shape_string(dim) << ", norm "
                                    << normalization << (onesided ? ", onesided" : ", two-sided"));
  const Tensor x = leaf(doubles(wiggle(numel_of(sizes)), sizes));
  const Tensor y = r2c(x, dim, normalization, onesided);
  const std::vector<C> g = cwiggle(y.numel());
  const Tensor gx = grad_of(y, x, complexes(g, sizes_of(y)));
  EXPECT_EQ(gx.dtype(), DType::Float64);
  EXPECT_EQ(sizes_of(gx), sizes);
  const std::vector<double> got = values(gx);
  for (int64_t j = 0; j < x.numel(); ++j) {
    std::vector<double> e(static_cast<size_t>(x.numel()), 0.0);
    e[static_cast<size_t>(j)] = 1;
    const std::vector<C> column = r2c(doubles(e, sizes), dim, normalization, onesided).to_vector<C>();
    double want = 0;
    for (size_t k = 0; k < g.size(); ++k) want += (std::conj(g[k]) * column[k]).real();
    EXPECT_NEAR(got[static_cast<size_t>(j)], want, 1e-12) << "element " << j;
  }
}

TEST(FftGradients, R2csGradientIsItsAdjoint) {
  expect_r2c_gradient_is_its_adjoint({4}, {0}, 0, true);   // even: the Nyquist entry not doubled
  expect_r2c_gradient_is_its_adjoint({5}, {0}, 1, true);   // odd: no Nyquist entry
  expect_r2c_gradient_is_its_adjoint({4}, {0}, 2, false);  // two-sided: the upper half folds back
  expect_r2c_gradient_is_its_adjoint({5}, {0}, 0, false);
  expect_r2c_gradient_is_its_adjoint({1}, {0}, 0, false);
  expect_r2c_gradient_is_its_adjoint({2, 3, 4}, {2, 0}, 1, true);
  expect_r2c_gradient_is_its_adjoint({2, 3, 4}, {0, 1}, 2, false);
  expect_r2c_gradient_is_its_adjoint({3, 2, 4}, {1, 2, 0}, 0, false);
  expect_r2c_gradient_is_its_adjoint({3, 4}, {1, 0}, 0, true);
}

// c2r's gradient with (real) grad_output g: element k's is <g, c2r(e_k)> + i <g, c2r(i e_k)>.
void expect_c2r_gradient_is_its_adjoint(const Ints& sizes, const Ints& dim, int64_t normalization, int64_t n) {
  SCOPED_TRACE(::testing::Message() << "c2r of " << shape_string(sizes) << " over " << shape_string(dim) << ", norm "
                                    << normalization << ", n " << n);
  const Tensor h = leaf(complexes(cwiggle(numel_of(sizes)), sizes));
  const Tensor y = c2r(h, dim, normalization, n);
  const std::vector<double> g = wiggle(y.numel(), 1.0);
  const Tensor gh = grad_of(y, h, doubles(g, sizes_of(y)));
  EXPECT_EQ(gh.dtype(), DType::Complex128);
  EXPECT_EQ(sizes_of(gh), sizes);
  const std::vector<C> got = gh.to_vector<C>();
  auto against = [&](const std::vector<C>& e) {
    const std::vector<double> column = values(c2r(complexes(e, sizes), dim, normalization, n));
    double sum = 0;
    for (size_t i = 0; i < g.size(); ++i) sum += g[i] * column[i];
    return sum;
  };
  for (int64_t k = 0; k < h.numel(); ++k) {
    std::vector<C> e(static_cast<size_t>(h.numel()), C(0, 0));
    e[static_cast<size_t>(k)] = C(1, 0);
    const double re = against(e);
    e[static_cast<size_t>(k)] = C(0, 1);
    const double im = against(e);
    EXPECT_NEAR(got[static_cast<size_t>(k)].real(), re, 1e-12) << "element " << k;
    EXPECT_NEAR(got[static_cast<size_t>(k)].imag(), im, 1e-12) << "element " << k;
  }
}

TEST(FftGradients, C2rsGradientIsItsAdjoint) {
  expect_c2r_gradient_is_its_adjoint({3}, {0}, 0, 4);  // DC and Nyquist: the imaginary part gets 0
  expect_c2r_gradient_is_its_adjoint({3}, {0}, 1, 5);
  expect_c2r_gradient_is_its_adjoint({1}, {0}, 2, 1);
  expect_c2r_gradient_is_its_adjoint({2}, {0}, 0, 2);
  expect_c2r_gradient_is_its_adjoint({4}, {0}, 0, 4);  // a full spectrum: its unread entries get 0
  expect_c2r_gradient_is_its_adjoint({2, 3, 3}, {0, 2}, 1, 4);
  expect_c2r_gradient_is_its_adjoint({2, 3, 3}, {2, 1}, 2, 5);
  expect_c2r_gradient_is_its_adjoint({3, 2, 2}, {2, 0, 1}, 0, 3);
}

// Each backward is linear in the gradient and the adjoint of its forward, so its own gradient (by
// that gradient) is the forward again: double backward goes through the registry ops.
TEST(FftGradients, TheDoubleBackwardIsTheForward) {
  // Two-sided, the upper half of the last dim (4 and 3 entries) folds back in the backward.
  for (auto [dim, onesided] : {std::pair{Ints{0, 2}, true}, std::pair{Ints{0, 2}, false}, std::pair{Ints{2, 1}, false}}) {
    const Ints sizes{2, 3, 4};
    const Tensor x = leaf(doubles(wiggle(24), sizes));
    const Tensor y = r2c(x, dim, 1, onesided);
    const Tensor g = leaf(complexes(cwiggle(y.numel()), sizes_of(y)));
    const Tensor gx = autograd::grad({y}, {x}, {g}, /*retain_graph=*/true, /*create_graph=*/true).at(0);
    ASSERT_TRUE(gx.requires_grad());
    const Tensor v = doubles(wiggle(24, 0.5), sizes);
    expect_complex(grad_of(gx, g, v), r2c(v, dim, 1, onesided).to_vector<C>());
  }
  for (int64_t n : {4, 5}) {
    const Ints sizes{2, 3, 3}, dim{0, 2};
    const Tensor h = leaf(complexes(cwiggle(18), sizes));
    const Tensor y = c2r(h, dim, 2, n);
    const Tensor g = leaf(doubles(wiggle(y.numel()), sizes_of(y)));
    const Tensor gh = autograd::grad({y}, {h}, {g}, /*retain_graph=*/true, /*create_graph=*/true).at(0);
    ASSERT_TRUE(gh.requires_grad());
    const Tensor w = complexes(cwiggle(18), sizes);
    expect_values(grad_of(gh, g, w), values(c2r(w, dim, 2, n)));
  }
}

}  // namespace
}  // namespace opconform::reference
