// FFT: the real-to-complex and complex-to-real discrete Fourier transforms that torch.fft's real
// transforms (rfft, rfftn, irfft, irfftn, hfft, ihfft) lower to:
//   - _fft_r2c(self, dim, normalization, onesided): X[k] = s * sum_n x[n] exp(-2 pi i sum_d k_d n_d / N_d)
//     over the dims listed (N_d their sizes); onesided keeps the first N/2 + 1 entries of the last
//     dim listed (the others are the conjugates of mirrored ones);
//   - _fft_c2r(self, dim, normalization, last_dim_size): the real signal of N = last_dim_size
//     entries along the last dim listed whose onesided spectrum self is (Note [c2r reads a onesided
//     spectrum]).
// s is the scale of normalization (PyTorch's fft_norm_mode): 0 none, 1 1/sqrt(n), 2 1/n, n the
// product of the signal sizes. The kernels transform one dim at a time in complex128, each output
// entry a direct sum (O(N^2) per dim: clarity over speed), and round once. The output layout is
// PyTorch's CPU kernel's (Note [FFT output layout]).
//
// Note [c2r reads a onesided spectrum]: with m = N/2 + 1 entries h[k] along the last dim,
//   c2r(h)[n] = s * Re(sum over k of w[k_last] h[k] exp(+2 pi i sum_d k_d n_d / N_d)),
// w = 1 at k_last = 0 and at N/2 (N even), 2 in between: the inverse transform of h's Hermitian
// extension, the imaginary parts at DC and Nyquist ignored. PyTorch runs a complex inverse
// transform over the other dims, then a 1-d c2r along the last one, which is this same map.
//
// Gradients (PyTorch's fft_r2c_backward and fft_c2r_backward, written with registry ops): c2r's is
// r2c of the gradient with the entries w counts twice (1 .. N - m) doubled. r2c's is the real part
// of the inverse complex transform of the gradient zero-padded to N entries; Core ATen has no c2c,
// but by the Note that is c2r of the gradient with those entries halved. A two-sided gradient's
// upper half folds back by mirroring: Re(sum over k >= m of g[k] e^{+i t k n}) is, with k' = N - k,
// the same sum at -n over k' in 1 .. N - m, so it is c2r of the mirrored half, read at -n along
// the last dim. Both formulas call the two ops, so double backward works.
//
// Note [FFT output layout]: PyTorch's CPU kernels (MKL's _exec_fft) lay their output out as
// [the other dims, ordered by the input's strides, largest first; then the transformed dims]
// row-major: r2c's transformed dims ordered by stride too but the onesided one last; c2r runs the
// complex transform of the other dims first, whose output is laid out the same way, then the 1-d
// transform of the last dim on it. The fake kernels give the same layout (PyTorch's meta
// registrations give r2c a contiguous one instead; the CPU kernel's is what this follows).
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <numeric>

#include "opconform/core/fake_tensor.h"  // concrete_stand_in
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/detail/op_builder.h"
#include "opconform/reference/detail/op_support.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using namespace detail;
using Grads = std::vector<Tensor>;
using Ints = std::vector<int64_t>;
using SymInts = std::vector<SymInt>;

constexpr const char* kR2c = "aten::_fft_r2c";
constexpr const char* kC2r = "aten::_fft_c2r";

// ---- arguments ----

// The transformed dims, in the order given (the last one is the onesided one). PyTorch's kernels
// take dims as they are: a negative one, or one named twice, breaks them (an internal assert, a
// wrong shape), and so does an empty input (MKL refuses a transform of no elements).
Ints fft_dims(std::string_view op, const Tensor& self, const Ints& dim) {
  OPCONFORM_CHECK(self.numel() > 0, ErrorCode::kInvalidArgument, op,
                  ": argument 'self' must hold at least one element, got shape ", shape_string(self.sizes()));
  OPCONFORM_CHECK(!dim.empty(), ErrorCode::kInvalidArgument, op, ": argument 'dim' must name at least one dim");
  std::vector<bool> named(static_cast<size_t>(self.dim()), false);
  for (int64_t d : dim) {
    OPCONFORM_CHECK(d >= 0 && d < self.dim(), ErrorCode::kInvalidArgument, op, ": argument 'dim' ", shape_string(dim),
                    " must hold dims of 'self' (rank ", self.dim(), ") in [0, ", self.dim(), "); they are not wrapped");
    OPCONFORM_CHECK(!named[static_cast<size_t>(d)], ErrorCode::kInvalidArgument, op, ": argument 'dim' ",
                    shape_string(dim), " names dim ", d, " twice");
    named[static_cast<size_t>(d)] = true;
  }
  return dim;
}

