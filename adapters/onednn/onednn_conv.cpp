// convolution on oneDNN's convolution_forward (transposed=True: deconvolution_forward), 1-, 2- and
// 3-d, with the backward primitives (backward_data, backward_weights with the bias gradient) as
// the autograd formula. The mapping of PyTorch's arguments:
//   - oneDNN's dilation counts the inserted gaps: PyTorch's dilation - 1;
//   - padding_l = padding; padding_r = padding, minus output_padding for the transposed case
//     (which is how PyTorch's extra output rows appear in oneDNN's size formula);
//   - weights are logical [G, OC/G, IC/G, k...] (or [OC, IC, k...]): a regrouped, and for the
//     transposed case dim-swapped, descriptor of PyTorch's weight memory, no copy;
//   - the primitive picks its layouts (format_tag::any) and the plugin reorders in and out, as a
//     framework integration does; the result is row-major, as the reference's.
#include <algorithm>

#include "onednn_memory.h"

namespace opc_onednn {
namespace {

using fmt = dnnl::memory::format_tag;

struct Conv {
  Tensor input, weight;      // weight: PyTorch's layout
  std::optional<Tensor> bias;
  bool transposed = false;
  int64_t groups = 1;
  Dims strides, dilates, pad_l, pad_r;  // oneDNN's
  Dims out_shape;
  Tensor weight_view;  // the weight as oneDNN's logical weights (same memory)
};

Dims expand_list(const Dims& v, size_t n, const char* name) {
  if (v.size() == n) return v;
  if (v.size() == 1) return Dims(n, v[0]);
  invalid_argument(std::string("argument '") + name + "' must have " + std::to_string(n) + " elements, got " + shape_string(v));
}

// PyTorch's weight as oneDNN's logical weights: regrouped to [G, OC/G, IC/G, k...] when groups > 1,
// with the (IC, OC) dims swapped for the transposed case.
Tensor weight_view(const Tensor& w, bool transposed, int64_t groups) {
  Tensor v = w;
  const Dims& s = w.strides;
  Dims k_shape(w.shape.begin() + 2, w.shape.end()), k_strides(s.begin() + 2, s.end());
  if (groups == 1) {
    if (transposed) v = permuted(w, [&] {
      std::vector<int> p{1, 0};
      for (int d = 2; d < w.ndim(); ++d) p.push_back(d);
      return p;
    }());
    return v;
  }
  const int64_t first = w.size(0) / groups;  // OC/G, or IC/G when transposed
  if (transposed) {  // [G*ICg, OCg, k] -> [G, OCg, ICg, k]
    v.shape = {groups, w.size(1), first};
    v.strides = {first * s[0], s[1], s[0]};
  } else {  // [G*OCg, ICg, k] -> [G, OCg, ICg, k]
    v.shape = {groups, first, w.size(1)};
    v.strides = {first * s[0], s[0], s[1]};
  }
  v.shape.insert(v.shape.end(), k_shape.begin(), k_shape.end());
  v.strides.insert(v.strides.end(), k_strides.begin(), k_strides.end());
  return v;
}

Conv read_conv(Call& call) {
  Conv c;
  c.input = call.tensor(0, "input");
  c.weight = call.tensor(1, "weight");
  c.bias = call.optional_tensor(2, "bias");
  c.transposed = call.boolean(6, "transposed");
  c.groups = call.integer(8, "groups");
  const int n = c.input.ndim();
  if (n < 3 || n > 5) not_implemented("argument 'input' must be 3-, 4- or 5-D (1-3 spatial dims), got " + shape_string(c.input.shape));
  if (c.weight.ndim() != n) invalid_argument("argument 'weight' must have the rank of 'input'");
  if (c.groups < 1) invalid_argument("argument 'groups' must be positive");
  if (c.input.type != c.weight.type) invalid_argument("arguments 'input' and 'weight' must have one dtype");
  const size_t k = static_cast<size_t>(n - 2);
  const Dims stride = expand_list(call.int_list(3, "stride"), k, "stride");
  const Dims padding = expand_list(call.int_list(4, "padding"), k, "padding");
  const Dims dilation = expand_list(call.int_list(5, "dilation"), k, "dilation");
  const Dims output_padding = expand_list(call.int_list(7, "output_padding"), k, "output_padding");
  const Dims out_pad = c.transposed ? output_padding : Dims(k, 0);  // ignored otherwise, as PyTorch
  const int64_t in_channels = c.transposed ? c.weight.size(0) : c.weight.size(1) * c.groups;
  const int64_t out_channels = c.transposed ? c.weight.size(1) * c.groups : c.weight.size(0);
  if (c.input.size(1) != in_channels || c.weight.size(0) % c.groups != 0) {
    invalid_argument("input of shape " + shape_string(c.input.shape) + " does not match weight of shape " +
                     shape_string(c.weight.shape) + " with groups=" + std::to_string(c.groups));
  }
  if (c.bias && (c.bias->ndim() != 1 || c.bias->size(0) != out_channels)) invalid_argument("argument 'bias' must have shape [" + std::to_string(out_channels) + "]");
  c.out_shape = {c.input.size(0), out_channels};
  for (size_t i = 0; i < k; ++i) {
    if (stride[i] < 1 || dilation[i] < 1 || padding[i] < 0) invalid_argument("stride and dilation must be positive, padding non-negative");
    const int64_t in = c.input.shape[i + 2], kernel = c.weight.shape[i + 2], extent = dilation[i] * (kernel - 1) + 1;
    const int64_t out = c.transposed ? (in - 1) * stride[i] - 2 * padding[i] + extent + out_pad[i]
                                     : (in + 2 * padding[i] - extent) / stride[i] + 1;
    if (out < 0 || (!c.transposed && in + 2 * padding[i] < extent)) invalid_argument("the kernel is larger than the padded input");
    c.out_shape.push_back(out);
    c.strides.push_back(stride[i]);
    c.dilates.push_back(dilation[i] - 1);
    c.pad_l.push_back(padding[i]);
    // oneDNN refuses negative padding: output_padding beyond padding has no descriptor.
    if (padding[i] < out_pad[i]) {
      not_implemented("output_padding " + shape_string(out_pad) + " larger than padding " + shape_string(padding) +
                      " would need a negative padding_r, which oneDNN refuses");
    }
    c.pad_r.push_back(padding[i] - out_pad[i]);
  }
  c.weight_view = weight_view(c.weight, c.transposed, c.groups);
  return c;
}

// A memory in `want`'s layout holding t (t itself when its descriptor already is that layout).
dnnl::memory in_layout(Call& call, Tensor& t, const dnnl::memory::desc& want, const char* name) {
  const dnnl::memory::desc have = input_md(call, t, name);
  if (have == want) return memory_of(have, t);
  dnnl::memory m(want, engine());
  if (t.numel() > 0) run(dnnl::reorder(memory_of(have, t), m), {{DNNL_ARG_FROM, memory_of(have, t)}, {DNNL_ARG_TO, m}});
  return m;
}

// Where a primitive writes `out` (out's own memory when the layouts agree), and the copy back.
struct OutLayout {
  dnnl::memory mem;
  bool copy_back;
};
OutLayout out_layout(const dnnl::memory::desc& have, const Tensor& out) {
  const dnnl::memory::desc user = md_of(out);
  if (have == user) return {memory_of(user, out), false};
  return {dnnl::memory(have, engine()), true};
}
void copy_back(const OutLayout& o, const Tensor& out) {
  if (!o.copy_back || out.numel() == 0) return;
  const dnnl::memory user = memory_of(md_of(out), out);
  run(dnnl::reorder(o.mem, user), {{DNNL_ARG_FROM, o.mem}, {DNNL_ARG_TO, user}});
}

dnnl::memory::desc any_md(const Dims& dims, dt type) { return dnnl::memory::desc(dims, type, fmt::any); }

template <class Fwd>
typename Fwd::primitive_desc forward_pd(const Conv& c, dnnl::prop_kind kind) {
  const dt type = c.input.type;
  const dnnl::algorithm a = std::is_same_v<Fwd, dnnl::convolution_forward> ? dnnl::algorithm::convolution_direct
                                                                             : dnnl::algorithm::deconvolution_direct;
  // The bias as format any too: a strided bias descriptor is accepted but read as dense (a sliced
  // bias gave wrong values), so it is reordered into the layout the primitive asks for.
  const dnnl::memory::desc bias_md = c.bias ? any_md(c.bias->shape, c.bias->type) : dnnl::memory::desc();
  return typename Fwd::primitive_desc({kind, a, any_md(c.input.shape, type), any_md(c.weight_view.shape, type), bias_md,
                                       any_md(c.out_shape, type), c.strides, c.dilates, c.pad_l, c.pad_r},
                                      engine());
}

template <class Fwd>
void forward(Call& call) {
  Conv c = read_conv(call);
  const Tensor out = call.output(0, c.input.type, c.out_shape);
  if (out.numel() == 0) return;
  const auto pd = forward_pd<Fwd>(c, dnnl::prop_kind::forward_inference);
  const dnnl::memory src = in_layout(call, c.input, pd.src_desc(), "input");
  const dnnl::memory wei = in_layout(call, c.weight_view, pd.weights_desc(), "weight");
  const OutLayout dst = out_layout(pd.dst_desc(), out);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst.mem}};
  if (c.bias) args[DNNL_ARG_BIAS] = in_layout(call, *c.bias, pd.bias_desc(), "bias");
  run(Fwd(pd), args);
  copy_back(dst, out);
}

