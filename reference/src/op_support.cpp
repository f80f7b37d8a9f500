#include "opconform/reference/detail/op_support.h"

#include <algorithm>

#include "opconform/core/error.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/core/fake_tensor.h"

namespace opconform::reference::detail {

std::vector<DType> concat_dtypes(std::vector<DType> a, const std::vector<DType>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

namespace {

// The dtypes of the op's tensor outputs for one sample: the op called on fake tensors of the
// logical (per-sample) shapes.
std::vector<DType> logical_output_dtypes(const Ops& ops, const std::string& op, const Stack& inputs,
                                         const std::vector<std::optional<int64_t>>& in_dims) {
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Stack logical = inputs;
  for (size_t i = 0; i < logical.size(); ++i) {
    if (!logical[i].is_tensor()) continue;
    const Tensor& t = logical[i].to_tensor();
    std::vector<SymInt> sizes;
    for (int64_t d = 0; d < t.dim(); ++d)
      if (!in_dims[i] || d != *in_dims[i]) sizes.emplace_back(t.size(d));
    logical[i] = IValue(make_fake_tensor(std::move(sizes), t.dtype(), t.device()));
  }
  std::vector<DType> dtypes;
  for (const auto& v : ops.call(op, std::move(logical))) dtypes.push_back(v.is_tensor() ? v.to_tensor().dtype() : DType::Float32);
  return dtypes;
}

}  // namespace

VmapRule elementwise_vmap_rule(Registry& registry, std::string op) {
  return [ops = Ops(registry), op](const VmapInfo& info, const Stack& inputs,
                                   const std::vector<std::optional<int64_t>>& in_dims) {
    int64_t max_rank = 0;  // the largest logical rank among the tensor arguments
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].is_tensor()) continue;
      max_rank = std::max(max_rank, inputs[i].to_tensor().dim() - (in_dims[i] ? 1 : 0));
    }
    Stack args = inputs;
    // A batched 0-d tensor is dimensioned physically, which can change type promotion (a 0-d
    // float64 bound no longer defers to a float16 tensor): the output dtypes are those the op
    // gives one sample, found on fake tensors, and the physical outputs are cast to them.
    std::optional<std::vector<DType>> logical_dtypes;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].is_tensor() && in_dims[i] && inputs[i].to_tensor().dim() == 1) {
        logical_dtypes = logical_output_dtypes(ops, op, inputs, in_dims);
        break;
      }
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].is_tensor() || !in_dims[i]) continue;
      Tensor t = move_batch_dim(args[i].to_tensor(), in_dims[i], 0, info.batch_size);
      while (t.dim() - 1 < max_rank) t = ops.tensor("aten::unsqueeze", {t, IValue(int64_t{1})});
      args[i] = IValue(t);
    }
    Stack outputs = ops.call(op, std::move(args));
    for (size_t j = 0; logical_dtypes && j < outputs.size() && j < logical_dtypes->size(); ++j) {
      if (outputs[j].is_tensor() && outputs[j].to_tensor().dtype() != (*logical_dtypes)[j])
        outputs[j] = IValue(ops.to(outputs[j].to_tensor(), (*logical_dtypes)[j]));
    }
    std::vector<std::optional<int64_t>> out_dims(outputs.size(), int64_t{0});
    return std::make_pair(std::move(outputs), std::move(out_dims));
  };
}

void save_tensor_inputs(autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
  std::vector<Tensor> saved;
  for (const auto& v : inputs) {
    if (v.is_tensor()) saved.push_back(v.to_tensor());
  }
  ctx.save_for_backward(std::move(saved));
}

void save_inputs_and_outputs(autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
  std::vector<Tensor> saved;
  for (const auto& v : inputs) {
    if (v.is_tensor()) saved.push_back(v.to_tensor());
  }
  for (const auto& v : outputs)
    if (v.is_tensor()) saved.push_back(v.to_tensor());
  ctx.save_for_backward(std::move(saved));
}

int64_t wrap_dim(int64_t dim, int64_t rank, std::string_view op, std::string_view arg) {
  const int64_t r = std::max<int64_t>(rank, 1);
  OPCONFORM_CHECK(dim >= -r && dim < r, ErrorCode::kInvalidArgument, op, ": ", arg, " ", dim,
                  " is out of range for a tensor of rank ", rank, " (expected [", -r, ", ", r - 1, "])");
  return dim < 0 ? dim + r : dim;
}

}  // namespace opconform::reference::detail
