// Convolution (1-, 2- and 3-d and more, grouped, strided, padded, dilated, transposed) and its
// backward op, col2im (fold), and 2-d and 3-d max and average pooling (one plan over the spatial
// dims) with the 2-d backward ops.
//
// Kernels read their inputs in float64 (row-major copies), accumulate in float64 and round once;
// outputs are contiguous (PyTorch's layout for contiguous inputs). Formulas are written with
// registry ops: the gradients of a convolution are convolutions themselves (of the gradient with
// the weight, transposed or not, and of the input with the gradient), so double backward works;
// pooling gradients scatter-add the output gradient into the input through the windows.
#include <cmath>
#include <limits>

#include "opconform/core/fake_tensor.h"
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
int64_t product(const Ints& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}
Ints tail(const Ints& v, size_t from) { return Ints(v.begin() + static_cast<std::ptrdiff_t>(from), v.end()); }
Ints concat(Ints a, const Ints& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The row-major offset of a multi-index.
int64_t flat(const Ints& sizes, const Ints& index) {
  int64_t offset = 0;
  for (size_t d = 0; d < sizes.size(); ++d) offset = offset * sizes[d] + index[d];
  return offset;
}

// floor(a / b) for b > 0 (PyTorch's div_rtn).
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// A list argument of one value per spatial dim, or a single value for all of them.
Ints expand_list(std::string_view op, std::string_view arg, const Ints& v, size_t dims) {
  OPCONFORM_CHECK(v.size() == 1 || v.size() == dims, ErrorCode::kInvalidArgument, op, ": argument '", arg,
                  "' must have 1 or ", dims, " elements, got ", shape_string(v));
  return v.size() == 1 ? Ints(dims, v[0]) : v;
}

void check_all(std::string_view op, std::string_view arg, const Ints& v, int64_t min) {
  for (int64_t x : v) {
    OPCONFORM_CHECK(x >= min, ErrorCode::kInvalidArgument, op, ": argument '", arg, "' must be >= ", min, ", got ",
                    shape_string(v));
  }
}

// A fake tensor with symbolic sizes (a dynamic capture): the fake kernels then compute output
// sizes from sym_sizes() so the captured graph replays at other sizes.
bool is_symbolic(const Tensor& t) { return t.defined() && t.is_fake() && t.has_symbolic_sizes(); }
using SymInts = std::vector<SymInt>;

// ---- registry calls shared by the formulas ----

Tensor narrow(const Ops& ops, const Tensor& t, int64_t dim, int64_t length) {
  if (t.size(dim) == length) return t;
  return ops.tensor("aten::slice.Tensor", {t, IValue(dim), IValue(int64_t{0}), IValue(length), IValue(int64_t{1})});
}

// ============================================================================ convolution

struct ConvPlan {
  bool transposed;
  int64_t batch, in_channels, out_channels, groups;
  Ints in_spatial, kernel, stride, padding, dilation, output_padding, out_spatial;
  int64_t in_per_group() const { return in_channels / groups; }
  int64_t out_per_group() const { return out_channels / groups; }
  Ints out_sizes() const { return concat({batch, out_channels}, out_spatial); }
};

// convolution takes int64 too, as PyTorch's CPU kernels (the slow, im2col paths) do; exact in
// double for the values samples hold, rounded once.
const std::vector<DType> kConvolutionDtypes = concat_dtypes(kFloating, {DType::Int64});

ConvPlan plan_convolution(std::string_view op, const Tensor& input, const Tensor& weight, const MaybeTensor& bias,
                          const Ints& stride, const Ints& padding, const Ints& dilation, bool transposed,
                          const Ints& output_padding, int64_t groups) {
  require_dtype(op, input, kConvolutionDtypes, "input");
  OPCONFORM_CHECK(weight.dtype() == input.dtype(), ErrorCode::kInvalidArgument, op, ": argument 'weight' has dtype ",
                  name(weight.dtype()), " but 'input' has dtype ", name(input.dtype()), "; they must be the same");
  OPCONFORM_CHECK(!bias || bias->dtype() == input.dtype(), ErrorCode::kInvalidArgument, op, ": argument 'bias' has dtype ",
                  name(bias->dtype()), " but 'input' has dtype ", name(input.dtype()), "; they must be the same");
  OPCONFORM_CHECK(weight.dim() >= 3, ErrorCode::kInvalidArgument, op,
                  ": argument 'weight' must have at least 3 dims (out, in / groups, kernel...), got shape ",
                  shape_string(weight.sizes()));
  OPCONFORM_CHECK(input.dim() == weight.dim(), ErrorCode::kInvalidArgument, op, ": expected a ", weight.dim(),
                  "-d argument 'input' (batch, channels, spatial...) for a ", weight.dim(), "-d weight, got shape ",
                  shape_string(input.sizes()));
  OPCONFORM_CHECK(groups > 0, ErrorCode::kInvalidArgument, op, ": argument 'groups' must be positive, got ", groups);
  const size_t dims = static_cast<size_t>(input.dim() - 2);
  ConvPlan p;
  p.transposed = transposed;
  p.groups = groups;
  p.batch = input.size(0);
  p.in_channels = input.size(1);
  p.in_spatial = tail(sizes_of(input), 2);
  p.kernel = tail(sizes_of(weight), 2);
  p.stride = expand_list(op, "stride", stride, dims);
  p.padding = expand_list(op, "padding", padding, dims);
  p.dilation = expand_list(op, "dilation", dilation, dims);
  p.output_padding = expand_list(op, "output_padding", output_padding, dims);
  check_all(op, "stride", p.stride, 1);
  check_all(op, "dilation", p.dilation, 1);
  check_all(op, "padding", p.padding, 0);
  check_all(op, "output_padding", p.output_padding, 0);
  if (!transposed) {
    OPCONFORM_CHECK(weight.size(1) * groups == p.in_channels && weight.size(0) % groups == 0, ErrorCode::kInvalidArgument,
                    op, ": argument 'weight' of shape ", shape_string(weight.sizes()), " with groups=", groups,
                    " needs 'input' with ", weight.size(1) * groups, " channels and out channels divisible by groups; "
                    "'input' has shape ", shape_string(input.sizes()));
    p.out_channels = weight.size(0);
  } else {
    OPCONFORM_CHECK(weight.size(0) == p.in_channels && p.in_channels % groups == 0, ErrorCode::kInvalidArgument, op,
                    ": argument 'weight' of shape ", shape_string(weight.sizes()), " (transposed, groups=", groups,
                    ") needs 'input' with ", weight.size(0), " channels, divisible by groups; 'input' has shape ",
                    shape_string(input.sizes()));
    p.out_channels = weight.size(1) * groups;
  }
  OPCONFORM_CHECK(!bias || sizes_of(*bias) == Ints{p.out_channels}, ErrorCode::kInvalidArgument, op,
                  ": argument 'bias' must have shape [", p.out_channels, "], got ", shape_string(bias->sizes()));
  for (size_t i = 0; i < dims; ++i) {
    const int64_t extent = p.dilation[i] * (p.kernel[i] - 1) + 1;  // the dilated kernel
    if (!transposed) {
      const int64_t padded = p.in_spatial[i] + 2 * p.padding[i];
      OPCONFORM_CHECK(padded >= extent, ErrorCode::kInvalidArgument, op, ": the padded input size ", padded,
                      " of spatial dim ", i, " is smaller than the dilated kernel size ", extent,
                      " (arguments 'input', 'weight', 'padding', 'dilation')");
      p.out_spatial.push_back((padded - extent) / p.stride[i] + 1);
    } else {
      OPCONFORM_CHECK(p.output_padding[i] < p.stride[i] || p.output_padding[i] < p.dilation[i],
                      ErrorCode::kInvalidArgument, op, ": argument 'output_padding' ", shape_string(p.output_padding),
                      " must be smaller than either stride or dilation");
      const int64_t out = (p.in_spatial[i] - 1) * p.stride[i] - 2 * p.padding[i] + extent + p.output_padding[i];
      OPCONFORM_CHECK(out >= 1, ErrorCode::kInvalidArgument, op, ": the output size ", out, " of spatial dim ", i,
                      " is too small (arguments 'input', 'weight', 'stride', 'padding')");
      p.out_spatial.push_back(out);
    }
  }
  return p;
}

// The output sizes of a planned convolution with symbolic input and weight sizes (the same
// formulas as plan_convolution, on sym_sizes()).
SymInts sym_conv_sizes(const ConvPlan& p, const Tensor& input, const Tensor& weight) {
  const SymInts in = input.sym_sizes(), w = weight.sym_sizes();
  SymInts out{in[0], p.transposed ? w[1] * p.groups : w[0]};
  for (size_t i = 0; i < p.kernel.size(); ++i) {
    const SymInt extent = (w[2 + i] - 1) * p.dilation[i] + 1;
    if (!p.transposed) {
      out.push_back(floordiv(in[2 + i] + 2 * p.padding[i] - extent, SymInt(p.stride[i])) + 1);
    } else {
      out.push_back((in[2 + i] - 1) * p.stride[i] - 2 * p.padding[i] + extent + p.output_padding[i]);
    }
  }
  return out;
}

// Calls f(y, x, w) for every multiply of a convolution: y, x and w row-major offsets into the
// output, the input and the weight, x = -1 for a tap on the zero padding. Both the forward and
// the backward CPU kernels are these loops:
//   y[n, o, j] = bias[o] + sum over the input channels c of o's group and the kernel offsets k of
//   x[n, c, j * stride - padding + k * dilation] * w[o, c', k]          (convolution)
//   x[n, c, i] * w[c, o', k] where j = i * stride - padding + k * dilation  (transposed)
// positions outside the input counting as zero.
template <typename F>
void for_each_tap(const ConvPlan& p, F&& f) {
  const Ints x_sizes = concat({p.batch, p.in_channels}, p.in_spatial), y_sizes = p.out_sizes();
  const Ints w_sizes = concat(p.transposed ? Ints{p.in_channels, p.out_per_group()} : Ints{p.out_channels, p.in_per_group()}, p.kernel);
  const size_t dims = p.kernel.size();
  Ints x_index(dims + 2), w_index(dims + 2);
  for_each_index(y_sizes, [&](const Ints& yi) {
    const int64_t n = yi[0], o = yi[1], group = o / p.out_per_group(), y_at = flat(y_sizes, yi);
    for (int64_t ci = 0; ci < p.in_per_group(); ++ci) {
      const int64_t c = group * p.in_per_group() + ci;
      for_each_index(p.kernel, [&](const Ints& k) {
        x_index[0] = n;
        x_index[1] = c;
        // A tap on the zero padding still multiplies (PyTorch pads the input with zeros, so a
        // weight of inf or NaN there gives NaN); a transposed convolution has no such taps.
        bool padded = false;
        for (size_t d = 0; d < dims; ++d) {
          const int64_t j = yi[2 + d];
          int64_t i;
          if (!p.transposed) {
            i = j * p.stride[d] - p.padding[d] + k[d] * p.dilation[d];
          } else {  // j = i * stride - padding + k * dilation, solved for i
            const int64_t scaled = j + p.padding[d] - k[d] * p.dilation[d];
            if (scaled % p.stride[d] != 0) return;
            i = scaled / p.stride[d];
          }
          if (i < 0 || i >= p.in_spatial[d]) {
            if (p.transposed) return;
            padded = true;
            i = 0;
          }
          x_index[2 + d] = i;
          w_index[2 + d] = k[d];
        }
        w_index[0] = p.transposed ? c : o;
        w_index[1] = p.transposed ? o % p.out_per_group() : ci;
        f(y_at, padded ? int64_t{-1} : flat(x_sizes, x_index), flat(w_sizes, w_index));
      });
    }
  });
}

Tensor convolution_cpu(const ConvPlan& p, const Tensor& input, const Tensor& weight, const MaybeTensor& bias) {
  const std::vector<double> x = input.to_vector<double>(), w = weight.to_vector<double>();
  const std::vector<double> b = bias ? bias->to_vector<double>() : std::vector<double>(p.out_channels, 0.0);
  const Ints y_sizes = p.out_sizes();
  std::vector<double> y(static_cast<size_t>(product(y_sizes)));
  const int64_t spatial = product(p.out_spatial);
  for (size_t at = 0; at < y.size(); ++at) y[at] = b[static_cast<size_t>(static_cast<int64_t>(at) / spatial % p.out_channels)];
  for_each_tap(p, [&](int64_t yi, int64_t xi, int64_t wi) {
    y[static_cast<size_t>(yi)] += (xi < 0 ? 0.0 : x[static_cast<size_t>(xi)]) * w[static_cast<size_t>(wi)];
  });
  return from_vector<double>(y, y_sizes).to(input.dtype());
}

Tensor call_convolution(const Ops& ops, const Tensor& input, const Tensor& weight, const Ints& stride, const Ints& padding,
                        const Ints& dilation, bool transposed, const Ints& output_padding, int64_t groups) {
  return ops.tensor("aten::convolution", {input, weight, IValue(), IValue(stride), IValue(padding), IValue(dilation),
                                          IValue(transposed), IValue(output_padding), IValue(groups)});
}

// sum over n and j of b[n, grp * cb + ob, j] * a[n, grp * ca + oa, k * dilation - padding + j * stride]
// for every channel of b (all groups), channel oa of a's group and kernel offset k < kernel:
// a tensor [b channels, a channels / groups, kernel...] — the weight gradient of a convolution
// (a = input, b = grad) and of a transposed one (a = grad, b = input). It is itself a grouped
// convolution, the batch playing the channels: of a as [ca, groups * N, ...] with b as
// [groups * cb, N, ...], stride and dilation swapped.
Tensor batch_correlation(const Ops& ops, const Tensor& a, const Tensor& b, const ConvPlan& p) {
  const int64_t n = a.size(0), g = p.groups, ca = a.size(1) / g, cb = b.size(1) / g;
  const Ints a_spatial = tail(sizes_of(a), 2), b_spatial = tail(sizes_of(b), 2);
  Ints rest;  // the spatial dims after the three leading ones
  for (size_t d = 0; d < a_spatial.size(); ++d) rest.push_back(static_cast<int64_t>(3 + d));
  Tensor in = ops.permute(ops.reshape(a, concat({n, g, ca}, a_spatial)), concat({2, 1, 0}, rest));
  in = ops.reshape(in, concat({ca, g * n}, a_spatial));
  Tensor wt = ops.permute(ops.reshape(b, concat({n, g, cb}, b_spatial)), concat({1, 2, 0}, rest));
  wt = ops.reshape(wt, concat({g * cb, n}, b_spatial));
  Tensor r = call_convolution(ops, in, wt, p.dilation, p.padding, p.stride, false, Ints(a_spatial.size(), 0), g);
  for (size_t d = 0; d < p.kernel.size(); ++d) r = narrow(ops, r, static_cast<int64_t>(2 + d), p.kernel[d]);
  Ints swap{1, 0};
  for (size_t d = 0; d < p.kernel.size(); ++d) swap.push_back(static_cast<int64_t>(2 + d));
  return ops.permute(r, swap);
}

// The gradients of a planned convolution of x with w by input, weight and bias for the output
// gradient g, each where mask asks (undefined otherwise): convolution's formula and
// convolution_backward's composite.
std::vector<Tensor> convolution_grads(const Ops& ops, const ConvPlan& p, const Tensor& x, const Tensor& w, const Tensor& g,
                                      const std::vector<bool>& mask) {
  std::vector<Tensor> out(3);
  if (mask[0]) {
    if (!p.transposed) {
      // The transposed convolution of g with w; output_padding restores the sizes the strides dropped.
      Ints restore;
      for (size_t d = 0; d < p.kernel.size(); ++d) {
        const int64_t reached = (p.out_spatial[d] - 1) * p.stride[d] - 2 * p.padding[d] + p.dilation[d] * (p.kernel[d] - 1) + 1;
        restore.push_back(p.in_spatial[d] - reached);
      }
      out[0] = call_convolution(ops, g, w, p.stride, p.padding, p.dilation, true, restore, p.groups);
    } else {
      Tensor gx = call_convolution(ops, g, w, p.stride, p.padding, p.dilation, false, Ints(p.kernel.size(), 0), p.groups);
      for (size_t d = 0; d < p.kernel.size(); ++d) gx = narrow(ops, gx, static_cast<int64_t>(2 + d), p.in_spatial[d]);
      out[0] = gx;
    }
  }
  if (mask[1]) out[1] = p.transposed ? batch_correlation(ops, g, x, p) : batch_correlation(ops, x, g, p);
  if (mask[2]) out[2] = ops.sum_dims(g, non_channel_dims(g.dim()), false);  // a per-channel bias
  return out;
}

Grads convolution_backward(const Ops& ops, autograd::AutogradContext& ctx, const Grads& grads) {
  const auto saved = ctx.saved_tensors();  // input, weight
  const Tensor &x = saved[0], &w = saved[1];
  const ConvPlan p = plan_convolution("aten::convolution", x, w, std::nullopt, saved_argument(ctx, 3).to<Ints>(),
                                      saved_argument(ctx, 4).to<Ints>(), saved_argument(ctx, 5).to<Ints>(), saved_argument(ctx, 6).to_bool(),
                                      saved_argument(ctx, 7).to<Ints>(), saved_argument(ctx, 8).to_int());
  std::vector<Tensor> g = convolution_grads(ops, p, x, w, grads[0], {ctx.needs_input_grad(0), ctx.needs_input_grad(1), ctx.needs_input_grad(2)});
  g.resize(9);
  return g;
}

// Consistent shapes: groups divide both channel counts, the (dilated) kernel fits the padded
// input, a transposed convolution's output_padding is below its stride or dilation.
Stack draw_convolution_args(SampleDraw& draw) {
  const DType d = draw.dtype();
  const int64_t dims = draw.integer(1, 3), groups = draw.integer(1, 2);
  const int64_t in_per_group = draw.integer(1, 2), out_per_group = draw.integer(1, 2);
  const int64_t batch = draw.coin(10) ? 0 : draw.integer(1, 2);
  const bool transposed = draw.coin(30);
  Ints kernel, stride, padding, dilation, output_padding, spatial;
  for (int64_t i = 0; i < dims; ++i) {
    const int64_t k = draw.integer(1, 3), s = draw.integer(1, 2), dil = draw.integer(1, 2);
    int64_t pad = draw.integer(0, 2);
    const int64_t extent = dil * (k - 1) + 1;
    int64_t op = 0, size;
    if (!transposed) {
      const int64_t smallest = std::max<int64_t>(1, extent - 2 * pad);
      size = draw.integer(smallest, smallest + 2);
    } else {
      op = draw.integer(0, std::max(s, dil) - 1);
      size = draw.integer(1, 3);
      pad = std::min(pad, ((size - 1) * s + extent + op - 1) / 2);  // keeps the output size >= 1
    }
    kernel.push_back(k);
    stride.push_back(s);
    dilation.push_back(dil);
    padding.push_back(pad);
    output_padding.push_back(op);
    spatial.push_back(size);
  }
  const int64_t in_channels = groups * in_per_group, out_channels = groups * out_per_group;
  Tensor input = draw.tensor(concat({batch, in_channels}, spatial), d);
  Tensor weight = draw.tensor(concat(transposed ? Ints{in_channels, out_per_group} : Ints{out_channels, in_per_group}, kernel), d);
  IValue bias = draw.coin(70) ? IValue(draw.tensor({out_channels}, d)) : IValue();
  return {IValue(input), IValue(weight), bias, IValue(stride), IValue(padding), IValue(dilation), IValue(transposed),
          IValue(output_padding), IValue(groups)};
}

// convolution_backward's CPU kernel: the forward's multiplies (for_each_tap) run backwards, in
// float64, rounded once: gx[x] += g[y] w[w], gw[w] += g[y] x[x] (a tap on the padding adds
// g * 0, as PyTorch's correlation of the zero-padded input does), gb[o] += g[y].
std::tuple<Tensor, Tensor, Tensor> convolution_backward_cpu(const ConvPlan& p, const Tensor& grad, const Tensor& input,
                                                           const Tensor& weight, const std::vector<bool>& mask) {
  const std::vector<double> g = grad.to_vector<double>(), x = input.to_vector<double>(), w = weight.to_vector<double>();
  std::vector<double> gx(x.size(), 0.0), gw(w.size(), 0.0), gb(static_cast<size_t>(p.out_channels), 0.0);
  for_each_tap(p, [&](int64_t yi, int64_t xi, int64_t wi) {
    const double gy = g[static_cast<size_t>(yi)];
    if (xi >= 0) gx[static_cast<size_t>(xi)] += gy * w[static_cast<size_t>(wi)];
    gw[static_cast<size_t>(wi)] += gy * (xi < 0 ? 0.0 : x[static_cast<size_t>(xi)]);
  });
  const int64_t spatial = product(p.out_spatial);
  for (size_t at = 0; at < g.size(); ++at) gb[static_cast<size_t>(static_cast<int64_t>(at) / spatial % p.out_channels)] += g[at];
  return {mask[0] ? from_vector<double>(gx, sizes_of(input)).to(input.dtype()) : Tensor(),
          mask[1] ? from_vector<double>(gw, sizes_of(weight)).to(input.dtype()) : Tensor(),
          mask[2] ? from_vector<double>(gb, {p.out_channels}).to(input.dtype()) : Tensor()};
}

// convolution_backward(grad_output, input, weight, bias_sizes, ..., output_mask): convolution's
// gradients by input, weight and bias as an op (Note [Backward ops as composites]); its formula
// is convolution's (convolution_grads), which a test ties to the CPU kernel.
void register_convolution_backward(Library& lib, const std::string& fam) {
  OpBuilder b(lib,
              "aten::convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, "
              "SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt "
              "groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
              fam, "the gradients of convolution by input, weight and bias (each where output_mask asks)");
  const std::string name = b.name();
  auto plan = [name](const Tensor& grad, const Tensor& input, const Tensor& weight, const std::optional<Ints>& bias_sizes,
                     const Ints& stride, const Ints& padding, const Ints& dilation, bool transposed,
                     const Ints& output_padding, int64_t groups) {
    require_dtype(name, input, kFloating, "input");
    const ConvPlan p = plan_convolution(name, input, weight, std::nullopt, stride, padding, dilation, transposed,
                                        output_padding, groups);
    OPCONFORM_CHECK(sizes_of(grad) == p.out_sizes() && grad.dtype() == input.dtype(), ErrorCode::kInvalidArgument, name,
                    ": argument 'grad_output' must be the convolution's output shape ", shape_string(p.out_sizes()),
                    " in input's dtype, got ", shape_string(grad.sizes()), " ", opconform::name(grad.dtype()));
    OPCONFORM_CHECK(!bias_sizes || *bias_sizes == Ints{p.out_channels}, ErrorCode::kInvalidArgument, name,
                    ": argument 'bias_sizes' must be [", p.out_channels, "], got ", shape_string(*bias_sizes));
    return p;
  };
  b.cpu([plan](const Tensor& grad, const Tensor& input, const Tensor& weight, const std::optional<Ints>& bias_sizes,
               const Ints& stride, const Ints& padding, const Ints& dilation, bool transposed, const Ints& output_padding,
               int64_t groups, std::vector<bool> mask) {
     const ConvPlan p = plan(grad, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups);
     return convolution_backward_cpu(p, grad, input, weight, mask);
   })
      .fake([plan](const Tensor& grad, const Tensor& input, const Tensor& weight, const std::optional<Ints>& bias_sizes,
                   const Ints& stride, const Ints& padding, const Ints& dilation, bool transposed,
                   const Ints& output_padding, int64_t groups, std::vector<bool> mask) {
        const ConvPlan p = plan(grad, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups);
        // PyTorch's meta: new contiguous tensors of the input's, the weight's and the bias's shapes.
        auto like = [&](const Tensor& t) {
          return is_symbolic(t) ? make_fake_tensor(t.sym_sizes(), input.dtype(), input.device()) : empty(sizes_of(t), input.options());
        };
        SymInt channels = p.out_channels;
        if (is_symbolic(weight)) channels = transposed ? weight.sym_sizes()[1] * groups : weight.sym_sizes()[0];
        return std::make_tuple(mask[0] ? like(input) : Tensor(), mask[1] ? like(weight) : Tensor(),
                               mask[2] ? make_fake_tensor({channels}, input.dtype(), input.device()) : Tensor());
      })
      .autograd(composite_formula(lib.registry(), [plan](const Ops& ops, const Stack& a) {
        const Tensor &grad = a[0].to_tensor(), &input = a[1].to_tensor(), &weight = a[2].to_tensor();
        const ConvPlan p = plan(grad, input, weight, a[3].to<std::optional<Ints>>(), a[4].to<Ints>(), a[5].to<Ints>(),
                                a[6].to<Ints>(), a[7].to_bool(), a[8].to<Ints>(), a[9].to_int());
        const std::vector<Tensor> g = convolution_grads(ops, p, input, weight, grad, a[10].to<std::vector<bool>>());
        return Stack{IValue(g[0]), IValue(g[1]), IValue(g[2])};
      }))
      .samples([name](SampleDraw& draw) {
        // A convolution's arguments, its output's shape for grad_output, bias_sizes when it has a bias.
        Stack conv = draw_convolution_args(draw);
        const Tensor input = conv[0].to_tensor(), weight = conv[1].to_tensor();
        const ConvPlan p = plan_convolution(name, input, weight, std::nullopt, conv[3].to<Ints>(), conv[4].to<Ints>(),
                                            conv[5].to<Ints>(), conv[6].to_bool(), conv[7].to<Ints>(), conv[8].to_int());
        const bool bias = conv[2].is_tensor();
        const std::vector<bool> mask{draw.coin(80), draw.coin(70), bias && draw.coin(70)};
        Stack args{IValue(draw.tensor(p.out_sizes(), input.dtype())), conv[0], conv[1],
                   bias ? IValue(Ints{p.out_channels}) : IValue()};
        args.insert(args.end(), conv.begin() + 3, conv.end());
        args.push_back(IValue(mask));
        return args;
      })
      .dtypes(kFloating);
}

// ============================================================================ pooling

// Pooling over the last `dims` (2 or 3) dims of an [N, C, spatial...] or [C, spatial...] input.
struct PoolPlan {
  Ints leading;  // [N, C] or [C]
  int64_t planes;
  Ints in, out, kernel, stride, pad, dilation;  // per spatial dim
  size_t dims() const { return in.size(); }
  int64_t plane() const { return product(in); }
  int64_t out_plane() const { return product(out); }
  Ints out_sizes() const { return concat(leading, out); }
};

// PyTorch's pooling_output_shape: in ceil mode the last window must start inside the input or
// its left padding.
int64_t pooled_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  int64_t out = floor_div(in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

SymInt sym_pooled_size(const SymInt& in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  SymInt out = floordiv(in + (2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0)), SymInt(stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) out = out - 1;
  return out;
}

// The output sizes of a planned pooling with a symbolic input.
SymInts sym_pool_sizes(const PoolPlan& p, const Tensor& input, bool ceil_mode) {
  SymInts sizes = input.sym_sizes();
  const size_t first = sizes.size() - p.dims();
  for (size_t d = 0; d < p.dims(); ++d)
    sizes[first + d] = sym_pooled_size(sizes[first + d], p.kernel[d], p.pad[d], p.stride[d], p.dilation[d], ceil_mode);
  return sizes;
}

// avg_pool2d/3d take int64 too, as PyTorch's CPU kernels do: the window's sum divided by the
// divisor, truncated toward zero (int64 division; the double quotient truncated is the same number).
const std::vector<DType> kAvgPoolDtypes = concat_dtypes(kFloating, {DType::Int64});

PoolPlan plan_pool(std::string_view op, size_t dims, const Tensor& input, const Ints& kernel_size, const Ints& stride,
                   const Ints& padding, const Ints& dilation, bool ceil_mode, const std::vector<DType>& dtypes = kFloating) {
  require_dtype(op, input, dtypes, "self");
  const Ints sizes = sizes_of(input);
  const auto rank = static_cast<int64_t>(dims);
  bool non_empty = input.dim() == rank + 1 || input.dim() == rank + 2;
  for (int64_t d = input.dim() == rank + 2 ? 1 : 0; non_empty && d < input.dim(); ++d) non_empty = sizes[d] > 0;
  OPCONFORM_CHECK(non_empty, ErrorCode::kInvalidArgument, op, ": argument 'self' must be a ", rank + 1, "-d (C, spatial...) or ",
                  rank + 2, "-d (N, C, spatial...) tensor with non-zero C and spatial sizes, got shape ", shape_string(sizes));
  PoolPlan p;
  p.kernel = expand_list(op, "kernel_size", kernel_size, dims);
  p.stride = stride.empty() ? p.kernel : expand_list(op, "stride", stride, dims);
  p.pad = expand_list(op, "padding", padding, dims);
  p.dilation = expand_list(op, "dilation", dilation, dims);
  check_all(op, "kernel_size", p.kernel, 1);
  check_all(op, "stride", p.stride, 1);
  check_all(op, "padding", p.pad, 0);
  check_all(op, "dilation", p.dilation, 1);
  for (size_t d = 0; d < dims; ++d) {
    OPCONFORM_CHECK(p.pad[d] <= p.kernel[d] / 2, ErrorCode::kInvalidArgument, op, ": argument 'padding' ",
                    shape_string(p.pad), " must be at most half of 'kernel_size' ", shape_string(p.kernel));
  }
  p.leading = Ints(sizes.begin(), sizes.end() - rank);
  p.planes = product(p.leading);
  p.in = tail(sizes, sizes.size() - dims);
  for (size_t d = 0; d < dims; ++d) {
    p.out.push_back(pooled_size(p.in[d], p.kernel[d], p.pad[d], p.stride[d], p.dilation[d], ceil_mode));
    OPCONFORM_CHECK(p.out[d] >= 1, ErrorCode::kInvalidArgument, op, ": the output size ", shape_string(p.out),
                    "... of input ", shape_string(sizes),
                    " is too small (arguments 'kernel_size', 'stride', 'padding', 'dilation')");
  }
  return p;
}

// A window of input positions lo[d], lo[d] + step[d], ... < hi[d] per spatial dim. With padding
// and dilation it may hold no input position at all.
struct Window {
  Ints lo, hi;
  bool empty() const {
    for (size_t d = 0; d < lo.size(); ++d)
      if (lo[d] >= hi[d]) return true;
    return false;
  }
};

// Calls f(offset in the plane) for each input position of a window, row-major.
template <typename F>
void for_each_in_window(const PoolPlan& p, const Window& w, const Ints& step, F&& f) {
  Ints counts, at(p.dims());
  for (size_t d = 0; d < p.dims(); ++d) counts.push_back(w.hi[d] > w.lo[d] ? (w.hi[d] - w.lo[d] + step[d] - 1) / step[d] : 0);
  for_each_index(counts, [&](const Ints& i) {
    for (size_t d = 0; d < p.dims(); ++d) at[d] = w.lo[d] + i[d] * step[d];
    f(flat(p.in, at));
  });
}

// Max pooling's window of output position o, clipped to the input (step: the dilation).
Window max_window(const PoolPlan& p, const Ints& o) {
  Window w;
  for (size_t d = 0; d < p.dims(); ++d) {
    int64_t lo = o[d] * p.stride[d] - p.pad[d];
    w.hi.push_back(std::min(lo + (p.kernel[d] - 1) * p.dilation[d] + 1, p.in[d]));
    while (lo < 0) lo += p.dilation[d];
    w.lo.push_back(lo);
  }
  return w;
}

// PyTorch's CPU max pooling: in each window the first largest value, or the last NaN; its index
// is the row-major position within the plane (h * W + w; (t * H + h) * W + w). An empty window
// gives -inf and the index of its first position.
std::tuple<Tensor, Tensor> max_pool_cpu(const PoolPlan& p, const Tensor& input) {
  const std::vector<double> x = input.to_vector<double>();
  const int64_t plane = p.plane(), out_plane = p.out_plane();
  std::vector<double> y(static_cast<size_t>(p.planes * out_plane));
  std::vector<int64_t> where(y.size());
  for (int64_t c = 0; c < p.planes; ++c) {
    auto at = static_cast<size_t>(c * out_plane);
    for_each_index(p.out, [&](const Ints& o) {
      const Window win = max_window(p, o);
      int64_t best = flat(p.in, win.lo);
      double best_value = -std::numeric_limits<double>::infinity();
      for_each_in_window(p, win, p.dilation, [&](int64_t i) {
        const double v = x[static_cast<size_t>(c * plane + i)];
        if (v > best_value || std::isnan(v)) {
          best_value = v;
          best = i;
        }
      });
      y[at] = best_value;
      where[at++] = best;
    });
  }
  return {from_vector<double>(y, p.out_sizes()).to(input.dtype()), from_vector<int64_t>(where, p.out_sizes())};
}

// Adds src [planes, m] into a zero [planes, plane_size] gradient at index [planes, m] (entries
// equal to plane_size are dropped) and shapes the result as `sizes`.
Tensor scatter_into_planes(const Ops& ops, const Tensor& src, const Tensor& index, int64_t planes, int64_t plane_size,
                           const Ints& sizes, bool has_dropped) {
  Tensor zero = ops.full({planes, plane_size + (has_dropped ? 1 : 0)}, int64_t{0}, src);
  Tensor summed = ops.tensor("aten::scatter_add", {zero, IValue(int64_t{1}), index, src});
  if (has_dropped) summed = narrow(ops, summed, 1, plane_size);
  return ops.reshape(summed, sizes);
}

// The plane positions max pooling's outputs took (indices as [planes, positions]), with the
// outputs of empty windows sent to a dropped column `plane` (the mask built with registry ops);
// any_empty says whether there are such outputs.
Tensor max_pool_gradient_index(const Ops& ops, const PoolPlan& p, const Tensor& indices, Device device, bool& any_empty) {
  const int64_t positions = p.out_plane();
  std::vector<bool> empty_windows;
  for_each_index(p.out, [&](const Ints& o) { empty_windows.push_back(max_window(p, o).empty()); });
  Tensor index = ops.reshape(indices, {p.planes, positions});
  any_empty = std::find(empty_windows.begin(), empty_windows.end(), true) != empty_windows.end();
  if (!any_empty) return index;
  Tensor mask = ops.full({positions}, false, DType::Bool, device);
  for (int64_t i = 0; i < positions; ++i) {
    if (!empty_windows[static_cast<size_t>(i)]) continue;
    mask = ops.tensor("aten::select_scatter", {mask, ops.full({}, true, DType::Bool, device), IValue(int64_t{0}), IValue(i)});
  }
  return ops.where(mask, ops.full({}, p.plane(), DType::Int64, device), index);
}

struct AvgPoolOptions {
  bool count_include_pad;
  std::optional<int64_t> divisor_override;
};

// The clipped window of output position o and its divisor, as PyTorch's CPU avg pooling.
struct AvgWindow {
  Window window;
  int64_t divisor;
};
AvgWindow avg_window(const PoolPlan& p, const AvgPoolOptions& o, const Ints& out) {
  AvgWindow a;
  int64_t padded_size = 1, size = 1;
  for (size_t d = 0; d < p.dims(); ++d) {
    int64_t lo = out[d] * p.stride[d] - p.pad[d], hi = std::min(lo + p.kernel[d], p.in[d] + p.pad[d]);
    padded_size *= hi - lo;
    lo = std::max<int64_t>(lo, 0), hi = std::min(hi, p.in[d]);
    size *= hi - lo;
    a.window.lo.push_back(lo);
    a.window.hi.push_back(hi);
  }
  a.divisor = o.divisor_override ? *o.divisor_override : o.count_include_pad ? padded_size : size;
  return a;
}

Tensor avg_pool_cpu(const PoolPlan& p, const AvgPoolOptions& o, const Tensor& input) {
  const std::vector<double> x = input.to_vector<double>();
  const int64_t plane = p.plane(), out_plane = p.out_plane();
  std::vector<double> y(static_cast<size_t>(p.planes * out_plane), 0.0);
  for (int64_t c = 0; c < p.planes; ++c) {
    auto at = static_cast<size_t>(c * out_plane);
    for_each_index(p.out, [&](const Ints& out) {
      const AvgWindow a = avg_window(p, o, out);
      if (!a.window.empty()) {
        double sum = 0;
        for_each_in_window(p, a.window, Ints(p.dims(), 1), [&](int64_t i) { sum += x[static_cast<size_t>(c * plane + i)]; });
        y[at] = sum / static_cast<double>(a.divisor);
      }
      ++at;
    });
  }
  return from_vector<double>(y, p.out_sizes()).to(input.dtype());
}

// Average pooling's gradient: every output's gradient / its divisor, added to each input position
// of its window. The windows are data-independent: index [planes, out positions * window cells]
// (cells outside the clipped window point past the plane and are dropped) and the coefficients
// 1 / divisor (0 for those cells), built with registry ops (so the formula can be captured into a
// graph) over [out positions..., kernel cells...], the clipped bounds as avg_window's.
Tensor avg_pool_backward(const Ops& ops, const Tensor& g, const PoolPlan& p, const AvgPoolOptions& o, const Ints& input_sizes) {
  const size_t dims = p.dims();
  const int64_t cells = product(p.kernel), positions = p.out_plane(), plane = p.plane();
  const Device device = g.device();
  auto positions_along = [&](int64_t n, size_t at) {
    Ints shape(2 * dims, 1);
    shape[at] = n;
    return ops.view(ops.arange(n, device), shape);
  };
  auto clamp = [&](const Tensor& t, IValue lo, IValue hi) { return ops.tensor("aten::clamp", {t, std::move(lo), std::move(hi)}); };
  auto times = [&](const Tensor& product_so_far, const Tensor& t) { return product_so_far.defined() ? ops.mul(product_so_far, t) : t; };
  Tensor padded_size, size, inside, cell;
  for (size_t d = 0; d < dims; ++d) {
    const Tensor lo = ops.add(ops.mul(positions_along(p.out[d], d), Scalar(p.stride[d])), Scalar(-p.pad[d]));
    const Tensor hi = clamp(ops.add(lo, Scalar(p.kernel[d])), IValue(), IValue(Scalar(p.in[d] + p.pad[d])));
    const Tensor lo_clipped = clamp(lo, IValue(Scalar(int64_t{0})), IValue());
    const Tensor hi_clipped = clamp(hi, IValue(), IValue(Scalar(p.in[d])));
    const Tensor at = ops.add(lo_clipped, positions_along(p.kernel[d], dims + d));  // each cell's input position
    const Tensor in_window = ops.tensor("aten::lt.Tensor", {at, hi_clipped});
    padded_size = times(padded_size, ops.sub(hi, lo));
    size = times(size, ops.sub(hi_clipped, lo_clipped));
    inside = inside.defined() ? ops.tensor("aten::logical_and", {inside, in_window}) : in_window;
    cell = cell.defined() ? ops.add(ops.mul(cell, Scalar(p.in[d])), at) : at;
  }
  Tensor divisor = o.divisor_override ? ops.full(Ints(2 * dims, 1), *o.divisor_override, DType::Int64, device)
                   : o.count_include_pad ? padded_size : size;
  const Tensor index = ops.where(inside, cell, ops.full({}, plane, DType::Int64, device));
  const Tensor reciprocal = ops.tensor("aten::reciprocal", {ops.to(divisor, g.dtype())});
  const Tensor coef = ops.where(inside, reciprocal, ops.scalar_like(0, g));
  Tensor idx = ops.expand(ops.reshape(index, {1, positions * cells}), {p.planes, positions * cells});
  Tensor spread = ops.mul(ops.reshape(g, {p.planes, positions, 1}), ops.reshape(coef, {positions, cells}));
  return scatter_into_planes(ops, ops.reshape(spread, {p.planes, positions * cells}), idx, p.planes, plane, input_sizes, true);
}

// A (dims + 1)-d or (dims + 2)-d input whose planes fit the (dilated) kernel with padding <= kernel / 2.
Stack draw_pool_args(SampleDraw& draw, bool dilated, size_t dims) {
  const DType d = draw.dtype();
  Ints leading{draw.integer(1, dims == 2 ? 3 : 2)};
  if (draw.coin(60)) leading.insert(leading.begin(), draw.coin(10) ? 0 : draw.integer(1, 2));
  Ints kernel, stride, padding, dilation, spatial;
  for (size_t i = 0; i < dims; ++i) {
    const int64_t k = draw.integer(1, 3), dil = dilated ? draw.integer(1, 2) : 1, pad = draw.integer(0, k / 2);
    const int64_t smallest = std::max<int64_t>(1, dil * (k - 1) + 1 - 2 * pad);
    kernel.push_back(k);
    stride.push_back(draw.integer(1, 3));
    padding.push_back(pad);
    dilation.push_back(dil);
    spatial.push_back(draw.integer(smallest, smallest + (dims == 2 ? 3 : 1)));  // 3-d: fewer elements
  }
  // Lists of one element stand for every dim when they agree.
  auto list = [&](const Ints& v) {
    const bool same = std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v[0]; });
    return IValue(same && draw.coin(30) ? Ints{v[0]} : v);
  };
  Tensor input = draw.tensor(concat(leading, spatial), d);
  Stack args{IValue(input), list(kernel), draw.coin(20) ? IValue(Ints{}) : list(stride), list(padding)};
  if (dilated) args.push_back(list(dilation));
  args.push_back(IValue(draw.coin(30)));  // ceil_mode
  return args;
}

