// IValue and Stack: boxed values, the one calling convention every kernel can be called with.
//
// A boxed call pushes the arguments on a Stack in schema order, calls the kernel, and finds the
// returns on the stack in their place (PyTorch's convention). Unboxed C++ kernels are wrapped
// automatically (see kernel.h); fallbacks, plugin kernels and generic tools (checks, graph
// capture) work on the boxed form only.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "opconform/core/device.h"
#include "opconform/core/dtype.h"
#include "opconform/core/error.h"
#include "opconform/core/layout.h"
#include "opconform/core/scalar.h"
#include "opconform/core/tensor.h"

namespace opconform {

class IValue;
// Elements of lists the typed forms do not cover (Scalar[], str[], int[]? inside lists, ...).
struct GenericList {
  std::shared_ptr<std::vector<IValue>> elements;
};

class IValue {
 public:
  enum class Tag : uint8_t {
    None, Tensor, Int, Double, Bool, Complex, String, DType, Device, Layout, MemoryFormat,
    IntList, DoubleList, BoolList, TensorList, OptionalTensorList, GenericList,
  };

  IValue() = default;  // None
  IValue(std::nullopt_t) {}
  IValue(Tensor t) : v_(std::move(t)) {}
  IValue(int64_t i) : v_(i) {}
  IValue(int i) : v_(static_cast<int64_t>(i)) {}
  IValue(double d) : v_(d) {}
  IValue(bool b) : v_(b) {}
  IValue(complex128 c) : v_(c) {}
  IValue(std::string s) : v_(std::move(s)) {}
  IValue(const char* s) : v_(std::string(s)) {}
  IValue(DType d) : v_(d) {}
  IValue(Device d) : v_(d) {}
  IValue(Layout l) : v_(l) {}
  IValue(MemoryFormat m) : v_(m) {}
  IValue(std::vector<int64_t> l) : v_(std::move(l)) {}
  IValue(std::vector<double> l) : v_(std::move(l)) {}
  IValue(std::vector<bool> l) : v_(std::move(l)) {}
  IValue(std::vector<Tensor> l) : v_(std::move(l)) {}
  IValue(std::vector<std::optional<Tensor>> l) : v_(std::move(l)) {}
  IValue(GenericList l) : v_(std::move(l)) {}
  IValue(const Scalar& s);  // stored as Bool, Int, Double or Complex
  template <typename T>
  IValue(std::optional<T> o) {
    if (o) *this = IValue(std::move(*o));
  }
  static IValue list(std::vector<IValue> elements) {
    return IValue(GenericList{std::make_shared<std::vector<IValue>>(std::move(elements))});
  }

  Tag tag() const { return static_cast<Tag>(v_.index()); }
  std::string_view type_name() const;
  bool is_none() const { return tag() == Tag::None; }
  bool is_tensor() const { return tag() == Tag::Tensor; }
  bool is_int() const { return tag() == Tag::Int; }
  bool is_double() const { return tag() == Tag::Double; }
  bool is_bool() const { return tag() == Tag::Bool; }
  bool is_string() const { return tag() == Tag::String; }
  bool is_scalar() const { return is_int() || is_double() || is_bool() || tag() == Tag::Complex; }
  bool is_tensor_list() const { return tag() == Tag::TensorList; }

  const Tensor& to_tensor() const { return get<Tensor>("Tensor"); }
  int64_t to_int() const { return get<int64_t>("int"); }
  double to_double() const;  // accepts int, as PyTorch does for float arguments
  bool to_bool() const { return get<bool>("bool"); }
  const std::string& to_string_ref() const { return get<std::string>("str"); }
  Scalar to_scalar() const;
  const std::vector<Tensor>& to_tensor_list() const { return get<std::vector<Tensor>>("Tensor[]"); }
  const std::vector<IValue>& to_generic_list() const { return *get<GenericList>("list").elements; }

  // Converts to a C++ type: the types kernels take (see IValueConverter below).
  template <typename T>
  T to() const;

  // Same tag and value; tensors compare by identity (is_same), not by value.
  bool identical(const IValue& other) const;
  std::string repr() const;

 private:
  template <typename T>
  const T& get(const char* expected) const {
    if (const T* p = std::get_if<T>(&v_)) return *p;
    throw_type_error(expected);
  }
  [[noreturn]] void throw_type_error(const char* expected) const;

  std::variant<std::monostate, Tensor, int64_t, double, bool, complex128, std::string, DType, Device, Layout,
               MemoryFormat, std::vector<int64_t>, std::vector<double>, std::vector<bool>, std::vector<Tensor>,
               std::vector<std::optional<Tensor>>, GenericList>
      v_;
  template <typename T> friend struct IValueConverter;
};

std::ostream& operator<<(std::ostream& out, const IValue& v);

using Stack = std::vector<IValue>;

// ---- conversions between IValue and the C++ types kernels use ----
template <typename T>
struct IValueConverter {
  static T from(const IValue& v) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      return static_cast<T>(v.to_int());
    } else {
      return v.template get<T>("the kernel's argument type");
    }
  }
};
template <> struct IValueConverter<Tensor> { static Tensor from(const IValue& v) { return v.to_tensor(); } };
template <> struct IValueConverter<double> { static double from(const IValue& v) { return v.to_double(); } };
template <> struct IValueConverter<bool> { static bool from(const IValue& v) { return v.to_bool(); } };
template <> struct IValueConverter<Scalar> { static Scalar from(const IValue& v) { return v.to_scalar(); } };
template <> struct IValueConverter<std::string> {
  static std::string from(const IValue& v) { return v.to_string_ref(); }
};
template <> struct IValueConverter<std::vector<Tensor>> {
  static std::vector<Tensor> from(const IValue& v) { return v.to_tensor_list(); }
};
template <typename T>
struct IValueConverter<std::optional<T>> {
  static std::optional<T> from(const IValue& v) {
    if (v.is_none()) return std::nullopt;
    return IValueConverter<T>::from(v);
  }
};
template <typename T>
struct IValueConverter<std::vector<T>> {
  // Typed lists convert directly; a generic list converts element by element.
  static std::vector<T> from(const IValue& v) {
    if (auto* p = std::get_if<std::vector<T>>(&v.v_)) return *p;
    if (auto* g = std::get_if<GenericList>(&v.v_)) {
      std::vector<T> out;
      out.reserve(g->elements->size());
      for (const auto& e : *g->elements) out.push_back(e.template to<T>());
      return out;
    }
    v.throw_type_error("list");
  }
};

template <typename T>
T IValue::to() const {
  return IValueConverter<std::decay_t<T>>::from(*this);
}

// Turns a C++ value into an IValue: scalars, tensors, lists, optionals as they are.
template <typename T>
IValue to_ivalue(T&& value) {
  using D = std::decay_t<T>;
  if constexpr (std::is_integral_v<D> && !std::is_same_v<D, bool>) return IValue(static_cast<int64_t>(value));
  else if constexpr (std::is_same_v<D, float>) return IValue(static_cast<double>(value));
  else return IValue(std::forward<T>(value));
}

}  // namespace opconform
