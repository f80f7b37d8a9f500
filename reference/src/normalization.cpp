// Normalization: layer norm, group norm, batch norm in inference mode, and dropout.
//
// The norms read the input in float64 (row-major), normalize each row of their statistics —
// layer norm: the trailing normalized_shape; group norm: one group of channels of one sample —
// with the mean and the biased variance, and round once. Outputs are contiguous, as PyTorch's
// CPU kernels give them. Their formulas are the full gradients, the contributions of the mean
// and rstd outputs included, written with registry ops (so double backward works).
#include <cmath>
#include <limits>

#include "opconform/core/device_semantics.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/generator.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/detail/elementwise.h"
#include "opconform/reference/detail/op_builder.h"
#include "opconform/reference/detail/op_support.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using namespace detail;
using Grads = std::vector<Tensor>;
using Ints = std::vector<int64_t>;
using MaybeTensor = std::optional<Tensor>;

Ints sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }
int64_t product(const Ints& v, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < std::min(to, v.size()); ++i) p *= v[i];
  return p;
}

// The dtype of the statistics: the input's, or float32 when a float16/bfloat16 input comes with
// float32 parameters (PyTorch's "mixed type"). Any other mix is an error, as PyTorch's kernels.
DType parameter_dtype(std::string_view op, const Tensor& input,
                      const std::vector<std::pair<const MaybeTensor*, const char*>>& params) {
  require_dtype(op, input, kFloating, "input");
  const bool reduced = input.dtype() == DType::Float16 || input.dtype() == DType::BFloat16;
  std::optional<DType> common;
  for (const auto& [p, arg] : params) {
    if (!*p) continue;
    const DType d = (*p)->dtype();
    OPCONFORM_CHECK(d == input.dtype() || (reduced && d == DType::Float32), ErrorCode::kInvalidArgument, op,
                    ": argument '", arg, "' has dtype ", name(d), " but 'input' has dtype ", name(input.dtype()),
                    " (parameters take the input's dtype, or float32 for a float16/bfloat16 input)");
    OPCONFORM_CHECK(!common || *common == d, ErrorCode::kInvalidArgument, op, ": argument '", arg, "' has dtype ",
                    name(d), " but another parameter has dtype ", name(*common));
    common = d;
  }
  return common.value_or(input.dtype());
}

// The dtype of layer norm's and batch norm's saved statistics: the parameters' (cpu_dtype) on
// CPU, the accumulation dtype on CUDA — float32 for float16/bfloat16 input (Note
// [Device-dependent semantics] in core/device_semantics.h).
DType statistics_dtype(const Tensor& input, DType cpu_dtype) {
  if (!semantic_device(input).is_cuda()) return cpu_dtype;
  return input.dtype() == DType::Float16 || input.dtype() == DType::BFloat16 ? DType::Float32 : input.dtype();
}

void check_param_shape(std::string_view op, const MaybeTensor& p, const Ints& want, std::string_view arg) {
  if (!p) return;
  OPCONFORM_CHECK(sizes_of(*p) == want, ErrorCode::kInvalidArgument, op, ": argument '", arg, "' has shape ",
                  shape_string(p->sizes()), " but ", shape_string(want), " is expected");
}

// The values of an optional per-channel (or per-element) parameter, `fill` when None.
std::vector<double> values_or(const MaybeTensor& p, int64_t n, double fill) {
  return p ? p->to_vector<double>() : std::vector<double>(static_cast<size_t>(n), fill);
}

// Mean and biased variance of `rows` consecutive rows of `len` values (0/0 = NaN for empty rows).
struct Moments {
  std::vector<double> mean, var;
};
Moments row_moments(const std::vector<double>& x, int64_t rows, int64_t len) {
  Moments m{std::vector<double>(rows), std::vector<double>(rows)};
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * len;
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < len; ++i) sum += row[i];
    const double mean = sum / static_cast<double>(len);
    for (int64_t i = 0; i < len; ++i) squares += (row[i] - mean) * (row[i] - mean);
    m.mean[r] = mean;
    m.var[r] = squares / static_cast<double>(len);
  }
  return m;
}

// Each row of `len` values normalized with its moments, then scaled and shifted by the parameters
// k = param(row, i) of its elements: y = (x - mean) rstd w[k] + b[k], rstd = 1 / sqrt(var + eps).
struct NormalizedRows {
  std::vector<double> y, mean, rstd;
};
template <typename Param>
NormalizedRows normalize_rows(const std::vector<double>& x, int64_t rows, int64_t len, double eps,
                              const std::vector<double>& w, const std::vector<double>& b, Param param) {
  const Moments m = row_moments(x, rows, len);
  NormalizedRows out{std::vector<double>(x.size()), m.mean, std::vector<double>(rows)};
  for (int64_t r = 0; r < rows; ++r) {
    out.rstd[r] = 1 / std::sqrt(m.var[r] + eps);
    for (int64_t i = 0; i < len; ++i) {
      const size_t at = static_cast<size_t>(r * len + i), k = static_cast<size_t>(param(r, i));
      out.y[at] = (x[at] - m.mean[r]) * out.rstd[r] * w[k] + b[k];
    }
  }
  return out;
}

// A contiguous tensor of dtype d from float64 values in row-major order.
Tensor make(const std::vector<double>& values, const Ints& sizes, DType d) {
  return from_vector<double>(values, sizes).to(d);
}

// ---- formulas ----

Tensor mean_dims(const Ops& ops, const Tensor& t, Ints dims) {
  return ops.tensor("aten::mean.dim", {t, IValue(std::move(dims)), IValue(true)});
}
// Sum over dims (none: t itself; sum.dim_IntList reads an empty list as "all dims").
Tensor sum_over(const Ops& ops, const Tensor& t, const Ints& dims, bool keepdim) {
  return dims.empty() ? t : ops.sum_dims(t, dims, keepdim);
}

// The gradient of the input of a normalization over `dims` (x̂ = (x - mean) rstd, mean and rstd
// keepdim) through x̂ alone, given the gradient gx̂ of x̂: rstd (gx̂ - E[gx̂] - x̂ E[gx̂ x̂]). This is
// what the norms' backward ops compute.
Tensor normalized_grad(const Ops& ops, const Tensor& gxhat, const Tensor& xhat, const Tensor& rstd, const Ints& dims) {
  Tensor centered = ops.sub(gxhat, mean_dims(ops, gxhat, dims));
  Tensor projected = ops.sub(centered, ops.mul(xhat, mean_dims(ops, ops.mul(gxhat, xhat), dims)));
  return ops.mul(rstd, projected);
}

// The whole gradient of the input, the mean and rstd outputs' gradients (n values each) included:
//   normalized_grad + g_mean / n - g_rstd rstd² x̂ / n
Tensor normalized_input_grad(const Ops& ops, const Tensor& gxhat, const Tensor& xhat, const Tensor& rstd,
                             const Tensor& g_mean, const Tensor& g_rstd, const Ints& dims, int64_t n) {
  Tensor gx = normalized_grad(ops, gxhat, xhat, rstd, dims);
  const double inv_n = 1.0 / static_cast<double>(n);
  gx = ops.add(gx, ops.mul(g_mean, inv_n));
  return ops.add(gx, ops.mul(ops.mul(ops.mul(g_rstd, ops.mul(rstd, rstd)), xhat), -inv_n));
}

