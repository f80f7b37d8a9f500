// Registry, OperatorHandle and dispatch.
//
// A Registry is a value: it holds operator definitions (schemas) and their kernels per dispatch
// key, plus fallbacks per key. Tests build their own; Registry::global() is the process default
// used by the convenience API. Registration goes through Library (library.h), which undoes what
// it registered when it dies.
//
// Dispatch (Note [Dispatch]): a call computes
//     keys = (keys of the tensor arguments | thread-local included | BackendSelect)
//            - thread-local excluded - keys the operator skips (fallthrough)
// and runs the kernel of its highest key from the operator's dispatch table. The table is
// recomputed on every registration: for each runtime key, in order,
//     1. a kernel registered at that key (the newest one; an override hides the older one until
//        it is undone),
//     2. for a backend key: CompositeExplicitAutograd,
//     3. for an autograd key: the Autograd alias kernel,
//     4. CompositeImplicitAutograd (for an autograd key only when the backend has no kernel of
//        its own, as PyTorch),
//     5. the registry's fallback for the key,
//     6. for a backend key: "missing" (the call fails with a message listing the kernels the
//        operator has and where they were registered); any other key is skipped.
// A kernel may redispatch below its own key: op.redispatch(keys.after(DispatchKey::AutogradCPU)...).
#pragma once

#include <array>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include "opconform/core/source_location.h"
#include <string>
#include <string_view>
#include <vector>

#include "opconform/core/detail/call_context.h"
#include "opconform/core/dispatch_key.h"
#include "opconform/core/ivalue.h"
#include "opconform/core/kernel.h"
#include "opconform/core/op_data.h"
#include "opconform/core/schema.h"
#include "opconform/core/tag.h"

namespace opconform {

// Where a registration came from: a source location, or a plugin's name.
struct RegistrationSource {
  std::string where;  // "file.cpp:42" or "plugin libvendor.so"
  static RegistrationSource here(SourceLocation loc = SourceLocation::current());
  static RegistrationSource named(std::string what) { return {std::move(what)}; }
};

// Undoes one registration when destroyed (unless released). Move-only.
class RegistrationHandle {
 public:
  RegistrationHandle() = default;
  explicit RegistrationHandle(std::function<void()> undo) : undo_(std::move(undo)) {}
  RegistrationHandle(RegistrationHandle&& o) noexcept : undo_(std::exchange(o.undo_, nullptr)) {}
  RegistrationHandle& operator=(RegistrationHandle&& o) noexcept;
  ~RegistrationHandle() { reset(); }
  // Undoes the registration now.
  void reset();
  // Keeps the registration for the registry's lifetime.
  void release() { undo_ = nullptr; }

 private:
  std::function<void()> undo_;
};

namespace detail {
struct RegistryState;
struct KernelRegistration {
  KernelFunction kernel;
  RegistrationSource source;
  uint64_t id;
};
// How a dispatch table entry was found (for dumps and error messages).
enum class TableSource : uint8_t { Missing, Skip, Direct, CompositeExplicit, AutogradAlias, CompositeImplicit, Fallback };
struct OperatorEntry {
  std::string name;  // "ns::op.overload"
  std::optional<FunctionSchema> schema;
  RegistrationSource schema_source;
  std::vector<Tag> tags;
  std::string alias_analysis;
  std::shared_ptr<const OpData> data;  // null: none set (Note [Per-op data belongs to the registry])
  size_t num_arguments = 0;
  // Kernels per key, alias keys included; the front one is active.
  std::array<std::list<KernelRegistration>, static_cast<size_t>(DispatchKey::EndOfAliasKeys)> kernels;
  // Computed (Note [Dispatch]).
  std::array<KernelFunction, kNumRuntimeKeys> table;
  std::array<TableSource, kNumRuntimeKeys> table_source{};
  std::array<const RegistrationSource*, kNumRuntimeKeys> table_where{};
  DispatchKeySet skip;
  RegistryState* registry = nullptr;
};

template <typename T>
DispatchKeySet keys_of(const T& arg) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, Tensor>) {
    return arg.defined() ? arg.key_set() : DispatchKeySet();
  } else if constexpr (std::is_same_v<D, std::optional<Tensor>>) {
    return arg && arg->defined() ? arg->key_set() : DispatchKeySet();
  } else if constexpr (std::is_same_v<D, std::vector<Tensor>> || std::is_same_v<D, std::vector<std::optional<Tensor>>>) {
    DispatchKeySet ks;
    for (const auto& t : arg) ks |= keys_of(t);
    return ks;
  } else {
    return DispatchKeySet();
  }
}
DispatchKeySet keys_of_other_values(const IValue& v);
// The keys of the last num_arguments values of the stack (the arguments of a boxed call).
inline DispatchKeySet keys_of_stack(const Stack& stack, size_t num_arguments) {
  DispatchKeySet ks;
  size_t n = num_arguments < stack.size() ? num_arguments : stack.size();
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const IValue& v = stack[i];
    if (v.is_tensor()) ks |= keys_of(v.to_tensor());
    else if (v.tag() >= IValue::Tag::TensorList) ks |= keys_of_other_values(v);
  }
  return ks;
}
}  // namespace detail

