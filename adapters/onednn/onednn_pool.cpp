// max_pool2d_with_indices and avg_pool2d on oneDNN's pooling_v2 primitive (pooling_max,
// pooling_avg_include_padding / _exclude_padding), with pooling_v2_backward as avg_pool2d's
// autograd formula.
//
// ceil_mode: PyTorch's output size (pooling_output_shape) is kept by enlarging padding_r, as
// PyTorch's own mkldnn pooling does; oneDNN's include-padding average then divides by the whole
// kernel area, the extra right padding included (see docs/onednn-conformance.md).
//
// Max pooling's indices cannot come from oneDNN: "The workspace format is opaque, and the indices
// cannot be restored from it" (doc/primitives/pooling.md, 2.6). The plugin computes PyTorch's
// flat h * W + w indices itself, with PyTorch's rule (the first maximum; a NaN wins), over the
// input values; the values come from oneDNN. divisor_override has no oneDNN counterpart.
#include <cmath>
#include <limits>

#include "onednn_memory.h"

namespace opc_onednn {
namespace {

using alg = dnnl::algorithm;

struct Pool {
  Tensor input;  // 4-d: a 3-d [C, H, W] self is [1, C, H, W]
  bool batched = true;
  Dims kernel, stride, padding, dilation, pad_r;
  Dims out_shape;  // 4-d
};

Dims pair_of(const Dims& v, const char* name, const Dims& fallback) {
  if (v.empty() && !fallback.empty()) return fallback;
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return v;
  invalid_argument(std::string("argument '") + name + "' must have 1 or 2 elements, got " + shape_string(v));
}

// PyTorch's pooling_output_shape.
int64_t output_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil) {
  const int64_t numerator = in + 2 * pad - dilation * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  int64_t out = (numerator >= 0 ? numerator / stride : -((-numerator + stride - 1) / stride)) + 1;
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

Pool read_pool(Call& call, const Dims& dilation, bool ceil) {
  Pool p;
  Tensor self = call.tensor(0, "self");
  if (self.ndim() != 3 && self.ndim() != 4) invalid_argument("argument 'self' must be 3-D or 4-D, got " + shape_string(self.shape));
  p.batched = self.ndim() == 4;
  if (!p.batched) {
    self.shape.insert(self.shape.begin(), 1);
    self.strides.insert(self.strides.begin(), std::max<int64_t>(self.numel(), 1));
  }
  p.input = self;
  p.kernel = pair_of(call.int_list(1, "kernel_size"), "kernel_size", {});
  p.stride = pair_of(call.int_list(2, "stride"), "stride", p.kernel);
  p.padding = pair_of(call.int_list(3, "padding"), "padding", {});
  p.dilation = pair_of(dilation, "dilation", {});
  p.out_shape = {self.size(0), self.size(1)};
  for (size_t i = 0; i < 2; ++i) {
    const int64_t k = p.kernel[i], s = p.stride[i], pad = p.padding[i], d = p.dilation[i], in = self.shape[i + 2];
    if (k <= 0 || s <= 0 || d <= 0) invalid_argument("kernel_size, stride and dilation must be positive");
    if (pad < 0 || pad > k / 2) invalid_argument("pad should be at most half of effective kernel size");
    const int64_t out = output_size(in, k, pad, s, d, ceil);
    if (out <= 0) invalid_argument("the output size is too small: " + std::to_string(out));
    p.out_shape.push_back(out);
    // floor mode: padding_r = padding gives the same size under oneDNN's floor division;
    // ceil mode: exactly as much as the last window needs.
    const int64_t exact = (out - 1) * s + d * (k - 1) + 1 - in - pad;
    p.pad_r.push_back(std::max(exact, pad));
  }
  return p;
}

Dims dilates(const Pool& p) { return {p.dilation[0] - 1, p.dilation[1] - 1}; }

Dims user_shape(const Pool& p) {  // the output's shape as the user sees it (3-d for a 3-d self)
  return p.batched ? p.out_shape : Dims(p.out_shape.begin() + 1, p.out_shape.end());
}

// The forward's descriptor; run into out (row-major, seen 4-d) when out is given.
dnnl::pooling_v2_forward::primitive_desc pool_forward(Call& call, Pool& p, alg algorithm, const Tensor* out,
                                                      dnnl::prop_kind kind) {
  const dnnl::memory::desc dst_md = md_of(p.input.type, p.out_shape, contiguous_strides(p.out_shape));
  const auto pd = with_dense_fallback(call, {&p.input}, [&] {
    return dnnl::pooling_v2_forward::primitive_desc(
        {kind, algorithm, md_of(p.input), dst_md, p.stride, p.kernel, dilates(p), p.padding, p.pad_r}, engine());
  });
  if (out != nullptr && out->numel() > 0 && p.input.numel() > 0) {
    run(dnnl::pooling_v2_forward(pd), {{DNNL_ARG_SRC, memory_of(md_of(p.input), p.input)}, {DNNL_ARG_DST, memory_of(dst_md, *out)}});
  }
  return pd;
}

// PyTorch's indices: per window, the first maximum (a NaN wins over every number, the last NaN
// over earlier ones), as a flat h * W + w offset into the plane.
void max_indices(const Pool& p, int64_t* indices) {
  const int64_t H = p.input.size(2), W = p.input.size(3), OH = p.out_shape[2], OW = p.out_shape[3];
  const int64_t item = dtype_size(p.input.type);
  const char* base = static_cast<const char*>(p.input.data);
  for (int64_t n = 0; n < p.out_shape[0]; ++n) {
    for (int64_t c = 0; c < p.out_shape[1]; ++c) {
      const char* plane = base + (n * p.input.strides[0] + c * p.input.strides[1]) * item;
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t h0 = oh * p.stride[0] - p.padding[0], w0 = ow * p.stride[1] - p.padding[1];
          while (h0 < 0) h0 += p.dilation[0];
          while (w0 < 0) w0 += p.dilation[1];
          int64_t best = h0 * W + w0;
          float best_value = -std::numeric_limits<float>::infinity();
          const int64_t h_end = std::min(oh * p.stride[0] - p.padding[0] + (p.kernel[0] - 1) * p.dilation[0] + 1, H);
          const int64_t w_end = std::min(ow * p.stride[1] - p.padding[1] + (p.kernel[1] - 1) * p.dilation[1] + 1, W);
          for (int64_t h = h0; h < h_end; h += p.dilation[0]) {
            for (int64_t w = w0; w < w_end; w += p.dilation[1]) {
              const float v = load_float(plane + (h * p.input.strides[2] + w * p.input.strides[3]) * item, p.input.type);
              if (v > best_value || std::isnan(v)) {
                best_value = v;
                best = h * W + w;
              }
            }
          }
          *indices++ = best;
        }
      }
    }
  }
}