// The scale of fft_norm_mode `normalization` for a signal of n elements: 0 none, 1 1/sqrt(n),
// 2 1/n. PyTorch's CPU kernel (MKL's plan) scales by 1/n for any value but 0 and 1; so does this.
double norm_scale(int64_t normalization, int64_t n) {
  if (normalization == 0) return 1.0;
  return normalization == 1 ? 1.0 / std::sqrt(static_cast<double>(n)) : 1.0 / static_cast<double>(n);
}

// The transform and its output shape (Note [Shape plans over SymInt]).
struct FftPlan {
  Ints dims;  // in the order given
  SymInts out_sizes;
  int64_t last = 0;  // dims.back()
  SymInt n;          // the full signal length along `last`
  SymInt half;       // n / 2 + 1: the onesided length
  SymInt signal;     // the element count of one signal (the product of its sizes), for the scale
};

// The scale of a plan's transform (the CPU kernels: concrete sizes).
double plan_scale(const FftPlan& p, int64_t normalization) { return norm_scale(normalization, p.signal.expect_int()); }

FftPlan plan_r2c(const Tensor& self, const Ints& dim, bool onesided) {
  OPCONFORM_CHECK(self.dtype() == DType::Float32 || self.dtype() == DType::Float64, ErrorCode::kInvalidArgument,
                  kR2c, ": argument 'self' must be float32 or float64, got ", name(self.dtype()));
  FftPlan p;
  p.dims = fft_dims(kR2c, self, dim);
  p.last = p.dims.back();
  p.out_sizes = self.sym_sizes();
  p.n = p.out_sizes[static_cast<size_t>(p.last)];
  p.half = floordiv(p.n, 2) + 1;
  p.signal = 1;
  for (int64_t d : p.dims) p.signal *= p.out_sizes[static_cast<size_t>(d)];
  if (onesided) p.out_sizes[static_cast<size_t>(p.last)] = p.half;
  return p;
}

// c2r reads the first n / 2 + 1 entries of the last dim; PyTorch's kernel also takes a full
// spectrum of n entries (reading the same ones).
FftPlan plan_c2r(const Tensor& self, const Ints& dim, int64_t last_dim_size) {
  OPCONFORM_CHECK(self.dtype() == DType::Complex64 || self.dtype() == DType::Complex128, ErrorCode::kInvalidArgument,
                  kC2r, ": argument 'self' must be complex64 or complex128, got ", name(self.dtype()));
  FftPlan p;
  p.dims = fft_dims(kC2r, self, dim);
  p.last = p.dims.back();
  OPCONFORM_CHECK(last_dim_size > 0, ErrorCode::kInvalidArgument, kC2r, ": argument 'last_dim_size' must be positive, got ",
                  last_dim_size);
  p.n = last_dim_size;
  p.half = last_dim_size / 2 + 1;
  p.out_sizes = self.sym_sizes();
  // Checked on the concrete size (a symbol's hint), recording no guard: PyTorch's meta kernel
  // has no such check, so a captured graph stays replayable at other sizes.
  const int64_t given = self.size(p.last);
  OPCONFORM_CHECK(given == p.half || given == p.n, ErrorCode::kInvalidArgument, kC2r, ": dim ", p.last,
                  " of 'self' ", shape_string(self.sizes()), " must hold last_dim_size / 2 + 1 = ", p.half,
                  " entries (or last_dim_size = ", p.n, "), got ", given);
  p.out_sizes[static_cast<size_t>(p.last)] = p.n;
  p.signal = 1;
  for (int64_t d : p.dims) p.signal *= p.out_sizes[static_cast<size_t>(d)];
  return p;
}

// ---- layout (Note [FFT output layout]) ----