// avg_pool2d/3d's arguments: a pooling sample, count_include_pad and sometimes a divisor.
Stack draw_avg_pool_args(SampleDraw& draw, size_t dims) {
  Stack args = draw_pool_args(draw, false, dims);
  args.push_back(IValue(draw.coin()));  // count_include_pad
  args.push_back(draw.coin(30) ? IValue(draw.integer(1, 3)) : IValue());
  return args;
}

// A pooling backward op's grad_output: the pooled shape of self, in self's dtype.
void check_pooled_grad(std::string_view op, const PoolPlan& p, const Tensor& grad, const Tensor& self) {
  OPCONFORM_CHECK(sizes_of(grad) == p.out_sizes() && grad.dtype() == self.dtype(), ErrorCode::kInvalidArgument, op,
                  ": 'grad_output' must be the pooled shape ", shape_string(p.out_sizes()), " in self's dtype, got ",
                  shape_string(grad.sizes()), " ", name(grad.dtype()));
}

// max_pool2d_with_indices and max_pool3d_with_indices.
void register_max_pool(Library& lib, const std::string& fam, size_t dims) {
  OpBuilder b(lib,
              dims == 2 ? "aten::max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                          "int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"
                        : "aten::max_pool3d_with_indices(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, "
                          "int[3] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
              fam, dims == 2 ? "2-d max pooling over (dilated) windows; returns (values, int64 indices h * W + w per plane)"
                             : "3-d max pooling over (dilated) windows; returns (values, int64 indices (t * H + h) * W + w per plane)");
  const std::string name = b.name();
  auto plan = [name, dims](const Tensor& self, const Ints& kernel_size, const Ints& stride, const Ints& padding,
                           const Ints& dilation, bool ceil_mode) {
    return plan_pool(name, dims, self, kernel_size, stride, padding, dilation, ceil_mode);
  };
  b.cpu([plan](const Tensor& self, const Ints& kernel_size, const Ints& stride, const Ints& padding, const Ints& dilation,
               bool ceil_mode) { return max_pool_cpu(plan(self, kernel_size, stride, padding, dilation, ceil_mode), self); })
      .fake([plan](const Tensor& self, const Ints& kernel_size, const Ints& stride, const Ints& padding,
                   const Ints& dilation, bool ceil_mode) {
        const PoolPlan p = plan(self, kernel_size, stride, padding, dilation, ceil_mode);
        if (is_symbolic(self)) {
          const SymInts sizes = sym_pool_sizes(p, self, ceil_mode);
          return std::make_tuple(make_fake_tensor(sizes, self.dtype(), self.device()),
                                 make_fake_tensor(sizes, DType::Int64, self.device()));
        }
        return std::make_tuple(empty(p.out_sizes(), self.options()),
                               empty(p.out_sizes(), TensorOptions(DType::Int64, self.device())));
      })
      .autograd(
          [ops = Ops(lib.registry()), plan](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
            // Each output's gradient goes to the input position its index names; outputs of
            // empty windows (constant -inf) pass none.
            const auto saved = ctx.saved_tensors();  // self, indices
            const Tensor &x = saved[0], &indices = saved[1];
            const PoolPlan p = plan(x, saved_argument(ctx, 1).to<Ints>(), saved_argument(ctx, 2).to<Ints>(),
                                    saved_argument(ctx, 3).to<Ints>(), saved_argument(ctx, 4).to<Ints>(),
                                    saved_argument(ctx, 5).to_bool());
            bool any_empty = false;
            const Tensor index = max_pool_gradient_index(ops, p, indices, x.device(), any_empty);
            Tensor gx = scatter_into_planes(ops, ops.reshape(g[0], {p.planes, p.out_plane()}), index, p.planes, p.plane(),
                                            sizes_of(x), any_empty);
            return {gx, Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
          },
          [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
            ctx.save_for_backward({inputs[0].to_tensor(), outputs[1].to_tensor()});
            ctx.mark_non_differentiable({outputs[1].to_tensor()});
            save_arguments(ctx, inputs);
          })
      .samples([dims](SampleDraw& draw) { return draw_pool_args(draw, true, dims); })
      .dtypes(kFloating);
}

// avg_pool2d and avg_pool3d.
void register_avg_pool(Library& lib, const std::string& fam, size_t dims) {
  OpBuilder b(lib,
              dims == 2 ? "aten::avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool "
                          "ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor"
                        : "aten::avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, bool "
                          "ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
              fam, std::to_string(dims) + "-d average pooling (divisor: the window with its padding, the window without it, "
                                          "or the override)");
  const std::string name = b.name();
  auto plan = [name, dims](const Tensor& self, const Ints& kernel_size, const Ints& stride, const Ints& padding,
                           bool ceil_mode, std::optional<int64_t> divisor_override) {
    OPCONFORM_CHECK(!divisor_override || *divisor_override != 0, ErrorCode::kInvalidArgument, name,
                    ": argument 'divisor_override' must not be zero");
    return plan_pool(name, dims, self, kernel_size, stride, padding, {1}, ceil_mode, kAvgPoolDtypes);
  };
  b.cpu([plan](const Tensor& self, const Ints& kernel_size, const Ints& stride, const Ints& padding, bool ceil_mode,
               bool count_include_pad, std::optional<int64_t> divisor_override) {
     return avg_pool_cpu(plan(self, kernel_size, stride, padding, ceil_mode, divisor_override),
                         {count_include_pad, divisor_override}, self);
   })
      .fake([plan](const Tensor& self, const Ints& kernel_size, const Ints& stride, const Ints& padding, bool ceil_mode,
                   bool, std::optional<int64_t> divisor_override) {
        const PoolPlan p = plan(self, kernel_size, stride, padding, ceil_mode, divisor_override);
        if (is_symbolic(self)) return make_fake_tensor(sym_pool_sizes(p, self, ceil_mode), self.dtype(), self.device());
        return empty(p.out_sizes(), self.options());
      })
      .autograd(
          [ops = Ops(lib.registry()), plan](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
            const Tensor x = ctx.saved_tensors()[0];
            const auto divisor = saved_argument(ctx, 6).to<std::optional<int64_t>>();
            const PoolPlan p = plan(x, saved_argument(ctx, 1).to<Ints>(), saved_argument(ctx, 2).to<Ints>(),
                                    saved_argument(ctx, 3).to<Ints>(), saved_argument(ctx, 4).to_bool(), divisor);
            return {avg_pool_backward(ops, g[0], p, {saved_argument(ctx, 5).to_bool(), divisor}, sizes_of(x)),
                    Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
          },
          [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
            ctx.save_for_backward({inputs[0].to_tensor()});
            save_arguments(ctx, inputs);
          })
      .samples([dims](SampleDraw& draw) { return draw_avg_pool_args(draw, dims); })
      .dtypes(kAvgPoolDtypes);
}

// max_pool2d_with_indices_backward(grad_output, self, ..., indices): each output's gradient added
// to the input position its index names (outputs of empty windows give none), as max pooling's
// formula; its gradient by grad_output gathers the incoming one at the indices. A test ties it to
// max_pool2d_with_indices' formula.
void register_max_pool2d_backward(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib,
              "aten::max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, "
              "int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor",
              fam, "the gradient of max_pool2d_with_indices: each grad_output element added at its index");
  const std::string name = b.name();
  auto plan = [name](const Tensor& grad, const Tensor& self, const Ints& kernel_size, const Ints& stride,
                     const Ints& padding, const Ints& dilation, bool ceil_mode, const Tensor& indices) {
    const PoolPlan p = plan_pool(name, 2, self, kernel_size, stride, padding, dilation, ceil_mode);
    check_pooled_grad(name, p, grad, self);
    OPCONFORM_CHECK(sizes_of(indices) == p.out_sizes() && indices.dtype() == DType::Int64, ErrorCode::kInvalidArgument,
                    name, ": 'indices' must be int64 of the pooled shape ", shape_string(p.out_sizes()), ", got ",
                    shape_string(indices.sizes()), " ", opconform::name(indices.dtype()));
    return p;
  };
  b.cpu([name, plan](const Tensor& grad, const Tensor& self, const Ints& kernel_size, const Ints& stride,
                     const Ints& padding, const Ints& dilation, bool ceil_mode, const Tensor& indices) {
     const PoolPlan p = plan(grad, self, kernel_size, stride, padding, dilation, ceil_mode, indices);
     const std::vector<double> g = grad.contiguous().to_vector<double>();
     const std::vector<int64_t> at = indices.contiguous().to_vector<int64_t>();
     const int64_t plane = p.plane(), positions = p.out_plane();
     std::vector<bool> empty_windows;
     for_each_index(p.out, [&](const Ints& o) { empty_windows.push_back(max_window(p, o).empty()); });
     std::vector<double> x(static_cast<size_t>(p.planes * plane), 0.0);
     for (int64_t c = 0; c < p.planes; ++c) {
       for (int64_t i = 0; i < positions; ++i) {
         if (empty_windows[static_cast<size_t>(i)]) continue;
         const int64_t k = at[static_cast<size_t>(c * positions + i)];
         OPCONFORM_CHECK(k >= 0 && k < plane, ErrorCode::kInvalidArgument, name, ": index ", k,
                         " in 'indices' is out of bounds for a plane of ", plane, " elements");
         x[static_cast<size_t>(c * plane + k)] += g[static_cast<size_t>(c * positions + i)];
       }
     }
     return from_vector<double>(x, sizes_of(self)).to(self.dtype());
   })
      .fake([plan](const Tensor& grad, const Tensor& self, const Ints& kernel_size, const Ints& stride,
                   const Ints& padding, const Ints& dilation, bool ceil_mode, const Tensor& indices) {
        plan(grad, self, kernel_size, stride, padding, dilation, ceil_mode, indices);
        if (is_symbolic(self)) return make_fake_tensor(self.sym_sizes(), self.dtype(), self.device());
        return empty(self.sizes(), self.options());
      })
      .autograd(
          [ops = Ops(r), name](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
            const auto saved = ctx.saved_tensors();  // indices, self (for its shape)
            const Tensor &indices = saved[0], &self = saved[1];
            const PoolPlan p = plan_pool(name, 2, self, saved_argument(ctx, 2).to<Ints>(), saved_argument(ctx, 3).to<Ints>(),
                                         saved_argument(ctx, 4).to<Ints>(), saved_argument(ctx, 5).to<Ints>(),
                                         saved_argument(ctx, 6).to_bool());
            const int64_t plane = p.plane();
            bool any_empty = false;
            const Tensor index = max_pool_gradient_index(ops, p, indices, g[0].device(), any_empty);
            // A zero column at `plane` for the dropped outputs, then a gather at the indices.
            const Tensor planes = ops.tensor("aten::constant_pad_nd",
                                             {ops.reshape(g[0], {p.planes, plane}), IValue(Ints{0, 1}), IValue(int64_t{0})});
            const Tensor gathered = ops.tensor("aten::gather", {planes, IValue(int64_t{1}), index, IValue(false)});
            return {ops.reshape(gathered, p.out_sizes()), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
          },
          [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
            ctx.save_for_backward({inputs[7].to_tensor(), inputs[1].to_tensor()});
            save_arguments(ctx, inputs);
          })
      .samples([name](SampleDraw& draw) {
        Stack args = draw_pool_args(draw, true, 2);  // self, kernel_size, stride, padding, dilation, ceil_mode
        const Tensor self = args[0].to_tensor();
        const PoolPlan p = plan_pool(name, 2, self, args[1].to<Ints>(), args[2].to<Ints>(), args[3].to<Ints>(),
                                     args[4].to<Ints>(), args[5].to_bool());
        const Tensor indices = std::get<1>(max_pool_cpu(p, self));
        args.insert(args.begin(), IValue(draw.tensor(p.out_sizes(), self.dtype())));
        args.push_back(IValue(indices));
        return args;
      })
      .dtypes(kFloating);
}

// Each output's gradient / its divisor added to every input position of its clipped window
// (avg_window): the CPU kernel of avg_pool2d_backward, in double, rounded once.
Tensor avg_pool_backward_cpu(const PoolPlan& p, const AvgPoolOptions& o, const Tensor& grad, const Tensor& self) {
  const std::vector<double> g = grad.contiguous().to_vector<double>();
  const int64_t plane = p.plane(), out_plane = p.out_plane();
  std::vector<double> x(static_cast<size_t>(p.planes * plane), 0.0);
  for (int64_t c = 0; c < p.planes; ++c) {
    auto at = static_cast<size_t>(c * out_plane);
    for_each_index(p.out, [&](const Ints& out) {
      const AvgWindow a = avg_window(p, o, out);
      const double gy = g[at++];
      if (a.window.empty()) return;
      const double share = gy / static_cast<double>(a.divisor);
      for_each_in_window(p, a.window, Ints(p.dims(), 1), [&](int64_t i) { x[static_cast<size_t>(c * plane + i)] += share; });
    });
  }
  return from_vector<double>(x, sizes_of(self)).to(self.dtype());
}

// avg_pool2d_backward(grad_output, self, ...): avg_pool2d's gradient as an op. Its gradient by
// grad_output is avg_pool2d of the incoming one (a linear map's adjoint's adjoint, as PyTorch's
// derivatives.yaml); self gives the shape only. A test ties it to avg_pool2d's formula.
void register_avg_pool2d_backward(Library& lib, const std::string& fam) {
  Registry& r = lib.registry();
  OpBuilder b(lib,
              "aten::avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] "
              "padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor",
              fam, "the gradient of avg_pool2d: each grad_output element / its divisor spread over its window");
  const std::string name = b.name();
  auto plan = [name](const Tensor& grad, const Tensor& self, const Ints& kernel_size, const Ints& stride,
                     const Ints& padding, bool ceil_mode, std::optional<int64_t> divisor_override) {
    OPCONFORM_CHECK(!divisor_override || *divisor_override != 0, ErrorCode::kInvalidArgument, name,
                    ": argument 'divisor_override' must not be zero");
    const PoolPlan p = plan_pool(name, 2, self, kernel_size, stride, padding, {1}, ceil_mode);
    check_pooled_grad(name, p, grad, self);
    return p;
  };
  b.cpu([plan](const Tensor& grad, const Tensor& self, const Ints& kernel_size, const Ints& stride, const Ints& padding,
               bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
     return avg_pool_backward_cpu(plan(grad, self, kernel_size, stride, padding, ceil_mode, divisor_override),
                                  {count_include_pad, divisor_override}, grad, self);
   })
      .fake([plan](const Tensor& grad, const Tensor& self, const Ints& kernel_size, const Ints& stride,
                   const Ints& padding, bool ceil_mode, bool, std::optional<int64_t> divisor_override) {
        plan(grad, self, kernel_size, stride, padding, ceil_mode, divisor_override);
        if (is_symbolic(self)) return make_fake_tensor(self.sym_sizes(), self.dtype(), self.device());
        return empty(self.sizes(), self.options());
      })
      .autograd(
          [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
            Stack args{IValue(g[0])};
            for (size_t i = 2; i < 8; ++i) args.push_back(saved_argument(ctx, i));
            return {ops.tensor("aten::avg_pool2d", std::move(args)), Tensor(), Tensor(), Tensor(), Tensor(),
                    Tensor(), Tensor(), Tensor()};
          },
          [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) { save_arguments(ctx, inputs); })
      .samples([name](SampleDraw& draw) {
        Stack args = draw_avg_pool_args(draw, 2);  // self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor
        const Tensor self = args[0].to_tensor();
        const PoolPlan p = plan_pool(name, 2, self, args[1].to<Ints>(), args[2].to<Ints>(), args[3].to<Ints>(), {1},
                                     args[4].to_bool());
        args.insert(args.begin(), IValue(draw.tensor(p.out_sizes(), self.dtype())));
        return args;
      })
      .dtypes(kFloating);
}

// ============================================================================ col2im

// col2im (fold): columns [N, C * kh * kw, L] (or unbatched [C * kh * kw, L]), one per sliding
// block, summed into an [N, C, H, W] image; PyTorch's col2im_shape_check gives the rules.
struct FoldPlan {
  Ints leading;  // [N, C] or [C]
  int64_t channels;
  Ints out, kernel, dilation, padding, stride, blocks;  // per spatial dim (2)
  int64_t cells() const { return kernel[0] * kernel[1]; }
  int64_t length() const { return blocks[0] * blocks[1]; }
  Ints out_sizes() const { return concat(leading, out); }
};

FoldPlan plan_col2im(std::string_view op, const Tensor& self, const Ints& output_size, const Ints& kernel_size,
                     const Ints& dilation, const Ints& padding, const Ints& stride) {
  require_dtype(op, self, kFloating, "self");
  FoldPlan p;
  p.out = expand_list(op, "output_size", output_size, 2);
  p.kernel = expand_list(op, "kernel_size", kernel_size, 2);
  p.dilation = expand_list(op, "dilation", dilation, 2);
  p.padding = expand_list(op, "padding", padding, 2);
  p.stride = expand_list(op, "stride", stride, 2);
  check_all(op, "kernel_size", p.kernel, 1);
  check_all(op, "dilation", p.dilation, 1);
  check_all(op, "padding", p.padding, 0);
  check_all(op, "stride", p.stride, 1);
  const Ints sizes = sizes_of(self);
  const bool batched = self.dim() == 3;
  OPCONFORM_CHECK((self.dim() == 2 || batched) && sizes[batched ? 1 : 0] > 0 && sizes.back() > 0,
                  ErrorCode::kInvalidArgument, op, ": argument 'self' must be 2-d or 3-d (batch mode, possibly of 0 batch "
                  "size) with non-zero other dims, got shape ", shape_string(sizes));
  const int64_t planes = sizes[batched ? 1 : 0];
  OPCONFORM_CHECK(planes % p.cells() == 0, ErrorCode::kInvalidArgument, op, ": size ", planes,
                  " of argument 'self''s channel dim must be divisible by the product of kernel_size ", shape_string(p.kernel));
  for (size_t d = 0; d < 2; ++d) {
    const int64_t reach = p.dilation[d] * (p.kernel[d] - 1) + 1;
    p.blocks.push_back(floor_div(p.out[d] + 2 * p.padding[d] - reach, p.stride[d]) + 1);
  }
  OPCONFORM_CHECK(p.blocks[0] >= 1 && p.blocks[1] >= 1, ErrorCode::kInvalidArgument, op, ": output_size ",
                  shape_string(p.out), " with these kernel_size, dilation, padding and stride gives ",
                  shape_string(p.blocks), " sliding blocks, which is too small (non-positive)");
  OPCONFORM_CHECK(sizes.back() == p.length(), ErrorCode::kInvalidArgument, op, ": argument 'self' must hold ",
                  p.length(), " sliding blocks (", shape_string(p.blocks), " for output_size ", shape_string(p.out),
                  ") in its last dim, got shape ", shape_string(sizes));
  p.channels = planes / p.cells();
  p.leading = batched ? Ints{sizes[0], p.channels} : Ints{p.channels};
  return p;
}

// out[n, c, b_h * s_h - p_h + k_h * d_h, b_w * s_w - p_w + k_w * d_w] += col[n, (c, k_h, k_w), (b_h, b_w)]
// for positions inside the image.
Tensor col2im_cpu(const FoldPlan& p, const Tensor& self) {
  const std::vector<double> col = self.to_vector<double>();
  const int64_t images = product(p.leading) / p.channels, H = p.out[0], W = p.out[1];
  std::vector<double> out(static_cast<size_t>(product(p.out_sizes())), 0.0);
  size_t at = 0;  // row-major over [images, channels, kh, kw, blocks_h, blocks_w]
  for (int64_t plane = 0; plane < images * p.channels; ++plane)
    for (int64_t kh = 0; kh < p.kernel[0]; ++kh)
      for (int64_t kw = 0; kw < p.kernel[1]; ++kw)
        for (int64_t bh = 0; bh < p.blocks[0]; ++bh)
          for (int64_t bw = 0; bw < p.blocks[1]; ++bw, ++at) {
            const int64_t h = bh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
            const int64_t w = bw * p.stride[1] - p.padding[1] + kw * p.dilation[1];
            if (h >= 0 && h < H && w >= 0 && w < W) out[static_cast<size_t>((plane * H + h) * W + w)] += col[at];
          }
  return from_vector<double>(out, p.out_sizes()).to(self.dtype());
}

// col2im's gradient, im2col of g: the padded image's values at every block's kernel positions,
// a gather over each flattened padded plane with an index built by registry ops (so the formula
// is captured into graphs and differentiates again: gather's gradient is a scatter-add).
Tensor im2col(const Ops& ops, const FoldPlan& p, const Tensor& g, const Ints& self_sizes) {
  const Device device = g.device();
  const int64_t padded_w = p.out[1] + 2 * p.padding[1], planes = product(p.leading);
  auto along = [&](int64_t n, int64_t at, int64_t step) {  // n positions * step along dim `at` of 4
    Ints shape(4, 1);
    shape[static_cast<size_t>(at)] = n;
    return ops.mul(ops.view(ops.arange(n, device), shape), Scalar(step));
  };
  // [kh, kw, blocks_h, blocks_w]: the padded-plane offset of each (kernel position, block).
  const Tensor row = ops.add(along(p.kernel[0], 0, p.dilation[0]), along(p.blocks[0], 2, p.stride[0]));
  const Tensor col = ops.add(along(p.kernel[1], 1, p.dilation[1]), along(p.blocks[1], 3, p.stride[1]));
  const Tensor index = ops.add(ops.mul(row, Scalar(padded_w)), col);
  const int64_t cells = p.cells() * p.length();
  const Tensor padded = ops.tensor("aten::constant_pad_nd",
                                   {g, IValue(Ints{p.padding[1], p.padding[1], p.padding[0], p.padding[0]}), IValue(int64_t{0})});
  const Tensor flat_planes = ops.reshape(padded, {planes, (p.out[0] + 2 * p.padding[0]) * padded_w});
  const Tensor idx = ops.expand(ops.reshape(index, {1, cells}), {planes, cells});
  return ops.reshape(ops.tensor("aten::gather", {flat_planes, IValue(int64_t{1}), idx, IValue(false)}), self_sizes);
}

void register_col2im(Library& lib, const std::string& fam) {
  OpBuilder b(lib,
              "aten::col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, "
              "int[2] stride) -> Tensor",
              fam, "fold: sums columns of sliding blocks [N, C * kh * kw, L] into an [N, C, H, W] image (im2col's adjoint)");
  const std::string name = b.name();
  b.cpu([name](const Tensor& self, const Ints& output_size, const Ints& kernel_size, const Ints& dilation,
               const Ints& padding, const Ints& stride) {
     return col2im_cpu(plan_col2im(name, self, output_size, kernel_size, dilation, padding, stride), self);
   })
      .fake([name](const Tensor& self, const Ints& output_size, const Ints& kernel_size, const Ints& dilation,
                   const Ints& padding, const Ints& stride) {
        const FoldPlan p = plan_col2im(name, self, output_size, kernel_size, dilation, padding, stride);
        if (!is_symbolic(self)) return empty(p.out_sizes(), self.options());
        // The batch and the channels come from self's (symbolic) sizes, the image from output_size.
        const SymInts in = self.sym_sizes();
        SymInts sizes{floordiv(in[in.size() - 2], SymInt(p.cells())), SymInt(p.out[0]), SymInt(p.out[1])};
        if (self.dim() == 3) sizes.insert(sizes.begin(), in[0]);
        return make_fake_tensor(sizes, self.dtype(), self.device());
      })
      .autograd(
          [ops = Ops(lib.registry()), name](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
            const Tensor self = ctx.saved_tensors()[0];
            const FoldPlan p = plan_col2im(name, self, saved_argument(ctx, 1).to<Ints>(), saved_argument(ctx, 2).to<Ints>(),
                                           saved_argument(ctx, 3).to<Ints>(), saved_argument(ctx, 4).to<Ints>(),
                                           saved_argument(ctx, 5).to<Ints>());
            return {im2col(ops, p, g[0], sizes_of(self)), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
          },
          [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
            ctx.save_for_backward({inputs[0].to_tensor()});
            save_arguments(ctx, inputs);
          })
      .samples([](SampleDraw& draw) {
        Ints out, kernel, dilation, padding, stride, blocks;
        for (int i = 0; i < 2; ++i) {
          kernel.push_back(draw.integer(1, 3));
          dilation.push_back(draw.integer(1, 2));
          padding.push_back(draw.integer(0, 1));
          stride.push_back(draw.integer(1, 2));
          const int64_t reach = dilation.back() * (kernel.back() - 1) + 1;
          out.push_back(std::max<int64_t>(1, reach - 2 * padding.back()) + draw.integer(0, 3));
          blocks.push_back(floor_div(out.back() + 2 * padding.back() - reach, stride.back()) + 1);
        }
        const int64_t planes = draw.integer(1, 2) * kernel[0] * kernel[1];
        Ints sizes{planes, blocks[0] * blocks[1]};
        if (draw.coin(70)) sizes.insert(sizes.begin(), draw.coin(10) ? 0 : draw.integer(1, 2));
        return Stack{IValue(draw.tensor(sizes, draw.dtype())), IValue(out), IValue(kernel), IValue(dilation),
                     IValue(padding), IValue(stride)};
      })
      .dtypes(kFloating);
}

}  // namespace

void register_convolution_pooling(Library& lib) {
  Registry& r = lib.registry();
  const std::string fam = "convolution_pooling";

  {
    OpBuilder b(lib,
                "aten::convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
                "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
                fam, "N-d grouped, strided, padded, dilated convolution (cross-correlation) or transposed convolution, plus bias");
    const std::string name = b.name();
    b.cpu([name](const Tensor& input, const Tensor& weight, const MaybeTensor& bias, const Ints& stride,
                 const Ints& padding, const Ints& dilation, bool transposed, const Ints& output_padding, int64_t groups) {
       const ConvPlan p =
           plan_convolution(name, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
       return convolution_cpu(p, input, weight, bias);
     })
        .fake([name](const Tensor& input, const Tensor& weight, const MaybeTensor& bias, const Ints& stride,
                     const Ints& padding, const Ints& dilation, bool transposed, const Ints& output_padding, int64_t groups) {
          const ConvPlan p =
              plan_convolution(name, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
          if (is_symbolic(input) || is_symbolic(weight) || (bias && is_symbolic(*bias)))
            return make_fake_tensor(sym_conv_sizes(p, input, weight), input.dtype(), input.device());
          return empty(p.out_sizes(), input.options());
        })
        .autograd(with_ops(r, convolution_backward),
                  [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
                    ctx.save_for_backward({inputs[0].to_tensor(), inputs[1].to_tensor()});
                    save_arguments(ctx, inputs);
                  })
        .samples(draw_convolution_args)
        .dtypes(kConvolutionDtypes);
  }
  register_max_pool(lib, fam, 2);
  register_max_pool(lib, fam, 3);
  register_avg_pool(lib, fam, 2);
  register_avg_pool(lib, fam, 3);
  register_avg_pool2d_backward(lib, fam);
  register_max_pool2d_backward(lib, fam);
  register_convolution_backward(lib, fam);
  register_col2im(lib, fam);
}

}  // namespace opconform::reference
