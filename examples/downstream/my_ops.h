// my_ops: two operators of a downstream library, written with opconform's custom_op (the C++
// counterpart of torch.library.custom_op), each with a fake kernel and an autograd formula.
//
//   myops::scale(Tensor x, float factor) -> Tensor     x * factor
//   myops::mul(Tensor x, Tensor y) -> Tensor           x * y, elementwise (same sizes and dtype)
//
// Both take floating CPU tensors of any layout and return a new contiguous tensor of x's dtype.
#pragma once

#include "opconform/core.h"

namespace my_ops {

using ScaleOp = opconform::TypedCustomOpDef<opconform::Tensor(const opconform::Tensor&, double)>;
using MulOp = opconform::TypedCustomOpDef<opconform::Tensor(const opconform::Tensor&, const opconform::Tensor&)>;

// The operators, defined in one registry; they are removed from it when the last copy of this
// struct is gone (custom_op's lifetime rule).
struct Ops {
  ScaleOp scale;
  MulOp mul;
};

Ops define_ops(opconform::Registry& registry);

}  // namespace my_ops
