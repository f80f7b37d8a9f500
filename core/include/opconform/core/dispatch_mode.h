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

// register_torch_dispatch: what an op does under modes of exactly `mode_type` (the dynamic type
// of the mode, subclasses not included). The newest registration for (op, type) wins until its
// handle is reset. `op_name` is the full name, "ns::op" or "ns::op.overload". Process-wide: it
// applies in every registry that has the op.
using DispatchRule = std::function<void(DispatchMode& mode, const OperatorHandle& op, Stack& stack)>;
RegistrationHandle register_dispatch_rule(std::string op_name, std::type_index mode_type, DispatchRule rule);

// The same for ModeType; the rule may take ModeType& (the mode is always of that type).
template <typename ModeType, typename F>
RegistrationHandle register_dispatch_rule(std::string op_name, F rule) {
  static_assert(std::is_base_of_v<DispatchMode, ModeType>, "ModeType must derive from DispatchMode");
  static_assert(std::is_invocable_v<F&, ModeType&, const OperatorHandle&, Stack&>,
                "the rule must be callable as rule(ModeType&, const OperatorHandle&, Stack&)");
  return register_dispatch_rule(std::move(op_name), std::type_index(typeid(ModeType)),
                                [rule = std::move(rule)](DispatchMode& mode, const OperatorHandle& op, Stack& stack) mutable {
                                  rule(static_cast<ModeType&>(mode), op, stack);
                                });
}

}  // namespace opconform
