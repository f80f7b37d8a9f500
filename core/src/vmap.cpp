// vmap: batched wrappers, levels, the rule kernel and the per-sample fallback (see vmap.h).
#include "opconform/core/vmap.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>

#include "opconform/core/error.h"
#include "opconform/core/schema.h"
#include "opconform/core/storage.h"

namespace opconform {
namespace {

const detail::TensorImpl* impl_of(const Tensor& t) { return t.unsafe_impl(); }

// ---- levels (Note [vmap levels]) ----

struct ActiveLevel {
  int64_t level;
  int64_t batch_size;
  Randomness randomness;
};
// Levels only grow, so a wrapper that escaped a finished vmap never matches a later one.
thread_local int64_t tls_last_level = 0;
thread_local std::vector<ActiveLevel> tls_active_levels;

class LevelScope {
 public:
  LevelScope(int64_t batch_size, Randomness randomness) {
    tls_active_levels.push_back({++tls_last_level, batch_size, randomness});
  }
  ~LevelScope() { tls_active_levels.pop_back(); }
  LevelScope(const LevelScope&) = delete;
  LevelScope& operator=(const LevelScope&) = delete;
  int64_t level() const { return tls_active_levels.back().level; }
};

const ActiveLevel& active_level(int64_t level) {
  for (const auto& a : tls_active_levels) {
    if (a.level == level) return a;
  }
  throw Error(ErrorCode::kInvalidArgument,
              detail::concat("vmap: a batched tensor of level ", level,
                             " was used outside its vmap (it escaped the vmapped function, or crossed threads)"));
}

int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view what) {
  OPCONFORM_CHECK(dim >= -ndim && dim < ndim, ErrorCode::kInvalidArgument, what, ": dimension ", dim,
                  " is out of range for a tensor of ", ndim, " dimensions (expected [", -ndim, ", ", ndim - 1, "])");
  return dim < 0 ? dim + ndim : dim;
}

// A view made with a Tensor method copies the key set but not the BatchedInfo (see vmap.h).
void check_not_stray(const Tensor& t) {
  OPCONFORM_CHECK(!t.defined() || !t.key_set().has(DispatchKey::Batched) || batched_info(t) != nullptr,
                  ErrorCode::kInvalidArgument,
                  "vmap: a tensor has the Batched key but no batch information: it is a view of a batched tensor "
                  "made with a Tensor method (view, select, ...), which vmap cannot see; use operators inside "
                  "vmapped functions, or move_batch_dim inside rules");
}

// ---- batch-aware views: they work through wrappers of any level, recursively ----

// The physical dim of logical dim d of a wrapper whose batch is at b.
int64_t physical_dim(int64_t d, int64_t b) { return d < b ? d : d + 1; }

Tensor select_any(const Tensor& t, int64_t dim, int64_t index) {
  const BatchedInfo* info = batched_info(t);
  if (info == nullptr) {
    check_not_stray(t);
    return t.select(dim, index);
  }
  int64_t pd = physical_dim(dim, info->bdim);
  int64_t bdim = pd < info->bdim ? info->bdim - 1 : info->bdim;
  return make_batched(select_any(info->value, pd, index), bdim, info->level);
}

Tensor permute_any(const Tensor& t, const std::vector<int64_t>& perm) {
  const BatchedInfo* info = batched_info(t);
  if (info == nullptr) {
    check_not_stray(t);
    return t.permute(perm);
  }
  // The batch dim stays where it is; the logical dims move around it.
  std::vector<int64_t> physical;
  for (int64_t d : perm) physical.push_back(physical_dim(d, info->bdim));
  physical.insert(physical.begin() + info->bdim, info->bdim);
  return make_batched(permute_any(info->value, physical), info->bdim, info->level);
}

Tensor movedim_any(const Tensor& t, int64_t from, int64_t to) {
  if (from == to) return t;
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d != from) perm.push_back(d);
  }
  perm.insert(perm.begin() + to, from);
  return permute_any(t, perm);
}