// dims stably ordered by stride, largest first (std::sort of so few elements is an insertion sort
// in libstdc++, hence stable).
Ints by_stride(Ints dims, IntArrayRef strides) {
  std::stable_sort(dims.begin(), dims.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  return dims;
}

// The dim order (innermost first) of _exec_fft's output for an input with in_strides, transforming
// `dims` (in this order): the transformed dims row-major, innermost last of `dims`, and outside
// them the other dims as one collapsed batch dim.
Ints exec_fft_order(IntArrayRef in_strides, const Ints& dims) {
  const auto rank = static_cast<int64_t>(in_strides.size());
  std::vector<bool> transformed(static_cast<size_t>(rank), false);
  for (int64_t d : dims) transformed[static_cast<size_t>(d)] = true;
  // The other dims in the order libstdc++'s std::partition leaves them (it swaps from both ends),
  // then ordered by stride; only dims of equal stride keep that order.
  Ints order(static_cast<size_t>(rank));
  std::iota(order.begin(), order.end(), int64_t{0});
  auto first = order.begin(), end = order.end();
  while (true) {
    while (first != end && !transformed[static_cast<size_t>(*first)]) ++first;
    if (first == end) break;
    --end;
    while (first != end && transformed[static_cast<size_t>(*end)]) --end;
    if (first == end) break;
    std::iter_swap(first, end);
    ++first;
  }
  const Ints batch = by_stride(Ints(order.begin(), first), in_strides);
  Ints inner_first(dims.rbegin(), dims.rend());
  inner_first.insert(inner_first.end(), batch.rbegin(), batch.rend());
  return inner_first;
}

// The output strides (dense in the order above: Note [Dense strides] in core/strides.h; no size is
// 0, fft_dims refuses empty inputs).
SymInts r2c_strides(const Tensor& self, const FftPlan& p) {
  Ints sorted = by_stride(Ints(p.dims.begin(), p.dims.end() - 1), self.strides());
  sorted.push_back(p.last);
  return dense_strides<SymInt>(p.out_sizes, exec_fft_order(self.strides(), sorted));
}

SymInts c2r_strides(const Tensor& self, const FftPlan& p) {
  Ints in_strides(self.strides().begin(), self.strides().end());
  if (p.dims.size() > 1) {  // the layout of the complex transform of the other dims, run first
    const Ints other_dims = by_stride(Ints(p.dims.begin(), p.dims.end() - 1), self.strides());
    in_strides = dense_strides(self.sizes(), exec_fft_order(self.strides(), other_dims));
  }
  return dense_strides<SymInt>(p.out_sizes, exec_fft_order(in_strides, {p.last}));
}

// ---- kernels ----

// One 1-d transform along dim d of a row-major buffer of `sizes` (updated): entry k < out_len of
// the result is sum over j of weight[j] * in[j] * exp(sign * 2 pi i j k / period).
std::vector<complex128> transform_dim(const std::vector<complex128>& in, Ints& sizes, int64_t d, int64_t out_len,
                                      int64_t period, int sign, const std::vector<double>& weight = {}) {
  const auto du = static_cast<size_t>(d);
  const int64_t len = sizes[du];
  int64_t outer = 1, inner = 1;
  for (size_t a = 0; a < sizes.size(); ++a) {
    if (a < du) outer *= sizes[a];
    if (a > du) inner *= sizes[a];
  }
  // exp(sign * 2 pi i t / period) for t = j * k mod period: exact phases, however large j * k.
  std::vector<complex128> twiddle(static_cast<size_t>(period));
  for (int64_t t = 0; t < period; ++t)
    twiddle[static_cast<size_t>(t)] =
        std::polar(1.0, sign * 2 * std::numbers::pi * static_cast<double>(t) / static_cast<double>(period));
  std::vector<complex128> out(static_cast<size_t>(outer * out_len * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < out_len; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        complex128 sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          const complex128 x = in[static_cast<size_t>((o * len + j) * inner + i)];
          sum += (weight.empty() ? x : x * weight[static_cast<size_t>(j)]) * twiddle[static_cast<size_t>(j * k % period)];
        }
        out[static_cast<size_t>((o * out_len + k) * inner + i)] = sum;
      }
  sizes[du] = out_len;
  return out;
}

// The output of either kernel: the plan's sizes laid out as PyTorch's (Note [FFT output layout]).
Tensor empty_fft(const Tensor& self, const FftPlan& p, const SymInts& strides, DType dtype) {
  return empty_strided(p.out_sizes, strides, TensorOptions(dtype, self.device()));
}

Tensor r2c_cpu(const Tensor& self, const Ints& dim, int64_t normalization, bool onesided) {
  const FftPlan p = plan_r2c(self, dim, onesided);
  const int64_t n = p.n.expect_int();
  const double scale = plan_scale(p, normalization);
  Ints sizes(self.sizes().begin(), self.sizes().end());
  std::vector<complex128> x = self.to_vector<complex128>();
  for (size_t i = 0; i + 1 < p.dims.size(); ++i) {
    const int64_t d = p.dims[i];
    x = transform_dim(x, sizes, d, sizes[static_cast<size_t>(d)], sizes[static_cast<size_t>(d)], -1);
  }
  x = transform_dim(x, sizes, p.last, p.out_sizes[static_cast<size_t>(p.last)].expect_int(), n, -1);
  for (complex128& v : x) v *= scale;
  Tensor out = empty_fft(self, p, r2c_strides(self, p), to_complex(self.dtype()));
  out.copy_(from_vector<complex128>(x, sizes));  // converted once to the dtype
  return out;
}

// w of Note [c2r reads a onesided spectrum]: 1 at 0 and N/2 (N even), 2 in between.
std::vector<double> hermitian_weights(int64_t n) {
  std::vector<double> w(static_cast<size_t>(n / 2 + 1), 2.0);
  w.front() = 1.0;
  if (n % 2 == 0) w.back() = 1.0;
  return w;
}

Tensor c2r_cpu(const Tensor& self, const Ints& dim, int64_t normalization, int64_t last_dim_size) {
  const FftPlan p = plan_c2r(self, dim, last_dim_size);
  const int64_t n = p.n.expect_int();
  const double scale = plan_scale(p, normalization);
  const Tensor spectrum = self.narrow(p.last, 0, p.half.expect_int());  // a full spectrum's upper half is not read
  Ints sizes(spectrum.sizes().begin(), spectrum.sizes().end());
  std::vector<complex128> h = spectrum.to_vector<complex128>();
  for (size_t i = 0; i + 1 < p.dims.size(); ++i) {
    const int64_t d = p.dims[i];
    h = transform_dim(h, sizes, d, sizes[static_cast<size_t>(d)], sizes[static_cast<size_t>(d)], +1);
  }
  h = transform_dim(h, sizes, p.last, n, n, +1, hermitian_weights(n));
  std::vector<double> y(h.size());
  for (size_t i = 0; i < h.size(); ++i) y[i] = h[i].real() * scale;
  Tensor out = empty_fft(self, p, c2r_strides(self, p), to_real(self.dtype()));
  out.copy_(from_vector<double>(y, sizes));
  return out;
}

// ---- gradients ----

// A real [1, .., m, .., 1] tensor (m along dim `last` of a rank-`rank` tensor) holding `inner` at
// entries 1 .. n - m of the last dim (those c2r doubles) and `edge` elsewhere, by registry ops.
Tensor last_dim_weights(const Ops& ops, int64_t n, int64_t rank, int64_t last, double inner, double edge, DType dtype,
                        Device device) {
  const int64_t m = n / 2 + 1;
  const Tensor k = ops.arange(m, device);
  const Tensor doubled = ops.tensor("aten::logical_and", {ops.tensor("aten::ge.Scalar", {k, Scalar(int64_t{1})}),
                                                          ops.tensor("aten::le.Scalar", {k, Scalar(n - m)})});
  Ints shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(last)] = m;
  const Tensor w = ops.where(doubled, ops.full({}, Scalar(inner), dtype, device), ops.full({}, Scalar(edge), dtype, device));
  return ops.view(w, shape);
}