dnnl::algorithm algorithm_of(bool transposed) {
  return transposed ? dnnl::algorithm::deconvolution_direct : dnnl::algorithm::convolution_direct;
}

// grad_input = backward_data(grad, weight).
template <class BwdData, class FwdPd>
void grad_input(Call& call, Conv& c, Tensor& grad, const FwdPd& fwd) {
  const dt type = c.input.type;
  const Tensor gin = call.output(0, type, c.input.shape);
  if (gin.numel() == 0 || grad.numel() == 0) return;
  const typename BwdData::primitive_desc pd({algorithm_of(c.transposed), any_md(c.input.shape, type),
                                             any_md(c.weight_view.shape, type), any_md(c.out_shape, type), c.strides,
                                             c.dilates, c.pad_l, c.pad_r},
                                            engine(), fwd);
  const dnnl::memory diff_dst = in_layout(call, grad, pd.diff_dst_desc(), "grad");
  const dnnl::memory wei = in_layout(call, c.weight_view, pd.weights_desc(), "weight");
  const OutLayout diff_src = out_layout(pd.diff_src_desc(), gin);
  run(BwdData(pd), {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_SRC, diff_src.mem}});
  copy_back(diff_src, gin);
}

// grad_weight (in PyTorch's row-major weight layout, written through its oneDNN view) and
// grad_bias = backward_weights(input, grad).
template <class BwdWeights, class FwdPd>
void grad_weights(Call& call, Conv& c, Tensor& grad, const FwdPd& fwd) {
  const dt type = c.input.type;
  const Tensor gw = call.output(1, type, c.weight.shape);
  const Tensor gw_view = weight_view(gw, c.transposed, c.groups);
  std::optional<Tensor> gb;
  if (c.bias) gb = call.output(2, c.bias->type, c.bias->shape);
  if (grad.numel() == 0 || c.input.numel() == 0 || gw.numel() == 0) return;
  const typename BwdWeights::primitive_desc pd({algorithm_of(c.transposed), any_md(c.input.shape, type),
                                                any_md(c.weight_view.shape, type), gb ? md_of(*gb) : dnnl::memory::desc(),
                                                any_md(c.out_shape, type), c.strides, c.dilates, c.pad_l, c.pad_r},
                                               engine(), fwd);
  const dnnl::memory src = in_layout(call, c.input, pd.src_desc(), "input");
  const dnnl::memory diff_dst = in_layout(call, grad, pd.diff_dst_desc(), "grad");
  const OutLayout diff_wei = out_layout(pd.diff_weights_desc(), gw_view);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst},
                                             {DNNL_ARG_DIFF_WEIGHTS, diff_wei.mem}};
  if (gb) args[DNNL_ARG_DIFF_BIAS] = memory_of(md_of(*gb), *gb);
  run(BwdWeights(pd), args);
  copy_back(diff_wei, gw_view);
}

