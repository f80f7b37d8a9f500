// What compile/'s tests share: the reference registered once, boxed calls, tensors from values.
#pragma once
#include <string_view>
#include <vector>

#include "opconform/core/registry.h"
#include "opconform/core/tensor.h"
#include "opconform/reference/reference.h"

namespace opconform::compile::testing {

// A registry of its own with the reference (and its fallbacks) registered, once per test binary.
inline Registry& registry() {
  static Registry r;
  static auto reg = reference::register_reference_ops(r);
  return r;
}

inline Stack call(std::string_view op, Stack args) {
  registry().get(op).call_boxed(args);
  return args;
}
inline Tensor call1(std::string_view op, Stack args) { return call(op, std::move(args)).at(0).to_tensor(); }

// start, start + 1, ... as float64 in `sizes`.
inline Tensor iota(std::vector<int64_t> sizes, double start = 1) {
  int64_t n = 1;
  for (auto s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<double>(i);
  return from_vector<double>(v, sizes);
}

}  // namespace opconform::compile::testing
