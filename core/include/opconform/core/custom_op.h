// custom_op: define an operator from a C++ function (torch.library.custom_op), and the
// register_* API that gives it the behaviour every subsystem needs.
//
//   auto numpy_sin = custom_op("mylib::numpy_sin", [](const Tensor& x) { ... },
//                              {.mutates_args = {}}, {"x"});
//   Tensor y = numpy_sin(x);                        // a dispatched call
//   numpy_sin.register_fake([](const Tensor& x) { return empty_like(x); });
//   numpy_sin.register_autograd(backward, setup_context);
//
// The schema is inferred from the C++ signature and the argument names (infer_schema.h), or
// given as a string and checked against mutates_args. device_types = nullopt registers the
// function as the default kernel of every device (CompositeExplicitAutograd) but meta (Note
// [Meta calls of custom ops]); a list registers it for those devices only (an empty list is an
// error). An op whose only device source is a Device argument (a factory) dispatches on that
// argument.
//
// Note [Custom op aliasing]: outputs are new tensors, except in the two standard forms —
// Tag::inplace returns its first argument, Tag::out returns its out= arguments in order. Every
// call checks this (cheaply: pointer comparisons, no allocation) and fails with a message that
// names the output and the argument. Tag::inplace and Tag::out ops, and mutable ops returning
// nothing, get a fake kernel automatically; Tag::out ops refuse autograd like built-in out= ops.
// Without register_autograd, backward through the op fails with an error naming it.
//
// Note [Meta calls of custom ops]: as PyTorch's register_fake, a custom op's fake kernel
// (register_fake's newest, or the automatic one) also serves DispatchKey::Meta: a call with meta
// tensors runs it, in a FakeTensorMode of its own, and returns meta tensors on the meta device
// (an argument returned is returned itself, a view of one shares its storage). The op's function
// sees meta tensors only where the meta device is named (device_types, register_kernel). An op
// whose function serves every device (device_types = nullopt, register_kernel without devices)
// and that has no fake kernel fails a meta call with kNotImplemented "operator '<op>' has no fake
// kernel; register one with register_fake" (the fake fallback's words) instead of running the
// function on data-less tensors; an op with a device list has no Meta kernel until it has a fake
// kernel. A meta call needs every tensor argument on the meta device, and an output whose size
// depends on the data (get_ctx().new_dynamic_size()) is an error: meta tensors hold concrete
// sizes only (use FakeTensorMode).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <vector>

#include "opconform/core/autocast.h"
#include "opconform/core/autograd.h"
#include "opconform/core/detail/output_alias_check.h"
#include "opconform/core/dispatch_mode.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/infer_schema.h"
#include "opconform/core/library.h"
#include "opconform/core/registry.h"
#include "opconform/core/vmap.h"

namespace opconform {

struct CustomOpOptions {
  MutatesArgs mutates_args;                              // names of written arguments, or all_unknown()
  std::optional<std::vector<DeviceType>> device_types;   // nullopt: the default kernel for every device
  std::string schema;                                    // "(Tensor x) -> Tensor"; empty: inferred
  std::vector<Tag> tags;
  Registry* registry = nullptr;                          // nullptr: Registry::global()
};

// setup_context(ctx, inputs, keyword_only_inputs, output): the keyword-only-arguments form.
using KeywordSetupContextFn =
    std::function<void(autograd::AutogradContext& ctx, const Stack& inputs, const Stack& keyword_only_inputs,
                       const Stack& outputs)>;

namespace detail {
struct CustomOpState;
}

// Re-enables (or disables again) a device kernel when it goes out of scope.
class KernelEnabledGuard {
 public:
  KernelEnabledGuard(std::shared_ptr<detail::CustomOpState> state, DeviceType device, bool previous);
  KernelEnabledGuard(KernelEnabledGuard&&) noexcept = default;
  ~KernelEnabledGuard();

 private:
  std::shared_ptr<detail::CustomOpState> state_;
  DeviceType device_;
  bool previous_;
};

class CustomOpDef {
 public:
  explicit CustomOpDef(std::shared_ptr<detail::CustomOpState> state) : state_(std::move(state)) {}

  const std::string& name() const;        // "mylib::numpy_sin"
  OperatorHandle handle() const;
  const FunctionSchema& schema() const;
  Registry& registry() const;
  // Calls through the dispatcher with a stack of arguments.
  void call_boxed(Stack& stack) const { handle().call_boxed(stack); }