// Inserts a new dim of `size` at `dim` (0..t.dim()) by expansion (no copy).
Tensor expand_new_dim_any(const Tensor& t, int64_t dim, int64_t size) {
  const BatchedInfo* info = batched_info(t);
  if (info == nullptr) {
    check_not_stray(t);
    Tensor u = t.unsqueeze(dim);
    std::vector<int64_t> sizes(u.sizes().begin(), u.sizes().end());
    sizes[dim] = size;
    return u.expand(sizes);
  }
  // A new dim at or before the batch dim goes in front of it physically.
  int64_t pos = dim <= info->bdim ? dim : dim + 1;
  int64_t bdim = dim <= info->bdim ? info->bdim + 1 : info->bdim;
  return make_batched(expand_new_dim_any(info->value, pos, size), bdim, info->level);
}

// Stacks equally shaped tensors along a new dim 0. Slices that are wrappers of some level are
// stacked physically and wrapped again, so nested vmap works through the fallback.
Tensor stack_any(const std::vector<Tensor>& slices) {
  int64_t outer = 0;
  int64_t outer_size = 0;
  for (const auto& s : slices) {
    check_not_stray(s);
    if (const BatchedInfo* info = batched_info(s); info && info->level > outer) {
      outer = info->level;
      outer_size = info->value.size(info->bdim);
    }
  }
  if (outer == 0) {
    const Tensor& first = slices.front();
    std::vector<int64_t> sizes{static_cast<int64_t>(slices.size())};
    sizes.insert(sizes.end(), first.sizes().begin(), first.sizes().end());
    Tensor out = empty(sizes, first.options());
    for (size_t i = 0; i < slices.size(); ++i) {
      OPCONFORM_CHECK(std::ranges::equal(slices[i].sizes(), first.sizes()) && slices[i].dtype() == first.dtype(),
                      ErrorCode::kInvalidArgument,
                      "vmap fallback: the per-sample outputs differ in shape or dtype (sample 0 and sample ", i,
                      "); such operators need a vmap rule");
      out.select(0, static_cast<int64_t>(i)).copy_(slices[i]);
    }
    return out;
  }
  // Bring every slice to "batch of level `outer` at physical dim 0", then stack the physicals:
  // the result's dim 0 is the new stack dim and dim 1 the batch of level `outer`.
  std::vector<Tensor> physical;
  physical.reserve(slices.size());
  for (const auto& s : slices) {
    const BatchedInfo* info = batched_info(s);
    if (info != nullptr && info->level == outer) physical.push_back(movedim_any(info->value, info->bdim, 0));
    else physical.push_back(expand_new_dim_any(s, 0, outer_size));
  }
  return make_batched(stack_any(physical), 1, outer);
}

// ---- arguments on the stack ----

// The largest vmap level among the tensors of stack[base..], 0 when none is batched.
int64_t max_level(const Stack& stack, size_t base) {
  int64_t level = 0;
  auto see = [&](const Tensor& t) {
    check_not_stray(t);
    if (const BatchedInfo* info = batched_info(t)) level = std::max(level, info->level);
  };
  for (size_t i = base; i < stack.size(); ++i) {
    const IValue& v = stack[i];
    if (v.is_tensor()) {
      see(v.to_tensor());
    } else if (auto* list = v.get_if<std::vector<Tensor>>()) {
      for (const auto& t : *list) see(t);
    } else if (auto* opt_list = v.get_if<std::vector<std::optional<Tensor>>>()) {
      for (const auto& t : *opt_list) {
        if (t) see(*t);
      }
    }
  }
  return level;
}

const BatchedInfo* info_at(const Tensor& t, int64_t level) {
  const BatchedInfo* info = batched_info(t);
  return info != nullptr && info->level == level ? info : nullptr;
}