// A fake input with symbolic sizes: the fake kernels' contiguous results take its symbolic
// sizes, dims from `kept` on (kept < 0: every dim) becoming 1.
bool symbolic(const Tensor& t) { return t.is_fake() && t.has_symbolic_sizes(); }

Tensor symbolic_like(const Tensor& input, DType dtype, int64_t kept = -1) {
  std::vector<SymInt> sizes = input.sym_sizes();
  if (kept >= 0) {
    for (size_t d = static_cast<size_t>(kept); d < sizes.size(); ++d) sizes[d] = SymInt(1);
  }
  return make_fake_tensor(std::move(sizes), dtype, input.device());
}

// ---- layer norm ----

struct LayerNormPlan {
  int64_t rows, len, axis;
  Ints stat_sizes;
  DType stat_dtype;
};

LayerNormPlan plan_layer_norm(std::string_view op, const Tensor& input, const Ints& normalized, const MaybeTensor& weight,
                              const MaybeTensor& bias) {
  const DType stat = statistics_dtype(input, parameter_dtype(op, input, {{&weight, "weight"}, {&bias, "bias"}}));
  const int64_t k = static_cast<int64_t>(normalized.size());
  const Ints sizes = sizes_of(input);
  OPCONFORM_CHECK(k >= 1, ErrorCode::kInvalidArgument, op, ": argument 'normalized_shape' must have at least one element");
  const int64_t axis = input.dim() - k;
  OPCONFORM_CHECK(axis >= 0 && Ints(sizes.begin() + std::max<int64_t>(axis, 0), sizes.end()) == normalized,
                  ErrorCode::kInvalidArgument, op, ": argument 'normalized_shape' ", shape_string(normalized),
                  " must be the trailing sizes of 'input', which has shape ", shape_string(sizes));
  check_param_shape(op, weight, normalized, "weight");
  check_param_shape(op, bias, normalized, "bias");
  Ints stat_sizes(sizes.begin(), sizes.begin() + axis);
  stat_sizes.resize(sizes.size(), 1);
  return {product(sizes, 0, axis), product(normalized), axis, stat_sizes, stat};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_cpu(std::string_view op, const Tensor& input, const Ints& normalized,
                                                  const MaybeTensor& weight, const MaybeTensor& bias, double eps) {
  const LayerNormPlan p = plan_layer_norm(op, input, normalized, weight, bias);
  const std::vector<double> x = input.to_vector<double>();
  const std::vector<double> w = values_or(weight, p.len, 1), b = values_or(bias, p.len, 0);
  const NormalizedRows n = normalize_rows(x, p.rows, p.len, eps, w, b, [](int64_t, int64_t i) { return i; });
  return {make(n.y, sizes_of(input), input.dtype()), make(n.mean, p.stat_sizes, p.stat_dtype),
          make(n.rstd, p.stat_sizes, p.stat_dtype)};
}

Grads layer_norm_backward(const Ops& ops, autograd::AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // input, [weight], [bias], out, mean, rstd
  const Tensor& x = saved[0];
  const bool has_weight = ctx.get("has_weight").to_bool();
  const Tensor weight = has_weight ? saved[1] : Tensor();
  const Tensor& mean = saved[saved.size() - 2];
  const Tensor& rstd = saved.back();
  const int64_t axis = ctx.get("axis").to_int();
  Ints normalized_dims, leading_dims;
  for (int64_t d = 0; d < x.dim(); ++d) (d < axis ? leading_dims : normalized_dims).push_back(d);
  const int64_t n = product(sizes_of(x), axis);

  Tensor xhat = ops.mul(ops.sub(x, mean), rstd);
  Tensor gxhat = has_weight ? ops.mul(g[0], weight) : g[0];
  Grads out(5);
  if (ctx.needs_input_grad(0)) out[0] = normalized_input_grad(ops, gxhat, xhat, rstd, g[1], g[2], normalized_dims, n);
  if (ctx.needs_input_grad(2)) out[2] = sum_over(ops, ops.mul(g[0], xhat), leading_dims, false);
  if (ctx.needs_input_grad(3)) out[3] = sum_over(ops, g[0], leading_dims, false);
  return out;
}

// ---- group norm ----

struct GroupNormPlan {
  int64_t rows, len, channels_per_group;
  DType stat_dtype;
};

GroupNormPlan plan_group_norm(std::string_view op, const Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias,
                              int64_t n, int64_t c, int64_t hxw, int64_t group) {
  const DType stat = parameter_dtype(op, input, {{&weight, "weight"}, {&bias, "bias"}});
  OPCONFORM_CHECK(input.dim() >= 2, ErrorCode::kInvalidArgument, op, ": argument 'input' must have at least 2 dims (N, C, ...), got shape ",
                  shape_string(input.sizes()));
  OPCONFORM_CHECK(input.size(0) == n && input.size(1) == c && input.numel() == n * c * hxw, ErrorCode::kInvalidArgument, op,
                  ": arguments 'N' (", n, "), 'C' (", c, ") and 'HxW' (", hxw, ") do not describe 'input' of shape ",
                  shape_string(input.sizes()));
  OPCONFORM_CHECK(group > 0 && c % group == 0, ErrorCode::kInvalidArgument, op, ": argument 'group' (", group,
                  ") must be positive and divide the number of channels (", c, ")");
  check_param_shape(op, weight, {c}, "weight");
  check_param_shape(op, bias, {c}, "bias");
  return {n * group, c / group * hxw, c / group, stat};
}

std::tuple<Tensor, Tensor, Tensor> group_norm_cpu(std::string_view op, const Tensor& input, const MaybeTensor& weight,
                                                  const MaybeTensor& bias, int64_t n, int64_t c, int64_t hxw,
                                                  int64_t group, double eps) {
  const GroupNormPlan p = plan_group_norm(op, input, weight, bias, n, c, hxw, group);
  const std::vector<double> x = input.to_vector<double>();
  const std::vector<double> w = values_or(weight, c, 1), b = values_or(bias, c, 0);
  // A row: one group of one sample; its elements' parameters are their channels'.
  const NormalizedRows rows = normalize_rows(x, p.rows, p.len, eps, w, b, [&](int64_t r, int64_t i) {
    return (r % group) * p.channels_per_group + i / std::max<int64_t>(hxw, 1);
  });
  return {make(rows.y, sizes_of(input), input.dtype()), make(rows.mean, {n, group}, p.stat_dtype),
          make(rows.rstd, {n, group}, p.stat_dtype)};
}

Grads group_norm_backward(const Ops& ops, autograd::AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // input, [weight], [bias], out, mean, rstd
  const Tensor& x = saved[0];
  const bool has_weight = ctx.get("has_weight").to_bool();
  const int64_t n = saved_argument(ctx, 3).to_int(), c = saved_argument(ctx, 4).to_int(), hxw = saved_argument(ctx, 5).to_int(),
                group = saved_argument(ctx, 6).to_int();
  const int64_t len = c / group * hxw;
  auto rows = [&](const Tensor& t) { return ops.reshape(t, {n, group, len}); };
  auto channels = [&](const Tensor& t) { return ops.reshape(t, {n, c, hxw}); };
  auto stat = [&](const Tensor& t) { return ops.reshape(t, {n, group, 1}); };
  const Tensor mean = stat(saved[saved.size() - 2]), rstd = stat(saved.back());

  Tensor xhat = ops.mul(ops.sub(rows(x), mean), rstd);
  Tensor gxhat = has_weight ? rows(ops.mul(channels(g[0]), ops.reshape(saved[1], {1, c, 1}))) : rows(g[0]);
  Grads out(8);
  if (ctx.needs_input_grad(0)) {
    Tensor gx = normalized_input_grad(ops, gxhat, xhat, rstd, stat(g[1]), stat(g[2]), {2}, len);
    out[0] = ops.view(gx, sizes_of(x));
  }
  if (ctx.needs_input_grad(1)) out[1] = ops.sum_dims(ops.mul(channels(g[0]), channels(xhat)), {0, 2}, false);
  if (ctx.needs_input_grad(2)) out[2] = ops.sum_dims(channels(g[0]), {0, 2}, false);
  return out;
}

// ---- batch norm (inference) ----

// The checks of every batch norm (running statistics where the op has them); the statistics' dtype.
DType plan_batch_norm(std::string_view op, const Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias,
                      const MaybeTensor& rm = std::nullopt, const MaybeTensor& rv = std::nullopt) {
  const DType stat = parameter_dtype(
      op, input, {{&weight, "weight"}, {&bias, "bias"}, {&rm, "running_mean"}, {&rv, "running_var"}});
  OPCONFORM_CHECK(input.dim() >= 2, ErrorCode::kInvalidArgument, op,
                  ": argument 'input' must have at least 2 dims (N, C, ...), got shape ", shape_string(input.sizes()));
  const Ints channels{input.size(1)};
  check_param_shape(op, weight, channels, "weight");
  check_param_shape(op, bias, channels, "bias");
  check_param_shape(op, rm, channels, "running_mean");
  check_param_shape(op, rv, channels, "running_var");
  return statistics_dtype(input, stat);
}

// The 2nd and 3rd results of batch norm in eval mode: empty on CPU; on CUDA the running mean and
// 1 / sqrt(running_var + eps) (Note [Device-dependent semantics]).
std::pair<Tensor, Tensor> eval_statistics(const Tensor& input, DType stat, const Tensor& running_mean,
                                          const Tensor& running_var, double eps) {
  const TensorOptions stats(stat, input.device());
  if (!semantic_device(input).is_cuda()) return {empty({0}, stats), empty({0}, stats)};
  if (input.is_fake()) {
    auto like = [&](const Tensor& t) { return symbolic(t) ? symbolic_like(t, stat) : empty_like(t, stats); };
    return {like(running_mean), like(running_var)};
  }
  std::vector<double> invstd = running_var.to_vector<double>();
  for (double& v : invstd) v = 1 / std::sqrt(v + eps);
  return {running_mean.to(stat).clone(), make(invstd, sizes_of(running_var), stat)};
}

// The channel dim of every element of a contiguous tensor of these sizes.
int64_t channel_of(int64_t flat, const Ints& sizes) { return flat / product(sizes, 2) % sizes[1]; }

// The shape [1, C, 1, ...] a per-channel parameter broadcasts as.
Ints channel_shape(const Tensor& input) {
  Ints s(static_cast<size_t>(input.dim()), 1);
  s[1] = input.size(1);
  return s;
}

Grads batch_norm_backward(const Ops& ops, autograd::AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // input, [weight], [bias], running_mean, running_var
  const Tensor& x = saved[0];
  const bool has_weight = ctx.get("has_weight").to_bool(), has_bias = ctx.get("has_bias").to_bool();
  const size_t stats = 1 + has_weight + has_bias;
  const double eps = ctx.get("eps").to_double();  // set by each batch norm's setup_context
  const Ints shape = channel_shape(x), dims = non_channel_dims(x.dim());
  auto per_channel = [&](const Tensor& t) { return ops.reshape(t, shape); };
  const Tensor mean = per_channel(saved[stats]);
  const Tensor inv_std = ops.tensor("aten::rsqrt", {ops.add(per_channel(saved[stats + 1]), eps)});
  Tensor xhat = ops.mul(ops.sub(x, mean), inv_std);
  Tensor gxhat = has_weight ? ops.mul(g[0], per_channel(saved[1])) : g[0];
  Tensor gx = ops.mul(gxhat, inv_std);
  Grads out(static_cast<size_t>(ctx.get("arguments").to_int()));
  if (ctx.needs_input_grad(0)) out[0] = gx;
  if (ctx.needs_input_grad(1)) out[1] = ops.sum_dims(ops.mul(g[0], xhat), dims, false);
  if (ctx.needs_input_grad(2)) out[2] = ops.sum_dims(g[0], dims, false);
  // d/d running_mean = -sum(g w / s); d/d running_var = -sum(g w x̂) / (2 (var + eps))
  if (ctx.needs_input_grad(3)) out[3] = ops.neg(ops.sum_dims(gx, dims, false));
  if (ctx.needs_input_grad(4)) {
    Tensor scaled = ops.mul(ops.mul(gxhat, xhat), ops.mul(ops.mul(inv_std, inv_std), -0.5));
    out[4] = ops.sum_dims(scaled, dims, false);
  }
  return out;
}

// setup_context for the norms: tensor inputs and outputs saved, which optional parameters were
// given, and the other arguments.
void save_norm_context(autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs,
                       const std::vector<std::pair<size_t, const char*>>& optional_params) {
  save_inputs_and_outputs(ctx, inputs, outputs);
  for (const auto& [i, key] : optional_params) ctx.set(key, IValue(!inputs[i].is_none()));
  save_arguments(ctx, inputs);
}

// ---- the norms' backward ops (Note [Backward ops as composites] in op_support.h) ----

// Rows of `len` elements with given statistics (one mean and rstd per row; they need not be the
// rows' own) and gradients g of the normalized-and-scaled output, k = param(r, i) the parameter
// index of an element: x̂ = (x - mean) rstd, gx̂ = g w[k],
//   dx = rstd (gx̂ - mean_row(gx̂) - x̂ mean_row(gx̂ x̂)),  dw[k] = Σ g x̂,  db[k] = Σ g.
struct RowGradients {
  std::vector<double> dx, dw, db;
};
template <typename Param>
RowGradients normalized_rows_backward(const std::vector<double>& g, const std::vector<double>& x, const std::vector<double>& mean,
                                      const std::vector<double>& rstd, int64_t len, const std::vector<double>& w,
                                      Param param) {
  RowGradients out{std::vector<double>(x.size()), std::vector<double>(w.size(), 0.0), std::vector<double>(w.size(), 0.0)};
  for (size_t r = 0; r < mean.size(); ++r) {
    double sum_gxhat = 0, sum_gxhat_xhat = 0;
    for (int64_t i = 0; i < len; ++i) {
      const size_t at = r * static_cast<size_t>(len) + static_cast<size_t>(i), k = static_cast<size_t>(param(r, i));
      const double xhat = (x[at] - mean[r]) * rstd[r], gxhat = g[at] * w[k];
      sum_gxhat += gxhat;
      sum_gxhat_xhat += gxhat * xhat;
      out.dw[k] += g[at] * xhat;
      out.db[k] += g[at];
    }
    const double n = static_cast<double>(len);
    for (int64_t i = 0; i < len; ++i) {
      const size_t at = r * static_cast<size_t>(len) + static_cast<size_t>(i), k = static_cast<size_t>(param(r, i));
      const double xhat = (x[at] - mean[r]) * rstd[r];
      out.dx[at] = rstd[r] * (g[at] * w[k] - sum_gxhat / n - xhat * sum_gxhat_xhat / n);
    }
  }
  return out;
}

// A backward op's checks of grad_out (the input's shape and dtype) and of the statistics (`rows`
// values each, floating).
void check_norm_backward_inputs(std::string_view op, const Tensor& grad, const Tensor& input, const Tensor& mean,
                                const Tensor& rstd, int64_t rows) {
  OPCONFORM_CHECK(sizes_of(grad) == sizes_of(input) && grad.dtype() == input.dtype(), ErrorCode::kInvalidArgument, op,
                  ": argument 'grad_out' must have the shape and dtype of 'input' (", shape_string(input.sizes()), " ",
                  name(input.dtype()), "), got ", shape_string(grad.sizes()), " ", name(grad.dtype()));
  for (const auto& [t, arg] : {std::pair{&mean, "mean"}, std::pair{&rstd, "rstd"}}) {
    require_dtype(op, *t, kFloating, arg);
    OPCONFORM_CHECK(t->numel() == rows, ErrorCode::kInvalidArgument, op, ": argument '", arg, "' must have ", rows,
                    " elements (one per normalized row), got shape ", shape_string(t->sizes()));
  }
}

// The results of a norm's backward op from float64 values: dx in the input's dtype, dw and db
// (parameter shape) in the parameters' dtype, each only where output_mask asks for it.
std::tuple<Tensor, Tensor, Tensor> norm_backward_results(const RowGradients& grads, const std::vector<bool>& mask,
                                                         const Tensor& input, const Ints& param_sizes, DType param_dtype) {
  return {mask[0] ? make(grads.dx, sizes_of(input), input.dtype()) : Tensor(),
          mask[1] ? make(grads.dw, param_sizes, param_dtype) : Tensor(),
          mask[2] ? make(grads.db, param_sizes, param_dtype) : Tensor()};
}

std::tuple<Tensor, Tensor, Tensor> empty_norm_backward_results(const std::vector<bool>& mask, const Tensor& input,
                                                               const Ints& param_sizes, DType param_dtype) {
  const TensorOptions params(param_dtype, input.device());
  return {mask[0] ? (symbolic(input) ? symbolic_like(input, input.dtype()) : empty(sizes_of(input), input.options())) : Tensor(),
          mask[1] ? empty(param_sizes, params) : Tensor(), mask[2] ? empty(param_sizes, params) : Tensor()};
}

// The composites' common part, in float64 (rounded once at the end, as the CPU kernels): from
// the rows' g, x̂, gx̂ and rstd (each op shapes its rows; `dims` are the normalized ones), the
// results where output_mask asks, per_param summing a row-shaped tensor to the parameters' shape.
struct NormBackwardComposite {
  Tensor g, xhat, gxhat, rstd;
};
Stack norm_backward_outputs(const Ops& ops, const NormBackwardComposite& c, const std::vector<bool>& mask, const Ints& dims,
                            const Tensor& input, const std::function<Tensor(const Tensor&)>& per_param, DType param_dtype) {
  Stack out(3, IValue(Tensor()));
  if (mask[0]) out[0] = IValue(ops.to(ops.reshape(normalized_grad(ops, c.gxhat, c.xhat, c.rstd, dims), sizes_of(input)), input.dtype()));
  if (mask[1]) out[1] = IValue(ops.to(per_param(ops.mul(c.g, c.xhat)), param_dtype));
  // per_param always sums (over the rows), so neither result aliases grad_out.
  if (mask[2]) out[2] = IValue(ops.to(per_param(c.g), param_dtype));
  return out;
}

// ---- dropout ----

bool is_training(const std::optional<bool>& train) { return !train || *train; }

// The layouts PyTorch gives dropout's results: in training, output = input * mask (TensorIterator
// order of the input and the contiguous mask) and a contiguous mask; in eval, clones of the input.
std::pair<Tensor, Tensor> empty_dropout_results(std::string_view op, const Tensor& input, double p,
                                                const std::optional<bool>& train) {
  require_dtype(op, input, kFloating, "input");
  const Ints sizes = sizes_of(input);
  if (is_training(train)) {
    OPCONFORM_CHECK(p >= 0 && p <= 1, ErrorCode::kInvalidArgument, op, ": argument 'p' must be in [0, 1], got ", p);
    Tensor mask = symbolic(input) ? symbolic_like(input, DType::Bool) : empty(sizes, TensorOptions(DType::Bool, input.device()));
    return {empty_elementwise({input, mask}, input.dtype(), op), mask};
  }
  if (symbolic(input)) {
    const std::vector<SymInt> sym_sizes = input.sym_sizes();
    const std::vector<SymInt> strides =
        input.is_non_overlapping_and_dense() ? input.sym_strides() : contiguous_strides(sym_sizes);
    return {make_fake_tensor(sym_sizes, input.dtype(), input.device(), strides),
            make_fake_tensor(sym_sizes, DType::Bool, input.device(), strides)};
  }
  const Ints strides = input.is_non_overlapping_and_dense() ? Ints(input.strides().begin(), input.strides().end())
                                                             : contiguous_strides(sizes);
  return {empty_strided(sizes, strides, input.options()), empty_strided(sizes, strides, TensorOptions(DType::Bool, input.device()))};
}

double dropout_scale(double p, const std::optional<bool>& train) {
  if (!is_training(train)) return 1;
  return p == 1 ? 0 : 1 / (1 - p);
}

// The mask: element k (row-major) is kept when the k-th uniform draw is below 1 - p.
std::tuple<Tensor, Tensor> dropout_cpu(std::string_view op, const Tensor& input, double p, const std::optional<bool>& train) {
  auto [out, mask] = empty_dropout_results(op, input, p, train);
  const std::vector<double> x = input.to_vector<double>();
  std::vector<double> y(x.size());
  std::vector<bool> keep(x.size(), true);
  const double scale = dropout_scale(p, train);
  for (size_t k = 0; k < x.size(); ++k) {
    if (is_training(train)) keep[k] = default_generator().uniform() < 1 - p;
    y[k] = x[k] * (keep[k] ? 1.0 : 0.0) * scale;
  }
  const Ints sizes = sizes_of(input);
  out.copy_(from_vector<double>(y, sizes));
  Tensor kept = empty(sizes, TensorOptions(DType::Bool));
  bool* flags = kept.mutable_data_ptr<bool>();
  for (size_t k = 0; k < keep.size(); ++k) flags[k] = keep[k];
  mask.copy_(kept);
  return {out, mask};
}

// ---- sample builders ----

IValue maybe_param(SampleDraw& draw, const Ints& sizes, DType d, const ValueConstraint& values = {}) {
  return draw.coin(75) ? IValue(draw.tensor(sizes, d, values)) : IValue();
}
IValue draw_eps(SampleDraw& draw) { return IValue(draw.real(1e-5, 0.1)); }


const std::string kFamily = "normalization";

// native_layer_norm.
void register_layer_norm(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib,
                "aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) "
                "-> (Tensor, Tensor, Tensor)",
                kFamily, "(x - mean) / sqrt(var + eps) * weight + bias over the trailing normalized_shape; returns (out, mean, rstd)");
    const std::string name = b.name();
    b.cpu([name](const Tensor& input, const Ints& normalized, const MaybeTensor& weight, const MaybeTensor& bias,
                 double eps) { return layer_norm_cpu(name, input, normalized, weight, bias, eps); })
        .fake([name](const Tensor& input, const Ints& normalized, const MaybeTensor& weight, const MaybeTensor& bias,
                     double) {
          const LayerNormPlan p = plan_layer_norm(name, input, normalized, weight, bias);
          const TensorOptions stats(p.stat_dtype, input.device());
          if (symbolic(input)) {
            const int64_t axis = input.dim() - static_cast<int64_t>(normalized.size());
            return std::make_tuple(symbolic_like(input, input.dtype()), symbolic_like(input, p.stat_dtype, axis),
                                   symbolic_like(input, p.stat_dtype, axis));
          }
          return std::make_tuple(empty_like(input), empty(p.stat_sizes, stats), empty(p.stat_sizes, stats));
        })
        .autograd(with_ops(r, layer_norm_backward),
                  [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
                    save_norm_context(ctx, inputs, outputs, {{2, "has_weight"}});
                    const Tensor& x = inputs[0].to_tensor();
                    ctx.set("axis", IValue(x.dim() - static_cast<int64_t>(inputs[1].to<Ints>().size())));
                  })
        .samples([](SampleDraw& draw) {
          const DType d = draw.dtype();
          const Ints shape = draw.shape(1, 4);
          const int64_t k = draw.integer(1, static_cast<int64_t>(shape.size()));
          const Ints normalized(shape.end() - k, shape.end());
          Tensor input = draw.tensor(shape, d);
          return Stack{IValue(input), IValue(normalized), maybe_param(draw, normalized, d), maybe_param(draw, normalized, d),
                       draw_eps(draw)};
        })
        .dtypes(kFloating);
  }
}

