// native_layer_norm on oneDNN's layer_normalization (forward_training for the statistics,
// backward with diff scale/shift as the autograd formula), and
// _native_batch_norm_legit_no_training on batch_normalization (forward_inference with the running
// statistics: use_global_stats).
//
// Layer norm normalizes over the last dimension: the input is described as [M, N] (M the leading
// sizes, N the normalized ones), which needs a row-major input (else a dense copy first). oneDNN's
// statistics are the mean and the variance in float32; PyTorch returns the mean and
// rstd = 1 / sqrt(var + eps), computed here from oneDNN's variance, in the parameters' dtype
// (the input's when there are none), as the reference's CPU kernel. Scale and shift are float32
// in oneDNN 2.6 whatever the data type, so bfloat16 parameters are converted.
#include <cmath>
#include <cstring>

#include "onednn_memory.h"

namespace opc_onednn {
namespace {

using flags = dnnl::normalization_flags;

struct LayerNorm {
  Tensor input;
  std::optional<Tensor> weight, bias;
  float eps = 0;
  int64_t rows = 1, len = 1;
  Dims stat_shape;
  dt stat_type = dt::f32;
  flags f = flags::none;
};

LayerNorm read_layer_norm(Call& call) {
  LayerNorm ln;
  ln.input = call.tensor(0, "input");
  const Dims normalized = call.int_list(1, "normalized_shape");
  ln.weight = call.optional_tensor(2, "weight");
  ln.bias = call.optional_tensor(3, "bias");
  ln.eps = static_cast<float>(call.scalar(4, "eps"));
  const int64_t k = static_cast<int64_t>(normalized.size()), axis = ln.input.ndim() - k;
  if (k < 1 || axis < 0 || !std::equal(normalized.begin(), normalized.end(), ln.input.shape.begin() + axis)) {
    invalid_argument("argument 'normalized_shape' " + shape_string(normalized) + " must be the trailing sizes of 'input' " +
                     shape_string(ln.input.shape));
  }
  for (const auto* p : {&ln.weight, &ln.bias}) {
    if (*p && (*p)->shape != normalized) invalid_argument("weight and bias must have shape " + shape_string(normalized));
  }
  for (int64_t d = 0; d < ln.input.ndim(); ++d) (d < axis ? ln.rows : ln.len) *= ln.input.size(static_cast<int>(d));
  ln.stat_shape = Dims(ln.input.shape.begin(), ln.input.shape.begin() + axis);
  ln.stat_shape.resize(ln.input.shape.size(), 1);
  ln.stat_type = ln.weight ? ln.weight->type : ln.bias ? ln.bias->type : ln.input.type;
  if (ln.weight) ln.f |= flags::use_scale;
  if (ln.bias) ln.f |= flags::use_shift;
  return ln;
}

// The forward over [rows, len]: dst (may be a scratch), float32 mean and variance.
struct LayerNormRun {
  dnnl::layer_normalization_forward::primitive_desc pd;
  Tensor mean, var;
};

LayerNormRun layer_norm_forward(Call& call, LayerNorm& ln, const Tensor& dst) {
  if (!is_contiguous(ln.input)) densify(call, {&ln.input}, "layer norm reads the input as [M, N]");
  const dnnl::memory::desc data_md = md_of(ln.input.type, {ln.rows, ln.len}, {ln.len, 1});
  const dnnl::memory::desc stat_md = md_of(dt::f32, {ln.rows}, {1});
  LayerNormRun r{dnnl::layer_normalization_forward::primitive_desc(
                     {dnnl::prop_kind::forward_training, data_md, stat_md, ln.eps, ln.f}, engine()),
                 call.scratch(dt::f32, {ln.rows}), call.scratch(dt::f32, {ln.rows})};
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(data_md, ln.input)},
                                             {DNNL_ARG_DST, memory_of(data_md, dst)},
                                             {DNNL_ARG_MEAN, memory_of(stat_md, r.mean)},
                                             {DNNL_ARG_VARIANCE, memory_of(stat_md, r.var)}};
  if (ln.weight) args[DNNL_ARG_SCALE] = memory_of(dense_copy(call, *ln.weight, dt::f32));
  if (ln.bias) args[DNNL_ARG_SHIFT] = memory_of(dense_copy(call, *ln.bias, dt::f32));
  run(dnnl::layer_normalization_forward(r.pd), args);
  return r;
}

