#include "opconform/reference/detail/op_support.h"

#include <algorithm>
#include <span>
#include <cmath>
#include <memory>
#include <numeric>
#include <utility>

#include "opconform/core/error.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/reference/detail/calls.h"

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
      while (t.dim() - 1 < max_rank) t = ops.unsqueeze(t, 1);
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

void save_arguments(autograd::AutogradContext& ctx, const Stack& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].is_tensor()) ctx.set("arg" + std::to_string(i), inputs[i]);
}

const IValue& saved_argument(const autograd::AutogradContext& ctx, size_t i) {
  return ctx.get("arg" + std::to_string(i));
}

void save_argument_count(autograd::AutogradContext& ctx, const Stack& inputs) {
  ctx.set("arguments", IValue(static_cast<int64_t>(inputs.size())));
}

std::vector<Tensor> self_gradient(const autograd::AutogradContext& ctx, Tensor grad) {
  std::vector<Tensor> grads(static_cast<size_t>(ctx.get("arguments").to_int()));
  grads[0] = std::move(grad);
  return grads;
}

autograd::BackwardFn with_ops(Registry& registry, OpsBackwardFn backward) {
  return [ops = Ops(registry), backward](autograd::AutogradContext& ctx, const std::vector<Tensor>& grads) {
    return backward(ops, ctx, grads);
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

Tensor one_hot(const Ops& ops, const Tensor& index, int64_t d, int64_t n) {
  std::vector<int64_t> positions_shape(static_cast<size_t>(index.dim()), 1);
  positions_shape[static_cast<size_t>(d)] = n;
  std::vector<int64_t> positions(static_cast<size_t>(n));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  return ops.tensor("aten::eq.Tensor", {from_vector<int64_t>(positions, positions_shape).to(index.device()), index});
}

bool call_records(const OperatorHandle& op, const Stack& stack) {
  if (!autograd::GradMode::is_enabled()) return false;
  for (size_t i = stack.size() - op.schema().arguments.size(); i < stack.size(); ++i) {
    if (const Tensor* t = stack[i].get_if<Tensor>(); t != nullptr && t->defined() && t->requires_grad()) return true;
    if (stack[i].is_tensor_list()) {
      for (const Tensor& t : stack[i].to_tensor_list()) {
        if (t.defined() && t.requires_grad()) return true;
      }
    }
  }
  return false;
}

KernelFunction inplace_autograd_kernel(Registry& registry, autograd::BackwardFn backward, InplaceSetupFn setup) {
  return KernelFunction::from_boxed([ops = Ops(registry), backward = std::move(backward), setup = std::move(setup)](
                                        const OperatorHandle& op, DispatchKeySet keys, Stack& stack) {
    const size_t base = stack.size() - op.schema().arguments.size();
    const bool records = call_records(op, stack);
    auto original = std::make_shared<Tensor>(records ? ops.tensor("aten::clone", {stack[base]}) : Tensor());
    // A kernel per call, so that the copy travels with the call (no state outside it). The node it
    // records keeps this closure: setup takes the copy out of it.
    autograd::make_autograd_kernel(backward, [setup, original](autograd::AutogradContext& ctx, const Stack& inputs,
                                                               const Stack& outputs) {
      setup(ctx, inputs, outputs, std::exchange(*original, Tensor()));
    }).call_boxed(op, keys, stack);
  });
}

CompositeFormula composite_formula(Registry& registry, CompositeFn composite) {
  CompositeFormula f;
  f.setup = [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
    std::vector<Tensor> tensors;
    std::vector<int64_t> positions;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (const Tensor* t = inputs[i].get_if<Tensor>()) {
        tensors.push_back(*t);
        positions.push_back(static_cast<int64_t>(i));
      }
    }
    ctx.save_for_backward(std::move(tensors));
    ctx.set("tensor_positions", IValue(std::move(positions)));
    save_argument_count(ctx, inputs);
    save_arguments(ctx, inputs);
  };
  f.backward = [ops = Ops(registry), composite = std::move(composite)](autograd::AutogradContext& ctx,
                                                                      const std::vector<Tensor>& grads) {
    // With create_graph (grad mode on here) the composite runs on the saved tensors themselves,
    // so the gradient it gives is recorded back to them; else on detached copies.
    const bool create_graph = autograd::GradMode::is_enabled();
    const auto saved = ctx.saved_tensors();
    const auto positions = ctx.get("tensor_positions").to<std::vector<int64_t>>();
    Stack args(static_cast<size_t>(ctx.get("arguments").to_int()));
    for (size_t i = 0; i < args.size(); ++i) {
      if (std::find(positions.begin(), positions.end(), static_cast<int64_t>(i)) == positions.end())
        args[i] = saved_argument(ctx, i);
    }
    std::vector<Tensor> wrt;
    std::vector<size_t> wrt_at;
    for (size_t k = 0; k < saved.size(); ++k) {
      const size_t i = static_cast<size_t>(positions[k]);
      Tensor t = saved[k];
      if (ctx.needs_input_grad(i) && t.defined()) {
        if (!create_graph) t = t.detach().set_requires_grad(true);
        wrt.push_back(t);
        wrt_at.push_back(i);
      }
      args[i] = IValue(t);
    }
    std::vector<Tensor> out(args.size());
    if (wrt.empty()) return out;
    autograd::EnableGradGuard enable;
    const Stack results = composite(ops, args);
    std::vector<Tensor> roots, root_grads;
    for (size_t j = 0; j < results.size() && j < grads.size(); ++j) {
      const Tensor* r = results[j].get_if<Tensor>();
      if (r != nullptr && r->defined() && r->requires_grad() && grads[j].defined()) {
        roots.push_back(*r);
        root_grads.push_back(grads[j]);
      }
    }
    if (roots.empty()) return out;
    const std::vector<Tensor> g = autograd::grad(roots, wrt, root_grads, /*retain_graph=*/false, create_graph,
                                                 /*allow_unused=*/true);
    for (size_t k = 0; k < g.size(); ++k) out[wrt_at[k]] = g[k];
    return out;
  };
  return f;
}

int64_t wrap_dim(int64_t dim, int64_t rank, std::string_view op, std::string_view arg) {
  const int64_t r = std::max<int64_t>(rank, 1);
  OPCONFORM_CHECK(dim >= -r && dim < r, ErrorCode::kInvalidArgument, op, ": ", arg, " ", dim,
                  " is out of range for a tensor of rank ", rank, " (expected [", -r, ", ", r - 1, "])");
  return dim < 0 ? dim + r : dim;
}

std::vector<bool> dim_mask(const std::vector<int64_t>& dims, int64_t rank, std::string_view op, std::string_view arg) {
  std::vector<bool> mask(static_cast<size_t>(std::max<int64_t>(rank, 1)), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, rank, op, arg);
    OPCONFORM_CHECK(!mask[static_cast<size_t>(w)], ErrorCode::kInvalidArgument, op, ": dim ", w,
                    " appears multiple times in the list of dims (argument '", arg, "')");
    mask[static_cast<size_t>(w)] = true;
  }
  return mask;
}