// native_layer_norm_backward: native_layer_norm's gradient through its output (PyTorch's formula
// passes mean and rstd's own gradients apart), from the given statistics.
void register_layer_norm_backward(Library& lib) {
  OpBuilder b(lib,
              "aten::native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, "
              "Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
              kFamily, "the gradients of native_layer_norm's output by input, weight and bias (each where output_mask "
                       "asks), from the given mean and rstd; weight/bias gradients without the parameter are those of "
                       "a weight of ones and a bias of zeros");
  const std::string name = b.name();
  auto plan = [name](const Tensor& grad, const Tensor& input, const Ints& normalized, const Tensor& mean, const Tensor& rstd,
                     const MaybeTensor& weight, const MaybeTensor& bias) {
    const LayerNormPlan p = plan_layer_norm(name, input, normalized, weight, bias);
    check_norm_backward_inputs(name, grad, input, mean, rstd, p.rows);
    return p;
  };
  b.cpu([plan](const Tensor& grad, const Tensor& input, const Ints& normalized, const Tensor& mean, const Tensor& rstd,
               const MaybeTensor& weight, const MaybeTensor& bias, std::vector<bool> mask) {
     const LayerNormPlan p = plan(grad, input, normalized, mean, rstd, weight, bias);
     const RowGradients grads =
         normalized_rows_backward(grad.to_vector<double>(), input.to_vector<double>(), mean.to_vector<double>(),
                                  rstd.to_vector<double>(), p.len, values_or(weight, p.len, 1),
                                  [](size_t, int64_t i) { return i; });
     return norm_backward_results(grads, mask, input, normalized, p.stat_dtype);
   })
      .fake([plan](const Tensor& grad, const Tensor& input, const Ints& normalized, const Tensor& mean, const Tensor& rstd,
                   const MaybeTensor& weight, const MaybeTensor& bias, std::vector<bool> mask) {
        return empty_norm_backward_results(mask, input, normalized, plan(grad, input, normalized, mean, rstd, weight, bias).stat_dtype);
      })
      .autograd(composite_formula(lib.registry(), [plan](const Ops& ops, const Stack& a) {
        const Tensor &grad = a[0].to_tensor(), &input = a[1].to_tensor();
        const Ints normalized = a[2].to<Ints>();
        const MaybeTensor weight = a[5].to<MaybeTensor>();
        const LayerNormPlan p = plan(grad, input, normalized, a[3].to_tensor(), a[4].to_tensor(), weight, a[6].to<MaybeTensor>());
        auto f64 = [&](const Tensor& t) { return ops.to(t, DType::Float64); };
        const Ints rows{p.rows, p.len};
        NormBackwardComposite c;
        c.g = ops.reshape(f64(grad), rows);
        c.rstd = ops.reshape(f64(a[4].to_tensor()), {p.rows, 1});
        c.xhat = ops.mul(ops.sub(ops.reshape(f64(input), rows), ops.reshape(f64(a[3].to_tensor()), {p.rows, 1})), c.rstd);
        c.gxhat = weight ? ops.mul(c.g, ops.reshape(f64(*weight), {1, p.len})) : c.g;
        auto per_param = [&](const Tensor& t) { return ops.reshape(ops.sum_dims(t, {0}, false), normalized); };
        return norm_backward_outputs(ops, c, a[7].to<std::vector<bool>>(), {1}, input, per_param, p.stat_dtype);
      }))
      .samples([name](SampleDraw& draw) {
        const DType d = draw.dtype();
        const Ints shape = draw.shape(1, 4);
        const int64_t k = draw.integer(1, static_cast<int64_t>(shape.size()));
        const Ints normalized(shape.end() - k, shape.end());
        const Tensor input = draw.tensor(shape, d);
        const IValue weight = maybe_param(draw, normalized, d), bias = maybe_param(draw, normalized, d);
        // The statistics of the forward call on this input (the usual caller's).
        auto [out, mean, rstd] = layer_norm_cpu(name, input, normalized, weight.to<MaybeTensor>(), bias.to<MaybeTensor>(),
                                                draw.real(1e-5, 0.1));
        const std::vector<bool> mask{draw.coin(80), draw.coin(70), draw.coin(70)};
        return Stack{IValue(draw.tensor(shape, d)), IValue(input), IValue(normalized), IValue(mean), IValue(rstd), weight,
                     bias, IValue(mask)};
      })
      .dtypes(kFloating);
}

