// vmap: torch.vmap and torch.library.register_vmap.
//
//   auto f = vmap([&](const std::vector<Tensor>& xs) { return std::vector<Tensor>{sum_dim(xs[0], 0)}; },
//                 {0});
//   std::vector<Tensor> ys = f({x});  // x: [B, N, M] -> ys[0]: [B, M]
//
// Inside the function, a batched input is a *batched tensor*: a wrapper whose sizes are the
// logical (per-sample) sizes and whose key set holds DispatchKey::Batched; its BatchedInfo keeps
// the physical tensor, the batch dimension and the vmap level. Every operator called on it
// dispatches to the Batched key, where either
//   - the operator's vmap rule runs (make_vmap_kernel, registered at DispatchKey::Batched), or
//   - the registry's vmap fallback (install_vmap_fallback) runs the operator once per sample and
//     stacks the results (slow but always right for functional ops; it counts its uses so a
//     missing rule can be spotted).
//
// Note [vmap levels]: every vmap call takes a new, larger level (a thread-local counter) and
// pushes it on a thread-local stack of active levels. Nested vmap wraps a batched tensor again,
// at the inner level. The Batched kernel handles the largest level among its arguments (the
// innermost vmap) and treats anything not batched at that level as unbatched; what it passes on
// may still hold batched tensors of outer levels, whose own calls reach the Batched key again.
// So rules and the fallback do *not* exclude the Batched key: physical tensors do not carry it
// and dispatch normally, outer-level wrappers must reach it.
//
// Note [Batched wrappers have no data]: the wrapper's storage holds no memory (it is a metadata
// tensor), so reading it outside an operator is an error rather than a silent read of sample 0.
// Tensor methods (view, select, ...) are not operators: a view made from a wrapper has the
// Batched key but no BatchedInfo, and using it in an operator is reported as an error. Inside
// rules, use the batch-aware helpers below on physical values (they may be wrappers of outer
// levels under nested vmap).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "opconform/core/ivalue.h"
#include "opconform/core/kernel.h"
#include "opconform/core/registry.h"
#include "opconform/core/tensor.h"

namespace opconform {

// torch.vmap's randomness: what random operators do across the batch.
enum class Randomness { Error, Different, Same };

// What detail::TensorImpl::batched points to (see tensor.h).
struct BatchedInfo {
  Tensor value;   // the physical tensor (itself a batched tensor of an outer level when nested)
  int64_t bdim;   // the batch dimension of value
  int64_t level;  // the vmap level this wrapper belongs to
};

struct VmapInfo {
  int64_t batch_size;
  Randomness randomness;
};

// torch.library.register_vmap's rule: given the physical inputs (batched arguments unwrapped at
// the current level) and one in_dim per argument (nullopt: not batched), returns the outputs (one
// per schema return) and their out_dims (nullopt: the same for every sample).
// A Tensor[] argument with some batched element reaches the rule with every element batched at
// dim 0 (unbatched elements expanded) and in_dim 0.
using VmapRule = std::function<std::pair<Stack, std::vector<std::optional<int64_t>>>(
    const VmapInfo& info, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims)>;

using VmapFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Vectorizes fn over the batch dimension of its inputs. in_dims: one per input (or a single
// entry for all); nullopt = not batched; negative dims count from the end. out_dims: one per
// output (or a single entry for all); nullopt is only allowed for outputs that do not depend on
// the batch. Batched inputs must agree on the batch size (the error names the arguments).
VmapFunction vmap(VmapFunction fn, std::vector<std::optional<int64_t>> in_dims,
                  std::vector<std::optional<int64_t>> out_dims = {0}, Randomness randomness = Randomness::Error);

// A boxed kernel for DispatchKey::Batched that runs `rule` (see Note [vmap levels]).
KernelFunction make_vmap_kernel(VmapRule rule);

// The per-sample fallback at DispatchKey::Batched for operators without a rule. Operators that
// write an input, or return anything but tensors, are refused with an error.
RegistrationHandle install_vmap_fallback(Registry& registry);

// How many times the fallback handled `op_name` ("ns::op" or "ns::op.overload"), all registries
// and threads together.
int64_t vmap_fallback_count(std::string_view op_name);
void reset_vmap_fallback_counts();

// ---- batched tensors (for rules and tests) ----

// Wraps `value` as a batched tensor of `level` with its batch at `bdim` (negative wraps).
Tensor make_batched(const Tensor& value, int64_t bdim, int64_t level);
// True for a batched wrapper (any level).
bool is_batched(const Tensor& t);
// The wrapper's BatchedInfo, null for anything else.
const BatchedInfo* batched_info(const Tensor& t);
// The innermost active vmap level, 0 outside vmap.
int64_t current_vmap_level();

// Returns `t` with its batch at `to`: `bdim` is where the batch is now; nullopt means `t` has no
// batch dimension, and one of batch_size is added by expansion. Works on physical tensors that
// are batched wrappers of outer levels too (the usual first step of a rule).
Tensor move_batch_dim(const Tensor& t, std::optional<int64_t> bdim, int64_t to, int64_t batch_size);

}  // namespace opconform
