// Unary activations and math functions on oneDNN's eltwise primitive, with eltwise_backward as
// their autograd formulas. Each op maps its arguments to an algorithm and (alpha, beta), the way
// PyTorch's mkldnn fusions and ONNX Runtime's DNNL provider map them:
//   relu -> eltwise_relu (alpha 0); leaky_relu -> eltwise_relu (alpha = negative_slope);
//   gelu -> eltwise_gelu_erf ("none") / eltwise_gelu_tanh ("tanh"); tanh, sigmoid (logistic),
//   exp, log, sqrt, abs; elu -> eltwise_elu (alpha; scale = input_scale = 1 only);
//   hardtanh and clamp -> eltwise_clip_v2 (a missing clamp bound is +-infinity);
//   pow.Tensor_Scalar -> eltwise_square for exponent 2, else eltwise_pow (alpha 1, beta exponent).
#include <cmath>
#include <limits>

#include "onednn_memory.h"

namespace opc_onednn {
namespace {

using alg = dnnl::algorithm;

struct Eltwise {
  alg algorithm;
  float alpha = 0, beta = 0;
};

// ---- argument mappings -----------------------------------------------------------------------

template <alg A>
Eltwise plain(Call&) {
  return {A};
}

Eltwise leaky_relu(Call& call) { return {alg::eltwise_relu, static_cast<float>(call.scalar(1, "negative_slope"))}; }

Eltwise gelu(Call& call) {
  const std::string approximate = call.string(1, "approximate");
  if (approximate == "none") return {alg::eltwise_gelu_erf};
  if (approximate == "tanh") return {alg::eltwise_gelu_tanh};
  invalid_argument("argument 'approximate' must be 'none' or 'tanh', got '" + approximate + "'");
}

Eltwise elu(Call& call) {
  const double scale = call.scalar(2, "scale"), input_scale = call.scalar(3, "input_scale");
  if (scale != 1 || input_scale != 1) {
    not_implemented("eltwise_elu has one parameter (alpha): 'scale' and 'input_scale' must be 1, got " +
                    std::to_string(scale) + " and " + std::to_string(input_scale));
  }
  return {alg::eltwise_elu, static_cast<float>(call.scalar(1, "alpha"))};
}

// eltwise_clip_v2 refuses alpha > beta (invalid_arguments); PyTorch defines it (every element
// becomes max): an argument combination the mapping cannot express.
Eltwise clip(float lo, float hi, const char* lo_name, const char* hi_name) {
  if (lo > hi) {
    not_implemented(std::string("eltwise_clip_v2 refuses ") + lo_name + " > " + hi_name + " (" + std::to_string(lo) +
                    " > " + std::to_string(hi) + ")");
  }
  return {alg::eltwise_clip_v2, lo, hi};
}

Eltwise hardtanh(Call& call) {
  return clip(static_cast<float>(call.scalar(1, "min_val")), static_cast<float>(call.scalar(2, "max_val")), "min_val", "max_val");
}

Eltwise clamp(Call& call) {
  const auto lo = call.optional_scalar(1, "min"), hi = call.optional_scalar(2, "max");
  if (!lo && !hi) invalid_argument("at least one of 'min' or 'max' must not be None");
  constexpr float inf = std::numeric_limits<float>::infinity();
  return clip(lo ? static_cast<float>(*lo) : -inf, hi ? static_cast<float>(*hi) : inf, "min", "max");
}

Eltwise pow_scalar(Call& call) {
  const double exponent = call.scalar(1, "exponent");
  if (exponent == 2) return {alg::eltwise_square};
  return {alg::eltwise_pow, 1.0f, static_cast<float>(exponent)};
}

using Mapping = Eltwise (*)(Call&);

// ---- kernels ---------------------------------------------------------------------------------

void forward(Call& call, Mapping mapping) {
  const Eltwise e = mapping(call);
  Tensor self = call.tensor(0, "self");
  // TensorIterator's layout: self's memory order (a dense self keeps its strides).
  const Tensor out = call.output(0, self.type, self.shape, elementwise_strides(self.shape, {&self}));
  if (out.numel() == 0) return;
  // In 2.6 the eltwise descriptor has one data descriptor for src and dst, so src must have
  // out's layout: a self of another layout (sliced, expanded) is first reordered into out and the
  // primitive runs in place there.
  Tensor src = self;
  if (self.strides != out.strides) {
    reorder_into(input_md(call, self, "self"), self, md_of(out), out);
    src = out;
  }
  const dnnl::memory::desc md = md_of(out);
  const dnnl::eltwise_forward::primitive_desc pd(
      {dnnl::prop_kind::forward_inference, e.algorithm, md, e.alpha, e.beta}, engine());
  run(dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, memory_of(md, src)}, {DNNL_ARG_DST, memory_of(md, out)}});
}

