// add.Tensor, sub.Tensor, mul.Tensor, div.Tensor, maximum and minimum on oneDNN's binary primitive
// (binary_add/sub/mul/div/max/min). add's and sub's alpha scales src1 (primitive_attr::set_scales
// on DNNL_ARG_SRC_1), which keeps PyTorch's single rounding of a + alpha * b.
//
// Broadcasting: 2.6's binary wants sources of the destination's rank and lets src1 broadcast over
// size-1 dims; src0 is given as a stride-0 view of the output's shape where it broadcasts.
// Type promotion is PyTorch's for the dtypes oneDNN has (result_type below): an integral input
// of a floating result is converted first; a 0-d float32 next to a bfloat16 tensor stays float32,
// as PyTorch reads a wrapped scalar at full precision.
#include "onednn_memory.h"

namespace opc_onednn {
namespace {

using alg = dnnl::algorithm;

// PyTorch's result type for two tensors of oneDNN types: floating beats integral, and a 0-d tensor
// decides only when it brings a higher category.
dt result_type(const Tensor& a, const Tensor& b) {
  if (a.type == b.type) return a.type;
  const bool af = is_floating(a.type), bf = is_floating(b.type);
  if (af != bf) return af ? a.type : b.type;
  if ((a.ndim() == 0) != (b.ndim() == 0)) return a.ndim() == 0 ? b.type : a.type;
  if (af) return dt::f32;  // float32 with bfloat16
  not_implemented(std::string("promotion of ") + dtype_name(a.type) + " with " + dtype_name(b.type) + " is not mapped");
}

// t with leading size-1 dims up to `rank` (oneDNN's binary wants equal ranks).
Tensor with_rank(const Tensor& t, size_t rank) {
  Tensor r = t;
  const size_t lead = rank - t.shape.size();
  r.shape.insert(r.shape.begin(), lead, 1);
  r.strides.insert(r.strides.begin(), lead, 1);
  return r;
}

void binary(Call& call, alg algorithm, bool has_alpha) {
  Tensor self = call.tensor(0, "self"), other = call.tensor(1, "other");
  const double alpha = has_alpha ? call.scalar(2, "alpha") : 1.0;
  const dt type = result_type(self, other);
  if (algorithm == alg::binary_div && !is_floating(type)) {
    not_implemented("integer division is true division in PyTorch; oneDNN's binary_div of integers is not");
  }
  const Dims shape = broadcast_shape(self, "self", other, "other");
  const Tensor out = call.output(0, type, shape, elementwise_strides(shape, {&self, &other}));
  if (out.numel() == 0) return;
  if (!is_floating(self.type) && is_floating(type)) self = dense_copy(call, self, type);
  if (!is_floating(other.type) && is_floating(type)) other = dense_copy(call, other, type);
  Tensor src0 = expanded(self, shape), src1 = with_rank(other, shape.size());
  dnnl::primitive_attr attr;
  if (alpha != 1.0) attr.set_scales(DNNL_ARG_SRC_1, 0, {static_cast<float>(alpha)});
  const dnnl::memory::desc dst_md = md_of(out);
  const auto pd = with_dense_fallback(call, {&src0, &src1}, [&] {
    return dnnl::binary::primitive_desc({algorithm, md_of(src0), md_of(src1), dst_md}, attr, engine());
  });
  run(dnnl::binary(pd), {{DNNL_ARG_SRC_0, memory_of(md_of(src0), src0)},
                         {DNNL_ARG_SRC_1, memory_of(md_of(src1), src1)},
                         {DNNL_ARG_DST, memory_of(dst_md, out)}});
}

template <alg A, bool Alpha>
void kernel(Call& call) {
  binary(call, A, Alpha);
}

template <alg A>
bool probe(dt t) {
  const dnnl::memory::desc md({2, 3}, t, dnnl::memory::format_tag::ab);
  const dnnl::memory::desc row({1, 3}, t, dnnl::memory::format_tag::ab);
  const dnnl::binary::primitive_desc pd({A, md, row, md}, engine());
  return true;
}

}  // namespace

std::vector<OpDef> binary_ops() {
  return {
      {"aten::add.Tensor", kernel<alg::binary_add, true>, nullptr, probe<alg::binary_add>},
      {"aten::sub.Tensor", kernel<alg::binary_sub, true>, nullptr, probe<alg::binary_sub>},
      {"aten::mul.Tensor", kernel<alg::binary_mul, false>, nullptr, probe<alg::binary_mul>},
      {"aten::div.Tensor", kernel<alg::binary_div, false>, nullptr, probe<alg::binary_div>},
      {"aten::maximum", kernel<alg::binary_max, false>, nullptr, probe<alg::binary_max>},
      {"aten::minimum", kernel<alg::binary_min, false>, nullptr, probe<alg::binary_min>},
  };
}

}  // namespace opc_onednn
