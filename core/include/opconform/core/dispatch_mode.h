// Dispatch modes: TorchDispatchMode and torch.library.register_torch_dispatch.
//
//   struct LoggingMode : DispatchMode {
//     std::vector<std::string> seen;
//     void dispatch(const OperatorHandle& op, Stack& stack) override {
//       seen.push_back(op.name());
//       DispatchMode::dispatch(op, stack);  // rules for LoggingMode, else the op as usual
//     }
//   };
//   auto fallback = install_dispatch_mode_fallback(registry);  // once per registry
//   auto mode = std::make_shared<LoggingMode>();
//   { DispatchModeGuard guard(mode); op.call(x); }              // mode->seen == {"t::op"}
//
// A thread-local stack of modes. While it is not empty, DispatchKey::DispatchMode (the highest
// key) is in the thread's included keys, so every call reaches the registry's DispatchMode
// fallback, which pops the top mode, calls mode->dispatch(op, stack) and pushes the mode back.
//
// Note [What a mode sees] (as PyTorch): while a mode handles a call it is off the stack, so
//   - the calls it makes (running the op, or other ops) go through the outer modes only: with
//     nested modes, the outer mode sees what the inner one runs;
//   - the calls made by the op's kernels (an op implemented by calling other ops) are not seen
//     by that mode: a mode sees the calls made *under* it by user code, not the inside of
//     kernels. (A CompositeImplicitAutograd kernel is such a kernel here: the mode sees the op,
//     not its decomposition.)
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "opconform/core/ivalue.h"
#include "opconform/core/registry.h"

namespace opconform {

class DispatchMode {
 public:
  virtual ~DispatchMode();

  // Handles one call: the arguments are on the stack, the returns must be left there. The
  // default applies the rule registered for (op, the dynamic type of this mode), if any, else
  // runs the op as usual (redispatch).
  virtual void dispatch(const OperatorHandle& op, Stack& stack);

  // Runs the op as if this mode were not there: through the outer modes, then its kernels.
  // Meant for dispatch() and rules; called from elsewhere it first takes this mode off the top
  // of the stack, so it never comes back to this mode.
  void redispatch(const OperatorHandle& op, Stack& stack);
};

// Pushes a mode for a scope (includes DispatchKey::DispatchMode in the thread's key set) and
// pops it, restoring the key, when the scope ends. Guards must nest.
class DispatchModeGuard {
 public:
  explicit DispatchModeGuard(std::shared_ptr<DispatchMode> mode);
  ~DispatchModeGuard();
  DispatchModeGuard(const DispatchModeGuard&) = delete;
  DispatchModeGuard& operator=(const DispatchModeGuard&) = delete;

 private:
  std::shared_ptr<DispatchMode> mode_;
  bool previous_key_included_;
};

// The thread's modes, innermost last (a copy).
std::vector<std::shared_ptr<DispatchMode>> dispatch_mode_stack();

// The registry's fallback at DispatchKey::DispatchMode: hands each call to the top mode.
RegistrationHandle install_dispatch_mode_fallback(Registry& registry);
// The same, kept for the registry's lifetime unless the registry has a DispatchMode fallback
// already (PyTorch keeps its mode fallback installed for the whole process). For code that
// needs the fallback on every call, such as a capture per sample: installing and removing a
// fallback recomputes every operator's dispatch table (Note [Fallbacks installed once]).
void ensure_dispatch_mode_fallback(Registry& registry);

// register_torch_dispatch: what an op does under modes of exactly `mode_type` (the dynamic type
// of the mode, subclasses not included). The newest registration for (op, type) wins until its
// handle is reset. `op_name` is the full name, "ns::op" or "ns::op.overload". Process-wide: it
// applies in every registry that has the op.
using DispatchRule = std::function<void(DispatchMode& mode, const OperatorHandle& op, Stack& stack)>;
RegistrationHandle register_dispatch_rule(std::string op_name, std::type_index mode_type, DispatchRule rule);

// ---- tensor-subclass-like wrappers (a Tensor subclass with __torch_dispatch__) ----
//
// A wrapper tensor stands for an inner tensor (same metadata, same memory) and routes every
// operator called with it to its TensorSubclass object, below any active dispatch mode (as
// PyTorch runs modes before subclasses). TensorSubclass::dispatch applies the rule registered
// for (op, the subclass's type) if any, else unwraps every wrapper argument and runs the op on
// the inner tensors (results come back unwrapped). Needs install_dispatch_mode_fallback.
class TensorSubclass {
 public:
  virtual ~TensorSubclass();
  virtual void dispatch(const OperatorHandle& op, Stack& stack);
  // Replaces every wrapper argument by its inner tensor and runs the op as usual.
  static void unwrap_and_call(const OperatorHandle& op, Stack& stack);
};

struct SubclassInfo {
  std::shared_ptr<TensorSubclass> subclass;
  Tensor inner;
};

// A wrapper of `inner` handled by `subclass`.
Tensor make_subclass_tensor(const Tensor& inner, std::shared_ptr<TensorSubclass> subclass);
// The handler of a wrapper tensor; null for any other tensor.
TensorSubclass* subclass_of(const Tensor& t);
// The inner tensor of a wrapper; the tensor itself for any other tensor.
Tensor unwrap_subclass(const Tensor& t);

using SubclassDispatchRule = std::function<void(TensorSubclass& subclass, const OperatorHandle& op, Stack& stack)>;
RegistrationHandle register_subclass_dispatch_rule(std::string op_name, std::type_index subclass_type,
                                                   SubclassDispatchRule rule);

// A rule for one op under one mode type (Type derives from DispatchMode) or for one tensor-
// subclass type (Type derives from TensorSubclass): rule(Type&, const OperatorHandle&, Stack&).
template <typename Type, typename F>
RegistrationHandle register_dispatch_rule(std::string op_name, F rule) {
  static_assert(std::is_base_of_v<DispatchMode, Type> || std::is_base_of_v<TensorSubclass, Type>,
                "the type must derive from DispatchMode or TensorSubclass");
  static_assert(std::is_invocable_v<F&, Type&, const OperatorHandle&, Stack&>,
                "the rule must be callable as rule(Type&, const OperatorHandle&, Stack&)");
  if constexpr (std::is_base_of_v<DispatchMode, Type>) {
    return register_dispatch_rule(std::move(op_name), std::type_index(typeid(Type)),
                                  [rule = std::move(rule)](DispatchMode& mode, const OperatorHandle& op, Stack& stack) mutable {
                                    rule(static_cast<Type&>(mode), op, stack);
                                  });
  } else {
    return register_subclass_dispatch_rule(
        std::move(op_name), std::type_index(typeid(Type)),
        [rule = std::move(rule)](TensorSubclass& subclass, const OperatorHandle& op, Stack& stack) mutable {
          rule(static_cast<Type&>(subclass), op, stack);
        });
  }
}

}  // namespace opconform
