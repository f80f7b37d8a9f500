// KernelFunction: one implementation of an operator for one dispatch key, callable boxed
// (on a Stack) and, when it was registered from a typed C++ function, unboxed (a direct call
// through one function pointer, no boxing).
//
// Kernels are made from:
//   - a C++ function or lambda: Tensor (const Tensor&, int64_t) — boxed form generated;
//   - the same with the current DispatchKeySet first: Tensor (DispatchKeySet, const Tensor&),
//     for kernels that redispatch (with_keyset);
//   - a boxed function: void (const OperatorHandle&, DispatchKeySet, Stack&) — fallbacks,
//     plugin kernels, generic wrappers;
//   - fallthrough(): "skip this key" (the dispatcher goes on to the next key).
//
// Note [Unboxed signatures]: a typed call finds the kernel's unboxed entry only when both use
// the same canonical signature: return and argument types decayed (const Tensor& == Tensor ==
// Tensor&). Any other call goes through the boxed form, so it is correct, just slower.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "opconform/core/dispatch_key.h"
#include "opconform/core/ivalue.h"

namespace opconform {

class OperatorHandle;

using BoxedKernel = std::function<void(const OperatorHandle&, DispatchKeySet, Stack&)>;

namespace detail {

// Parameter passing for canonical unboxed signatures: small trivially copyable by value, the
// rest by const reference.
template <typename T>
using canonical_arg_t = std::conditional_t<std::is_trivially_copyable_v<std::decay_t<T>> && sizeof(std::decay_t<T>) <= 16,
                                           std::decay_t<T>, const std::decay_t<T>&>;

template <typename Ret, typename... Args>
using canonical_fn_t = std::decay_t<Ret>(const void* functor, DispatchKeySet, canonical_arg_t<Args>...);

// A unique address per canonical signature (comparing it is one pointer compare).
template <typename Ret, typename... Args>
inline constexpr char signature_tag = 0;
template <typename Ret, typename... Args>
constexpr const void* signature_id() {
  return &signature_tag<std::decay_t<Ret>, std::decay_t<Args>...>;
}

template <typename F> struct function_traits : function_traits<decltype(&F::operator())> {};
template <typename R, typename... A> struct function_traits<R (*)(A...)> {
  using ret = R;
  using args = std::tuple<A...>;
};
template <typename R, typename... A> struct function_traits<R(A...)> : function_traits<R (*)(A...)> {};
template <typename C, typename R, typename... A> struct function_traits<R (C::*)(A...) const> : function_traits<R (*)(A...)> {};
template <typename C, typename R, typename... A> struct function_traits<R (C::*)(A...)> : function_traits<R (*)(A...)> {};

// Pushes a kernel's return value(s) onto the stack: void -> nothing, tuple -> each element.
template <typename R>
void push_returns(Stack& stack, R&& value) {
  using D = std::decay_t<R>;
  if constexpr (requires { std::tuple_size<D>::value; }) {
    std::apply([&](auto&&... e) { (stack.push_back(to_ivalue(std::forward<decltype(e)>(e))), ...); },
               std::forward<R>(value));
  } else {
    stack.push_back(to_ivalue(std::forward<R>(value)));
  }
}

// Pops a typed result off the stack (the inverse of push_returns).
template <typename R>
R pop_returns(Stack& stack);

}  // namespace detail

class KernelFunction {
 public:
  KernelFunction() = default;  // invalid: no kernel

  // From a C++ callable: Ret(Args...) or, with_keyset, Ret(DispatchKeySet, Args...).
  template <typename F>
  static KernelFunction from_callable(F f, bool with_keyset = false);
  static KernelFunction from_boxed(BoxedKernel f);
  static KernelFunction fallthrough();

  bool valid() const { return boxed_ != nullptr || fallthrough_; }
  bool is_fallthrough() const { return fallthrough_; }
  bool has_unboxed() const { return unboxed_ != nullptr; }

