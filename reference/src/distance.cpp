// Distance: p-norm distances between the rows of matrices.
//   - _cdist_forward(x1 [..., P, M], x2 [..., R, M], p, compute_mode): [..., P, R], the distance of
//     each row of x1 to each row of x2, the batch dims broadcast;
//   - _pdist_forward(self [N, M], p): the N(N-1)/2 distances of rows i < j, pairs in row-major
//     order ((0,1), (0,2), ..., (1,2), ...).
//
// Note [p-norm distances]: the distance of rows a and b is (sum_k |a_k - b_k|^p)^(1/p); p = 0
// counts the non-zero differences, p = inf takes the largest. Kernels read float64 copies, sum
// in float64 and round once. compute_mode only picks PyTorch's algorithm for p = 2 (the matrix
// product |a|^2 - 2 a.b + |b|^2 when mode 1, or mode 0 / None with P or R > 25): the reference
// computes the exact distance whatever the mode, but takes float16 and bfloat16 only where that
// path runs, as PyTorch's CPU kernels do (the direct kernel has float32 and float64 alone). Two
// NaN rules follow the CPU kernels: a NaN difference makes the sum NaN (p = 0 too), but cdist's
// inf norm drops it (a scalar std::max from 0) while pdist's propagates it (a vector maximum).
//
// Note [p-norm gradients]: d dist / d(a_k - b_k) = sign(a_k - b_k) (|a_k - b_k| / dist)^(p-1),
// written with registry ops over the [..., P, R, M] differences so that double backward works
// (PyTorch's _cdist_backward / _pdist_backward have no derivative). PyTorch's conventions: 0 for
// p = 0 (the norm is piecewise constant), sign(diff) for p = 1, diff / dist for p = 2, and for
// p = inf the gradient goes to every difference whose magnitude is the maximum; 0 where the
// distance or the difference is 0 (sign(0) = 0 gives it; 1 stands in for the zero dist and
// ratio, so that no 0/0 or 0^(p-1) reaches the graph and its derivatives stay finite).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

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

const std::vector<DType> kDirectDtypes = {DType::Float32, DType::Float64};

// The p-norm of a - b over m elements (Note [p-norm distances]); drop_nan_max: cdist's inf norm.
double pnorm(const double* a, const double* b, int64_t m, double p, bool drop_nan_max) {
  double agg = 0;
  if (std::isinf(p)) {  // -inf too: PyTorch tests isinf(p) alone
    for (int64_t k = 0; k < m; ++k) {
      const double d = std::abs(a[k] - b[k]);
      if (drop_nan_max ? agg < d : (std::isnan(d) || d > agg)) agg = d;
    }
    return agg;
  }
  for (int64_t k = 0; k < m; ++k) {
    const double d = std::abs(a[k] - b[k]);
    if (p == 0) agg += std::isnan(d) ? d : (d != 0 ? 1.0 : 0.0);
    else if (p == 1) agg += d;
    else if (p == 2) agg += d * d;
    else agg += std::pow(d, p);
  }
  if (p == 0 || p == 1) return agg;
  return p == 2 ? std::sqrt(agg) : std::pow(agg, 1.0 / p);
}

// ---- cdist ----

// The output's shape (Note [Shape plans over SymInt]).
struct CdistPlan {
  SymInts batch;  // the broadcast batch sizes
  SymInt rows1, rows2, cols;
  SymInts sizes;  // batch + [rows1, rows2]
};

// The broadcast of two batch shapes (PyTorch's infer_size): a size 1 takes the other; two
// symbolic sizes must be equal (a guard). nullopt when they do not broadcast.
std::optional<SymInts> broadcast_batch(const SymInts& a, const SymInts& b) {
  const size_t n = std::max(a.size(), b.size());
  SymInts out(n);
  for (size_t i = 0; i < n; ++i) {
    const SymInt da = i < n - a.size() ? SymInt(1) : a[i - (n - a.size())];
    const SymInt db = i < n - b.size() ? SymInt(1) : b[i - (n - b.size())];
    if (da == 1) {
      out[i] = db;
    } else {
      if (db != 1 && da != db) return std::nullopt;
      out[i] = da;
    }
  }
  return out;
}