void layer_norm(Call& call) {
  LayerNorm ln = read_layer_norm(call);
  const Tensor out = call.output(0, ln.input.type, ln.input.shape);
  const Tensor mean = call.output(1, ln.stat_type, ln.stat_shape), rstd = call.output(2, ln.stat_type, ln.stat_shape);
  if (ln.rows == 0 || ln.len == 0) return;  // oneDNN has nothing to run; see docs (empty tensors)
  const LayerNormRun r = layer_norm_forward(call, ln, out);
  const Tensor rstd32 = call.scratch(dt::f32, {ln.rows});
  for (int64_t i = 0; i < ln.rows; ++i) {
    static_cast<float*>(rstd32.data)[i] = 1.0f / std::sqrt(static_cast<const float*>(r.var.data)[i] + ln.eps);
  }
  const Dims flat_stats{ln.rows};
  reorder_into(r.mean, Tensor{ln.stat_type, flat_stats, {1}, mean.data});
  reorder_into(rstd32, Tensor{ln.stat_type, flat_stats, {1}, rstd.data});
}

bool all_zero(const Tensor& t) {
  std::vector<int64_t> index(t.shape.size(), 0);
  for (int64_t k = 0; k < t.numel(); ++k) {
    int64_t offset = 0;
    for (size_t i = 0; i < index.size(); ++i) offset += index[i] * t.strides[i];
    if (load_float(static_cast<const char*>(t.data) + offset * dtype_size(t.type), t.type) != 0) return false;
    for (size_t i = index.size(); i-- > 0;) {
      if (++index[i] < t.shape[i]) break;
      index[i] = 0;
    }
  }
  return true;
}

// [input, normalized_shape, weight, bias, eps, out, mean, rstd, grad_out, grad_mean, grad_rstd].
void layer_norm_backward(Call& call) {
  const int64_t n = call.num_returns();
  if (call.is_none(n + 3)) return;
  for (int64_t i : {n + 4, n + 5}) {
    if (!call.is_none(i) && !all_zero(call.tensor(i, "grad of a statistic"))) {
      not_implemented("layer_normalization_backward takes no gradient of the mean or rstd results");
    }
  }
  LayerNorm ln = read_layer_norm(call);
  Tensor grad = call.tensor(n + 3, "grad");
  if (!is_contiguous(grad) || grad.type != ln.input.type) grad = dense_copy(call, grad, ln.input.type);
  const Tensor diff = call.output(0, ln.input.type, ln.input.shape);
  std::optional<Tensor> diff_w, diff_b;
  if (ln.weight) diff_w = call.output(2, ln.weight->type, ln.weight->shape);
  if (ln.bias) diff_b = call.output(3, ln.bias->type, ln.bias->shape);
  if (ln.rows == 0 || ln.len == 0) return;
  // The statistics again, in float32 and as oneDNN's variance (rstd would lose digits).
  const LayerNormRun fwd = layer_norm_forward(call, ln, call.scratch(ln.input.type, ln.input.shape));
  const dnnl::memory::desc data_md = md_of(ln.input.type, {ln.rows, ln.len}, {ln.len, 1});
  const dnnl::memory::desc stat_md = md_of(dt::f32, {ln.rows}, {1});
  const dnnl::layer_normalization_backward::primitive_desc pd(
      {dnnl::prop_kind::backward, data_md, data_md, stat_md, ln.eps, ln.f}, engine(), fwd.pd);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, memory_of(data_md, ln.input)}, {DNNL_ARG_MEAN, memory_of(stat_md, fwd.mean)},
      {DNNL_ARG_VARIANCE, memory_of(stat_md, fwd.var)}, {DNNL_ARG_DIFF_DST, memory_of(data_md, grad)},
      {DNNL_ARG_DIFF_SRC, memory_of(data_md, diff)}};
  const Tensor dw32 = call.scratch(dt::f32, {ln.len}), db32 = call.scratch(dt::f32, {ln.len});
  if (ln.weight) args[DNNL_ARG_SCALE] = memory_of(dense_copy(call, *ln.weight, dt::f32));
  if (ln.bias) args[DNNL_ARG_SHIFT] = memory_of(dense_copy(call, *ln.bias, dt::f32));
  if (ln.weight) args[DNNL_ARG_DIFF_SCALE] = memory_of(dw32);
  if (ln.bias) args[DNNL_ARG_DIFF_SHIFT] = memory_of(db32);
  run(dnnl::layer_normalization_backward(pd), args);
  if (diff_w) reorder_into(dw32, Tensor{diff_w->type, {ln.len}, {1}, diff_w->data});
  if (diff_b) reorder_into(db32, Tensor{diff_b->type, {ln.len}, {1}, diff_b->data});
}