  // Calls the kernel on a stack holding the arguments; leaves the returns there.
  void call_boxed(const OperatorHandle& op, DispatchKeySet keys, Stack& stack) const {
    boxed_(functor_.get(), op, keys, stack);
  }

  // Calls with typed arguments: the unboxed entry when the signature matches, else boxed.
  template <typename Ret, typename... Args>
  Ret call(const OperatorHandle& op, DispatchKeySet keys, detail::canonical_arg_t<Args>... args) const {
    if (signature_ == detail::signature_id<Ret, Args...>()) [[likely]] {
      if (direct_ != nullptr) {  // a plain function of exactly the canonical signature: no wrapper
        using Direct = std::decay_t<Ret> (*)(detail::canonical_arg_t<Args>...);
        return reinterpret_cast<Direct>(direct_)(args...);
      }
      auto fn = reinterpret_cast<detail::canonical_fn_t<Ret, Args...>*>(unboxed_);
      return fn(functor_.get(), keys, args...);
    }
    Stack stack;
    stack.reserve(sizeof...(Args));
    (stack.push_back(to_ivalue(args)), ...);
    call_boxed(op, keys, stack);
    return detail::pop_returns<Ret>(stack);
  }

 private:
  using BoxedFn = void (*)(const void* functor, const OperatorHandle&, DispatchKeySet, Stack&);
  std::shared_ptr<void> functor_;
  BoxedFn boxed_ = nullptr;
  void* unboxed_ = nullptr;
  // The kernel itself when it is a function pointer whose type is the canonical signature (no
  // key set, no mutable references): a typed call then makes one indirect call instead of two.
  void* direct_ = nullptr;
  const void* signature_ = nullptr;
  bool fallthrough_ = false;
};

// ------------------------------------------------------------------ implementation

namespace detail {

template <typename R>
R pop_returns(Stack& stack) {
  using D = std::decay_t<R>;
  if constexpr (std::is_void_v<D>) {
    return;
  } else if constexpr (requires { std::tuple_size<D>::value; }) {
    constexpr size_t n = std::tuple_size_v<D>;
    OPCONFORM_CHECK(stack.size() >= n, ErrorCode::kSchemaMismatch, "kernel returned ", stack.size(),
                    " values, expected ", n);
    size_t base = stack.size() - n;
    D result = [&]<size_t... I>(std::index_sequence<I...>) {
      return D{stack[base + I].template to<std::tuple_element_t<I, D>>()...};
    }(std::make_index_sequence<n>{});
    stack.resize(base);
    return result;
  } else {
    OPCONFORM_CHECK(!stack.empty(), ErrorCode::kSchemaMismatch, "kernel returned no value, expected one");
    D result = stack.back().template to<D>();
    stack.pop_back();
    return result;
  }
}

template <typename F, bool WithKeyset, typename Ret, typename ArgsTuple>
struct KernelWrapper;

template <typename F, bool WithKeyset, typename Ret, typename... Args>
struct KernelWrapper<F, WithKeyset, Ret, std::tuple<Args...>> {
  // Hands an argument to the kernel's own parameter type (a mutable Tensor& binds to the
  // handle: tensors are handles, so this does not alias anything new).
  template <typename P>
  static decltype(auto) pass(canonical_arg_t<P> a) {
    if constexpr (std::is_lvalue_reference_v<P> && !std::is_const_v<std::remove_reference_t<P>>) {
      return const_cast<std::decay_t<P>&>(a);
    } else {
      return a;
    }
  }

  static std::decay_t<Ret> unboxed(const void* functor, DispatchKeySet keys, canonical_arg_t<Args>... args) {
    const F& f = *static_cast<const F*>(functor);
    if constexpr (WithKeyset) return const_cast<F&>(f)(keys, pass<Args>(args)...);
    else return const_cast<F&>(f)(pass<Args>(args)...);
  }