// PyTorch's checks, in its order (Distance.cpp's _cdist_forward and cdist_impl, then the kernel's).
CdistPlan plan_cdist(std::string_view op, const Tensor& x1, const Tensor& x2, double p, std::optional<int64_t> mode) {
  OPCONFORM_CHECK(x1.dim() >= 2, ErrorCode::kInvalidArgument, op,
                  ": cdist only supports at least 2D tensors, argument 'x1' got: ", x1.dim(), "D");
  OPCONFORM_CHECK(x2.dim() >= 2, ErrorCode::kInvalidArgument, op,
                  ": cdist only supports at least 2D tensors, argument 'x2' got: ", x2.dim(), "D");
  const SymInts s1 = x1.sym_sizes(), s2 = x2.sym_sizes();
  OPCONFORM_CHECK(s1.back() == s2.back(), ErrorCode::kInvalidArgument, op,
                  ": arguments 'x1' and 'x2' must have the same number of columns, got ", s1.back(), " and ", s2.back());
  OPCONFORM_CHECK(is_floating(x1.dtype()), ErrorCode::kInvalidArgument, op,
                  ": cdist only supports floating-point dtypes, argument 'x1' got: ", name(x1.dtype()));
  OPCONFORM_CHECK(is_floating(x2.dtype()), ErrorCode::kInvalidArgument, op,
                  ": cdist only supports floating-point dtypes, argument 'x2' got: ", name(x2.dtype()));
  OPCONFORM_CHECK(p >= 0, ErrorCode::kInvalidArgument, op, ": argument 'p' must be non-negative, got ", p);
  const int64_t m = mode.value_or(0);
  OPCONFORM_CHECK(m >= 0 && m <= 2, ErrorCode::kInvalidArgument, op,
                  ": argument 'compute_mode' must be None, 0, 1 or 2, got ", m);
  CdistPlan plan;
  auto batch_of = [](const SymInts& s) { return SymInts(s.begin(), s.end() - 2); };
  std::optional<SymInts> batch_sizes = broadcast_batch(batch_of(s1), batch_of(s2));
  OPCONFORM_CHECK(batch_sizes.has_value(), ErrorCode::kInvalidArgument, op, ": the batch sizes of 'x1' ",
                  shape_string(x1.sizes().first(s1.size() - 2)), " and 'x2' ", shape_string(x2.sizes().first(s2.size() - 2)),
                  " do not broadcast");
  plan.batch = std::move(*batch_sizes);
  plan.rows1 = s1[s1.size() - 2], plan.rows2 = s2[s2.size() - 2], plan.cols = s1.back();
  plan.sizes = plan.batch;
  plan.sizes.push_back(plan.rows1), plan.sizes.push_back(plan.rows2);
  SymInt batch = 1;
  for (const SymInt& s : plan.batch) batch *= s;
  // An empty result or no columns (zeros) takes no kernel, so no dtype rule applies there.
  if (batch == 0 || plan.rows1 == 0 || plan.rows2 == 0 || plan.cols == 0) return plan;
  const bool matrix_product = p == 2 && (m == 1 || (m == 0 && (plan.rows1 > 25 || plan.rows2 > 25)));
  if (!matrix_product) require_dtype(op, x1, kDirectDtypes, "x1");
  OPCONFORM_CHECK(x1.dtype() == x2.dtype(), ErrorCode::kInvalidArgument, op,
                  ": arguments 'x1' and 'x2' must have the same dtype, got ", name(x1.dtype()), " and ", name(x2.dtype()));
  return plan;
}

Tensor cdist_cpu(std::string_view op, const Tensor& x1, const Tensor& x2, double p, std::optional<int64_t> mode) {
  const CdistPlan plan = plan_cdist(op, x1, x2, p, mode);
  Tensor out = empty(plan.sizes, x1.options());  // row-major, as PyTorch's
  if (out.numel() == 0) return out;
  const int64_t rows1 = plan.rows1.expect_int(), rows2 = plan.rows2.expect_int(), cols = plan.cols.expect_int();
  Ints e1 = expect_ints(plan.batch), e2 = e1;
  e1.push_back(rows1), e1.push_back(cols);
  e2.push_back(rows2), e2.push_back(cols);
  const std::vector<double> a = x1.expand(e1).contiguous().to_vector<double>();
  const std::vector<double> b = x2.expand(e2).contiguous().to_vector<double>();
  if (cols == 0) {  // no columns: zeros, as PyTorch
    out.fill_(Scalar(0.0));
    return out;
  }
  std::vector<double> r(static_cast<size_t>(out.numel()));
  const int64_t batch = out.numel() / (rows1 * rows2);
  for (int64_t l = 0; l < batch; ++l)
    for (int64_t i = 0; i < rows1; ++i)
      for (int64_t j = 0; j < rows2; ++j)
        r[static_cast<size_t>((l * rows1 + i) * rows2 + j)] =
            pnorm(a.data() + (l * rows1 + i) * cols, b.data() + (l * rows2 + j) * cols, cols, p, /*drop_nan_max=*/true);
  out.copy_(from_vector<double>(r, expect_ints(plan.sizes)));
  return out;
}