// (n - k) mod n for k < len: the index along the last dim that mirrors entry k.
Tensor mirrored(const Ops& ops, int64_t len, int64_t n, Device device) {
  return ops.tensor("aten::remainder.Scalar", {ops.add(ops.neg(ops.arange(len, device)), Scalar(n)), Scalar(n)});
}

struct FftArgs {
  Ints dims;
  int64_t normalization = 0;
  int64_t n = 0;  // the full signal length along the last dim
};

FftArgs saved_fft_args(const autograd::AutogradContext& ctx) {
  return {ctx.get("dims").to<Ints>(), ctx.get("normalization").to_int(), ctx.get("n").to_int()};
}

// r2c's gradient: c2r of the gradient with the entries c2r doubles halved; a two-sided gradient's
// upper half mirrored into the onesided range and its c2r read at -n (the file's note).
Tensor r2c_backward(const Ops& ops, const Tensor& grad, const FftArgs& a, bool onesided) {
  const int64_t m = a.n / 2 + 1, last = a.dims.back();
  const DType real = to_real(grad.dtype());
  auto c2r = [&](const Tensor& spectrum) {
    return ops.tensor(kC2r, {spectrum, IValue(a.dims), IValue(a.normalization), IValue(a.n)});
  };
  const Tensor low = onesided ? grad : ops.tensor("aten::slice.Tensor", {grad, IValue(last), IValue(int64_t{0}), IValue(m), IValue(int64_t{1})});
  Tensor gx = c2r(ops.mul(low, last_dim_weights(ops, a.n, grad.dim(), last, 0.5, 1.0, real, grad.device())));
  if (onesided) return gx;
  const Tensor up = ops.tensor("aten::index_select", {grad, IValue(last), mirrored(ops, m, a.n, grad.device())});
  const Tensor folded = c2r(ops.mul(up, last_dim_weights(ops, a.n, grad.dim(), last, 0.5, 0.0, real, grad.device())));
  return ops.add(gx, ops.tensor("aten::index_select", {folded, IValue(last), mirrored(ops, a.n, a.n, grad.device())}));
}

