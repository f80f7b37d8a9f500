// Elementwise float helpers for tests and examples: the role numpy plays in the seed
// document's examples (kernels written outside the operator model).
#pragma once

#include <functional>
#include <vector>

#include "opconform/core/tensor.h"

namespace opconform::testing {

// f applied to every element (computed in double, stored in x's dtype), a new contiguous tensor.
inline Tensor map(const Tensor& x, const std::function<double(double)>& f) {
  Tensor in = x.to(DType::Float64, Device::cpu()).contiguous();
  Tensor out = empty(x.sizes(), TensorOptions(DType::Float64));
  const double* p = in.const_data_ptr<double>();
  double* o = out.mutable_data_ptr<double>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = f(p[i]);
  return out.to(x.dtype(), x.device());
}

// f over two same-shape tensors, a new contiguous tensor of a's dtype and device.
inline Tensor zip(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f) {
  Tensor ca = a.to(DType::Float64, Device::cpu()).contiguous();
  Tensor cb = b.to(DType::Float64, Device::cpu()).expand(a.sizes()).contiguous();
  Tensor out = empty(a.sizes(), TensorOptions(DType::Float64));
  const double* pa = ca.const_data_ptr<double>();
  const double* pb = cb.const_data_ptr<double>();
  double* o = out.mutable_data_ptr<double>();
  for (int64_t i = 0; i < a.numel(); ++i) o[i] = f(pa[i], pb[i]);
  return out.to(a.dtype(), a.device());
}

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// |a - b| <= atol + rtol * |b| elementwise, same shape.
inline bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-6) {
  if (a.numel() != b.numel()) return false;
  auto va = values(a), vb = values(b);
  for (size_t i = 0; i < va.size(); ++i) {
    double diff = va[i] > vb[i] ? va[i] - vb[i] : vb[i] - va[i];
    double scale = vb[i] < 0 ? -vb[i] : vb[i];
    if (!(diff <= atol + rtol * scale)) return false;
  }
  return true;
}

}  // namespace opconform::testing