  // A kernel for some device types, replacing the default function there. No device types
  // (an empty list, or the overload without one) means every device, as PyTorch's
  // device_types=None: the kernel replaces the default function at CompositeExplicitAutograd,
  // so devices with a kernel of their own keep it, and meta keeps the fake kernel (Note [Meta
  // calls of custom ops]). set_kernel_enabled(d, false) turns it off for device type d.
  template <typename F>
  CustomOpDef& register_kernel(std::vector<DeviceType> device_types, F fn, SourceLocation loc = SourceLocation::current()) {
    return register_kernel_function(std::move(device_types), KernelFunction::from_callable(with_alias_check(std::move(fn))),
                                    loc);
  }
  template <typename F>
  CustomOpDef& register_kernel(F fn, SourceLocation loc = SourceLocation::current()) {
    return register_kernel({}, std::move(fn), loc);
  }
  // The fake kernel: metadata only, same signature as the op (get_ctx() works inside). It serves
  // fake tensors and meta tensors (Note [Meta calls of custom ops]). Registering another one
  // replaces it, as PyTorch's CustomOpDef.register_fake: the newest serves the calls.
  template <typename F>
  CustomOpDef& register_fake(F fn, SourceLocation loc = SourceLocation::current()) {
    return register_fake_function(KernelFunction::from_callable(std::move(fn)), loc);
  }
  // The old name of register_fake.
  template <typename F>
  CustomOpDef& impl_abstract(F fn, SourceLocation loc = SourceLocation::current()) {
    return register_fake(std::move(fn), loc);
  }
  // backward(ctx, grad_outputs) -> one gradient per argument (undefined: none).
  CustomOpDef& register_autograd(autograd::BackwardFn backward, autograd::SetupContextFn setup_context = {},
                                 SourceLocation loc = SourceLocation::current());
  CustomOpDef& register_autograd(autograd::BackwardFn backward, KeywordSetupContextFn setup_context,
                                 SourceLocation loc = SourceLocation::current());
  // Under autocast on `device_type`, floating inputs are cast to `cast_dtype` first.
  CustomOpDef& register_autocast(DeviceType device_type, DType cast_dtype, SourceLocation loc = SourceLocation::current());
  CustomOpDef& register_vmap(VmapRule rule, SourceLocation loc = SourceLocation::current());
  // A rule for this op under one dispatch mode type, or for one tensor-subclass type
  // (register_torch_dispatch): rule(Type&, const OperatorHandle&, Stack&).
  template <typename Type, typename F>
  CustomOpDef& register_dispatch_rule(F rule) {
    keep(opconform::register_dispatch_rule<Type>(name(), std::move(rule)));
    return *this;
  }
  // Disables (or re-enables) the kernel registered with register_kernel for a device type (its
  // own, or the every-device one) for as long as the guard lives; calls on that device type then
  // use the original function.
  [[nodiscard]] KernelEnabledGuard set_kernel_enabled(DeviceType device_type, bool enabled);

  bool has_fake() const;
  bool has_autograd() const;

  const std::shared_ptr<detail::CustomOpState>& state() const { return state_; }
  // fn wrapped with this op's per-call aliasing check (Note [Custom op aliasing]).
  template <typename F> auto with_alias_check(F fn) const;

 protected:
  // Keeps a registration made outside the op's library alive as long as the op.
  void keep(RegistrationHandle handle);
  CustomOpDef& register_kernel_function(std::vector<DeviceType> device_types, KernelFunction kernel, SourceLocation loc);
  CustomOpDef& register_fake_function(KernelFunction kernel, SourceLocation loc);
  std::shared_ptr<detail::CustomOpState> state_;
};

// A CustomOpDef that can be called like the function it was made from.
template <typename Signature> class TypedCustomOpDef;
template <typename Ret, typename... Args>
class TypedCustomOpDef<Ret(Args...)> : public CustomOpDef {
 public:
  explicit TypedCustomOpDef(CustomOpDef def)
      : CustomOpDef(std::move(def)), typed_(handle().template typed<Ret(Args...)>()) {}
  Ret operator()(detail::canonical_arg_t<Args>... args) const { return typed_.call(args...); }

