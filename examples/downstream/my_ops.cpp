#include "my_ops.h"

#include <algorithm>
#include <string>
#include <vector>

namespace my_ops {
namespace {

using opconform::DType;
using opconform::Error;
using opconform::ErrorCode;
using opconform::Registry;
using opconform::Tensor;

void require_floating(const Tensor& t, const char* name) {
  if (!opconform::is_floating(t.dtype()))
    throw Error(ErrorCode::kInvalidArgument,
                std::string("argument '") + name + "' must be a floating tensor, got " + std::string(opconform::name(t.dtype())));
}

// f over the elements of same-sized inputs, computed in double and rounded once to out_dtype.
// Inputs of any layout are read through a contiguous float64 copy; the result is contiguous.
template <typename F>
Tensor elementwise(const std::vector<Tensor>& inputs, DType out_dtype, F f) {
  std::vector<Tensor> wide;
  for (const Tensor& t : inputs) wide.push_back(t.to(DType::Float64).contiguous());
  Tensor out = opconform::empty(inputs[0].sizes(), opconform::TensorOptions(DType::Float64));
  double* o = out.mutable_data_ptr<double>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<double> x;
    for (const Tensor& w : wide) x.push_back(w.const_data_ptr<double>()[i]);
    o[i] = f(x);
  }
  return out.to(out_dtype);
}

Tensor scale(const Tensor& x, double factor) {
  require_floating(x, "x");
  return elementwise({x}, x.dtype(), [factor](const std::vector<double>& v) { return v[0] * factor; });
}

void require_like(const Tensor& y, const Tensor& x) {
  if (y.dtype() != x.dtype() || !std::ranges::equal(y.sizes(), x.sizes()))
    throw Error(ErrorCode::kInvalidArgument, "argument 'y' must have the sizes and dtype of 'x'");
}

Tensor mul(const Tensor& x, const Tensor& y) {
  require_floating(x, "x");
  require_like(y, x);
  return elementwise({x, y}, x.dtype(), [](const std::vector<double>& v) { return v[0] * v[1]; });
}

// Fake kernels: the output's metadata only, as the real kernels make it (contiguous, x's dtype),
// after the same argument checks.
Tensor scale_fake(const Tensor& x, double) {
  require_floating(x, "x");
  return opconform::empty_like(x);
}

Tensor mul_fake(const Tensor& x, const Tensor& y) {
  require_floating(x, "x");
  require_like(y, x);
  return opconform::empty_like(x);
}

}  // namespace

Ops define_ops(Registry& registry) {
  const opconform::CustomOpOptions options{.device_types = std::vector{opconform::DeviceType::CPU},
                                           .registry = &registry};
  ScaleOp scale_op = opconform::custom_op("myops::scale", scale, options, {"x", "factor"});
  MulOp mul_op = opconform::custom_op("myops::mul", mul, options, {"x", "y"});
  scale_op.register_fake(scale_fake);
  mul_op.register_fake(mul_fake);

  // The formulas call the operators themselves, through the registry (by name: an op holding
  // its own CustomOpDef would never be freed). So graph capture sees them and they are
  // differentiable again.
  scale_op.register_autograd(
      [&registry](opconform::autograd::AutogradContext& ctx, const std::vector<Tensor>& grad) {
        auto op = registry.get("myops::scale").typed<Tensor(const Tensor&, double)>();
        return std::vector<Tensor>{op.call(grad[0], ctx.get("factor").to_double()), Tensor()};
      },
      [](opconform::autograd::AutogradContext& ctx, const opconform::Stack& inputs, const opconform::Stack&) {
        ctx.set("factor", inputs[1]);
      });
  mul_op.register_autograd(
      [&registry](opconform::autograd::AutogradContext& ctx, const std::vector<Tensor>& grad) {
        auto op = registry.get("myops::mul").typed<Tensor(const Tensor&, const Tensor&)>();
        const std::vector<Tensor> xy = ctx.saved_tensors();
        return std::vector<Tensor>{op.call(grad[0], xy[1]), op.call(grad[0], xy[0])};
      },
      [](opconform::autograd::AutogradContext& ctx, const opconform::Stack& inputs, const opconform::Stack&) {
        ctx.save_for_backward({inputs[0].to_tensor(), inputs[1].to_tensor()});
      });
  return {scale_op, mul_op};
}

}  // namespace my_ops