// A list element as a physical tensor with its batch at dim 0 (expanded when not batched).
Tensor element_batch_first(const Tensor& t, int64_t level, int64_t batch_size) {
  if (const BatchedInfo* info = info_at(t, level)) return movedim_any(info->value, info->bdim, 0);
  return expand_new_dim_any(t, 0, batch_size);
}

// Unwraps one argument at `level` for a rule: the physical value and its in_dim.
std::pair<IValue, std::optional<int64_t>> unwrap_argument(const IValue& v, int64_t level, int64_t batch_size) {
  if (v.is_tensor()) {
    if (const BatchedInfo* info = info_at(v.to_tensor(), level)) return {IValue(info->value), info->bdim};
    return {v, std::nullopt};
  }
  if (auto* list = v.get_if<std::vector<Tensor>>()) {
    if (std::ranges::none_of(*list, [&](const Tensor& t) { return info_at(t, level) != nullptr; })) {
      return {v, std::nullopt};
    }
    std::vector<Tensor> out;
    for (const auto& t : *list) out.push_back(element_batch_first(t, level, batch_size));
    return {IValue(std::move(out)), 0};
  }
  if (auto* list = v.get_if<std::vector<std::optional<Tensor>>>()) {
    if (std::ranges::none_of(*list, [&](const auto& t) { return t && info_at(*t, level) != nullptr; })) {
      return {v, std::nullopt};
    }
    std::vector<std::optional<Tensor>> out;
    for (const auto& t : *list) {
      out.push_back(t ? std::optional<Tensor>(element_batch_first(*t, level, batch_size)) : std::nullopt);
    }
    return {IValue(std::move(out)), 0};
  }
  return {v, std::nullopt};
}

// Sample `index` of one argument at `level` (for the fallback).
IValue slice_argument(const IValue& v, int64_t level, int64_t index) {
  auto slice = [&](const Tensor& t) {
    const BatchedInfo* info = info_at(t, level);
    return info != nullptr ? select_any(info->value, info->bdim, index) : t;
  };
  if (v.is_tensor()) return IValue(slice(v.to_tensor()));
  if (auto* list = v.get_if<std::vector<Tensor>>()) {
    std::vector<Tensor> out;
    for (const auto& t : *list) out.push_back(slice(t));
    return IValue(std::move(out));
  }
  if (auto* list = v.get_if<std::vector<std::optional<Tensor>>>()) {
    std::vector<std::optional<Tensor>> out;
    for (const auto& t : *list) out.push_back(t ? std::optional<Tensor>(slice(*t)) : std::nullopt);
    return IValue(std::move(out));
  }
  return v;
}

// Wraps a rule's output at `level` (Tensor[] outputs: the out_dim holds for every element).
IValue wrap_output(IValue v, std::optional<int64_t> out_dim, int64_t level) {
  if (!out_dim) return v;
  if (v.is_tensor()) return IValue(make_batched(v.to_tensor(), *out_dim, level));
  if (auto* list = v.get_if<std::vector<Tensor>>()) {
    std::vector<Tensor> out;
    for (const auto& t : *list) out.push_back(make_batched(t, *out_dim, level));
    return IValue(std::move(out));
  }
  throw Error(ErrorCode::kInvalidArgument, detail::concat("vmap rule: out_dim ", *out_dim, " given for an output of type ",
                                                          v.type_name(), "; only tensor outputs have a batch dim"));
}

// The caller's key set, restricted to the Batched key and below: what the operator runs on
// for one sample. Batched stays only if the sample still holds wrappers of outer levels.
DispatchKeySet keys_for_sample(const OperatorHandle& op, const Stack& sample) {
  return op.dispatch_keys(sample) & DispatchKeySet::below(DispatchKey::Batched).add(DispatchKey::Batched);
}

// ---- fallback counts ----

std::mutex counts_mutex;
std::map<std::string, int64_t, std::less<>>& fallback_counts() {
  static auto* counts = new std::map<std::string, int64_t, std::less<>>();  // outlives static handles
  return *counts;
}