// [args..., result, grad]: the gradient of `self` from eltwise_backward over self (the
// algorithms' src-based formulas), all in row-major copies.
void backward(Call& call, Mapping mapping) {
  const int64_t n = call.num_returns();
  if (call.is_none(n + 1)) return;
  const Eltwise e = mapping(call);
  Tensor self = call.tensor(0, "self"), grad = call.tensor(n + 1, "grad");
  if (!is_contiguous(self)) self = dense_copy(call, self);
  if (!is_contiguous(grad) || grad.type != self.type) grad = dense_copy(call, grad, self.type);
  const Tensor diff = call.output(0, self.type, self.shape);
  if (diff.numel() == 0) return;
  const dnnl::memory::desc md = md_of(diff);
  const dnnl::eltwise_forward::primitive_desc hint({dnnl::prop_kind::forward_training, e.algorithm, md, e.alpha, e.beta},
                                                    engine());
  const dnnl::eltwise_backward::primitive_desc pd({e.algorithm, md, md, e.alpha, e.beta}, engine(), hint);
  run(dnnl::eltwise_backward(pd), {{DNNL_ARG_SRC, memory_of(md, self)},
                                   {DNNL_ARG_DIFF_DST, memory_of(md, grad)},
                                   {DNNL_ARG_DIFF_SRC, memory_of(md, diff)}});
}

template <Mapping M>
void forward_of(Call& call) {
  forward(call, M);
}
template <Mapping M>
void backward_of(Call& call) {
  backward(call, M);
}

// Forward and backward descriptors of a {2, 3} tensor of `t`.
template <alg A>
bool probe(dt t) {
  const dnnl::memory::desc md({2, 3}, t, dnnl::memory::format_tag::ab);
  const dnnl::eltwise_forward::primitive_desc fwd({dnnl::prop_kind::forward_training, A, md, 0.5f, 2.0f}, engine());
  const dnnl::eltwise_backward::primitive_desc bwd({A, md, md, 0.5f, 2.0f}, engine(), fwd);
  return true;
}

template <Mapping M, alg A>
OpDef op(const char* name) {
  return {name, forward_of<M>, backward_of<M>, probe<A>};
}

}  // namespace

std::vector<OpDef> eltwise_ops() {
  return {
      op<plain<alg::eltwise_relu>, alg::eltwise_relu>("aten::relu"),
      op<leaky_relu, alg::eltwise_relu>("aten::leaky_relu"),
      op<gelu, alg::eltwise_gelu_erf>("aten::gelu"),
      op<plain<alg::eltwise_tanh>, alg::eltwise_tanh>("aten::tanh"),
      op<plain<alg::eltwise_logistic>, alg::eltwise_logistic>("aten::sigmoid"),
      op<elu, alg::eltwise_elu>("aten::elu"),
      op<hardtanh, alg::eltwise_clip_v2>("aten::hardtanh"),
      op<clamp, alg::eltwise_clip_v2>("aten::clamp"),
      op<plain<alg::eltwise_exp>, alg::eltwise_exp>("aten::exp"),
      op<plain<alg::eltwise_log>, alg::eltwise_log>("aten::log"),
      op<plain<alg::eltwise_sqrt>, alg::eltwise_sqrt>("aten::sqrt"),
      op<plain<alg::eltwise_abs>, alg::eltwise_abs>("aten::abs"),
      op<pow_scalar, alg::eltwise_pow>("aten::pow.Tensor_Scalar"),
  };
}

}  // namespace opc_onednn