// c2r's gradient: r2c of the gradient, the entries c2r doubled doubled; zeros for the entries of
// a full spectrum that c2r does not read.
Tensor c2r_backward(const Ops& ops, const Tensor& grad, const FftArgs& a, int64_t given) {
  const int64_t last = a.dims.back();
  const Tensor spectrum = ops.tensor(kR2c, {grad, IValue(a.dims), IValue(a.normalization), IValue(true)});
  Tensor g = ops.mul(spectrum, last_dim_weights(ops, a.n, grad.dim(), last, 2.0, 1.0, grad.dtype(), grad.device()));
  if (given == a.n / 2 + 1) return g;
  Ints pad(2 * static_cast<size_t>(grad.dim() - last), 0);  // (before, after) from the last dim backwards
  pad[pad.size() - 1] = given - (a.n / 2 + 1);
  return ops.tensor("aten::constant_pad_nd", {g, IValue(pad), IValue(Scalar(0.0))});
}

// n is saved as the integer the formula's ops take (its value at the hint for a symbolic fake,
// which a captured backward bakes in).
void save_fft_args(autograd::AutogradContext& ctx, const FftPlan& p, int64_t normalization) {
  ctx.set("dims", IValue(p.dims));
  ctx.set("normalization", IValue(normalization));
  ctx.set("n", IValue(concrete_stand_in(p.n)));
}

// ---- vmap and samples ----

// The batch moved to the front, every dim shifted past it.
VmapRule fft_vmap_rule(Registry& registry, std::string op) {
  return [ops = Ops(registry), op](const VmapInfo&, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
    const Tensor& self = inputs[0].to_tensor();
    const int64_t bdim = *in_dims[0];
    Ints order{bdim};
    for (int64_t d = 0; d < self.dim(); ++d)
      if (d != bdim) order.push_back(d);
    Ints dims = inputs[1].to<Ints>();
    for (int64_t& d : dims)
      if (d >= 0) ++d;  // a negative dim stays one (and is refused)
    Stack args = inputs;
    args[0] = IValue(ops.permute(self, order));
    args[1] = IValue(std::move(dims));
    return std::make_pair(ops.call(op, std::move(args)), std::vector<std::optional<int64_t>>{int64_t{0}});
  };
}