void count_fallback(const std::string& name) {
  std::lock_guard lock(counts_mutex);
  ++fallback_counts()[name];
}

void run_rule(const VmapRule& rule, const OperatorHandle& op, DispatchKeySet keys, Stack& stack) {
  const FunctionSchema& schema = op.schema();
  const size_t base = stack.size() - schema.arguments.size();
  const int64_t level = max_level(stack, base);
  if (level == 0) {  // Batched reached without batched arguments: nothing to do at this key
    op.redispatch_boxed(keys.after(DispatchKey::Batched), stack);
    return;
  }
  const ActiveLevel& active = active_level(level);
  Stack inputs;
  std::vector<std::optional<int64_t>> in_dims;
  for (size_t i = base; i < stack.size(); ++i) {
    auto [value, dim] = unwrap_argument(stack[i], level, active.batch_size);
    inputs.push_back(std::move(value));
    in_dims.push_back(dim);
  }
  auto [outputs, out_dims] = rule(VmapInfo{active.batch_size, active.randomness}, inputs, in_dims);
  OPCONFORM_CHECK(schema.is_varret || outputs.size() == schema.returns.size(), ErrorCode::kSchemaMismatch,
                  "vmap rule of '", op.name(), "' returned ", outputs.size(), " outputs; the schema has ",
                  schema.returns.size());
  OPCONFORM_CHECK(out_dims.size() == outputs.size(), ErrorCode::kInvalidArgument, "vmap rule of '", op.name(),
                  "' returned ", outputs.size(), " outputs but ", out_dims.size(), " out_dims");
  stack.resize(base);
  for (size_t j = 0; j < outputs.size(); ++j) stack.push_back(wrap_output(std::move(outputs[j]), out_dims[j], level));
}

void vmap_fallback(const OperatorHandle& op, DispatchKeySet keys, Stack& stack) {
  const FunctionSchema& schema = op.schema();
  const size_t base = stack.size() - schema.arguments.size();
  const int64_t level = max_level(stack, base);
  if (level == 0) {
    op.redispatch_boxed(keys.after(DispatchKey::Batched), stack);
    return;
  }
  const ActiveLevel& active = active_level(level);
  OPCONFORM_CHECK(!schema.is_mutable(), ErrorCode::kNotImplemented, "vmap: '", op.name(),
                  "' has no vmap rule, and the per-sample fallback cannot run operators that write their inputs; "
                  "register one with make_vmap_kernel at DispatchKey::Batched");
  OPCONFORM_CHECK(!op.has_tag(Tag::nondeterministic_seeded) || active.randomness == Randomness::Different,
                  ErrorCode::kInvalidArgument, "vmap: random operator '", op.name(),
                  "' called under vmap with randomness=", active.randomness == Randomness::Error ? "error" : "same",
                  "; the fallback supports randomness=different only (register a vmap rule for 'same')");
  OPCONFORM_CHECK(active.batch_size > 0, ErrorCode::kNotImplemented, "vmap: '", op.name(),
                  "' has no vmap rule, and the per-sample fallback cannot run a batch of size 0");
  count_fallback(op.name());

  const Stack args(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
  std::vector<std::vector<Tensor>> per_output;
  for (int64_t i = 0; i < active.batch_size; ++i) {
    Stack sample;
    sample.reserve(args.size());
    for (const auto& a : args) sample.push_back(slice_argument(a, level, i));
    op.redispatch_boxed(keys_for_sample(op, sample), sample);
    if (per_output.empty()) per_output.resize(sample.size());
    for (size_t j = 0; j < sample.size(); ++j) {
      // An undefined Tensor output (a backward op's output_mask false) stays undefined.
      if (sample[j].is_none()) sample[j] = IValue(Tensor());
      OPCONFORM_CHECK(sample[j].is_tensor(), ErrorCode::kNotImplemented, "vmap: '", op.name(),
                      "' has no vmap rule, and the per-sample fallback only handles tensor outputs (output ", j,
                      " is ", sample[j].type_name(), "); register a rule with make_vmap_kernel");
      per_output[j].push_back(sample[j].to_tensor());
    }
  }
  stack.resize(base);
  for (size_t j = 0; j < per_output.size(); ++j) {
    const auto& outputs = per_output[j];
    const auto defined = std::ranges::count_if(outputs, [](const Tensor& t) { return t.defined(); });
    OPCONFORM_CHECK(defined == 0 || defined == std::ssize(outputs), ErrorCode::kInvalidArgument, "vmap: '",
                    op.name(), "' returned an undefined output ", j, " for ", std::ssize(outputs) - defined, " of ",
                    outputs.size(), " samples and a tensor for the others; the fallback cannot stack them");
    stack.push_back(defined == 0 ? IValue(Tensor()) : IValue(make_batched(stack_any(outputs), 0, level)));
  }
}

}  // namespace