// native_group_norm.
void register_group_norm(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib,
                "aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, "
                "int group, float eps) -> (Tensor, Tensor, Tensor)",
                kFamily, "normalizes each group of C/group channels of each sample, then per-channel weight and bias; "
                     "returns (out, mean [N, group], rstd [N, group])");
    const std::string name = b.name();
    b.cpu([name](const Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias, int64_t n, int64_t c,
                 int64_t hxw, int64_t group, double eps) {
       return group_norm_cpu(name, input, weight, bias, n, c, hxw, group, eps);
     })
        .fake([name](const Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias, int64_t n, int64_t c,
                     int64_t hxw, int64_t group, double) {
          const GroupNormPlan p = plan_group_norm(name, input, weight, bias, n, c, hxw, group);
          const TensorOptions stats(p.stat_dtype, input.device());
          return std::make_tuple(empty_like(input), empty({n, group}, stats), empty({n, group}, stats));
        })
        .autograd(with_ops(r, group_norm_backward),
                  [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
                    save_norm_context(ctx, inputs, outputs, {{1, "has_weight"}});
                  })
        .samples([](SampleDraw& draw) {
          const DType d = draw.dtype();
          const int64_t n = draw.integer(1, 3), group = draw.integer(1, 3), c = group * draw.integer(1, 2);
          const Ints spatial = draw.shape(0, 2);
          Ints shape{n, c};
          shape.insert(shape.end(), spatial.begin(), spatial.end());
          Tensor input = draw.tensor(shape, d);
          return Stack{IValue(input), maybe_param(draw, {c}, d), maybe_param(draw, {c}, d), IValue(n), IValue(c),
                       IValue(product(spatial)), IValue(group), draw_eps(draw)};
        })
        .dtypes(kFloating);
  }
}

