// Implementation of convert_scalar (see dtype.h).
#pragma once

#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

namespace opconform {
namespace detail {

template <typename T> struct is_complex_t : std::false_type {};
template <typename T> struct is_complex_t<std::complex<T>> : std::true_type {};

// Widens any element type to double (real part of complex).
template <typename From>
double to_double(From v) {
  if constexpr (is_complex_t<From>::value) return static_cast<double>(v.real());
  else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>)
    return static_cast<double>(static_cast<float>(v));
  else return static_cast<double>(v);
}

template <typename To>
To double_to_integral(double d) {
  if (std::isnan(d)) return To(0);
  // Compare in long double-free way: bounds of To as double are exact for every To here except
  // int64's max, which rounds up to 2^63; values at or above it saturate.
  constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
  if (d <= lo) return std::numeric_limits<To>::min();
  if (d >= hi) return std::numeric_limits<To>::max();
  return static_cast<To>(d);
}

}  // namespace detail

template <typename To, typename From>
To convert_scalar(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (detail::is_complex_t<From>::value) return v.real() != 0 || v.imag() != 0;
    else return detail::to_double(v) != 0.0;
  } else if constexpr (detail::is_complex_t<To>::value) {
    using R = typename To::value_type;
    if constexpr (detail::is_complex_t<From>::value)
      return To(static_cast<R>(v.real()), static_cast<R>(v.imag()));
    else if constexpr (std::is_integral_v<From>)
      return To(static_cast<R>(v), R(0));
    else return To(static_cast<R>(detail::to_double(v)), R(0));
  } else if constexpr (std::is_integral_v<To>) {
    if constexpr (std::is_integral_v<From>) return static_cast<To>(v);  // wraps, as C and PyTorch
    else return detail::double_to_integral<To>(detail::to_double(v));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    if constexpr (std::is_same_v<From, float>) return To(v);
    else if constexpr (std::is_integral_v<From>) return To(static_cast<double>(v));
    else return To(detail::to_double(v));
  } else {  // float or double
    if constexpr (std::is_integral_v<From>) return static_cast<To>(v);
    else if constexpr (detail::is_complex_t<From>::value) return static_cast<To>(v.real());
    else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>)
      return static_cast<To>(static_cast<float>(v));
    else return static_cast<To>(v);
  }
}

}  // namespace opconform
