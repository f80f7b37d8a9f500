// IValue and Stack: boxed values, the one calling convention every kernel can be called with.
//
// A boxed call pushes the arguments on a Stack in schema order, calls the kernel, and finds the
// returns on the stack in their place (PyTorch's convention). Unboxed C++ kernels are wrapped
// automatically (see kernel.h); fallbacks, plugin kernels and generic tools (checks, graph
// capture) work on the boxed form only.
#pragma once

#include <complex>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <new>
#include <vector>

#include "opconform/core/device.h"
#include "opconform/core/dtype.h"
#include "opconform/core/error.h"
#include "opconform/core/layout.h"
#include "opconform/core/scalar.h"
#include "opconform/core/symint.h"
#include "opconform/core/tensor.h"

namespace opconform {

class IValue;
// Elements of lists the typed forms do not cover (Scalar[], str[], int[]? inside lists, ...).
struct GenericList {
  std::shared_ptr<std::vector<IValue>> elements;
};

class IValue {
 public:
  // Trivially copyable kinds first: copies, moves and destruction test one comparison.
  enum class Tag : uint8_t {
    None, Int, Double, Bool, Complex, DType, Device, Layout, MemoryFormat,
    Tensor, String, IntList, DoubleList, BoolList, TensorList, OptionalTensorList, GenericList,
    SymInt,  // a symbolic integer (a concrete one is stored as Int)
  };

  IValue() noexcept {}  // None
  IValue(std::nullopt_t) noexcept {}
  IValue(Tensor t) noexcept : tag_(Tag::Tensor) { new (&p_.tensor) Tensor(std::move(t)); }
  IValue(int64_t i) noexcept : tag_(Tag::Int) { p_.i = i; }
  IValue(int i) noexcept : tag_(Tag::Int) { p_.i = i; }
  IValue(double d) noexcept : tag_(Tag::Double) { p_.d = d; }
  IValue(bool b) noexcept : tag_(Tag::Bool) { p_.b = b; }
  IValue(complex128 c) noexcept : tag_(Tag::Complex) { p_.c = c; }
  IValue(std::string s) : tag_(Tag::String) { new (&p_.str) std::string(std::move(s)); }
  IValue(const char* s) : IValue(std::string(s)) {}
  IValue(DType d) noexcept : tag_(Tag::DType) { p_.dtype = d; }
  IValue(Device d) noexcept : tag_(Tag::Device) { p_.device = d; }
  IValue(Layout l) noexcept : tag_(Tag::Layout) { p_.layout = l; }
  IValue(MemoryFormat m) noexcept : tag_(Tag::MemoryFormat) { p_.memory_format = m; }
  IValue(std::vector<int64_t> l) : tag_(Tag::IntList) { new (&p_.int_list) std::vector<int64_t>(std::move(l)); }
  IValue(std::vector<double> l) : tag_(Tag::DoubleList) { new (&p_.double_list) std::vector<double>(std::move(l)); }
  IValue(std::vector<bool> l) : tag_(Tag::BoolList) { new (&p_.bool_list) std::vector<bool>(std::move(l)); }
  IValue(std::vector<Tensor> l) : tag_(Tag::TensorList) { new (&p_.tensor_list) std::vector<Tensor>(std::move(l)); }
  IValue(std::vector<std::optional<Tensor>> l) : tag_(Tag::OptionalTensorList) {
    new (&p_.optional_tensor_list) std::vector<std::optional<Tensor>>(std::move(l));
  }
  IValue(GenericList l) : tag_(Tag::GenericList) { new (&p_.generic_list) GenericList(std::move(l)); }
  IValue(const Scalar& s);  // stored as Bool, Int, Double or Complex
  // A concrete SymInt is stored as Int, a symbolic one as SymInt.
  IValue(const opconform::SymInt& s) {
    if (auto v = s.maybe_as_int()) {
      tag_ = Tag::Int;
      p_.i = *v;
    } else {
      tag_ = Tag::SymInt;
      new (&p_.symint) opconform::SymInt(s);
    }
  }
  template <typename T>
  IValue(std::optional<T> o) {
    if (o) *this = IValue(std::move(*o));
  }
  static IValue list(std::vector<IValue> elements) {
    return IValue(GenericList{std::make_shared<std::vector<IValue>>(std::move(elements))});
  }