// native_group_norm_backward: native_group_norm's gradient through its output, from the given
// statistics [N, group].
void register_group_norm_backward(Library& lib) {
  OpBuilder b(lib,
              "aten::native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight, "
              "SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
              kFamily, "the gradients of native_group_norm's output by input, weight and bias [C] (each where "
                       "output_mask asks), from the given mean and rstd; without weight, those of a weight of ones");
  const std::string name = b.name();
  auto plan = [name](const Tensor& grad, const Tensor& input, const Tensor& mean, const Tensor& rstd, const MaybeTensor& weight,
                     int64_t n, int64_t c, int64_t hxw, int64_t group) {
    const GroupNormPlan p = plan_group_norm(name, input, weight, std::nullopt, n, c, hxw, group);
    check_norm_backward_inputs(name, grad, input, mean, rstd, p.rows);
    return p;
  };
  b.cpu([plan](const Tensor& grad, const Tensor& input, const Tensor& mean, const Tensor& rstd, const MaybeTensor& weight,
               int64_t n, int64_t c, int64_t hxw, int64_t group, std::vector<bool> mask) {
     const GroupNormPlan p = plan(grad, input, mean, rstd, weight, n, c, hxw, group);
     const RowGradients grads = normalized_rows_backward(
         grad.to_vector<double>(), input.to_vector<double>(), mean.to_vector<double>(), rstd.to_vector<double>(), p.len,
         values_or(weight, c, 1), [&](size_t r, int64_t i) {
           return static_cast<int64_t>(r) % group * p.channels_per_group + i / std::max<int64_t>(hxw, 1);
         });
     return norm_backward_results(grads, mask, input, {c}, p.stat_dtype);
   })
      .fake([plan](const Tensor& grad, const Tensor& input, const Tensor& mean, const Tensor& rstd, const MaybeTensor& weight,
                   int64_t n, int64_t c, int64_t hxw, int64_t group, std::vector<bool> mask) {
        return empty_norm_backward_results(mask, input, {c}, plan(grad, input, mean, rstd, weight, n, c, hxw, group).stat_dtype);
      })
      .autograd(composite_formula(lib.registry(), [plan](const Ops& ops, const Stack& a) {
        const Tensor &grad = a[0].to_tensor(), &input = a[1].to_tensor();
        const MaybeTensor weight = a[4].to<MaybeTensor>();
        const int64_t n = a[5].to_int(), c = a[6].to_int(), hxw = a[7].to_int(), group = a[8].to_int();
        const GroupNormPlan p = plan(grad, input, a[2].to_tensor(), a[3].to_tensor(), weight, n, c, hxw, group);
        auto f64 = [&](const Tensor& t) { return ops.to(t, DType::Float64); };
        // Rows [N, group, C/group * HxW]; parameters per channel of [N, C, HxW].
        const Ints rows{n, group, p.len}, channels{n, c, hxw};
        NormBackwardComposite comp;
        comp.g = ops.reshape(f64(grad), rows);
        comp.rstd = ops.reshape(f64(a[3].to_tensor()), {n, group, 1});
        comp.xhat = ops.mul(ops.sub(ops.reshape(f64(input), rows), ops.reshape(f64(a[2].to_tensor()), {n, group, 1})), comp.rstd);
        comp.gxhat = weight ? ops.reshape(ops.mul(ops.reshape(comp.g, channels), ops.reshape(f64(*weight), {1, c, 1})), rows) : comp.g;
        auto per_param = [&](const Tensor& t) { return ops.sum_dims(ops.reshape(t, channels), {0, 2}, false); };
        return norm_backward_outputs(ops, comp, a[9].to<std::vector<bool>>(), {2}, input, per_param, p.stat_dtype);
      }))
      .samples([name](SampleDraw& draw) {
        const DType d = draw.dtype();
        const int64_t n = draw.integer(1, 3), group = draw.integer(1, 3), c = group * draw.integer(1, 2);
        const Ints spatial = draw.shape(0, 2);
        Ints shape{n, c};
        shape.insert(shape.end(), spatial.begin(), spatial.end());
        const Tensor input = draw.tensor(shape, d);
        const IValue weight = maybe_param(draw, {c}, d);
        const int64_t hxw = product(spatial);
        auto [out, mean, rstd] =
            group_norm_cpu(name, input, weight.to<MaybeTensor>(), std::nullopt, n, c, hxw, group, draw.real(1e-5, 0.1));
        const std::vector<bool> mask{draw.coin(80), draw.coin(70), draw.coin(70)};
        return Stack{IValue(draw.tensor(shape, d)), IValue(input), IValue(mean), IValue(rstd), weight, IValue(n), IValue(c),
                     IValue(hxw), IValue(group), IValue(mask)};
      })
      .dtypes(kFloating);
}