void check_strided(std::string_view op, std::optional<Layout> layout, std::optional<bool> pin_memory) {
  OPCONFORM_CHECK(!layout || *layout == Layout::Strided, ErrorCode::kNotImplemented, op, ": layout '",
                  to_string(*layout), "' is not supported (only strided tensors)");
  OPCONFORM_CHECK(!pin_memory || !*pin_memory, ErrorCode::kNotImplemented, op,
                  ": pin_memory=True needs an accelerator runtime");
}

void require_dtype(std::string_view op, const Tensor& t, const std::vector<DType>& allowed, std::string_view arg) {
  if (std::find(allowed.begin(), allowed.end(), t.dtype()) != allowed.end()) return;
  std::string taken;
  for (DType d : allowed) taken += (taken.empty() ? "" : ", ") + std::string(name(d));
  throw Error(ErrorCode::kNotImplemented, ErrorReason::kDtypeNotImplemented,
              opconform::detail::concat(op, ": argument '", arg, "' has dtype ",
                                                                     name(t.dtype()), ", which the operator does not "
                                                                     "support (it takes ", taken, ")"));
}

std::vector<int64_t> non_channel_dims(int64_t rank) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
  return dims;
}

int64_t draw_dim(SampleDraw& draw, int64_t rank) {
  const int64_t r = std::max<int64_t>(rank, 1);
  return draw.integer(-r, r - 1);
}

Tensor draw_tie_free(SampleDraw& draw, const std::vector<int64_t>& shape, DType dtype) {
  Tensor t = draw.tensor(shape, dtype, {}, /*mutable_input=*/true);
  if (!is_floating(dtype) || t.numel() == 0) return t;
  const auto drawn = t.to_vector<double>();
  if (!std::all_of(drawn.begin(), drawn.end(), [](double v) { return std::isfinite(v); })) return t;
  const int64_t n = t.numel();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t i = 0; i + 1 < n; ++i) std::swap(order[i], order[draw.integer(i, n - 1)]);
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t code = order[i];
    const double magnitude = std::ldexp(1.0 + static_cast<double>((code / 2) % 128) / 128, static_cast<int>(code / 256));
    values[i] = code % 2 ? -magnitude : magnitude;
  }
  t.copy_(from_vector<double>(values, shape));
  return t;
}