// [input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, result, grad].
template <class Fwd, class BwdData, class BwdWeights>
void backward_of(Call& call, Conv& c) {
  const int64_t n = call.num_returns();
  Tensor grad = call.tensor(n + 1, "grad");
  if (grad.type != c.input.type) grad = dense_copy(call, grad, c.input.type);
  if (c.input.numel() == 0 || Tensor{c.input.type, c.out_shape, {}}.numel() == 0) {
    call.output(0, c.input.type, c.input.shape);  // zero gradients
    call.output(1, c.input.type, c.weight.shape);
    if (c.bias) call.output(2, c.bias->type, c.bias->shape);
    return;
  }
  const auto fwd = forward_pd<Fwd>(c, dnnl::prop_kind::forward_training);
  grad_input<BwdData>(call, c, grad, fwd);
  grad_weights<BwdWeights>(call, c, grad, fwd);
}

void convolution(Call& call) {
  if (call.boolean(6, "transposed")) {
    forward<dnnl::deconvolution_forward>(call);
  } else {
    forward<dnnl::convolution_forward>(call);
  }
}

void convolution_backward(Call& call) {
  if (call.is_none(call.num_returns() + 1)) return;
  Conv c = read_conv(call);
  if (c.transposed) {
    backward_of<dnnl::deconvolution_forward, dnnl::deconvolution_backward_data, dnnl::deconvolution_backward_weights>(call, c);
  } else {
    backward_of<dnnl::convolution_forward, dnnl::convolution_backward_data, dnnl::convolution_backward_weights>(call, c);
  }
}

// A 1x1 2-d convolution with bias, and its backward descriptors.
bool probe(dt t) {
  Conv c;
  c.input = Tensor{t, {1, 2, 3, 3}, contiguous_strides({1, 2, 3, 3})};
  c.weight = c.weight_view = Tensor{t, {2, 2, 1, 1}, contiguous_strides({2, 2, 1, 1})};
  c.bias = Tensor{t, {2}, {1}};
  c.strides = {1, 1};
  c.dilates = c.pad_l = c.pad_r = {0, 0};
  c.out_shape = {1, 2, 3, 3};
  const auto fwd = forward_pd<dnnl::convolution_forward>(c, dnnl::prop_kind::forward_training);
  const dnnl::convolution_backward_data::primitive_desc data(
      {dnnl::algorithm::convolution_direct, any_md(c.input.shape, t), any_md(c.weight.shape, t), any_md(c.out_shape, t),
       c.strides, c.dilates, c.pad_l, c.pad_r},
      engine(), fwd);
  return true;
}

}  // namespace

std::vector<OpDef> conv_ops() { return {{"aten::convolution", convolution, convolution_backward, probe}}; }

}  // namespace opc_onednn