Tensor cdist_fake(std::string_view op, const Tensor& x1, const Tensor& x2, double p, std::optional<int64_t> mode) {
  return empty(plan_cdist(op, x1, x2, p, mode).sizes, x1.options());
}

// ---- gradients (Note [p-norm gradients]) ----

// The gradient of dist by each difference, times grad: diff [..., M], dist and grad broadcast
// against it ([..., 1]).
Tensor pair_gradient(const Ops& ops, const Tensor& diff, const Tensor& dist, const Tensor& grad, double p) {
  if (p == 0) return ops.mul(ops.mul(diff, grad), Scalar(0.0));  // zero, recorded (double backward)
  const Tensor sign = ops.tensor("aten::sign", {diff});
  if (std::isinf(p)) {
    const Tensor at_max = ops.tensor("aten::eq.Tensor", {ops.tensor("aten::abs", {diff}), dist});
    return ops.mul(ops.mul(sign, ops.to(at_max, diff.dtype())), grad);
  }
  if (p == 1) return ops.mul(sign, grad);
  const Tensor safe_dist = ops.where(ops.tensor("aten::eq.Scalar", {dist, Scalar(0.0)}), ops.scalar_like(1.0, dist), dist);
  if (p == 2) return ops.mul(ops.div(diff, safe_dist), grad);
  const Tensor ratio = ops.div(ops.tensor("aten::abs", {diff}), safe_dist);
  const Tensor safe_ratio = ops.where(ops.tensor("aten::eq.Scalar", {diff, Scalar(0.0)}), ops.scalar_like(1.0, ratio), ratio);
  return ops.mul(ops.mul(sign, ops.tensor("aten::pow.Tensor_Scalar", {safe_ratio, Scalar(p - 1)})), grad);
}

// x1's gradient sums the pair terms over x2's rows, x2's the negated ones over x1's rows, each
// reduced to its operand's (broadcast) shape.
Grads cdist_backward(const Ops& ops, autograd::AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // x1, x2, result
  const Tensor &x1 = saved[0], &x2 = saved[1], &dist = saved[2];
  const double p = ctx.get("p").to_double();
  // diff[..., i, j, k] = x1[..., i, k] - x2[..., j, k]: [..., P, R, M]
  const Tensor diff = ops.sub(ops.unsqueeze(x1, x1.dim() - 1), ops.unsqueeze(x2, x2.dim() - 2));
  const Tensor term = pair_gradient(ops, diff, ops.unsqueeze(dist, dist.dim()), ops.unsqueeze(g[0], g[0].dim()), p);
  Tensor g1, g2;
  if (ctx.needs_input_grad(0)) g1 = ops.sum_to(ops.sum_dims(term, {term.dim() - 2}, false), x1.sizes());
  if (ctx.needs_input_grad(1)) g2 = ops.neg(ops.sum_to(ops.sum_dims(term, {term.dim() - 3}, false), x2.sizes()));
  return {g1, g2, Tensor(), Tensor()};
}

// ---- pdist ----

// N(N-1)/2, 0 for N = 0 and 1 too.
SymInt pair_count(const SymInt& n) { return floordiv(n * (n - 1), 2); }