// ---- memory formats (PyTorch's suggest_memory_format / empty_like rules) ----

// c10's is_channels_last_strides_2d / _3d: does this 4-d (5-d) layout look channels-last?
bool strides_like_channels_last(IntArrayRef sizes, IntArrayRef strides) {
  if (sizes.size() != 4 && sizes.size() != 5) return false;
  if (strides[1] == 0) return false;
  int64_t min = 0;
  for (int64_t d : channels_last_order(static_cast<int64_t>(sizes.size()))) {
    if (sizes[d] == 0 || strides[d] < min) return false;
    if (d == 0 && min == strides[1]) return false;  // ambiguous (N111): contiguous wins
    min = strides[d] * (sizes[d] > 1 ? sizes[d] : 1);
  }
  return true;
}

MemoryFormat suggest_memory_format(const Tensor& t) {
  if (!strides_like_channels_last(t.sizes(), t.strides())) return MemoryFormat::Contiguous;
  return t.dim() == 4 ? MemoryFormat::ChannelsLast : MemoryFormat::ChannelsLast3d;
}

std::vector<SymInt> format_strides(const std::vector<SymInt>& sizes, MemoryFormat format) {
  switch (format) {
    case MemoryFormat::Contiguous: return contiguous_strides(sizes);
    case MemoryFormat::ChannelsLast:
    case MemoryFormat::ChannelsLast3d: return channels_last_strides(sizes);
    case MemoryFormat::Preserve: break;
  }
  throw Error(ErrorCode::kInternal, "format_strides: preserve_format is no layout of its own (strides_for_format)");
}

std::vector<SymInt> strides_for_format(const Tensor& self, MemoryFormat format, std::string_view op) {
  switch (format) {
    case MemoryFormat::Preserve:
      if (self.is_non_overlapping_and_dense()) return self.sym_strides();
      return format_strides(self.sym_sizes(), suggest_memory_format(self));
    case MemoryFormat::Contiguous: break;
    case MemoryFormat::ChannelsLast:
      OPCONFORM_CHECK(self.dim() == 4, ErrorCode::kInvalidArgument, op,
                      ": required rank 4 tensor to use channels_last format, got rank ", self.dim());
      break;
    case MemoryFormat::ChannelsLast3d:
      OPCONFORM_CHECK(self.dim() == 5, ErrorCode::kInvalidArgument, op,
                      ": required rank 5 tensor to use channels_last_3d format, got rank ", self.dim());
      break;
  }
  return format_strides(self.sym_sizes(), format);
}

Tensor new_like(const Tensor& self, MemoryFormat format, TensorOptions options, std::string_view op) {
  return empty_strided(self.sym_sizes(), strides_for_format(self, format, op), options);
}

std::vector<int64_t> expect_ints(std::span<const SymInt> values) {
  std::vector<int64_t> out;
  out.reserve(values.size());
  for (const SymInt& v : values) out.push_back(v.expect_int());
  return out;
}

std::string sym_shape_string(std::span<const SymInt> sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + sizes[i].to_string();
  return out + "]";
}

bool symbolic_fake(const Tensor& t) { return t.defined() && t.is_fake() && t.has_symbolic_sizes(); }

Tensor with_sym_shape(const Tensor& out, std::vector<SymInt> sizes, std::vector<SymInt> strides) {
  OPCONFORM_CHECK(static_cast<int64_t>(sizes.size()) == out.dim() && sizes.size() == strides.size(),
                  ErrorCode::kInternal, "symbolic shape of rank ", sizes.size(), " for an output of rank ", out.dim());
  for (int64_t d = 0; d < out.dim(); ++d) {
    OPCONFORM_CHECK(concrete_stand_in(sizes[static_cast<size_t>(d)]) == out.size(d), ErrorCode::kInternal,
                    "symbolic size ", sizes[static_cast<size_t>(d)], " of dimension ", d, " disagrees with ",
                    shape_string(out.sizes()));
  }
  Tensor t = out.as_strided(out.sizes(), out.strides(), out.storage_offset());
  t.unsafe_impl()->sym_shape = std::make_shared<const SymShape>(SymShape{std::move(sizes), std::move(strides)});
  return t;
}

}  // namespace opconform::reference::detail
