// Calls of reference operators through the dispatcher, for autograd formulas and composite
// kernels. A backward written with these calls is recorded by autograd itself, so double
// backward works (the rule: formulas use registry ops, never raw loops).
//
//   Ops ops(lib.registry());
//   Tensor gx = ops.mul(grad, ops.cos(x));
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "opconform/core/ivalue.h"
#include "opconform/core/registry.h"
#include "opconform/core/scalar.h"
#include "opconform/core/tensor.h"

namespace opconform::reference::detail {

class Ops {
 public:
  explicit Ops(Registry& registry) : registry_(&registry) {}

  // Calls `op` ("aten::mul.Tensor") with the leading arguments given; the rest take their
  // schema defaults. Returns the stack of results.
  Stack call(std::string_view op, Stack args) const;
  // The same, for an op with one tensor result.
  Tensor tensor(std::string_view op, Stack args) const { return call(op, std::move(args)).at(0).to_tensor(); }

  // The calls formulas use most (each one registry op).
  Tensor add(const Tensor& a, const Tensor& b) const { return tensor("aten::add.Tensor", {a, b}); }
  Tensor sub(const Tensor& a, const Tensor& b) const { return tensor("aten::sub.Tensor", {a, b}); }
  Tensor mul(const Tensor& a, const Tensor& b) const { return tensor("aten::mul.Tensor", {a, b}); }
  Tensor div(const Tensor& a, const Tensor& b) const { return tensor("aten::div.Tensor", {a, b}); }
  Tensor mul(const Tensor& a, const Scalar& s) const { return tensor("aten::mul.Scalar", {a, s}); }
  Tensor add(const Tensor& a, const Scalar& s) const { return tensor("aten::add.Scalar", {a, s}); }
  Tensor neg(const Tensor& a) const { return tensor("aten::neg", {a}); }
  Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) const { return tensor("aten::where.self", {c, a, b}); }
  Tensor view(const Tensor& a, std::vector<int64_t> sizes) const { return tensor("aten::view", {a, IValue(sizes)}); }
  Tensor unsqueeze(const Tensor& a, int64_t dim) const { return tensor("aten::unsqueeze", {a, IValue(dim)}); }
  Tensor permute(const Tensor& a, std::vector<int64_t> dims) const {
    return tensor("aten::permute", {a, IValue(std::move(dims))});
  }
  // a with new sizes (one may be -1): a view when a is contiguous (every shape can view it), else
  // a view of a contiguous aten::clone; recorded, unlike Tensor::reshape.
  Tensor reshape(const Tensor& a, std::vector<int64_t> sizes) const;
  Tensor expand(const Tensor& a, std::vector<int64_t> sizes) const {
    return tensor("aten::expand", {a, IValue(sizes)});
  }
  Tensor sum_dims(const Tensor& a, std::vector<int64_t> dims, bool keepdim) const {
    return tensor("aten::sum.dim_IntList", {a, IValue(dims), IValue(keepdim)});
  }
  // A tensor of `sizes` filled with value, in like's dtype and on its device (or the ones given).
  Tensor full(std::vector<int64_t> sizes, const Scalar& value, const Tensor& like) const {
    return full(std::move(sizes), value, like.dtype(), like.device());
  }
  Tensor full(std::vector<int64_t> sizes, const Scalar& value, DType dtype, Device device) const;
  // The 0-d form (it broadcasts, e.g. as where's "else" value).
  Tensor scalar_like(const Scalar& value, const Tensor& like) const { return full({}, value, like); }
  Tensor zeros_like(const Tensor& a) const;
  // 0, 1, ..., n-1 (int64) on `device`.
  Tensor arange(int64_t n, Device device) const;
  // A gradient of broadcast shape reduced back to `sizes` (sums over broadcast dims), in `dtype`.
  Tensor sum_to(const Tensor& grad, IntArrayRef sizes) const;
  // A tensor converted to dtype through aten::_to_copy (recorded, unlike Tensor::to).
  Tensor to(const Tensor& a, DType dtype) const;

  Registry& registry() const { return *registry_; }

 private:
  Registry* registry_;
};

}  // namespace opconform::reference::detail
