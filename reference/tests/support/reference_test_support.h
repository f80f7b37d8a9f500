// What the reference's unit tests share: the reference registered once, boxed calls that fill in
// schema defaults, tensors from values, value comparisons, gradients and gradient checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/conformance/generate.h"
#include "opconform/conformance/gradcheck.h"
#include "opconform/core/autograd.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/reference.h"

namespace opconform::reference::testing {

// The global registry with the reference registered (once per test binary): autograd sums
// gradients under create_graph with its aten::add.Tensor.
inline Registry& registry() {
  static ReferenceRegistration registration = register_reference_ops(Registry::global());
  return Registry::global();
}
inline detail::Ops ops() { return detail::Ops(registry()); }

// `op` called boxed with the leading arguments given (the rest take their schema defaults):
// every result, or the first one as a tensor.
inline Stack call_all(std::string_view op, Stack args) { return ops().call(op, std::move(args)); }
inline Tensor call(std::string_view op, Stack args) { return ops().tensor(op, std::move(args)); }

// The message of the Error the call throws (empty when it throws none).
inline std::string error_of(std::string_view op, Stack args) {
  try {
    call_all(op, std::move(args));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- tensors from values, values from tensors ----

inline Tensor doubles(std::vector<double> v, std::vector<int64_t> sizes) { return from_vector<double>(v, sizes); }
// Values in `dtype` (float32 by default).
inline Tensor floats(std::vector<double> v, std::vector<int64_t> sizes, DType dtype = DType::Float32) {
  return from_vector<double>(v, sizes).to(dtype);
}
inline Tensor longs(std::vector<int64_t> v, std::vector<int64_t> sizes) { return from_vector<int64_t>(v, sizes); }
inline Tensor bools(std::vector<bool> v, std::vector<int64_t> sizes) { return from_vector<bool>(v, sizes); }
// 0, 1, ..., n-1 as float64 in `sizes`.
inline Tensor iota(std::vector<int64_t> sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return doubles(v, sizes);
}
// A leaf that requires grad, holding t's values.
inline Tensor leaf(const Tensor& t) { return t.detach().set_requires_grad(true); }

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
inline std::vector<int64_t> sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }
inline std::vector<int64_t> strides_of(const Tensor& t) { return {t.strides().begin(), t.strides().end()}; }

// t's values are `want`: NaN where want is NaN, infinities exactly, the rest within tol.
inline void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-12) {
  const std::vector<double> got = t.to(DType::Float64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    else if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << "element " << i;
    else EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

// ---- gradients ----

// The gradients of sum(out * weights) by each input (weights: ones when undefined).
inline std::vector<Tensor> grads_of(const Tensor& out, const std::vector<Tensor>& inputs,
                                    const Tensor& weights = Tensor()) {
  return autograd::grad({out}, inputs, {weights.defined() ? weights : ones(out.sizes(), out.options())});
}
inline Tensor grad_of(const Tensor& out, const Tensor& input, const Tensor& weights = Tensor()) {
  return grads_of(out, {input}, weights).at(0);
}

// gradcheck and gradgradcheck of `op` pass on these arguments (the tensors that require grad are
// differentiated).
inline void expect_gradients_pass(std::string_view op, const Stack& args) {
  const OperatorHandle handle = registry().get(op);
  auto first = conformance::gradcheck(handle, args);
  EXPECT_EQ(first.outcome, conformance::Outcome::passed) << op << ": " << first.message;
  auto second = conformance::gradgradcheck(handle, args);
  EXPECT_EQ(second.outcome, conformance::Outcome::passed) << op << ": " << second.message;
}

// The same on `count` generated float64 samples (no NaN or inf) whose floating tensors require
// grad: neither check may fail, and gradcheck must pass on one sample at least. skip_ties leaves
// out samples with repeated values (max-like and sorting ops are not differentiable there).
inline void expect_generated_gradients_pass(const std::string& op, bool skip_ties = false, int count = 25) {
  const OperatorHandle handle = registry().get(op);
  conformance::GenerateSpec spec;
  spec.count = count;
  spec.seed = 20240611;
  spec.dtypes = {DType::Float64};
  spec.include_special_values = false;
  int checked = 0, passed = 0;
  for (auto& sample : conformance::generate_samples(handle, spec)) {
    bool ties = false;
    for (auto& v : sample.args) {
      if (!v.is_tensor() || !v.to_tensor().defined() || !is_floating(v.to_tensor().dtype())) continue;
      auto sorted = v.to_tensor().to_vector<double>();
      std::sort(sorted.begin(), sorted.end());
      ties = ties || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
      v.to_tensor().set_requires_grad(true);
    }
    if (skip_ties && ties) continue;
    ++checked;
    auto first = conformance::gradcheck(handle, sample.args);
    EXPECT_NE(first.outcome, conformance::Outcome::failed) << op << ": " << first.message;
    passed += first.outcome == conformance::Outcome::passed ? 1 : 0;
    auto second = conformance::gradgradcheck(handle, sample.args);
    EXPECT_NE(second.outcome, conformance::Outcome::failed) << op << ": " << second.message;
  }
  EXPECT_GT(checked, 0) << op << ": no sample was checked";
  EXPECT_GT(passed, 0) << op << ": gradcheck passed on no sample";
}

// The sizes of a tensor with symbolic sizes at the given symbol values (fake kernels that
// compute symbolic sizes give the output sizes at other values of the input's symbols).
inline std::vector<int64_t> sizes_at(const Tensor& t, const std::map<std::string, int64_t>& at) {
  EXPECT_TRUE(t.has_symbolic_sizes());
  std::vector<int64_t> out;
  for (const SymInt& s : t.sym_sizes()) {
    out.push_back(s.maybe_as_int() ? *s.maybe_as_int()
                                   : s.node()->evaluate([&](const SymNode& sym) { return at.at(sym.symbol().name); }));
  }
  return out;
}
// With s0 = 5 and s1 = 7 (the symbols of a dynamic fake input of size [2, 3]).
inline std::vector<int64_t> sizes_at_5_7(const Tensor& t) { return sizes_at(t, {{"s0", 5}, {"s1", 7}}); }

}  // namespace opconform::reference::testing
