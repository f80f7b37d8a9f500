// _softmax and _log_softmax on oneDNN's softmax_v2 primitive (softmax_accurate / softmax_log:
// v2 takes separate src and dst descriptors, so self keeps its own layout and the result is
// row-major, as the reference's empty_like), with softmax_v2_backward as the autograd formula
// (it reads the forward's result, which the formula receives). half_to_float is refused, as
// PyTorch's CPU kernel refuses it.
#include <algorithm>

#include "onednn_memory.h"

namespace opc_onednn {
namespace {

using alg = dnnl::algorithm;

int axis_of(Call& call, const Tensor& self) {
  const int64_t dim = call.integer(1, "dim");
  const int64_t n = std::max(self.ndim(), 1);
  const int64_t w = dim < 0 ? dim + n : dim;
  if (w < 0 || w >= n) invalid_argument("argument 'dim': " + std::to_string(dim) + " is out of range for rank " + std::to_string(self.ndim()));
  if (call.boolean(2, "half_to_float")) not_implemented("half_to_float=True is not mapped (PyTorch's CPU kernel refuses it too)");
  return static_cast<int>(w);
}

void forward(Call& call, alg algorithm) {
  Tensor self = call.tensor(0, "self");
  const int axis = axis_of(call, self);
  const Tensor out = call.output(0, self.type, self.shape);
  if (out.numel() == 0) return;
  const dnnl::memory::desc dst_md = md_of(out);
  const auto pd = with_dense_fallback(call, {&self}, [&] {
    return dnnl::softmax_v2_forward::primitive_desc(
        {dnnl::prop_kind::forward_inference, algorithm, md_of(self), dst_md, axis}, engine());
  });
  run(dnnl::softmax_v2_forward(pd), {{DNNL_ARG_SRC, memory_of(md_of(self), self)}, {DNNL_ARG_DST, memory_of(dst_md, out)}});
}

// [self, dim, half_to_float, result, grad].
void backward(Call& call, alg algorithm) {
  const int64_t n = call.num_returns();
  if (call.is_none(n + 1)) return;
  const Tensor self = call.tensor(0, "self");
  const int axis = axis_of(call, self);
  Tensor result = call.tensor(n, "result"), grad = call.tensor(n + 1, "grad");
  if (!is_contiguous(result)) result = dense_copy(call, result);
  if (!is_contiguous(grad) || grad.type != self.type) grad = dense_copy(call, grad, self.type);
  const Tensor diff = call.output(0, self.type, self.shape);
  if (diff.numel() == 0) return;
  const dnnl::memory::desc md = md_of(diff);
  const dnnl::softmax_v2_forward::primitive_desc hint({dnnl::prop_kind::forward_training, algorithm, md, md, axis}, engine());
  const dnnl::softmax_v2_backward::primitive_desc pd({algorithm, md, md, md, axis}, engine(), hint);
  run(dnnl::softmax_v2_backward(pd), {{DNNL_ARG_DST, memory_of(md, result)},
                                      {DNNL_ARG_DIFF_DST, memory_of(md, grad)},
                                      {DNNL_ARG_DIFF_SRC, memory_of(md, diff)}});
}

template <alg A>
void forward_of(Call& call) {
  forward(call, A);
}
template <alg A>
void backward_of(Call& call) {
  backward(call, A);
}

template <alg A>
bool probe(dt t) {
  const dnnl::memory::desc md({2, 3}, t, dnnl::memory::format_tag::ab);
  const dnnl::softmax_v2_forward::primitive_desc fwd({dnnl::prop_kind::forward_training, A, md, md, 1}, engine());
  const dnnl::softmax_v2_backward::primitive_desc bwd({A, md, md, md, 1}, engine(), fwd);
  return true;
}

}  // namespace

std::vector<OpDef> softmax_ops() {
  return {
      {"aten::_softmax", forward_of<alg::softmax_accurate>, backward_of<alg::softmax_accurate>, probe<alg::softmax_accurate>},
      {"aten::_log_softmax", forward_of<alg::softmax_log>, backward_of<alg::softmax_log>, probe<alg::softmax_log>},
  };
}

}  // namespace opc_onednn