// A shape of rank 1 to 3, sizes 1 to 5 (PyTorch refuses empty inputs), and 1 to 3 distinct dims of
// it in any order.
std::pair<Ints, Ints> draw_fft_shape(SampleDraw& draw) {
  Ints shape(static_cast<size_t>(draw.integer(1, 3)));
  for (int64_t& s : shape) s = draw.integer(1, 5);
  Ints pool(shape.size());
  std::iota(pool.begin(), pool.end(), int64_t{0});
  Ints dims(static_cast<size_t>(draw.integer(1, static_cast<int64_t>(shape.size()))));
  for (int64_t& d : dims) {
    const auto at = static_cast<size_t>(draw.integer(0, static_cast<int64_t>(pool.size()) - 1));
    d = pool[at];
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(at));
  }
  return {shape, dims};
}

Stack r2c_sample(SampleDraw& draw) {
  const auto [shape, dims] = draw_fft_shape(draw);
  return Stack{IValue(draw.tensor(shape, draw.dtype())), IValue(dims), IValue(draw.integer(0, 2)), IValue(draw.coin())};
}

Stack c2r_sample(SampleDraw& draw) {
  auto [shape, dims] = draw_fft_shape(draw);
  const int64_t n = draw.integer(1, 6);
  // The onesided n / 2 + 1 entries; now and then a full spectrum of n (its upper part unread).
  shape[static_cast<size_t>(dims.back())] = n >= 3 && draw.coin(10) ? n : n / 2 + 1;
  return Stack{IValue(draw.tensor(shape, draw.dtype())), IValue(dims), IValue(draw.integer(0, 2)), IValue(n)};
}

void register_r2c(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor", "fft",
              "the discrete Fourier transform of a real tensor over `dim` (exp(-2 pi i k n / N), scaled per "
              "normalization: 0 none, 1 1/sqrt(n), 2 1/n); onesided keeps the last dim's first N/2 + 1 entries");
  b.cpu(r2c_cpu)
      .fake([](const Tensor& self, Ints dim, int64_t, bool onesided) {
        const FftPlan p = plan_r2c(self, dim, onesided);
        return empty_fft(self, p, r2c_strides(self, p), to_complex(self.dtype()));
      })
      .dtypes({DType::Float32, DType::Float64});
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        return {r2c_backward(ops, g[0], saved_fft_args(ctx), ctx.get("onesided").to<bool>()), Tensor(), Tensor(), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        const Tensor self = inputs[0].to_tensor();
        save_fft_args(ctx, plan_r2c(self, inputs[1].to<Ints>(), inputs[3].to<bool>()), inputs[2].to_int());
        ctx.set("onesided", inputs[3]);
      },
      /*double_backward=*/true);
  b.vmap(fft_vmap_rule(r, kR2c));
  b.samples(r2c_sample);
}

void register_c2r(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor", "fft",
              "the real inverse discrete Fourier transform (exp(+2 pi i k n / N)) over `dim` of a onesided spectrum: "
              "the last dim's first last_dim_size/2 + 1 entries, the imaginary parts of its DC and Nyquist entries ignored");
  b.cpu(c2r_cpu)
      .fake([](const Tensor& self, Ints dim, int64_t, int64_t last_dim_size) {
        const FftPlan p = plan_c2r(self, dim, last_dim_size);
        return empty_fft(self, p, c2r_strides(self, p), to_real(self.dtype()));
      })
      .dtypes({DType::Complex64, DType::Complex128});
  b.autograd(
      [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
        return {c2r_backward(ops, g[0], saved_fft_args(ctx), ctx.get("given").to_int()), Tensor(), Tensor(), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
        const Tensor self = inputs[0].to_tensor();
        const FftPlan p = plan_c2r(self, inputs[1].to<Ints>(), inputs[3].to_int());
        save_fft_args(ctx, p, inputs[2].to_int());
        ctx.set("given", IValue(self.size(p.last)));
      },
      /*double_backward=*/true);
  b.vmap(fft_vmap_rule(r, kC2r));
  b.samples(c2r_sample);
}

}  // namespace

void register_fft(Library& lib) {
  register_r2c(lib);
  register_c2r(lib);
}

}  // namespace opconform::reference