// batch norm in inference (running statistics).
// A batch norm sample's input and parameters: input of rank 2..4 (N, C, ...), optional per-channel
// weight and bias; with `running`, running mean and (positive) variance, mutable where the op writes
// them.
Stack draw_batch_norm_inputs(SampleDraw& draw, bool running, bool running_written = false) {
  const DType d = draw.dtype();
  const Ints shape = draw.shape(2, 4);
  const Ints channels{shape[1]};
  ValueConstraint positive;
  positive.min = 0.1;
  Stack args{IValue(draw.tensor(shape, d))};
  args.push_back(maybe_param(draw, channels, d));
  args.push_back(maybe_param(draw, channels, d));
  if (running) {
    args.emplace_back(draw.tensor(channels, d, {}, running_written));
    args.emplace_back(draw.tensor(channels, d, positive, running_written));
  }
  return args;
}

void register_batch_norm(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib,
                "aten::_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, "
                "Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
                kFamily, "(x - running_mean) / sqrt(running_var + eps) * weight + bias per channel (dim 1); "
                     "the 2nd and 3rd results are empty, as PyTorch's");
    const std::string name = b.name();
    b.cpu([name](const Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias, const Tensor& running_mean,
                 const Tensor& running_var, double, double eps) {
       const DType stat = plan_batch_norm(name, input, weight, bias, running_mean, running_var);
       const Ints sizes = sizes_of(input);
       const int64_t channels = sizes[1];
       const std::vector<double> x = input.to_vector<double>(), mean = running_mean.to_vector<double>(),
                                 var = running_var.to_vector<double>();
       const std::vector<double> w = values_or(weight, channels, 1), bb = values_or(bias, channels, 0);
       std::vector<double> y(x.size());
       for (size_t k = 0; k < x.size(); ++k) {
         const int64_t ch = channel_of(static_cast<int64_t>(k), sizes);
         y[k] = (x[k] - mean[ch]) / std::sqrt(var[ch] + eps) * w[ch] + bb[ch];
       }
       auto [mean_out, invstd_out] = eval_statistics(input, stat, running_mean, running_var, eps);
       return std::make_tuple(make(y, sizes, input.dtype()), mean_out, invstd_out);
     })
        .fake([name](const Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias, const Tensor& running_mean,
                     const Tensor& running_var, double, double eps) {
          const DType stat = plan_batch_norm(name, input, weight, bias, running_mean, running_var);
          Tensor out = symbolic(input) ? symbolic_like(input, input.dtype()) : empty_like(input);
          auto [mean_out, invstd_out] = eval_statistics(input, stat, running_mean, running_var, eps);
          return std::make_tuple(out, mean_out, invstd_out);
        })
        .autograd(with_ops(r, batch_norm_backward),
                  [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
                    save_norm_context(ctx, inputs, {}, {{1, "has_weight"}, {2, "has_bias"}});
                    ctx.set("eps", inputs[6]);
                    ctx.set("arguments", IValue(int64_t{7}));
                  })
        .samples([](SampleDraw& draw) {
          Stack args = draw_batch_norm_inputs(draw, /*running=*/true);
          args.push_back(IValue(draw.real(0, 1)));
          args.push_back(draw_eps(draw));
          return args;
        })
        .dtypes(kFloating);
  }
}

