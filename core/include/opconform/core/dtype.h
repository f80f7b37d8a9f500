// DType: the element types a tensor can hold, with PyTorch's names, sizes and type promotion.
//
// The enum order is part of the C ABI's history-free contract only through dlpack.h's mapping;
// inside C++ use the helpers here (itemsize, is_floating, promote_types, visit_dtype).
#pragma once

#include <complex>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>

#include "opconform/core/half.h"

namespace opconform {

enum class DType : uint8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,
  Complex128,
};

inline constexpr int kNumDTypes = 12;

using complex64 = std::complex<float>;
using complex128 = std::complex<double>;

// Size of one element in bytes.
constexpr size_t itemsize(DType t) {
  switch (t) {
    case DType::Bool: case DType::UInt8: case DType::Int8: return 1;
    case DType::Int16: case DType::Float16: case DType::BFloat16: return 2;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: case DType::Complex64: return 8;
    case DType::Complex128: return 16;
  }
  return 0;
}

constexpr bool is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }
constexpr bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
// Integral types; bool counts only when include_bool is set (PyTorch's isIntegralType).
constexpr bool is_integral(DType t, bool include_bool = false) {
  return (t >= DType::UInt8 && t <= DType::Int64) || (include_bool && t == DType::Bool);
}
constexpr bool is_signed(DType t) { return t != DType::Bool && t != DType::UInt8; }

// PyTorch's names: "float32", "int64", "bool", "complex64", ...
std::string_view name(DType t);
// Parses PyTorch's names and common aliases ("float", "double", "half", "long", "int", "f32").
std::optional<DType> parse_dtype(std::string_view name);
std::ostream& operator<<(std::ostream& out, DType t);

// The dtype PyTorch's torch.promote_types(a, b) gives.
DType promote_types(DType a, DType b);
// The real type of a complex type (complex64 -> float32); other types map to themselves.
DType to_real(DType t);
// The complex type holding a floating type (float32 -> complex64, float64 -> complex128).
DType to_complex(DType t);

// C++ type <-> DType.
template <typename T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::Int16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<complex64> { static constexpr DType value = DType::Complex64; };
template <> struct dtype_of<complex128> { static constexpr DType value = DType::Complex128; };
template <typename T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

template <typename T> struct type_tag { using type = T; };

// Calls f(type_tag<T>{}) with T the C++ type of `t`. The one place that switches on dtype:
// kernels write `visit_dtype(t, [&](auto tag) { using T = typename decltype(tag)::type; ... })`.
template <typename F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(type_tag<bool>{});
    case DType::UInt8: return f(type_tag<uint8_t>{});
    case DType::Int8: return f(type_tag<int8_t>{});
    case DType::Int16: return f(type_tag<int16_t>{});
    case DType::Int32: return f(type_tag<int32_t>{});
    case DType::Int64: return f(type_tag<int64_t>{});
    case DType::Float16: return f(type_tag<Half>{});
    case DType::BFloat16: return f(type_tag<BFloat16>{});
    case DType::Float32: return f(type_tag<float>{});
    case DType::Float64: return f(type_tag<double>{});
    case DType::Complex64: return f(type_tag<complex64>{});
    case DType::Complex128: break;
  }
  return f(type_tag<complex128>{});
}

// Converts one value between element types as PyTorch's copy_ does: complex to real keeps the
// real part, anything to bool is "!= 0". Floating to integral is defined for every input (C++
// leaves it undefined): NaN gives 0, values out of range saturate.
template <typename To, typename From>
To convert_scalar(From v);

}  // namespace opconform

#include "opconform/core/detail/convert_scalar.h"
