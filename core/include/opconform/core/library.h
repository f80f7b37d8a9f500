// Library: the torch.library.Library counterpart — define operators, implement them per
// dispatch key, register fallbacks. Everything a Library registers is undone when it dies.
//
//   Library lib("mylib", LibraryKind::DEF);
//   lib.define("sum(Tensor self) -> Tensor");
//   lib.impl("sum", [](const Tensor& x) { ... }, DispatchKey::CPU);
//
//   Library fb("_", LibraryKind::IMPL);            // fallbacks live in the global namespace "_"
//   fb.fallback(fallthrough_kernel(), DispatchKey::AutocastCPU);
//
// Kinds: DEF claims the namespace (one DEF library per namespace and registry), FRAGMENT adds
// definitions to a namespace, IMPL only implements (define is an error there).
#pragma once

#include <optional>
#include "opconform/core/source_location.h"
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "opconform/core/kernel.h"
#include "opconform/core/registry.h"

namespace opconform {

enum class LibraryKind { DEF, IMPL, FRAGMENT };

// The "skip this key" kernel (torch.library.fallthrough_kernel).
inline KernelFunction fallthrough_kernel() { return KernelFunction::fallthrough(); }

struct ImplOptions {
  bool with_keyset = false;     // the kernel takes the current DispatchKeySet first
  bool allow_override = true;   // false: error when the key already has a kernel
};

class Library {
 public:
  Library(std::string ns, LibraryKind kind, std::optional<DispatchKey> dispatch_key = std::nullopt,
          Registry& registry = Registry::global(), SourceLocation loc = SourceLocation::current());
  ~Library();
  Library(Library&&) noexcept;
  Library& operator=(Library&&) noexcept;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const std::string& ns() const { return ns_; }
  Registry& registry() const { return *registry_; }

  // Defines an operator from a schema string ("sum(Tensor self) -> Tensor"; the namespace is
  // added, or must match). Returns the operator's full name ("mylib::sum").
  std::string define(std::string_view schema, std::vector<Tag> tags = {}, std::string alias_analysis = "",
                     SourceLocation loc = SourceLocation::current());

  // Implements `op_name` ("sum", "sum.dim" or "mylib::sum") for a key (default: the library's).
  // `fn` is a typed C++ callable, a boxed callable void(const OperatorHandle&, DispatchKeySet,
  // Stack&), or a KernelFunction (fallthrough_kernel()).
  template <typename F>
  Library& impl(std::string_view op_name, F&& fn, std::optional<DispatchKey> key = std::nullopt,
                ImplOptions options = {}, SourceLocation loc = SourceLocation::current()) {
    return impl_kernel(op_name, make_kernel(std::forward<F>(fn), options.with_keyset), key, options.allow_override,
                       loc);
  }

  // Registers a fallback for every operator at `key` (only in the global namespace "_").
  template <typename F>
  Library& fallback(F&& fn, std::optional<DispatchKey> key = std::nullopt,
                    SourceLocation loc = SourceLocation::current()) {
    return fallback_kernel(make_kernel(std::forward<F>(fn), false), key, loc);
  }

  // Undoes every registration of this library now (the object stays usable).
  void reset();

  // Turns any accepted kernel form into a KernelFunction.
  template <typename F>
  static KernelFunction make_kernel(F&& fn, bool with_keyset) {
    using D = std::decay_t<F>;
    if constexpr (std::is_same_v<D, KernelFunction>) {
      return fn;
    } else if constexpr (std::is_invocable_r_v<void, D, const OperatorHandle&, DispatchKeySet, Stack&>) {
      return KernelFunction::from_boxed(BoxedKernel(std::forward<F>(fn)));
    } else {
      return KernelFunction::from_callable(std::forward<F>(fn), with_keyset);
    }
  }

 private:
  Library& impl_kernel(std::string_view op_name, KernelFunction kernel, std::optional<DispatchKey> key,
                       bool allow_override, SourceLocation loc);
  Library& fallback_kernel(KernelFunction kernel, std::optional<DispatchKey> key, SourceLocation loc);
  std::string qualify(std::string_view op_name) const;

  std::string ns_;
  LibraryKind kind_;
  std::optional<DispatchKey> dispatch_key_;
  Registry* registry_;
  RegistrationSource source_;
  std::vector<RegistrationHandle> registrations_;
};

// torch.library.define / torch.library.impl: define or implement one operator without keeping a
// Library; the returned handle undoes the registration when it dies.
//   auto def = define("mylib::sin", "(Tensor x) -> Tensor");
//   auto cpu = impl("mylib::sin", DispatchKey::CPU, [](const Tensor& x) { ... });
RegistrationHandle define(std::string_view qualname, std::string_view schema, std::vector<Tag> tags = {},
                          Registry& registry = Registry::global(), SourceLocation loc = SourceLocation::current());
template <typename F>
RegistrationHandle impl(std::string_view qualname, DispatchKey key, F&& fn, Registry& registry = Registry::global(),
                        SourceLocation loc = SourceLocation::current()) {
  return registry.impl(qualname, key, Library::make_kernel(std::forward<F>(fn), false), RegistrationSource::here(loc));
}

}  // namespace opconform