template <typename Signature> class TypedOperatorHandle;

// A handle to one operator overload of a Registry (cheap to copy; valid while the registry lives).
class OperatorHandle {
 public:
  explicit OperatorHandle(detail::OperatorEntry* entry) : entry_(entry) {}

  // "ns::name.overload" (or "ns::name").
  const std::string& name() const { return entry_->name; }
  bool has_schema() const { return entry_->schema.has_value(); }
  // Throws when the operator has implementations but no definition.
  const FunctionSchema& schema() const;
  const std::vector<Tag>& tags() const { return entry_->tags; }
  bool has_tag(Tag t) const;
  // Another operator of the registry this one belongs to (nullopt when it has none by that name).
  std::optional<OperatorHandle> find_in_registry(std::string_view name) const;
  // The data its definer set (op_data.h; an empty OpData when none). Shared, so it stays valid
  // when the data is replaced or the op undefined meanwhile.
  std::shared_ptr<const OpData> data() const;

  // Calls the operator: arguments on the stack in schema order, returns left there.
  void call_boxed(Stack& stack) const {
    if (!entry_->schema.has_value() || stack.size() < entry_->num_arguments) [[unlikely]] {
      reject_boxed_call(stack);
    }
    const auto& local = local_dispatch_key_set();
    DispatchKeySet keys = ((detail::keys_of_stack(stack, entry_->num_arguments) |
                            DispatchKeySet(DispatchKey::BackendSelect)) | local.included) - local.excluded - entry_->skip;
    detail::CallScope scope(entry_->name);  // Note [Call context without a rethrow]
    entry_->table[static_cast<size_t>(keys.highest())].call_boxed(*this, keys, stack);
  }
  // Calls the kernel of the highest key in `keys` (already computed by the caller).
  void redispatch_boxed(DispatchKeySet keys, Stack& stack) const;

  // Typed calls: op.typed<Tensor(const Tensor&, int64_t)>().call(x, 2).
  template <typename Signature>
  TypedOperatorHandle<Signature> typed() const { return TypedOperatorHandle<Signature>(*this); }

  // The key set a call with these arguments dispatches on (the thread-local state included).
  DispatchKeySet dispatch_keys(const Stack& stack) const;
  // The kernel the dispatch table holds for a runtime key: invalid when skipped, and for a backend
  // key without a kernel the error kernel that names what the operator has (see has_kernel_for).
  const KernelFunction& kernel_for(DispatchKey key) const;
  // True when a call dispatched to `key` reaches a kernel (direct, through an alias key or a
  // fallback), not the missing-kernel error.
  bool has_kernel_for(DispatchKey key) const;
  // True when a kernel is registered directly at `key` (an alias key counts as itself).
  bool has_kernel_at(DispatchKey key) const;
  // The computed dispatch table, one line per runtime key that is not skipped:
  //   "CPU: kernel registered at file.cpp:12 [direct]"
  std::string dump_dispatch_table() const;

  bool operator==(const OperatorHandle& o) const { return entry_ == o.entry_; }
  detail::OperatorEntry& entry() const { return *entry_; }

  // Typed dispatch, used by TypedOperatorHandle.
  template <typename Ret, typename... Args>
  Ret call_unboxed(detail::canonical_arg_t<Args>... args) const {
    const auto& local = local_dispatch_key_set();
    DispatchKeySet keys = ((detail::keys_of(args) | ... | DispatchKeySet(DispatchKey::BackendSelect)) |
                           local.included) - local.excluded - entry_->skip;
    detail::CallScope scope(entry_->name);  // Note [Call context without a rethrow]
    return redispatch_unboxed<Ret, Args...>(keys, args...);
  }
  template <typename Ret, typename... Args>
  Ret redispatch_unboxed(DispatchKeySet keys, detail::canonical_arg_t<Args>... args) const {
    const KernelFunction& k = entry_->table[static_cast<size_t>(keys.highest())];
    return k.template call<Ret, Args...>(*this, keys, args...);
  }