 private:
  TypedOperatorHandle<Ret(Args...)> typed_;
};

namespace detail {

// What the registered kernels need at call time. Kept apart from CustomOpState, which owns the
// registrations: kernels holding the state itself would keep it alive for ever (a cycle).
// (The aliasing check captures only the contract: the original function lives in here, so
// capturing this struct would be a cycle too.)
struct CustomOpKernels {
  KernelFunction original;  // the function custom_op was given (with the aliasing check)
  std::array<std::atomic<bool>, kNumDeviceTypes> enabled{};  // set_kernel_enabled, per device type
};

// Wraps a boxed autograd kernel into a typed one for this op's signature: calls where no
// argument requires grad go straight below autograd without boxing (most calls).
using AutogradWrapper = std::function<KernelFunction(KernelFunction boxed_autograd_kernel)>;

struct CustomOpState {
  std::string name;
  AutogradWrapper wrap_autograd;
  Registry* registry = nullptr;
  FunctionSchema schema;
  std::vector<Tag> tags;
  std::shared_ptr<CustomOpKernels> kernels;
  std::shared_ptr<const AliasContract> contract;
  Library library;
  std::optional<std::string> fake_source;  // where register_fake was called; none: no user fake kernel
  bool has_autograd = false;
  // Note [Meta calls of custom ops]: the meta kernel is registered (once), unless the user gave
  // the meta device a kernel of their own.
  bool meta_kernel_registered = false;
  bool user_meta_kernel = false;
  // After `library`, so destroyed before the definition.
  RegistrationHandle user_fake;            // register_fake's kernel; the next one replaces it
  std::vector<RegistrationHandle> extra;   // registrations outside the library (dispatch rules)

  CustomOpState(std::string name, Registry& registry, FunctionSchema schema, std::vector<Tag> tags);
};

// Defines the operator and registers what does not depend on the C++ function type.
std::shared_ptr<CustomOpState> define_custom_op(std::string name, FunctionSchema schema, const CustomOpOptions& options,
                                                AutogradWrapper wrap_autograd, SourceLocation loc);

template <typename T>
bool any_requires_grad(const T& arg) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, Tensor>) {
    return arg.defined() && arg.requires_grad();
  } else if constexpr (std::is_same_v<D, std::optional<Tensor>>) {
    return arg && arg->defined() && arg->requires_grad();
  } else if constexpr (std::is_same_v<D, std::vector<Tensor>>) {
    for (const auto& t : arg) {
      if (t.defined() && t.requires_grad()) return true;
    }
    return false;
  } else {
    return false;
  }
}

// The typed autograd wrapper of an op with signature Ret(Args...) (see AutogradWrapper).
template <typename Ret, typename... Args>
AutogradWrapper typed_autograd_wrapper(Registry& registry, std::string name) {
  return [&registry, name](KernelFunction boxed) {
    OperatorHandle op = registry.get(name);
    return KernelFunction::from_callable([op, boxed](DispatchKeySet keys, canonical_arg_t<Args>... args) -> Ret {
      if (!autograd::GradMode::is_enabled() || !(any_requires_grad(args) || ...)) {
        return op.typed<Ret(Args...)>().redispatch(keys - runtime_keys_of(DispatchKey::Autograd), args...);
      }
      return boxed.template call<Ret, Args...>(op, keys, args...);
    });
  };
}
void register_default_kernels(CustomOpState& state, KernelFunction fn,
                              const std::optional<std::vector<DeviceType>>& device_types, SourceLocation loc);
std::vector<std::string> argument_names_of(const std::string& schema_text);
FunctionSchema checked_given_schema(const std::string& name, const std::string& schema_text,
                                    const MutatesArgs& mutates_args, const std::vector<Tag>& tags);

}  // namespace detail

template <typename F>
auto CustomOpDef::with_alias_check(F fn) const {
  using traits = detail::function_traits<std::remove_pointer_t<std::decay_t<F>>>;
  return [&]<typename... A>(std::tuple<A...>*) {
    using Ret = typename traits::ret;
    return [fn = std::move(fn), contract = state_->contract](A... args) -> Ret {
      if constexpr (std::is_void_v<Ret>) {
        fn(std::forward<A>(args)...);
      } else {
        Ret result = fn(std::forward<A>(args)...);
        detail::TensorRefs inputs, outputs;
        size_t i = 0;
        (inputs.add_value(i++, args), ...);
        detail::gather_outputs(outputs, result);
        contract->check(inputs, outputs);
        return result;
      }
    };
  }(static_cast<typename traits::args*>(nullptr));
}