  IValue(const IValue& o) : tag_(o.tag_) {
    if (is_trivial(tag_)) p_.raw = o.p_.raw;
    else copy_from(o);
  }
  IValue(IValue&& o) noexcept : tag_(o.tag_) {
    if (is_trivial(tag_)) p_.raw = o.p_.raw;
    else if (tag_ == Tag::Tensor) new (&p_.tensor) Tensor(std::move(o.p_.tensor));
    else move_from(std::move(o));
  }
  IValue& operator=(const IValue& o) {
    if (this != &o) {
      IValue copy(o);
      *this = std::move(copy);
    }
    return *this;
  }
  IValue& operator=(IValue&& o) noexcept {
    if (this != &o) {
      destroy();
      new (this) IValue(std::move(o));
    }
    return *this;
  }
  ~IValue() { destroy(); }

  Tag tag() const { return tag_; }
  std::string_view type_name() const;
  bool is_none() const { return tag_ == Tag::None; }
  bool is_tensor() const { return tag_ == Tag::Tensor; }
  bool is_int() const { return tag_ == Tag::Int; }
  bool is_double() const { return tag_ == Tag::Double; }
  bool is_bool() const { return tag_ == Tag::Bool; }
  bool is_string() const { return tag_ == Tag::String; }
  bool is_scalar() const { return is_int() || is_double() || is_bool() || tag_ == Tag::Complex; }
  bool is_tensor_list() const { return tag_ == Tag::TensorList; }

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

  // The stored value when it has exactly type T, else nullptr.
  template <typename T>
  const T* get_if() const;

  // Same tag and value; tensors compare by identity (is_same), not by value.
  bool identical(const IValue& other) const;
  std::string repr() const;

  // Throws Error(kSchemaMismatch) naming the expected and the actual type.
  [[noreturn]] void throw_type_error(const char* expected) const;

 private:
  static constexpr bool is_trivial(Tag t) { return t < Tag::Tensor; }
  void destroy() noexcept {
    if (is_trivial(tag_)) return;
    if (tag_ == Tag::Tensor) p_.tensor.~Tensor();
    else destroy_slow();
  }
  void destroy_slow() noexcept;
  void copy_from(const IValue& o);
  void move_from(IValue&& o) noexcept;

  template <typename T>
  const T& get(const char* expected) const {
    if (const T* p = get_if<T>()) return *p;
    throw_type_error(expected);
  }