// ---------------------------------------------------------------- batched tensors

Tensor make_batched(const Tensor& value, int64_t bdim, int64_t level) {
  OPCONFORM_CHECK(value.defined(), ErrorCode::kInvalidArgument, "make_batched: undefined tensor");
  check_not_stray(value);
  bdim = wrap_dim(bdim, value.dim(), "make_batched");
  auto impl = std::make_unique<detail::TensorImpl>();
  impl->sizes.assign(value.sizes().begin(), value.sizes().end());
  impl->sizes.erase(impl->sizes.begin() + bdim);
  impl->strides = contiguous_strides(impl->sizes);
  impl->dtype = value.dtype();
  impl->device = value.device();
  // Note [Batched wrappers have no data]: a null data pointer with a nonzero size is a storage
  // without memory, so reads fail instead of showing one sample.
  impl->storage = Storage::wrap(nullptr, itemsize(value.dtype()), value.device(), nullptr);
  impl->key_set = value.key_set() | DispatchKeySet(DispatchKey::Batched);
  impl->batched = std::make_shared<BatchedInfo>(BatchedInfo{value, bdim, level});
  return Tensor::adopt(std::move(impl));
}

bool is_batched(const Tensor& t) { return batched_info(t) != nullptr; }

const BatchedInfo* batched_info(const Tensor& t) { return t.defined() ? impl_of(t)->batched.get() : nullptr; }

int64_t current_vmap_level() { return tls_active_levels.empty() ? 0 : tls_active_levels.back().level; }

Tensor move_batch_dim(const Tensor& t, std::optional<int64_t> bdim, int64_t to, int64_t batch_size) {
  if (!bdim) return expand_new_dim_any(t, wrap_dim(to, t.dim() + 1, "move_batch_dim"), batch_size);
  int64_t from = wrap_dim(*bdim, t.dim(), "move_batch_dim");
  OPCONFORM_CHECK(t.size(from) == batch_size, ErrorCode::kInvalidArgument, "move_batch_dim: dim ", from,
                  " has size ", t.size(from), ", expected the batch size ", batch_size);
  return movedim_any(t, from, wrap_dim(to, t.dim(), "move_batch_dim"));
}

// ---------------------------------------------------------------- vmap

