#include "opconform/core/scalar.h"

#include <cmath>
#include <sstream>

namespace opconform {

DType Scalar::default_dtype() const {
  switch (kind_) {
    case Kind::Bool: return DType::Bool;
    case Kind::Int: return DType::Int64;
    case Kind::Float: return DType::Float32;
    case Kind::Complex: break;
  }
  return DType::Complex64;
}

bool Scalar::identical(const Scalar& other) const {
  if (kind_ != other.kind_) return false;
  auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  switch (kind_) {
    case Kind::Bool:
    case Kind::Int: return i_ == other.i_;
    case Kind::Float: return same(d_, other.d_);
    case Kind::Complex: break;
  }
  return same(c_.real(), other.c_.real()) && same(c_.imag(), other.c_.imag());
}

std::string Scalar::to_string() const {
  std::ostringstream out;
  out.precision(17);
  switch (kind_) {
    case Kind::Bool: out << (i_ ? "True" : "False"); break;
    case Kind::Int: out << i_; break;
    case Kind::Float: out << d_; break;
    case Kind::Complex: out << "(" << c_.real() << (c_.imag() < 0 ? "" : "+") << c_.imag() << "j)"; break;
  }
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Scalar& s) { return out << s.to_string(); }

}  // namespace opconform
