// Scalar: a number of unknown element type (PyTorch's `Scalar` schema type): bool, integer,
// floating or complex. Used for `alpha=1`, `fill_(value)`, element access in tests.
#pragma once

#include <complex>
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>

#include "opconform/core/dtype.h"

namespace opconform {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float, Complex };

  Scalar() : Scalar(int64_t(0)) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}
  template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Scalar(I v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}
  Scalar(double v) : kind_(Kind::Float), d_(v) {}
  Scalar(float v) : kind_(Kind::Float), d_(v) {}
  Scalar(Half v) : kind_(Kind::Float), d_(static_cast<float>(v)) {}
  Scalar(BFloat16 v) : kind_(Kind::Float), d_(static_cast<float>(v)) {}
  Scalar(complex128 v) : kind_(Kind::Complex), c_(v) {}
  Scalar(complex64 v) : kind_(Kind::Complex), c_(v) {}

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_complex() const { return kind_ == Kind::Complex; }

  // The value converted to T with convert_scalar's rules (PyTorch's copy_ semantics).
  template <typename T>
  T to() const {
    switch (kind_) {
      case Kind::Bool: return convert_scalar<T>(static_cast<bool>(i_));
      case Kind::Int: return convert_scalar<T>(i_);
      case Kind::Float: return convert_scalar<T>(d_);
      case Kind::Complex: break;
    }
    return convert_scalar<T>(c_);
  }
  double to_double() const { return to<double>(); }
  int64_t to_int() const { return to<int64_t>(); }

  // The dtype PyTorch gives a tensor made from this scalar (bool, int64, float32 default,
  // complex64 default).
  DType default_dtype() const;

  // Exact equality of kind and value (NaN equals NaN here: this is for tests and printing).
  bool identical(const Scalar& other) const;
  std::string to_string() const;

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
    complex128 c_;
  };
};

std::ostream& operator<<(std::ostream& out, const Scalar& s);

}  // namespace opconform