 private:
  [[noreturn]] void reject_boxed_call(const Stack& stack) const;
  detail::OperatorEntry* entry_;
};

template <typename Ret, typename... Args>
class TypedOperatorHandle<Ret(Args...)> : public OperatorHandle {
 public:
  explicit TypedOperatorHandle(const OperatorHandle& op) : OperatorHandle(op) {}
  Ret call(detail::canonical_arg_t<Args>... args) const { return call_unboxed<Ret, Args...>(args...); }
  // Calls the kernel of the highest key of `keys - skipped` (e.g. keys.after(current key)).
  Ret redispatch(DispatchKeySet keys, detail::canonical_arg_t<Args>... args) const {
    return redispatch_unboxed<Ret, Args...>(keys - entry().skip, args...);
  }
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The process-wide default registry (empty until something registers into it).
  static Registry& global();

  // "ns::op.overload" or "ns::op" (the default overload).
  std::optional<OperatorHandle> find(std::string_view name) const;
  // Like find, but throws a clear error (with close names) when the operator does not exist.
  OperatorHandle get(std::string_view name) const;
  std::vector<OperatorHandle> operators() const;
  // Operators that have kernels but no definition ("dangling" implementations).
  std::vector<std::string> dangling_impls() const;

  // Registration primitives (Library is the friendly front end). Each returns a handle that
  // undoes the registration when destroyed.
  RegistrationHandle define(FunctionSchema schema, std::vector<Tag> tags, RegistrationSource source,
                            std::string alias_analysis = "");
  RegistrationHandle impl(std::string_view op_name, DispatchKey key, KernelFunction kernel,
                          RegistrationSource source, bool allow_override = true);
  RegistrationHandle fallback(DispatchKey key, KernelFunction kernel, RegistrationSource source);
  // Whether a fallback is registered at `key`.
  bool has_fallback(DispatchKey key) const;
  // Keeps a registration of this registry for the registry's lifetime (Note [Fallbacks
  // installed once] in dispatch_mode.cpp).
  void retain(RegistrationHandle handle);
  // Sets (replaces) the data of a defined operator, validated against its schema
  // (validate_op_data); it belongs to the definition and is removed with it. Throws
  // Error(kRegistration) when the op is not defined here.
  void set_op_data(std::string_view op_name, OpData data);
  // Adds a tag to a defined operator (a plugin's declare_op says what its define could not). Only
  // while the op is being registered: tags are read without the lock on every call.
  void add_tag(std::string_view op_name, Tag tag);
  // Claims a namespace for one DEF library (PyTorch allows one TORCH_LIBRARY per namespace).
  RegistrationHandle claim_namespace(std::string_view ns, RegistrationSource source);

 private:
  std::shared_ptr<detail::RegistryState> state_;
};

// The kernel an operator runs for one dispatch key, as computed now (torch.library.get_kernel).
// It is a snapshot: registering another kernel at that key later (for instance one that calls
// this one for some inputs) does not change it.
class SafeKernelFunction {
 public:
  SafeKernelFunction(OperatorHandle op, DispatchKey key, KernelFunction kernel)
      : op_(op), key_(key), kernel_(std::move(kernel)) {}
  // Calls the kernel with an explicit key set (a with_keyset kernel passes on the one it got).
  void call_boxed(DispatchKeySet keys, Stack& stack) const;
  // Convenience: pushes the arguments, calls, returns the stack of results.
  template <typename... Args>
  Stack call_boxed(DispatchKeySet keys, Args&&... args) const {
    Stack stack;
    (stack.push_back(to_ivalue(std::forward<Args>(args))), ...);
    call_boxed(keys, stack);
    return stack;
  }
  DispatchKey key() const { return key_; }
  const OperatorHandle& op() const { return op_; }

 private:
  OperatorHandle op_;
  DispatchKey key_;
  KernelFunction kernel_;
};

// Throws when the operator does not exist or the key is an alias key.
SafeKernelFunction get_kernel(const OperatorHandle& op, DispatchKey key);
SafeKernelFunction get_kernel(std::string_view op_name, DispatchKey key, const Registry& registry = Registry::global());

}  // namespace opconform
