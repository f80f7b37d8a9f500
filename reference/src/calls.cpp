#include "opconform/reference/detail/calls.h"

#include <algorithm>

#include "opconform/core/default_value.h"
#include "opconform/core/error.h"

namespace opconform::reference::detail {

Stack Ops::call(std::string_view op, Stack args) const {
  OperatorHandle handle = registry_->get(op);
  const FunctionSchema& schema = handle.schema();
  for (size_t i = args.size(); i < schema.arguments.size(); ++i) {
    auto d = default_ivalue(schema.arguments[i]);
    OPCONFORM_CHECK(d.has_value(), ErrorCode::kInvalidArgument, "reference call of '", op, "': argument '",
                    schema.arguments[i].name, "' has no default and was not given");
    args.push_back(std::move(*d));
  }
  handle.call_boxed(args);
  return args;
}

Tensor Ops::full(std::vector<int64_t> sizes, const Scalar& value, DType dtype, Device device) const {
  return tensor("aten::full", {IValue(std::move(sizes)), IValue(value), IValue(dtype), IValue(), IValue(device)});
}

Tensor Ops::zeros_like(const Tensor& a) const {
  return full(std::vector<int64_t>(a.sizes().begin(), a.sizes().end()), int64_t{0}, a);
}

Tensor Ops::arange(int64_t n, Device device) const {
  return tensor("aten::arange.start_step",
                {IValue(int64_t{0}), IValue(n), IValue(int64_t{1}), IValue(DType::Int64), IValue(), IValue(device)});
}

Tensor Ops::sum_to(const Tensor& grad, IntArrayRef sizes) const {
  if (std::ranges::equal(grad.sizes(), sizes)) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(sizes.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (sizes[d - lead] == 1 && grad.size(d) != 1)) dims.push_back(d);
  }
  Tensor summed = dims.empty() ? grad : sum_dims(grad, dims, /*keepdim=*/true);
  return view(summed, std::vector<int64_t>(sizes.begin(), sizes.end()));
}

Tensor Ops::reshape(const Tensor& a, std::vector<int64_t> sizes) const {
  if (a.is_contiguous()) return view(a, std::move(sizes));
  return view(tensor("aten::clone", {a, IValue(MemoryFormat::Contiguous)}), std::move(sizes));
}

Tensor Ops::to(const Tensor& a, DType dtype) const {
  if (a.dtype() == dtype) return a;
  return tensor("aten::_to_copy", {a, IValue(dtype)});
}

}  // namespace opconform::reference::detail