  // Reads an argument off the stack; tensors, tensor lists and strings are borrowed, not copied.
  template <typename P>
  static decltype(auto) unbox(const IValue& v) {
    using D = std::decay_t<P>;
    if constexpr (std::is_same_v<D, Tensor>) return v.to_tensor();
    else if constexpr (std::is_same_v<D, std::vector<Tensor>>) return v.to_tensor_list();
    else if constexpr (std::is_same_v<D, std::string>) return v.to_string_ref();
    else return v.template to<D>();
  }

  static void boxed(const void* functor, const OperatorHandle& op, DispatchKeySet keys, Stack& stack) {
    constexpr size_t n = sizeof...(Args);
    OPCONFORM_CHECK(stack.size() >= n, ErrorCode::kSchemaMismatch, "boxed call with ", stack.size(),
                    " arguments on the stack, the kernel takes ", n);
    size_t base = stack.size() - n;
    auto call = [&]<size_t... I>(std::index_sequence<I...>) -> decltype(auto) {
      return unboxed(functor, keys, unbox<Args>(stack[base + I])...);
    };
    if constexpr (std::is_void_v<Ret>) {
      call(std::index_sequence_for<Args...>{});
      stack.resize(base);
    } else if constexpr (n >= 1 && !requires { std::tuple_size<std::decay_t<Ret>>::value; }) {
      // One return: it takes the first argument's slot (no reallocation, no push).
      auto result = call(std::index_sequence_for<Args...>{});
      stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(base) + 1, stack.end());
      stack[base] = to_ivalue(std::move(result));
    } else {
      auto result = call(std::index_sequence_for<Args...>{});
      stack.resize(base);
      push_returns(stack, std::move(result));
    }
  }
};

// A plain function's address as a void* (what KernelFunction::direct_ holds); null for anything else.
template <typename Fn>
void* function_address(const Fn& f) {
  if constexpr (std::is_pointer_v<Fn> && std::is_function_v<std::remove_pointer_t<Fn>>) return reinterpret_cast<void*>(f);
  else return nullptr;
}

template <typename Tuple> struct drop_first;
template <typename First, typename... Rest> struct drop_first<std::tuple<First, Rest...>> {
  using type = std::tuple<Rest...>;
};

}  // namespace detail

template <typename F>
KernelFunction KernelFunction::from_callable(F f, bool with_keyset) {
  using Fn = std::decay_t<F>;
  using traits = detail::function_traits<std::remove_pointer_t<Fn>>;
  using Ret = typename traits::ret;
  using AllArgs = typename traits::args;
  KernelFunction k;
  k.functor_ = std::make_shared<Fn>(std::move(f));
  auto install = [&]<bool WithKeyset, typename Args>() {
    using W = detail::KernelWrapper<Fn, WithKeyset, Ret, Args>;
    k.boxed_ = &W::boxed;
    k.unboxed_ = reinterpret_cast<void*>(&W::unboxed);
    k.signature_ = [&]<typename... A>(std::tuple<A...>*) { return detail::signature_id<Ret, A...>(); }(
        static_cast<Args*>(nullptr));
    if constexpr (!WithKeyset) {
      constexpr bool canonical = []<typename... A>(std::tuple<A...>*) {
        return std::is_same_v<Fn, std::decay_t<Ret> (*)(detail::canonical_arg_t<A>...)>;
      }(static_cast<Args*>(nullptr));
      if (canonical) k.direct_ = detail::function_address(*static_cast<const Fn*>(k.functor_.get()));
    }
  };
  if constexpr (std::tuple_size_v<AllArgs> > 0 &&
                std::is_same_v<std::decay_t<std::tuple_element_t<0, AllArgs>>, DispatchKeySet>) {
    // A first parameter of type DispatchKeySet always receives the key set.
    install.template operator()<true, typename detail::drop_first<AllArgs>::type>();
  } else {
    OPCONFORM_CHECK(!with_keyset, ErrorCode::kRegistration,
                    "with_keyset kernels take the DispatchKeySet as their first parameter");
    install.template operator()<false, AllArgs>();
  }
  return k;
}

}  // namespace opconform