// ---- batch norm (training, no running statistics) ----

// Per-channel (dim 1) batch statistics: y = (x - mean_c) rstd_c w_c + b_c with the biased variance
// over every other dim; (y, mean [C], rstd [C]) and, for the running statistics, the variance
// with Bessel's correction (n - 1: NaN for one value per channel, as PyTorch's 0/0).
struct BatchStatistics {
  Tensor y, mean, rstd;
  std::vector<double> mean_values, unbiased_var;
};
BatchStatistics batch_statistics(std::string_view op, const Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias,
                                 double eps) {
  const DType stat = plan_batch_norm(op, input, weight, bias);
  const Ints sizes = sizes_of(input);
  const int64_t channels = sizes[1], per_channel = input.numel() / std::max<int64_t>(channels, 1);
  const std::vector<double> x = input.to_vector<double>();
  std::vector<size_t> channel(x.size());
  for (size_t k = 0; k < x.size(); ++k) channel[k] = static_cast<size_t>(channel_of(static_cast<int64_t>(k), sizes));
  std::vector<double> mean(static_cast<size_t>(channels), 0.0), var(static_cast<size_t>(channels), 0.0);
  for (size_t k = 0; k < x.size(); ++k) mean[channel[k]] += x[k];
  for (double& m : mean) m /= static_cast<double>(per_channel);  // 0/0: NaN for an empty batch
  for (size_t k = 0; k < x.size(); ++k) var[channel[k]] += (x[k] - mean[channel[k]]) * (x[k] - mean[channel[k]]);
  std::vector<double> rstd(static_cast<size_t>(channels));
  for (size_t c = 0; c < rstd.size(); ++c) rstd[c] = 1 / std::sqrt(var[c] / static_cast<double>(per_channel) + eps);
  const std::vector<double> w = values_or(weight, channels, 1), b = values_or(bias, channels, 0);
  std::vector<double> y(x.size());
  for (size_t k = 0; k < x.size(); ++k) y[k] = (x[k] - mean[channel[k]]) * rstd[channel[k]] * w[channel[k]] + b[channel[k]];
  std::vector<double> unbiased(var.size());
  for (size_t c = 0; c < var.size(); ++c) unbiased[c] = var[c] / static_cast<double>(per_channel - 1);
  return {make(y, sizes, input.dtype()), make(mean, {channels}, stat), make(rstd, {channels}, stat), mean, unbiased};
}

// The fake results of training-mode batch norm: out like the input, mean and rstd [C].
std::tuple<Tensor, Tensor, Tensor> fake_batch_statistics(const Tensor& input, DType stat) {
  if (symbolic(input)) {
    const std::vector<SymInt> channels{input.sym_sizes()[1]};
    return {symbolic_like(input, input.dtype()), make_fake_tensor(channels, stat, input.device()),
            make_fake_tensor(channels, stat, input.device())};
  }
  const TensorOptions stats(stat, input.device());
  return {empty_like(input), empty({input.size(1)}, stats), empty({input.size(1)}, stats)};
}

void require_training(std::string_view op, bool training) {
  OPCONFORM_CHECK(training, ErrorCode::kInvalidArgument, op,
                  ": argument 'training' must be true: without running statistics there is nothing to evaluate with");
}

// Its gradient: normalization over the non-channel dims, as layer norm's over its trailing ones
// (the mean and rstd outputs' gradients included).
Grads batch_norm_train_backward(const Ops& ops, autograd::AutogradContext& ctx, const Grads& g) {
  const auto saved = ctx.saved_tensors();  // input, [weight], [bias], out, mean, rstd
  const Tensor& x = saved[0];
  const bool has_weight = ctx.get("has_weight").to_bool();
  const Ints shape = channel_shape(x), dims = non_channel_dims(x.dim());
  auto per_channel = [&](const Tensor& t) { return t.defined() ? ops.reshape(t, shape) : t; };
  const Tensor mean = per_channel(saved[saved.size() - 2]), rstd = per_channel(saved.back());
  const int64_t n = x.numel() / std::max<int64_t>(x.size(1), 1);
  Tensor xhat = ops.mul(ops.sub(x, mean), rstd);
  Tensor gxhat = has_weight ? ops.mul(g[0], per_channel(saved[1])) : g[0];
  Grads out(static_cast<size_t>(ctx.get("arguments").to_int()));
  if (ctx.needs_input_grad(0)) out[0] = normalized_input_grad(ops, gxhat, xhat, rstd, per_channel(g[1]), per_channel(g[2]), dims, n);
  if (ctx.needs_input_grad(1)) out[1] = ops.sum_dims(ops.mul(g[0], xhat), dims, false);
  if (ctx.needs_input_grad(2)) out[2] = ops.sum_dims(g[0], dims, false);
  return out;
}

void register_batch_norm_training(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder b(lib,
              "aten::_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training, "
              "float momentum, float eps) -> (Tensor, Tensor, Tensor)",
              kFamily, "training-mode batch norm with the batch's own per-channel statistics (dim 1); returns (out, "
                       "mean, rstd); no running statistics to update, so momentum is unused");
  const std::string name = b.name();
  b.cpu([name](const Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias, bool training, double, double eps) {
     require_training(name, training);
     BatchStatistics s = batch_statistics(name, input, weight, bias, eps);
     return std::make_tuple(std::move(s.y), std::move(s.mean), std::move(s.rstd));
   })
      .fake([name](const Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias, bool training, double, double) {
        require_training(name, training);
        return fake_batch_statistics(input, plan_batch_norm(name, input, weight, bias));
      })
      .autograd(with_ops(r, batch_norm_train_backward),
                [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
                  save_norm_context(ctx, inputs, outputs, {{1, "has_weight"}, {2, "has_bias"}});
                  ctx.set("arguments", IValue(int64_t{6}));
                })
      .samples([](SampleDraw& draw) {
        Stack args = draw_batch_norm_inputs(draw, /*running=*/false);
        args.push_back(IValue(true));
        args.push_back(IValue(draw.real(0, 1)));
        args.push_back(draw_eps(draw));
        return args;
      })
      .dtypes(kFloating);
}