// Defines `name` ("ns::op") from fn. arg_names name fn's parameters ("*" starts the
// keyword-only ones); with options.schema they may be empty (the schema names them).
template <typename F>
auto custom_op(std::string name, F fn, CustomOpOptions options = {}, std::vector<std::string> arg_names = {},
               SourceLocation loc = SourceLocation::current()) {
  using traits = detail::function_traits<std::remove_pointer_t<std::decay_t<F>>>;
  FunctionSchema schema;
  if (options.schema.empty()) {
    schema = infer_schema<std::remove_pointer_t<std::decay_t<F>>>(arg_names, options.mutates_args, name, options.tags);
  } else {
    schema = detail::checked_given_schema(name, options.schema, options.mutates_args, options.tags);
  }
  Registry& registry = options.registry ? *options.registry : Registry::global();
  auto wrapper = [&]<typename... A>(std::tuple<A...>*) {
    return detail::typed_autograd_wrapper<typename traits::ret, A...>(registry, name);
  }(static_cast<typename traits::args*>(nullptr));
  CustomOpDef def(detail::define_custom_op(name, std::move(schema), options, std::move(wrapper), loc));
  auto kernel = KernelFunction::from_callable(def.with_alias_check(std::move(fn)));
  detail::register_default_kernels(*def.state(), std::move(kernel), options.device_types, loc);
  return [&]<typename... A>(std::tuple<A...>*) {
    return TypedCustomOpDef<typename traits::ret(A...)>(std::move(def));
  }(static_cast<typename traits::args*>(nullptr));
}

// The fallbacks PyTorch has built in, for a registry of one's own: autograd (backward through
// an op without a formula names it), fake (Meta kernels serve as fake ones), vmap (the per-sample
// loop) and dispatch modes / tensor-subclass wrappers. One handle undoes all four.
RegistrationHandle install_builtin_fallbacks(Registry& registry);

// The same registrations as free functions on an operator name. For an operator made with
// custom_op they act on its CustomOpDef; for any other operator they register into a library
// that the returned handle keeps alive.
std::optional<CustomOpDef> find_custom_op(std::string_view name, Registry& registry = Registry::global());
// register_fake on a custom op replaces its fake kernel whatever allow_override says (PyTorch's
// torch.library.register_fake hands custom ops to CustomOpDef.register_fake); on any other
// operator a second fake kernel needs allow_override. register_kernel with no device types
// registers at CompositeExplicitAutograd (every device).
template <typename F>
RegistrationHandle register_fake(std::string_view op_name, F fn, bool allow_override = false,
                                 Registry& registry = Registry::global(), SourceLocation loc = SourceLocation::current()) {
  if (auto def = find_custom_op(op_name, registry)) {
    def->register_fake(std::move(fn), loc);
    return RegistrationHandle();  // lives as long as the custom op
  }
  return registry.impl(op_name, DispatchKey::Fake, wrap_fake_kernel(KernelFunction::from_callable(std::move(fn))),
                       RegistrationSource::here(loc), allow_override);
}
template <typename F>
RegistrationHandle register_kernel(std::string_view op_name, std::vector<DeviceType> device_types, F fn,
                                   Registry& registry = Registry::global(), SourceLocation loc = SourceLocation::current()) {
  if (auto def = find_custom_op(op_name, registry)) {
    def->register_kernel(std::move(device_types), std::move(fn), loc);
    return RegistrationHandle();
  }
  if (device_types.empty()) {
    return registry.impl(op_name, DispatchKey::CompositeExplicitAutograd, KernelFunction::from_callable(std::move(fn)),
                         RegistrationSource::here(loc));
  }
  std::vector<RegistrationHandle> handles;
  for (DeviceType d : device_types) {
    handles.push_back(registry.impl(op_name, backend_key(d), KernelFunction::from_callable(fn), RegistrationSource::here(loc)));
  }
  auto shared = std::make_shared<std::vector<RegistrationHandle>>(std::move(handles));
  return RegistrationHandle([shared] { shared->clear(); });
}
RegistrationHandle register_autograd(std::string_view op_name, autograd::BackwardFn backward,
                                     autograd::SetupContextFn setup_context = {},
                                     Registry& registry = Registry::global(), SourceLocation loc = SourceLocation::current());
RegistrationHandle register_autocast(std::string_view op_name, DeviceType device_type, DType cast_dtype,
                                     Registry& registry = Registry::global(), SourceLocation loc = SourceLocation::current());
RegistrationHandle register_vmap(std::string_view op_name, VmapRule rule, Registry& registry = Registry::global(),
                                 SourceLocation loc = SourceLocation::current());

}  // namespace opconform