// (input, weight?, bias?, running_mean, running_var, momentum, eps) -> (out, empty, empty).
void batch_norm_inference(Call& call) {
  Tensor input = call.tensor(0, "input");
  const auto weight = call.optional_tensor(1, "weight"), bias = call.optional_tensor(2, "bias");
  const Tensor mean = call.tensor(3, "running_mean"), var = call.tensor(4, "running_var");
  (void)call.scalar(5, "momentum");  // unused in inference, still a float
  const float eps = static_cast<float>(call.scalar(6, "eps"));
  if (input.ndim() < 2) invalid_argument("argument 'input' must have at least 2 dimensions");
  const int64_t channels = input.size(1);
  for (const Tensor* p : {weight ? &*weight : nullptr, bias ? &*bias : nullptr, &mean, &var}) {
    if (p && p->shape != Dims{channels}) invalid_argument("the parameters and running statistics must have shape [" + std::to_string(channels) + "]");
  }
  const dt stat_type = weight ? weight->type : bias ? bias->type : input.type;
  const Tensor out = call.output(0, input.type, input.shape);
  call.output(1, stat_type, {0});
  call.output(2, stat_type, {0});
  if (out.numel() == 0) return;
  if (!is_contiguous(input)) densify(call, {&input}, "batch norm reads the input as [N, C, S, 1]");
  const int64_t spatial = input.numel() / (input.size(0) * channels);
  const Dims dims{input.size(0), channels, spatial, 1};  // any rank as 4-d, same memory
  const dnnl::memory::desc md = md_of(input.type, dims, contiguous_strides(dims));
  flags f = flags::use_global_stats;
  if (weight) f |= flags::use_scale;
  if (bias) f |= flags::use_shift;
  const dnnl::batch_normalization_forward::primitive_desc pd({dnnl::prop_kind::forward_inference, md, eps, f}, engine());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(md, input)},
                                             {DNNL_ARG_DST, memory_of(md, out)},
                                             {DNNL_ARG_MEAN, memory_of(dense_copy(call, mean, dt::f32))},
                                             {DNNL_ARG_VARIANCE, memory_of(dense_copy(call, var, dt::f32))}};
  if (weight) args[DNNL_ARG_SCALE] = memory_of(dense_copy(call, *weight, dt::f32));
  if (bias) args[DNNL_ARG_SHIFT] = memory_of(dense_copy(call, *bias, dt::f32));
  run(dnnl::batch_normalization_forward(pd), args);
}

bool probe_layer_norm(dt t) {
  const dnnl::memory::desc data({2, 3}, t, dnnl::memory::format_tag::ab), stat({2}, dt::f32, dnnl::memory::format_tag::a);
  const flags f = flags::use_scale | flags::use_shift;
  const dnnl::layer_normalization_forward::primitive_desc fwd({dnnl::prop_kind::forward_training, data, stat, 1e-5f, f}, engine());
  const dnnl::layer_normalization_backward::primitive_desc bwd({dnnl::prop_kind::backward, data, data, stat, 1e-5f, f}, engine(), fwd);
  return true;
}

bool probe_batch_norm(dt t) {
  const dnnl::memory::desc md({2, 3, 2, 1}, t, dnnl::memory::format_tag::abcd);
  const dnnl::batch_normalization_forward::primitive_desc pd(
      {dnnl::prop_kind::forward_inference, md, 1e-5f, flags::use_global_stats | flags::use_scale | flags::use_shift}, engine());
  return true;
}

}  // namespace

std::vector<OpDef> norm_ops() {
  return {
      {"aten::native_layer_norm", layer_norm, layer_norm_backward, probe_layer_norm},
      {"aten::_native_batch_norm_legit_no_training", batch_norm_inference, nullptr, probe_batch_norm},
  };
}

}  // namespace opc_onednn