// (self, kernel_size, stride, padding, dilation, ceil_mode) -> (out, indices).
void max_pool(Call& call) {
  Pool p = read_pool(call, call.int_list(4, "dilation"), call.boolean(5, "ceil_mode"));
  const Tensor out = call.output(0, p.input.type, user_shape(p));
  const Tensor indices = call.output(1, DLDataType{kDLInt, 64, 1}, user_shape(p));
  if (out.numel() == 0) return;
  pool_forward(call, p, alg::pooling_max, &out, dnnl::prop_kind::forward_inference);
  max_indices(p, static_cast<int64_t*>(indices.data));
}

alg avg_algorithm(Call& call) {
  if (!call.is_none(6)) not_implemented("argument 'divisor_override' has no oneDNN counterpart");
  return call.boolean(5, "count_include_pad") ? alg::pooling_avg_include_padding : alg::pooling_avg_exclude_padding;
}

// (self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override).
void avg_pool(Call& call) {
  const alg algorithm = avg_algorithm(call);
  Pool p = read_pool(call, {1, 1}, call.boolean(4, "ceil_mode"));
  const Tensor out = call.output(0, p.input.type, user_shape(p));
  if (out.numel() == 0) return;
  pool_forward(call, p, algorithm, &out, dnnl::prop_kind::forward_inference);
}

// [self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, result, grad].
void avg_pool_backward(Call& call) {
  const int64_t n = call.num_returns();
  if (call.is_none(n + 1)) return;
  const alg algorithm = avg_algorithm(call);
  Pool p = read_pool(call, {1, 1}, call.boolean(4, "ceil_mode"));
  Tensor grad = call.tensor(n + 1, "grad");
  if (!is_contiguous(grad) || grad.type != p.input.type) grad = dense_copy(call, grad, p.input.type);
  const Dims in_shape = p.input.shape;
  const Tensor diff = call.output(0, p.input.type, p.batched ? in_shape : Dims(in_shape.begin() + 1, in_shape.end()));
  if (diff.numel() == 0 || grad.numel() == 0) return;
  const auto fwd = pool_forward(call, p, algorithm, nullptr, dnnl::prop_kind::forward_training);
  const dnnl::memory::desc src_md = md_of(p.input.type, in_shape, contiguous_strides(in_shape));
  const dnnl::memory::desc dst_md = md_of(p.input.type, p.out_shape, contiguous_strides(p.out_shape));
  const dnnl::pooling_v2_backward::primitive_desc pd(
      {algorithm, src_md, dst_md, p.stride, p.kernel, dilates(p), p.padding, p.pad_r}, engine(), fwd);
  run(dnnl::pooling_v2_backward(pd), {{DNNL_ARG_DIFF_DST, memory_of(dst_md, grad)}, {DNNL_ARG_DIFF_SRC, memory_of(src_md, diff)}});
}

template <alg A>
bool probe(dt t) {
  const dnnl::memory::desc src({1, 1, 4, 4}, t, dnnl::memory::format_tag::abcd), dst({1, 1, 2, 2}, t, dnnl::memory::format_tag::abcd);
  const dnnl::pooling_v2_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, A, src, dst, {2, 2}, {2, 2}, {0, 0}, {0, 0}, {0, 0}}, engine());
  if (A != alg::pooling_max) {
    const dnnl::pooling_v2_backward::primitive_desc bwd({A, src, dst, {2, 2}, {2, 2}, {0, 0}, {0, 0}, {0, 0}}, engine(), fwd);
  }
  return true;
}

}  // namespace

std::vector<OpDef> pool_ops() {
  return {
      {"aten::max_pool2d_with_indices", max_pool, nullptr, probe<alg::pooling_max>},
      {"aten::avg_pool2d", avg_pool, avg_pool_backward, probe<alg::pooling_avg_include_padding>},
  };
}

}  // namespace opc_onednn