// _pdist_forward checks neither the rank nor p (torch.pdist does): a 2-D self is required here
// (PyTorch reads a 3-D one as rows of its second dim); negative p takes the general formula.
// PyTorch refuses a non-contiguous self; the reference reads any layout (torch.pdist passes
// self.contiguous()).
void check_pdist(std::string_view op, const Tensor& self) {
  OPCONFORM_CHECK(self.dim() == 2, ErrorCode::kInvalidArgument, op, ": argument 'self' must be a 2-D [N, M] tensor, got shape ",
                  shape_string(self.sizes()));
  if (self.size(0) > 1 && self.size(1) > 0) require_dtype(op, self, kDirectDtypes);
}

Tensor pdist_cpu(std::string_view op, const Tensor& self, double p) {
  check_pdist(op, self);
  const int64_t n = self.size(0), m = self.size(1);
  Tensor out = empty(SymInts{pair_count(self.sym_sizes()[0])}, self.options());
  if (out.numel() == 0) return out;
  if (m == 0) {  // zeros, as PyTorch, whatever p (pow(0, 1/p) would be inf for p < 0)
    out.fill_(Scalar(0.0));
    return out;
  }
  const std::vector<double> x = self.contiguous().to_vector<double>();
  std::vector<double> r;
  r.reserve(static_cast<size_t>(out.numel()));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) r.push_back(pnorm(x.data() + i * m, x.data() + j * m, m, p, /*drop_nan_max=*/false));
  out.copy_(from_vector<double>(r, {out.numel()}));
  return out;
}

// The [C, N] matrix of the pairs: row k holds +1 at i and -1 at j for the k-th pair i < j, so
// S @ self holds the pairs' differences and S^T @ t gives each row the sum of its pairs' terms.
// Built by registry ops from arange: row i's pairs start at s(i) = i (2N - 1 - i) / 2 and number
// N - 1 - i; the k-th pair of row i has j = k - s(i) + i + 1.
Tensor pair_matrix(const Ops& ops, int64_t n, DType dtype, Device device) {
  const int64_t c = pair_count(n).expect_int();
  const Tensor i = ops.view(ops.arange(n, device), {1, n}), k = ops.view(ops.arange(c, device), {c, 1});
  const Tensor start = ops.tensor("aten::div.Scalar_mode", {ops.mul(i, ops.add(ops.neg(i), Scalar(2 * n - 1))),
                                                            Scalar(int64_t{2}), IValue(std::string("floor"))});
  const Tensor end = ops.add(ops.add(start, ops.neg(i)), Scalar(n - 1));
  const Tensor in_row = ops.tensor("aten::logical_and", {ops.tensor("aten::ge.Tensor", {k, start}),
                                                         ops.tensor("aten::lt.Tensor", {k, end})});
  const Tensor offset = ops.add(ops.sub(i, start), Scalar(int64_t{1}));  // i + 1 - s(i)
  const Tensor j = ops.add(k, ops.sum_dims(ops.mul(ops.to(in_row, DType::Int64), offset), {1}, true));
  return ops.sub(ops.to(in_row, dtype), ops.to(ops.tensor("aten::eq.Tensor", {i, j}), dtype));
}

Grads pdist_backward(const Ops& ops, autograd::AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // self, result
  const Tensor &self = saved[0], &dist = saved[1];
  const Tensor s = pair_matrix(ops, self.size(0), self.dtype(), self.device());
  const Tensor diff = ops.tensor("aten::mm", {s, self});  // [C, M]
  const Tensor term = pair_gradient(ops, diff, ops.unsqueeze(dist, 1), ops.unsqueeze(g[0], 1), ctx.get("p").to_double());
  return {ops.tensor("aten::mm", {ops.permute(s, {1, 0}), term}), Tensor()};
}

// ---- samples ----

// The special cases of the kernels and formulas (0, 1, 2, inf) and the general path between
// and beyond them. Beyond 2 an even p: for odd p the gradient d |d|^(p-2) / dist^(p-1) has a
// second derivative that jumps at d = 0, which the samples' exact ties in a column hit, and
// gradgradcheck's central differences are then off by eps times that (large where dist is small);
// for even p it is a polynomial in d.
double draw_p(SampleDraw& draw) {
  static constexpr double kP[] = {0.0, 0.5, 1.0, 1.5, 2.0, 4.0, std::numeric_limits<double>::infinity()};
  return kP[draw.integer(0, 6)];
}