VmapFunction vmap(VmapFunction fn, std::vector<std::optional<int64_t>> in_dims,
                  std::vector<std::optional<int64_t>> out_dims, Randomness randomness) {
  OPCONFORM_CHECK(fn != nullptr, ErrorCode::kInvalidArgument, "vmap: no function given");
  return [fn = std::move(fn), in_dims = std::move(in_dims), out_dims = std::move(out_dims),
          randomness](const std::vector<Tensor>& inputs) -> std::vector<Tensor> {
    // A single in_dims entry applies to every input, as torch.vmap's in_dims=0.
    auto dims = in_dims.size() == 1 ? std::vector<std::optional<int64_t>>(inputs.size(), in_dims[0]) : in_dims;
    OPCONFORM_CHECK(dims.size() == inputs.size(), ErrorCode::kInvalidArgument, "vmap: in_dims has ", in_dims.size(),
                    " entries but the function was called with ", inputs.size(), " inputs");
    std::optional<int64_t> batch_size;
    size_t first_batched = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!dims[i]) continue;
      OPCONFORM_CHECK(inputs[i].defined(), ErrorCode::kInvalidArgument, "vmap: input ", i,
                      " is undefined but in_dims[", i, "] = ", *dims[i]);
      dims[i] = wrap_dim(*dims[i], inputs[i].dim(), detail::concat("vmap: in_dims[", i, "]"));
      int64_t size = inputs[i].size(*dims[i]);
      if (!batch_size) {
        batch_size = size;
        first_batched = i;
      }
      OPCONFORM_CHECK(size == *batch_size, ErrorCode::kInvalidArgument,
                      "vmap: the batched inputs disagree on the batch size: input ", first_batched, " has size ",
                      *batch_size, " at dim ", *dims[first_batched], ", input ", i, " has size ", size, " at dim ",
                      *dims[i]);
    }
    OPCONFORM_CHECK(batch_size.has_value(), ErrorCode::kInvalidArgument,
                    "vmap: no input is batched (every in_dims entry is None)");

    LevelScope scope(*batch_size, randomness);
    const int64_t level = scope.level();
    std::vector<Tensor> wrapped;
    wrapped.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      wrapped.push_back(dims[i] ? make_batched(inputs[i], *dims[i], level) : inputs[i]);
    }
    std::vector<Tensor> outputs = fn(wrapped);

    auto odims = out_dims.size() == 1 ? std::vector<std::optional<int64_t>>(outputs.size(), out_dims[0]) : out_dims;
    OPCONFORM_CHECK(odims.size() == outputs.size(), ErrorCode::kInvalidArgument, "vmap: out_dims has ",
                    out_dims.size(), " entries but the function returned ", outputs.size(), " outputs");
    std::vector<Tensor> results;
    results.reserve(outputs.size());
    for (size_t j = 0; j < outputs.size(); ++j) {
      if (!outputs[j].defined()) {  // torch.vmap returns None for a None output
        results.emplace_back();
        continue;
      }
      check_not_stray(outputs[j]);
      const BatchedInfo* info = info_at(outputs[j], level);
      if (!odims[j]) {
        OPCONFORM_CHECK(info == nullptr, ErrorCode::kInvalidArgument, "vmap: output ", j,
                        " depends on the batch but out_dims[", j, "] is None");
        results.push_back(outputs[j]);
      } else if (info != nullptr) {
        results.push_back(move_batch_dim(info->value, info->bdim, *odims[j], *batch_size));
      } else {
        // The same for every sample (or batched only at an outer level): expand, as torch.vmap.
        results.push_back(move_batch_dim(outputs[j], std::nullopt, *odims[j], *batch_size));
      }
    }
    return results;
  };
}

KernelFunction make_vmap_kernel(VmapRule rule) {
  OPCONFORM_CHECK(rule != nullptr, ErrorCode::kRegistration, "make_vmap_kernel: no rule given");
  return KernelFunction::from_boxed([rule = std::move(rule)](const OperatorHandle& op, DispatchKeySet keys,
                                                             Stack& stack) { run_rule(rule, op, keys, stack); });
}

RegistrationHandle install_vmap_fallback(Registry& registry) {
  return registry.fallback(DispatchKey::Batched, KernelFunction::from_boxed(vmap_fallback),
                           RegistrationSource::named("the vmap fallback (vmap.cpp)"));
}

int64_t vmap_fallback_count(std::string_view op_name) {
  std::lock_guard lock(counts_mutex);
  auto it = fallback_counts().find(op_name);
  return it == fallback_counts().end() ? 0 : it->second;
}

void reset_vmap_fallback_counts() {
  std::lock_guard lock(counts_mutex);
  fallback_counts().clear();
}

}  // namespace opconform
