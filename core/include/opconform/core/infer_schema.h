// infer_schema: the schema of a C++ callable (torch.library.infer_schema).
//
// C++ has no parameter names at run time, so the caller passes them; "*" among them starts the
// keyword-only arguments, as in a Python signature:
//
//   Tensor add_out(const Tensor& x, const Tensor& y, const Tensor& out);
//   infer_schema<decltype(add_out)>({"x", "y", "*", "out"}, {"out"}, "add_out", {Tag::out})
//     -> add_out(Tensor x, Tensor y, *, Tensor(a!) out) -> Tensor(a!)
//
// Types: Tensor, int64_t (and other integers) -> int, SymInt, double/float -> float, bool,
// std::string -> str, Scalar, DType -> ScalarType, Device, Layout, MemoryFormat,
// std::vector<T> -> T[], std::optional<T> -> T?, std::tuple<...> returns -> (..), void -> ().
// mutates_args names the written tensor arguments (or MutatesArgs::unknown(): every tensor
// argument may be written). Outputs are assumed not to alias inputs or each other, except for
// the standard forms the tags give:
//   Tag::inplace: (Tensor(a!) x, ...) -> Tensor(a!)   — the first argument, the only mutated one
//   Tag::out:     (..., *, Tensor(a!) out0, Tensor(b!) out1) -> (Tensor(a!), Tensor(b!))
// Other mutated tensors get Tensor(a<i>!) with i the argument's position, as PyTorch prints it.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "opconform/core/device.h"
#include "opconform/core/dispatch_key.h"
#include "opconform/core/dtype.h"
#include "opconform/core/kernel.h"
#include "opconform/core/layout.h"
#include "opconform/core/scalar.h"
#include "opconform/core/schema.h"
#include "opconform/core/symint.h"
#include "opconform/core/tag.h"
#include "opconform/core/tensor.h"

namespace opconform {

// Which arguments an operator writes: a list of names, or "unknown" (any tensor argument).
struct MutatesArgs {
  std::vector<std::string> names;
  bool unknown = false;

  MutatesArgs() = default;
  MutatesArgs(std::initializer_list<std::string> n) : names(n) {}
  MutatesArgs(std::vector<std::string> n) : names(std::move(n)) {}
  static MutatesArgs all_unknown() {
    MutatesArgs m;
    m.unknown = true;
    return m;
  }
};

namespace detail {

template <typename T> struct is_optional_t : std::false_type {};
template <typename T> struct is_optional_t<std::optional<T>> : std::true_type {};
template <typename T> struct is_vector_t : std::false_type {};
template <typename T, typename A> struct is_vector_t<std::vector<T, A>> : std::true_type {};
template <typename T> inline constexpr bool is_optional_v = is_optional_t<T>::value;
template <typename T> inline constexpr bool is_vector_v = is_vector_t<T>::value;

// The schema type of a C++ parameter or return type, or nullopt when unsupported.
template <typename T>
std::optional<Type> schema_type_of() {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, Tensor>) return Type::base(TypeKind::kTensor);
  else if constexpr (std::is_same_v<D, bool>) return Type::base(TypeKind::kBool);
  else if constexpr (std::is_integral_v<D>) return Type::base(TypeKind::kInt);
  else if constexpr (std::is_same_v<D, SymInt>) return Type::base(TypeKind::kSymInt);
  else if constexpr (std::is_floating_point_v<D>) return Type::base(TypeKind::kFloat);
  else if constexpr (std::is_same_v<D, std::string>) return Type::base(TypeKind::kStr);
  else if constexpr (std::is_same_v<D, Scalar>) return Type::base(TypeKind::kScalar);
  else if constexpr (std::is_same_v<D, DType>) return Type::base(TypeKind::kScalarType);
  else if constexpr (std::is_same_v<D, Device>) return Type::base(TypeKind::kDevice);
  else if constexpr (std::is_same_v<D, Layout>) return Type::base(TypeKind::kLayout);
  else if constexpr (std::is_same_v<D, MemoryFormat>) return Type::base(TypeKind::kMemoryFormat);
  else if constexpr (std::is_same_v<D, complex128>) return Type::base(TypeKind::kComplex);
  else if constexpr (is_optional_v<D>) {
    auto inner = schema_type_of<typename D::value_type>();
    if (!inner || inner->is_optional()) return std::nullopt;
    return Type::optional(*inner);
  } else if constexpr (is_vector_v<D>) {
    auto inner = schema_type_of<typename D::value_type>();
    if (!inner || inner->is_list()) return std::nullopt;
    return Type::list(*inner);
  } else {
    return std::nullopt;
  }
}

// Readable C++ type names for error messages.
std::string demangle(const char* mangled);
template <typename T>
std::string cpp_type_name() {
  std::string name = demangle(typeid(T).name());
  if constexpr (std::is_const_v<std::remove_reference_t<T>>) name = "const " + name;
  if constexpr (std::is_lvalue_reference_v<T>) name += "&";
  return name;
}

struct InferredSignature {
  std::vector<std::optional<Type>> params;
  std::vector<std::string> param_cpp;
  std::vector<std::optional<Type>> returns;  // empty for void
  std::string return_cpp;
};

template <typename T>
struct ReturnTypes {
  static void fill(InferredSignature& s) {
    if constexpr (!std::is_void_v<T>) s.returns.push_back(schema_type_of<T>());
    s.return_cpp = cpp_type_name<T>();
  }
};
template <typename... R>
struct ReturnTypes<std::tuple<R...>> {
  static void fill(InferredSignature& s) {
    (s.returns.push_back(schema_type_of<R>()), ...);
    s.return_cpp = cpp_type_name<std::tuple<R...>>();
  }
};

template <typename F>
InferredSignature inferred_signature() {
  using traits = function_traits<std::remove_pointer_t<std::decay_t<F>>>;
  InferredSignature s;
  using Args = typename traits::args;
  auto add = [&]<typename... A>(std::tuple<A...>*) {
    (s.params.push_back(schema_type_of<A>()), ...);
    (s.param_cpp.push_back(cpp_type_name<A>()), ...);
  };
  // A leading DispatchKeySet (a with_keyset kernel) is not part of the schema.
  if constexpr (std::tuple_size_v<Args> > 0 &&
                std::is_same_v<std::decay_t<std::tuple_element_t<0, Args>>, DispatchKeySet>) {
    add(static_cast<typename drop_first<Args>::type*>(nullptr));
  } else {
    add(static_cast<Args*>(nullptr));
  }
  ReturnTypes<std::decay_t<typename traits::ret>>::fill(s);
  return s;
}

FunctionSchema build_inferred_schema(const InferredSignature& signature, const std::vector<std::string>& arg_names,
                                     const MutatesArgs& mutates_args, const std::string& op_name,
                                     const std::vector<Tag>& tags);

}  // namespace detail

// The schema of callable type F (a function type, function pointer or lambda type). op_name may
// be empty (the schema then prints as "(Tensor x) -> Tensor"), "name" or "ns::name[.overload]".
// A leading DispatchKeySet parameter (a with_keyset kernel) is not part of the schema.
// Throws Error(kSchemaMismatch) for unsupported types, names that do not match the parameters,
// mutates_args naming a missing or non-tensor argument, and tags the signature cannot satisfy.
template <typename F>
FunctionSchema infer_schema(const std::vector<std::string>& arg_names, const MutatesArgs& mutates_args,
                            const std::string& op_name = "", const std::vector<Tag>& tags = {}) {
  auto signature = detail::inferred_signature<F>();
  return detail::build_inferred_schema(signature, arg_names, mutates_args, op_name, tags);
}

}  // namespace opconform