// For 0 < p < 2 but 1, the norm (gradcheck) or its gradient (gradgradcheck) has a cusp where a
// difference is 0: |d|^p or |d|^(p-1) with an unbounded slope. Tiny non-zero differences (the
// generator's tiny and denormal specials) put the cusp within gradcheck's step, where finite
// differences cannot see that slope, so such samples hold 0 for magnitudes below 2^-8 (and are
// drawn writable: no stride-0 layout). Exact zeros are fine: the gradient there is PyTorch's 0.
Tensor draw_operand(SampleDraw& draw, const Ints& sizes, DType dtype, double p) {
  const bool cusp = p > 0 && p < 2 && p != 1;
  const Tensor t = draw.tensor(sizes, dtype, {}, /*mutable_input=*/cusp);
  if (!cusp || t.numel() == 0) return t;
  std::vector<double> v = t.to_vector<double>();
  for (double& x : v) x = std::abs(x) < 0x1p-8 ? 0.0 : x;  // NaN stays
  t.copy_(from_vector<double>(v, sizes));
  return t;
}

// Batch dims (up to 2 of size 1 or 2) broadcast between the operands; float16 and bfloat16 only
// on the matrix-product path (p = 2, compute_mode 1), the others with any p and mode.
Stack cdist_sample(SampleDraw& draw) {
  const DType dtype = draw.dtype();
  const bool low = dtype == DType::Float16 || dtype == DType::BFloat16;
  const double p = low ? 2.0 : draw_p(draw);
  Ints batch;
  for (int64_t d = draw.integer(0, 2); d > 0; --d) batch.push_back(draw.integer(1, 2));
  auto operand = [&](int64_t cols) {
    Ints sizes(batch.end() - draw.integer(0, static_cast<int64_t>(batch.size())), batch.end());
    for (int64_t& s : sizes) s = draw.coin(25) ? 1 : s;
    sizes.push_back(draw.size());
    sizes.push_back(cols);
    return sizes;
  };
  const int64_t cols = draw.size();
  const Ints s1 = operand(cols), s2 = operand(cols);
  const int64_t mode = low ? 1 : draw.integer(-1, 2);  // -1: None
  return Stack{IValue(draw_operand(draw, s1, dtype, p)), IValue(draw_operand(draw, s2, dtype, p)), IValue(p),
               mode < 0 ? IValue() : IValue(mode)};
}

void register_cdist(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor", "distance",
              "p-norm distance of each row of x1 [..., P, M] to each row of x2 [..., R, M]: [..., P, R], batch dims "
              "broadcast (p = 0 counts non-zero differences, p = inf takes the largest)");
  const std::string name = b.name();
  b.cpu([name](const Tensor& x1, const Tensor& x2, double p, std::optional<int64_t> mode) {
     return cdist_cpu(name, x1, x2, p, mode);
   })
      .fake([name](const Tensor& x1, const Tensor& x2, double p, std::optional<int64_t> mode) {
        return cdist_fake(name, x1, x2, p, mode);
      })
      .dtypes(kFloating)
      .rounding();
  b.autograd(with_ops(r, cdist_backward), [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
    save_inputs_and_outputs(ctx, inputs, outputs);
    ctx.set("p", inputs[2]);
  });
  b.samples(cdist_sample);
}

void register_pdist(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder b(lib, "aten::_pdist_forward(Tensor self, float p=2.) -> Tensor", "distance",
              "p-norm distances of the rows i < j of self [N, M]: [N(N-1)/2], pairs in row-major order");
  const std::string name = b.name();
  b.cpu([name](const Tensor& self, double p) { return pdist_cpu(name, self, p); })
      .fake([name](const Tensor& self, double) {
        check_pdist(name, self);
        return empty(SymInts{pair_count(self.sym_sizes()[0])}, self.options());
      })
      .dtypes(kDirectDtypes);
  b.autograd(with_ops(r, pdist_backward), [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
    save_inputs_and_outputs(ctx, inputs, outputs);
    ctx.set("p", inputs[1]);
  });
  b.samples([](SampleDraw& draw) {
    const DType dtype = draw.dtype();
    const int64_t n = draw.size(), m = draw.size();
    const double p = draw_p(draw);
    return Stack{IValue(draw_operand(draw, {n, m}, dtype, p)), IValue(p)};
  });
}

}  // namespace

void register_distance(Library& lib) {
  register_cdist(lib);
  register_pdist(lib);
}

}  // namespace opconform::reference
