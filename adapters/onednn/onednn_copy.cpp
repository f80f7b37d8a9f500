// cat on oneDNN's concat primitive and _to_copy on reorder.
//
// cat: the legacy 1-D [0] tensors are skipped and so are empty inputs (oneDNN describes no
// zero-size source); inputs of another dtype are converted to the result's first. The result is
// channels-last when every input is, else row-major, as the reference's (and PyTorch's) cat.
//
// _to_copy: a reorder from self's layout into the memory_format's (preserve keeps a dense
// self's strides). Conversions are oneDNN's: float -> integer saturates and rounds to nearest
// even (src/cpu/simple_q10n.hpp), where PyTorch truncates toward zero and wraps; this shows in
// docs/onednn-conformance.md. float64, int64, bool and float16 have no oneDNN CPU type in 2.6.
#include "onednn_memory.h"

namespace opc_onednn {
namespace {

dt cat_type(const std::vector<Tensor>& tensors) {
  dt type = tensors.empty() ? dt::f32 : tensors[0].type;
  for (const Tensor& t : tensors) {
    if (t.type == type) continue;
    if (is_floating(t.type) && is_floating(type)) type = dt::f32;
    else if (is_floating(t.type) != is_floating(type)) type = is_floating(t.type) ? t.type : type;
    else not_implemented(std::string("promotion of ") + dtype_name(type) + " with " + dtype_name(t.type) + " is not mapped");
  }
  return type;
}

void cat(Call& call) {
  const std::vector<Tensor> tensors = call.tensor_list(0, "tensors");
  const int64_t raw = call.integer(1, "dim");
  const dt type = cat_type(tensors);
  std::vector<Tensor> kept;
  for (const Tensor& t : tensors) {
    if (!(t.ndim() == 1 && t.size(0) == 0)) kept.push_back(t);
  }
  if (kept.empty()) {
    call.output(0, type, {0});
    return;
  }
  const int n = kept[0].ndim();
  if (n == 0) invalid_argument("zero-dimensional tensor (at position 0) cannot be concatenated");
  const int64_t dim = raw < 0 ? raw + n : raw;
  if (dim < 0 || dim >= n) invalid_argument("argument 'dim': " + std::to_string(raw) + " is out of range for rank " + std::to_string(n));
  Dims shape = kept[0].shape;
  shape[static_cast<size_t>(dim)] = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    for (int d = 0; d < n; ++d) {
      if (kept[i].ndim() != n || (d != dim && kept[i].size(d) != shape[static_cast<size_t>(d)])) {
        invalid_argument("sizes of tensors must match except in dimension " + std::to_string(dim) + ": tensor " +
                         std::to_string(i) + " has shape " + shape_string(kept[i].shape));
      }
    }
    shape[static_cast<size_t>(dim)] += kept[i].size(static_cast<int>(dim));
  }
  bool channels_last = true;
  for (const Tensor& t : tensors) channels_last = channels_last && strides_like_channels_last(t);
  const Tensor out = call.output(0, type, shape, channels_last ? channels_last_strides(shape) : contiguous_strides(shape));
  if (out.numel() == 0) return;
  std::vector<Tensor> sources;
  for (Tensor& t : kept) {
    if (t.numel() == 0) continue;
    sources.push_back(t.type == type ? t : dense_copy(call, t, type));
  }
  std::vector<Tensor*> pointers;
  for (Tensor& t : sources) pointers.push_back(&t);
  const dnnl::memory::desc dst_md = md_of(out);
  const auto pd = with_dense_fallback(call, pointers, [&] {
    std::vector<dnnl::memory::desc> mds;
    for (const Tensor& t : sources) mds.push_back(md_of(t));
    return dnnl::concat::primitive_desc(dst_md, static_cast<int>(dim), mds, engine());
  });
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DST, memory_of(dst_md, out)}};
  for (size_t i = 0; i < sources.size(); ++i) args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = memory_of(sources[i]);
  run(dnnl::concat(pd), args);
}

// The output strides of _to_copy's memory_format (c10::MemoryFormat numbers; None: preserve).
Dims copy_strides(const Tensor& self, std::optional<int64_t> format) {
  switch (format.value_or(1)) {
    case 0: return contiguous_strides(self.shape);
    case 1:
      if (is_non_overlapping_and_dense(self)) return self.strides;
      return strides_like_channels_last(self) ? channels_last_strides(self.shape) : contiguous_strides(self.shape);
    case 2:
      if (self.ndim() != 4) invalid_argument("memory_format channels_last needs a 4-D tensor");
      return channels_last_strides(self.shape);
    case 3:
      if (self.ndim() != 5) invalid_argument("memory_format channels_last_3d needs a 5-D tensor");
      return channels_last_strides(self.shape);
    default: invalid_argument("argument 'memory_format': unknown value " + std::to_string(*format));
  }
}

// (self, *, dtype?, layout?, device?, pin_memory?, non_blocking, memory_format?).
void to_copy(Call& call) {
  Tensor self = call.tensor(0, "self");
  dt type = self.type;
  if (const auto scalar_type = call.optional_integer(1, "dtype")) {
    const auto t = dnnl_type_of_scalar_type(*scalar_type);
    if (!t || *t == dt::f16) not_implemented("argument 'dtype': ScalarType " + std::to_string(*scalar_type) + " has no oneDNN CPU type");
    type = *t;
  }
  if (const auto layout = call.optional_integer(2, "layout"); layout && *layout != 0) not_implemented("only the strided layout");
  if (!call.is_none(3) && call.string(3, "device").rfind("cpu", 0) != 0) not_implemented("argument 'device': CPU only");
  if (!call.is_none(4) && call.boolean(4, "pin_memory")) not_implemented("argument 'pin_memory': no pinned memory on CPU");
  (void)call.boolean(5, "non_blocking");  // a CPU copy is synchronous
  const Tensor out = call.output(0, type, self.shape, copy_strides(self, call.optional_integer(6, "memory_format")));
  if (out.numel() == 0) return;
  reorder_into(input_md(call, self, "self"), self, md_of(out), out);
}

bool probe_concat(dt t) {
  const dnnl::memory::desc a({2, 3}, t, dnnl::memory::format_tag::ab), b({2, 3}, t, dnnl::memory::format_tag::ba),
      c({4, 3}, t, dnnl::memory::format_tag::ab);
  const dnnl::concat::primitive_desc pd(c, 0, {a, b}, engine());
  return true;
}

bool probe_reorder(dt t) {
  const dnnl::memory::desc a({2, 3}, t, dnnl::memory::format_tag::ab), b({2, 3}, dt::f32, dnnl::memory::format_tag::ba);
  const dnnl::reorder::primitive_desc pd(engine(), a, engine(), b);
  return true;
}

}  // namespace

std::vector<OpDef> copy_ops() {
  return {
      {"aten::cat", cat, nullptr, probe_concat},
      {"aten::_to_copy", to_copy, nullptr, probe_reorder},
  };
}

}  // namespace opc_onednn
