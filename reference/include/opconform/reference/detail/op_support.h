// Pieces many reference operators share: dtype lists, the elementwise vmap rule, argument checks,
// setup_context / backward helpers, the Autograd kernel of in-place ops, sample drawing.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/core/sample_draw.h"
#include "opconform/core/autograd.h"
#include "opconform/core/dtype.h"
#include "opconform/core/layout.h"
#include "opconform/core/registry.h"
#include "opconform/core/vmap.h"
#include "opconform/reference/detail/calls.h"

namespace opconform::reference::detail {

// dtype lists for OpBuilder::dtypes.
inline const std::vector<DType> kFloating = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
inline const std::vector<DType> kFloatingAndComplex = {DType::Float16,   DType::BFloat16,  DType::Float32,
                                                       DType::Float64,   DType::Complex64, DType::Complex128};
inline const std::vector<DType> kIntegral = {DType::UInt8, DType::Int8, DType::Int16, DType::Int32, DType::Int64};
inline const std::vector<DType> kIntegralAndBool = {DType::Bool,  DType::UInt8, DType::Int8,
                                                    DType::Int16, DType::Int32, DType::Int64};
inline const std::vector<DType> kReal = {DType::UInt8,   DType::Int8,     DType::Int16,   DType::Int32,  DType::Int64,
                                         DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
inline const std::vector<DType> kAll = {DType::Bool,     DType::UInt8,   DType::Int8,    DType::Int16,
                                        DType::Int32,    DType::Int64,   DType::Float16, DType::BFloat16,
                                        DType::Float32,  DType::Float64, DType::Complex64, DType::Complex128};
std::vector<DType> concat_dtypes(std::vector<DType> a, const std::vector<DType>& b);
inline const std::vector<DType> kRealAndComplex = concat_dtypes(kReal, {DType::Complex64, DType::Complex128});

// The vmap rule of an elementwise op over every tensor argument: batch dims go to the front,
// lower-rank batched tensors get size-1 dims after the batch so broadcasting lines up, and the op
// runs once on the physical tensors (through the dispatcher, so nested vmap works). Outputs
// carry the batch at dim 0.
VmapRule elementwise_vmap_rule(Registry& registry, std::string op);

// ---- argument checks ----

// Wraps a possibly negative dim into [0, rank) (rank 0 accepts -1 and 0), naming op and argument
// in the error.
int64_t wrap_dim(int64_t dim, int64_t rank, std::string_view op, std::string_view arg = "dim");
// Which dims a dim list names (wrapped; max(rank, 1) entries); a dim named twice is an error.
std::vector<bool> dim_mask(const std::vector<int64_t>& dims, int64_t rank, std::string_view op,
                           std::string_view arg = "dim");
// Refuses the tensor options the reference cannot honour: non-strided layouts, pinned memory.
void check_strided(std::string_view op, std::optional<Layout> layout, std::optional<bool> pin_memory);
// Refuses a tensor argument whose dtype is not among `allowed` (an error naming the dtypes taken).
void require_dtype(std::string_view op, const Tensor& t, const std::vector<DType>& allowed,
                   std::string_view arg = "self");
// The dims but the channel dim 1 (0, 2, 3, ...): what a per-channel parameter's gradient sums over.
std::vector<int64_t> non_channel_dims(int64_t rank);

// Calls f(index) for every multi-index of `sizes` in row-major order (none when a size is 0; one,
// the empty index, for rank 0).
template <typename F>
void for_each_index(IntArrayRef sizes, F&& f) {
  for (int64_t s : sizes)
    if (s == 0) return;
  std::vector<int64_t> index(sizes.size(), 0);
  while (true) {
    f(static_cast<const std::vector<int64_t>&>(index));
    int64_t d = static_cast<int64_t>(sizes.size()) - 1;
    for (; d >= 0; --d) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// ---- autograd ----

// setup_context that saves the arguments that are tensors (in schema order; None skipped).
void save_tensor_inputs(autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs);
// setup_context that saves the tensor inputs, then the tensor outputs.
void save_inputs_and_outputs(autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs);
// Keeps every argument that is not a tensor (scalars, dims, flags, None) as attribute "arg<i>",
// i its schema position; saved_argument reads it back.
void save_arguments(autograd::AutogradContext& ctx, const Stack& inputs);
const IValue& saved_argument(const autograd::AutogradContext& ctx, size_t i);

// A formula shared by overloads of different arity (sum and sum.dim_IntList, sort and topk):
// setup_context keeps the argument count, backward returns self's gradient and none for the rest.
void save_argument_count(autograd::AutogradContext& ctx, const Stack& inputs);
std::vector<Tensor> self_gradient(const autograd::AutogradContext& ctx, Tensor grad);

// A backward written as a plain function of the registry calls, the ctx and the gradients.
using OpsBackwardFn = std::vector<Tensor> (*)(const Ops& ops, autograd::AutogradContext& ctx,
                                              const std::vector<Tensor>& grads);
autograd::BackwardFn with_ops(Registry& registry, OpsBackwardFn backward);

// The mask of the positions `index` (int64, size 1 at dim d) names along dim d of size n: true
// where the position 0 .. n-1 equals the index (the gradient of a selection goes there).
Tensor one_hot(const Ops& ops, const Tensor& index, int64_t d, int64_t n);

// setup_context of an in-place op that also receives self as it was before the call.
using InplaceSetupFn = std::function<void(autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs,
                                          const Tensor& original_self)>;
// The Autograd kernel (OpBuilder::autograd_kernel) of an in-place op (self: argument 0) whose
// formula needs self from before the write, which setup_context, run after the kernel, no longer
// sees (mul_: d/dother = grad * old self). A call that records first takes a recorded
// aten::clone of self, so that double backward reaches self's earlier history through it.
KernelFunction inplace_autograd_kernel(Registry& registry, autograd::BackwardFn backward, InplaceSetupFn setup);

// Whether a call records a gradient: grad mode is on and a tensor argument requires grad.
bool call_records(const OperatorHandle& op, const Stack& stack);

// Note [Backward ops as composites]: an op that is another op's gradient (native_layer_norm_backward,
// native_group_norm_backward, convolution_backward) is differentiable in every input through its
// own formula written with registry ops, `composite` (the call's arguments in, its results out,
// undefined Tensors where output_mask is false). Its CPU kernel is written apart (float64
// loops), so gradcheck compares the composite's gradient with finite differences of an
// independent kernel. The backward re-runs the composite on the saved arguments and
// differentiates it (autograd::grad inside the formula): nothing of the composite is saved in
// the forward, so graph capture sees the backward as calls on the op's own inputs and outputs,
// and with create_graph the gradient is recorded (double backward).
using CompositeFn = std::function<Stack(const Ops& ops, const Stack& args)>;
struct CompositeFormula {
  autograd::BackwardFn backward;
  autograd::SetupContextFn setup;
};
CompositeFormula composite_formula(Registry& registry, CompositeFn composite);

// ---- samples ----

// A dim of a tensor of `rank`, negative about half the time (rank 0: -1 or 0).
int64_t draw_dim(SampleDraw& draw, int64_t rank);
// A tensor of `shape` and `dtype` whose finite floating values are distinct, for ops that are not
// differentiable where values tie (max-like reductions, sort, topk): +-(1 + j/128) * 2^q, one
// (sign, j, q) per element in a drawn order, exact in every floating dtype (8 significant bits).
// Samples holding NaN or inf keep their values (gradcheck skips them; the forward checks see
// them), and so do integer ones (ties show the stable order). The stride-0 layout is not drawn:
// it repeats values.
Tensor draw_tie_free(SampleDraw& draw, const std::vector<int64_t>& shape, DType dtype);

// ---- memory formats (PyTorch's suggest_memory_format / empty_like rules) ----
// Layout decisions read the concrete strides (of a symbolic fake: at the hints) and record no
// guard; the strides they choose are computed over the (symbolic) sizes, with core's rule
// (strides.h).

// c10's is_channels_last_strides_2d / _3d: does this 4-d (5-d) layout look channels-last?
bool strides_like_channels_last(IntArrayRef sizes, IntArrayRef strides);
// PyTorch's suggest_memory_format: ChannelsLast (ChannelsLast3d for 5-d) when t's layout looks
// channels-last, else Contiguous.
MemoryFormat suggest_memory_format(const Tensor& t);
// Dense strides of `sizes` in a memory format: Contiguous or channels-last (Preserve is no layout
// of its own: strides_for_format resolves it).
std::vector<SymInt> format_strides(const std::vector<SymInt>& sizes, MemoryFormat format);
// The strides of a new tensor shaped like `self` in `format` (empty_like / clone): Preserve keeps
// self's (symbolic) strides when self is non-overlapping and dense, else takes its suggested format.
std::vector<SymInt> strides_for_format(const Tensor& self, MemoryFormat format, std::string_view op);
// A new uninitialised tensor shaped like self in `format`, with self's symbolic sizes when it has
// them (empty_like; fake under FakeTensorMode).
Tensor new_like(const Tensor& self, MemoryFormat format, TensorOptions options, std::string_view op);

// ---- symbolic sizes: one shape plan for the CPU and the fake kernel ----
// Note [Shape plans over SymInt]: an op computes its output sizes once, from the inputs'
// sym_sizes() (concrete for real tensors), and makes its outputs from them with core's stride rule
// and empty_strided over SymInts: a real tensor on real inputs, a fake one with symbolic sizes on
// symbolic fakes (test_aot_dispatch_dynamic replays a captured graph at other sizes). Comparisons
// in the plan record guards (symint.h). The CPU kernel's loops read the plan's sizes as integers
// (expect_ints).

// The values as integers; an error (kInvalidArgument) when one is symbolic.
std::vector<int64_t> expect_ints(std::span<const SymInt> values);
// "[s0, 3]": sizes as shape_string prints integers (for messages; "[2, 3]" when concrete).
std::string sym_shape_string(std::span<const SymInt> sizes);
// A fake tensor with symbolic sizes.
bool symbolic_fake(const Tensor& t);
// A view's symbolic sizes and strides attached to the concrete view `out` (a new tensor object
// over the same memory; each size must equal out's at the hints). Only for outputs that are views
// of an input, whose strides and offset follow from the input's (view, expand, slice, ...): a new
// tensor is made from its plan instead (Note [Shape plans over SymInt]).
Tensor with_sym_shape(const Tensor& out, std::vector<SymInt> sizes, std::vector<SymInt> strides);

}  // namespace opconform::reference::detail