  Tag tag_ = Tag::None;
  union Payload {
    struct { uint64_t a, b; } raw;  // the bytes of the trivially copyable kinds
    int64_t i;
    double d;
    bool b;
    complex128 c;
    DType dtype;
    Device device;
    Layout layout;
    MemoryFormat memory_format;
    Tensor tensor;
    std::string str;
    std::vector<int64_t> int_list;
    std::vector<double> double_list;
    std::vector<bool> bool_list;
    std::vector<Tensor> tensor_list;
    std::vector<std::optional<Tensor>> optional_tensor_list;
    GenericList generic_list;
    opconform::SymInt symint;
    Payload() noexcept : raw{0, 0} {}
    ~Payload() {}
  } p_;
  static_assert(sizeof(complex128) == sizeof(Payload::raw), "the trivial kinds fit the raw bytes");
};

template <typename T>
const T* IValue::get_if() const {
#define OPCONFORM_IVALUE_GET(Type, TagName, member) \
  if constexpr (std::is_same_v<T, Type>) return tag_ == Tag::TagName ? &p_.member : nullptr;
  OPCONFORM_IVALUE_GET(Tensor, Tensor, tensor)
  else OPCONFORM_IVALUE_GET(int64_t, Int, i)
  else OPCONFORM_IVALUE_GET(double, Double, d)
  else OPCONFORM_IVALUE_GET(bool, Bool, b)
  else OPCONFORM_IVALUE_GET(complex128, Complex, c)
  else OPCONFORM_IVALUE_GET(DType, DType, dtype)
  else OPCONFORM_IVALUE_GET(Device, Device, device)
  else OPCONFORM_IVALUE_GET(Layout, Layout, layout)
  else OPCONFORM_IVALUE_GET(MemoryFormat, MemoryFormat, memory_format)
  else OPCONFORM_IVALUE_GET(std::string, String, str)
  else OPCONFORM_IVALUE_GET(std::vector<int64_t>, IntList, int_list)
  else OPCONFORM_IVALUE_GET(std::vector<double>, DoubleList, double_list)
  else OPCONFORM_IVALUE_GET(std::vector<bool>, BoolList, bool_list)
  else OPCONFORM_IVALUE_GET(std::vector<Tensor>, TensorList, tensor_list)
  else OPCONFORM_IVALUE_GET(std::vector<std::optional<Tensor>>, OptionalTensorList, optional_tensor_list)
  else OPCONFORM_IVALUE_GET(GenericList, GenericList, generic_list)
  else OPCONFORM_IVALUE_GET(opconform::SymInt, SymInt, symint)
  else return nullptr;
#undef OPCONFORM_IVALUE_GET
}

std::ostream& operator<<(std::ostream& out, const IValue& v);

// A copy of v with fn applied to every defined tensor it holds (Tensor, Tensor[], Tensor?[] and
// generic lists, recursively); other values are copied as they are. Lists are new objects.
IValue map_tensors(const IValue& v, const std::function<Tensor(const Tensor&)>& fn);

using Stack = std::vector<IValue>;

// ---- conversions between IValue and the C++ types kernels use ----
template <typename T>
struct IValueConverter {
  static T from(const IValue& v) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      return static_cast<T>(v.to_int());
    } else {
      if (const T* p = v.template get_if<T>()) return *p;
      v.throw_type_error("the kernel's argument type");
    }
  }
};
template <> struct IValueConverter<Tensor> { static Tensor from(const IValue& v) { return v.to_tensor(); } };
template <> struct IValueConverter<double> { static double from(const IValue& v) { return v.to_double(); } };
template <> struct IValueConverter<bool> { static bool from(const IValue& v) { return v.to_bool(); } };
// SymInt arguments accept ints (concrete) and symbolic values; SymInt[] accepts int[] too.
template <> struct IValueConverter<SymInt> {
  static SymInt from(const IValue& v) {
    if (const SymInt* s = v.get_if<SymInt>()) return *s;
    return SymInt(v.to_int());
  }
};
template <> struct IValueConverter<std::vector<SymInt>> {
  static std::vector<SymInt> from(const IValue& v) {
    std::vector<SymInt> out;
    if (const auto* ints = v.get_if<std::vector<int64_t>>()) {
      for (int64_t i : *ints) out.emplace_back(i);
      return out;
    }
    for (const auto& e : v.to_generic_list()) out.push_back(IValueConverter<SymInt>::from(e));
    return out;
  }
};
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
    if (auto* p = v.template get_if<std::vector<T>>()) return *p;
    if (auto* g = v.template get_if<GenericList>()) {
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
  else if constexpr (std::is_same_v<D, std::vector<SymInt>>) {
    // int[] when every size is concrete, else a list of ints and symbolic values.
    std::vector<int64_t> ints;
    for (const auto& s : value) {
      if (auto v = s.maybe_as_int()) {
        ints.push_back(*v);
      } else {
        std::vector<IValue> elements(value.begin(), value.end());
        return IValue::list(std::move(elements));
      }
    }
    return IValue(std::move(ints));
  }
  else return IValue(std::forward<T>(value));
}

}  // namespace opconform