// _native_batch_norm_legit: training mode normalizes with the batch's statistics and updates the
// running ones in place (r = (1 - momentum) r + momentum s, the variance unbiased); eval mode uses
// the running ones, as _native_batch_norm_legit_no_training, and returns empty statistics.
void register_batch_norm_legit(Library& lib) {
  Registry& r = lib.registry();
  OpBuilder b(lib,
              "aten::_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean, "
              "Tensor(b!) running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
              kFamily, "batch norm per channel (dim 1): training uses the batch's statistics and updates running_mean "
                       "and running_var in place; eval uses the running ones (empty 2nd and 3rd results)");
  const std::string name = b.name();
  const OperatorHandle inference = r.get("aten::_native_batch_norm_legit_no_training");
  b.cpu([name, inference](const Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias, const Tensor& running_mean,
                          const Tensor& running_var, bool training, double momentum, double eps) {
     plan_batch_norm(name, input, weight, bias, running_mean, running_var);
     if (!training) {
       return inference.typed<std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const MaybeTensor&, const MaybeTensor&,
                                                                 const Tensor&, const Tensor&, double, double)>()
           .call(input, weight, bias, running_mean, running_var, momentum, eps);
     }
     BatchStatistics s = batch_statistics(name, input, weight, bias, eps);
     std::vector<double> rm = running_mean.to_vector<double>(), rv = running_var.to_vector<double>();
     for (size_t c = 0; c < rm.size(); ++c) {
       rm[c] = (1 - momentum) * rm[c] + momentum * s.mean_values[c];
       rv[c] = (1 - momentum) * rv[c] + momentum * s.unbiased_var[c];
     }
     running_mean.copy_(make(rm, {static_cast<int64_t>(rm.size())}, running_mean.dtype()));
     running_var.copy_(make(rv, {static_cast<int64_t>(rv.size())}, running_var.dtype()));
     return std::make_tuple(std::move(s.y), std::move(s.mean), std::move(s.rstd));
   })
      .fake([name](const Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias, const Tensor& running_mean,
                   const Tensor& running_var, bool training, double, double eps) {
        const DType stat = plan_batch_norm(name, input, weight, bias, running_mean, running_var);
        if (training) return fake_batch_statistics(input, stat);
        auto [mean_out, invstd_out] = eval_statistics(input, stat, running_mean, running_var, eps);
        return std::make_tuple(symbolic(input) ? symbolic_like(input, input.dtype()) : empty_like(input), mean_out,
                               invstd_out);
      })
      .autograd(with_ops(r,
                         [](const Ops& ops, autograd::AutogradContext& ctx, const Grads& g) {
                           return ctx.get("training").to_bool() ? batch_norm_train_backward(ops, ctx, g)
                                                                : batch_norm_backward(ops, ctx, g);
                         }),
                [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
                  const bool training = inputs[5].to_bool();
                  // Training: the batch's statistics (the outputs) are saved; eval: the running ones.
                  save_norm_context(ctx, inputs, training ? outputs : Stack{}, {{1, "has_weight"}, {2, "has_bias"}});
                  ctx.set("training", IValue(training));
                  ctx.set("eps", inputs[7]);
                  ctx.set("arguments", IValue(int64_t{8}));
                })
      .samples([](SampleDraw& draw) {
        Stack args = draw_batch_norm_inputs(draw, /*running=*/true, /*running_written=*/true);
        // Training only: eval mode leaves the running statistics unwritten, which test_schema takes for a
        // schema that lies (a mutable argument must be written on every sample); normalization_test
        // covers eval mode by hand.
        args.push_back(IValue(true));
        args.push_back(IValue(draw.real(0, 1)));
        args.push_back(draw_eps(draw));
        return args;
      })
      .dtypes(kFloating);
}

// native_dropout.
void register_dropout(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)", kFamily,
                "training (train None or true): zeroes each element with probability p (default generator) and scales "
                "the rest by 1/(1-p); returns (output, bool mask); eval: (input copy, all-true mask)",
                {Tag::nondeterministic_seeded});
    const std::string name = b.name();
    b.cpu([name](const Tensor& input, double p, const std::optional<bool>& train) { return dropout_cpu(name, input, p, train); })
        .fake([name](const Tensor& input, double p, const std::optional<bool>& train) {
          auto [out, mask] = empty_dropout_results(name, input, p, train);
          return std::make_tuple(out, mask);
        })
        .autograd(
            [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
              const Tensor mask = ctx.saved_tensors()[0];
              return {ops.mul(ops.mul(g[0], mask), ctx.get("scale").to_double()), Tensor(), Tensor()};
            },
            [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
              ctx.save_for_backward({outputs[1].to_tensor()});
              ctx.set("scale", IValue(dropout_scale(inputs[1].to_double(), inputs[2].to<std::optional<bool>>())));
            })
        .vmap([ops = Ops(r), name](const VmapInfo& info, const Stack& inputs,
                                   const std::vector<std::optional<int64_t>>& in_dims) {
          // As functorch: random in training needs randomness "different" (each sample its own
          // mask: the op on the whole batch) or "same" (one mask, broadcast over the batch).
          Tensor x = move_batch_dim(inputs[0].to_tensor(), in_dims[0], 0, info.batch_size);
          const bool training = is_training(inputs[2].to<std::optional<bool>>());
          OPCONFORM_CHECK(!training || info.randomness != Randomness::Error, ErrorCode::kInvalidArgument, name,
                          ": called in training mode under vmap with randomness='error'; use 'same' or 'different'");
          Stack results;
          if (training && info.randomness == Randomness::Same) {
            Ints sample_sizes(x.sizes().begin() + 1, x.sizes().end());
            Tensor ones_sample = ops.full(sample_sizes, 1.0, x);
            Stack one = ops.call(name, {IValue(ones_sample), inputs[1], inputs[2]});
            Tensor mask = one[1].to_tensor();
            Tensor out = ops.mul(ops.mul(x, mask), dropout_scale(inputs[1].to_double(), true));
            Ints batched_sizes(x.sizes().begin(), x.sizes().end());
            results = {IValue(out), IValue(ops.expand(ops.unsqueeze(mask, 0), batched_sizes))};
          } else {
            results = ops.call(name, {IValue(x), inputs[1], inputs[2]});
          }
          return std::make_pair(results, std::vector<std::optional<int64_t>>{int64_t{0}, int64_t{0}});
        })
        .samples([](SampleDraw& draw) {
          Tensor input = draw.tensor(draw.shape(0, 4), draw.dtype());
          const int64_t kind = draw.integer(0, 3);
          const double p = kind == 1 ? 0.0 : kind == 2 ? 1.0 : draw.real(0, 1);
          const int64_t mode = draw.integer(0, 2);
          return Stack{IValue(input), IValue(p), mode == 0 ? IValue() : IValue(mode == 1)};
        })
        .dtypes(kFloating);
  }
}

}  // namespace

void register_normalization(Library& lib) {
  register_layer_norm(lib);
  register_layer_norm_backward(lib);
  register_group_norm(lib);
  register_group_norm_backward(lib);
  register_batch_norm(lib);
  register_batch_norm_training(lib);
  register_batch_norm_legit(lib);
  register_dropout(lib);
}

}  // namespace opconform::reference
