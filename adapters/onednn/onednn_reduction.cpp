// sum, sum.dim_IntList, mean, mean.dim, amax and amin on oneDNN's reduction primitive
// (reduction_sum / _mean / _max / _min). The primitive wants src and dst of one rank with the
// reduced dims of size 1 in dst: dst is the output's memory described with keepdim's shape (the
// row-major layout is the same with or without the size-1 dims), so keepdim=False needs no view.
//
// A "reduction" that reduces nothing (only size-1 dims, or a 0-d self) is a reorder: oneDNN's
// reduction descriptor wants at least one dimension that shrinks. Empty inputs are left to
// oneDNN (it skips the execution: the host's zero-filled output stays), so the mean of nothing is 0
// here where PyTorch gives NaN, and amax/amin of nothing are 0 where PyTorch refuses: documented
// in docs/onednn-conformance.md.
#include <algorithm>

#include "onednn_memory.h"

namespace opc_onednn {
namespace {

using alg = dnnl::algorithm;

// The reduced dims as flags over self's dims (an empty or absent list: every dim).
std::vector<bool> reduced_dims(const Tensor& self, const std::optional<Dims>& dims) {
  const int n = std::max(self.ndim(), 1);
  std::vector<bool> reduced(static_cast<size_t>(n), !dims || dims->empty());
  if (!dims) return reduced;
  for (int64_t d : *dims) {
    const int64_t w = d < 0 ? d + n : d;
    if (w < 0 || w >= n) invalid_argument("argument 'dim': " + std::to_string(d) + " is out of range for rank " + std::to_string(self.ndim()));
    if (reduced[static_cast<size_t>(w)] && !dims->empty()) {
      invalid_argument("argument 'dim': dimension " + std::to_string(w) + " appears more than once");
    }
    reduced[static_cast<size_t>(w)] = true;
  }
  return reduced;
}

void reduce(Call& call, alg algorithm, const std::optional<Dims>& dims, bool keepdim, std::optional<int64_t> dtype) {
  Tensor self = call.tensor(0, "self");
  dt type = self.type;
  if (dtype) {
    const auto t = dnnl_type_of_scalar_type(*dtype);
    if (!t || !is_floating(*t) || *t == dt::f16) not_implemented("argument 'dtype' (ScalarType " + std::to_string(*dtype) + ") is not float32 or bfloat16");
    type = *t;
  }
  const std::vector<bool> reduced = reduced_dims(self, dims);
  Dims src_dims = self.ndim() ? self.shape : Dims{1}, keep_dims = src_dims, out_shape;
  for (size_t d = 0; d < src_dims.size(); ++d) {
    if (reduced[d]) keep_dims[d] = 1;
    if (self.ndim() && (!reduced[d] || keepdim)) out_shape.push_back(keep_dims[d]);
  }
  const Tensor out = call.output(0, type, out_shape);
  if (out.numel() == 0) return;
  const dnnl::memory::desc dst_md = md_of(type, keep_dims, contiguous_strides(keep_dims));
  Tensor src = self;
  if (src_dims == keep_dims) {  // nothing shrinks: a copy (and conversion)
    reorder_into(md_of(self.type, src_dims, self.ndim() ? self.strides : Dims{1}), self, dst_md, out);
    return;
  }
  const auto pd = with_dense_fallback(call, {&src}, [&] {
    return dnnl::reduction::primitive_desc({algorithm, md_of(src), dst_md, 0.f, 0.f}, engine());
  });
  run(dnnl::reduction(pd), {{DNNL_ARG_SRC, memory_of(md_of(src), src)}, {DNNL_ARG_DST, memory_of(dst_md, out)}});
}

template <alg A>
void full(Call& call) {  // sum(self, *, dtype), mean(self, *, dtype)
  reduce(call, A, std::nullopt, false, call.optional_integer(1, "dtype"));
}

template <alg A>
void by_dims(Call& call) {  // sum.dim_IntList / mean.dim (self, dim?, keepdim, *, dtype)
  reduce(call, A, call.optional_int_list(1, "dim"), call.boolean(2, "keepdim"), call.optional_integer(3, "dtype"));
}

template <alg A>
void extreme(Call& call) {  // amax / amin (self, dim=[], keepdim)
  reduce(call, A, call.int_list(1, "dim"), call.boolean(2, "keepdim"), std::nullopt);
}

template <alg A>
bool probe(dt t) {
  const dnnl::memory::desc src({2, 3}, t, dnnl::memory::format_tag::ab), dst({2, 1}, t, dnnl::memory::format_tag::ab);
  const dnnl::reduction::primitive_desc pd({A, src, dst, 0.f, 0.f}, engine());
  return true;
}

}  // namespace

std::vector<OpDef> reduction_ops() {
  return {
      {"aten::sum", full<alg::reduction_sum>, nullptr, probe<alg::reduction_sum>},
      {"aten::sum.dim_IntList", by_dims<alg::reduction_sum>, nullptr, probe<alg::reduction_sum>},
      {"aten::mean", full<alg::reduction_mean>, nullptr, probe<alg::reduction_mean>},
      {"aten::mean.dim", by_dims<alg::reduction_mean>, nullptr, probe<alg::reduction_mean>},
      {"aten::amax", extreme<alg::reduction_max>, nullptr, probe<alg::reduction_max>},
      {"aten::amin", extreme<alg::reduction_min>, nullptr, probe<alg::reduction_min>},
  };
}

}  // namespace opc_onednn
