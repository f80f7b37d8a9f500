// Activations: relu, gelu, leaky_relu, hardtanh, elu, clamp (scalar and tensor bounds), softmax
// and log_softmax, plus the in-place and out= overloads of relu and clamp.
// Elementwise kernels compute in the wide type (Note [Reference arithmetic] in detail/elementwise.h);
// softmax reads each slice along `dim` in float64 and rounds once. Formulas are written with
// registry ops (detail/calls.h), so they are differentiable again.
#include <cmath>
#include <limits>
#include <numbers>

#include "opconform/core/fake_tensor.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/detail/elementwise.h"
#include "opconform/reference/detail/op_builder.h"
#include "opconform/reference/detail/op_support.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using namespace detail;
using Grads = std::vector<Tensor>;
using Bound = std::optional<Scalar>;

// ---- scalars: PyTorch converts a bound to the computation's dtype with an overflow check ----

void check_scalar_fits(std::string_view op, std::string_view arg, const Scalar& s, DType d) {
  OPCONFORM_CHECK(!s.is_complex(), ErrorCode::kInvalidArgument, op, ": argument '", arg,
                  "' is complex, which the operator does not support");
  if (is_floating(d)) {
    const double v = s.to_double();
    OPCONFORM_CHECK(!std::isfinite(v) || std::abs(v) <= max_finite(d), ErrorCode::kInvalidArgument, op,
                    ": argument '", arg, "' (", v, ") cannot be converted to ", name(d), " without overflow");
  } else if (s.is_integral()) {
    const auto [lo, hi] = integer_range(d);
    const int64_t v = s.to_int();
    OPCONFORM_CHECK(v >= lo && v <= hi, ErrorCode::kInvalidArgument, op, ": argument '", arg, "' (", v,
                    ") cannot be converted to ", name(d), " without overflow");
  }
}

// ---- clamp with scalar bounds (shared by clamp, clamp_, clamp.out and hardtanh) ----

// PyTorch's clamp: a floating self keeps its dtype; otherwise self and the bounds promote
// (an integer tensor clamped by 0.5 gives float32). Complex and bool are refused.
DType clamp_result_dtype(std::string_view op, const Tensor& self, const Bound& min, const Bound& max) {
  OPCONFORM_CHECK(min || max, ErrorCode::kInvalidArgument, op, ": at least one of 'min' or 'max' must not be None");
  OPCONFORM_CHECK(!is_complex(self.dtype()), ErrorCode::kNotImplemented, op,
                  ": argument 'self' is complex, which clamp does not support");
  std::vector<Scalar> bounds;
  for (const Bound& b : {min, max})
    if (b) bounds.push_back(*b);
  const DType r = is_floating(self.dtype()) ? self.dtype() : result_type({self}, bounds);
  OPCONFORM_CHECK(r != DType::Bool, ErrorCode::kNotImplemented, op,
                  ": argument 'self' is bool (with bool or no bounds), which clamp does not support");
  if (min) check_scalar_fits(op, "min", *min, r);
  if (max) check_scalar_fits(op, "max", *max, r);
  return r;
}

// min(max(x, min), max) in the wide type of r; a NaN value or bound gives NaN.
Tensor clamp_values(std::string_view op, const Tensor& self, const Bound& min, const Bound& max, DType r) {
  return map_unary<Domain::Real>(op, self, r, r, [min, max](auto v) {
    using W = decltype(v);
    if (is_nan(v) || (min && is_nan(scalar_as<W>(*min))) || (max && is_nan(scalar_as<W>(*max)))) {
      return std::numeric_limits<W>::quiet_NaN();
    }
    if (min && v < scalar_as<W>(*min)) v = scalar_as<W>(*min);
    if (max && v > scalar_as<W>(*max)) v = scalar_as<W>(*max);
    return v;
  });
}

// max(x, 0), NaN kept (relu is clamp_min(x, 0) in PyTorch).
Tensor relu_values(std::string_view op, const Tensor& self) {
  require_dtype(op, self, kReal);
  return map_unary<Domain::Real>(op, self, self.dtype(), self.dtype(),
                                 [](auto v) -> decltype(v) { return is_nan(v) || v > 0 ? v : 0; });
}

// ---- out= ----

// An out= kernel writes the result into `out`, converting its dtype when `same_dtype` is false
// (PyTorch resizes an out of another shape; this reference requires the result's shape).
void check_out(std::string_view op, const Tensor& result_meta, const Tensor& out, bool same_dtype) {
  OPCONFORM_CHECK(std::ranges::equal(out.sizes(), result_meta.sizes()), ErrorCode::kInvalidArgument, op,
                  ": argument 'out' has shape ", shape_string(out.sizes()), " but the result has shape ",
                  shape_string(result_meta.sizes()), " (this reference does not resize out)");
  OPCONFORM_CHECK(!same_dtype || out.dtype() == result_meta.dtype(), ErrorCode::kInvalidArgument, op,
                  ": argument 'out' has dtype ", name(out.dtype()), " but the result has dtype ",
                  name(result_meta.dtype()));
  OPCONFORM_CHECK(out.device() == result_meta.device(), ErrorCode::kInvalidArgument, op, ": argument 'out' is on ",
                  out.device().to_string(), " but the result is on ", result_meta.device().to_string());
}

// ---- formulas ----

// where(cond, g, 0)
Tensor keep_where(const Ops& ops, const Tensor& cond, const Tensor& g) { return ops.where(cond, g, ops.scalar_like(0, g)); }
Tensor compare(const Ops& ops, std::string_view op, const Tensor& x, const Scalar& s) { return ops.tensor(op, {x, s}); }
Tensor logical_and(const Ops& ops, const Tensor& a, const Tensor& b) { return ops.tensor("aten::logical_and", {a, b}); }

Bound as_bound(const IValue& v) { return v.is_none() ? Bound() : Bound(v.to_scalar()); }

// setup_context that saves the tensor inputs and outputs and keeps the other arguments.
void save_inputs_and_arguments(autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
  save_inputs_and_outputs(ctx, inputs, outputs);
  save_arguments(ctx, inputs);
}
Bound bound_arg(const autograd::AutogradContext& ctx, size_t i) { return as_bound(saved_argument(ctx, i)); }

// d/dx clamp(x, min, max) = 1 where min <= x <= max (the subgradient 1 at the bounds, as PyTorch).
Tensor clamp_backward(const Ops& ops, const Tensor& g, const Tensor& x, const Bound& min, const Bound& max) {
  std::optional<Tensor> inside;
  if (min) inside = compare(ops, "aten::ge.Scalar", x, *min);
  if (max) {
    Tensor below = compare(ops, "aten::le.Scalar", x, *max);
    inside = inside ? logical_and(ops, *inside, below) : below;
  }
  return keep_where(ops, *inside, g);
}

// ---- softmax ----

// Softmax or log-softmax of every slice along `dim`, each read in float64: with m the slice's
// maximum (NaN if any element is NaN), y = exp(x - m) / sum exp(x - m), or its logarithm.
// The output is contiguous (PyTorch's layout for these ops).
Tensor softmax_values(const Tensor& self, int64_t dim, bool log) {
  const std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  const int64_t n = self.dim() == 0 ? 1 : sizes[dim];
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < self.dim(); ++d) inner *= sizes[d];
  const int64_t outer = n == 0 || inner == 0 ? 0 : self.numel() / (n * inner);
  std::vector<double> x = self.to_vector<double>(), y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < n; ++k) m = std::isnan(x[at(k)]) || x[at(k)] > m ? x[at(k)] : m;
      if (std::isnan(m)) {
        for (int64_t k = 0; k < n; ++k) y[at(k)] = m;
        continue;
      }
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(x[at(k)] - m);
      for (int64_t k = 0; k < n; ++k) {
        const double shifted = x[at(k)] - m;
        y[at(k)] = log ? shifted - std::log(sum) : std::exp(shifted) / sum;
      }
    }
  }
  return from_vector<double>(y, sizes).to(self.dtype());
}

// Validates a softmax call; returns the wrapped dim.
int64_t softmax_dim(std::string_view op, const Tensor& self, int64_t dim, bool half_to_float) {
  require_dtype(op, self, kFloating);
  OPCONFORM_CHECK(!half_to_float, ErrorCode::kNotImplemented, op,
                  ": argument 'half_to_float' is true; conversion from half to float is not supported on CPU");
  return wrap_dim(dim, self.dim(), op);
}

// vmap of softmax-like ops (one tensor, a dim, a flag): the batch goes first and dim shifts by one.
VmapRule softmax_vmap_rule(Registry& registry, std::string op) {
  return [ops = Ops(registry), op](const VmapInfo& info, const Stack& inputs,
                                   const std::vector<std::optional<int64_t>>& in_dims) {
    Tensor x = move_batch_dim(inputs[0].to_tensor(), in_dims[0], 0, info.batch_size);
    const int64_t logical_rank = x.dim() - 1;
    const int64_t dim = wrap_dim(inputs[1].to_int(), logical_rank, op);
    Tensor y;
    if (logical_rank == 0) {  // a 0-d sample: one slice of size 1
      Tensor column = ops.unsqueeze(x, 1);
      y = ops.view(ops.tensor(op, {column, IValue(int64_t{1}), inputs[2]}), {info.batch_size});
    } else {
      y = ops.tensor(op, {x, IValue(dim + 1), inputs[2]});
    }
    return std::make_pair(Stack{IValue(y)}, std::vector<std::optional<int64_t>>{int64_t{0}});
  };
}

// vmap of clamp.Tensor: the elementwise rule on inputs first cast to the result dtype of the
// *logical* tensors (a batched 0-d bound is dimensioned physically, which would change promotion).
VmapRule promoting_vmap_rule(Registry& registry, std::string op) {
  return [ops = Ops(registry), inner = elementwise_vmap_rule(registry, op)](
             const VmapInfo& info, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
    std::vector<Tensor> logical;  // one-element stand-ins of each logical rank and dtype
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].is_tensor()) continue;
      const Tensor& t = inputs[i].to_tensor();
      logical.push_back(empty(std::vector<int64_t>(t.dim() - (in_dims[i] ? 1 : 0), 1), TensorOptions(t.dtype())));
    }
    const DType rt = result_type(logical);
    Stack cast = inputs;
    for (auto& v : cast)
      if (v.is_tensor()) v = IValue(ops.to(v.to_tensor(), rt));
    return inner(info, cast, in_dims);
  };
}

// ---- sample builders ----

// A bound for clamp-like ops: an int, a float or a bool Scalar valid for a tensor of dtype d
// (unsigned tensors get non-negative ints; `promote` false keeps integer tensors integral).
IValue draw_bound(SampleDraw& draw, DType d, bool promote) {
  const bool may_be_float = is_floating(d) || promote;
  switch (draw.integer(0, may_be_float ? 2 : 1)) {
    case 0: return IValue(draw.integer(d == DType::UInt8 ? 0 : -5, 5));
    case 1: return IValue(draw.coin());
    default: return IValue(draw.real(-5, 5));
  }
}

// self, min, max with at least one bound.
Stack draw_clamp_args(SampleDraw& draw, bool mutable_self) {
  const DType d = draw.dtype();
  const bool promote = !mutable_self;  // an in-place clamp may not change self's dtype
  Tensor self = draw.tensor(draw.shape(0, 4), d, {}, mutable_self);
  const int64_t which = draw.integer(0, 2);  // 0: min only, 1: max only, 2: both
  IValue min = which != 1 ? draw_bound(draw, d, promote) : IValue();
  IValue max = which != 0 ? draw_bound(draw, d, promote) : IValue();
  // min == max makes clamp constant, where PyTorch's formula (1 at x == min == max) is no
  // derivative: keep the bounds apart (min > max stays: then max wins everywhere).
  if (which == 2 && min.to_scalar().to_double() == max.to_scalar().to_double())
    max = IValue(static_cast<int64_t>(min.to_scalar().to_double()) + 1);
  return {IValue(self), min, max};
}

// self, dim, half_to_float=false (true is an error on CPU).
Stack draw_softmax_args(SampleDraw& draw) {
  Tensor self = draw.tensor(draw.shape(0, 4), draw.dtype());
  return {IValue(self), IValue(draw_dim(draw, self.dim())), IValue(false)};
}

// A scalar parameter in [lo, hi], never NaN: a NaN parameter in the branch where() does not pick
// still poisons that branch's gradient (0 * NaN), as in PyTorch.
ArgConstraint scalar_in(double lo, double hi) {
  ArgConstraint c;
  c.values.min = lo;
  c.values.max = hi;
  c.values.allow_nan = false;
  return c;
}


const std::string kFamily = "activation";

// relu and its in-place / out= overloads.
void register_relu(Library& lib) {
  Registry& r = lib.registry();
  auto relu_backward = [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
    const Tensor result = ctx.saved_tensors().back();  // relu' = 1 where the result is > 0
    return {keep_where(ops, compare(ops, "aten::gt.Scalar", result, 0), g[0])};
  };
  auto save_result = [](autograd::AutogradContext& ctx, const Stack&, const Stack& outputs) {
    ctx.save_for_backward({outputs[0].to_tensor()});
  };
  {
    OpBuilder b(lib, "aten::relu(Tensor self) -> Tensor", kFamily, "max(x, 0), NaN kept");
    const std::string name = b.name();
    b.cpu([name](const Tensor& self) { return relu_values(name, self); })
        .fake([name](const Tensor& self) {
          require_dtype(name, self, kReal);
          return empty_elementwise({self}, self.dtype(), name);
        })
        .autograd(relu_backward, save_result)
        .vmap(elementwise_vmap_rule(r, name))
        .dtypes(kReal);
  }
  {
    OpBuilder b(lib, "aten::relu_(Tensor(a!) self) -> Tensor(a!)", kFamily, "relu in place", {Tag::inplace});
    const std::string name = b.name();
    b.cpu([name](const Tensor& self) {
       self.copy_(relu_values(name, self));
       return self;
     })
        .fake([name](const Tensor& self) {
          require_dtype(name, self, kReal);
          return self;
        })
        .autograd(relu_backward, save_result)
        .dtypes(kReal);
  }
  {
    OpBuilder b(lib, "aten::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", kFamily,
                "relu into out (any out dtype: the result is copied, as PyTorch's generated out= kernel)", {Tag::out});
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Tensor& out) {
       Tensor result = relu_values(name, self);
       check_out(name, result, out, /*same_dtype=*/false);
       out.copy_(result);
       return out;
     })
        .fake([name](const Tensor& self, const Tensor& out) {
          require_dtype(name, self, kReal);
          check_out(name, empty_elementwise({self}, self.dtype(), name), out, false);
          return out;
        })
        .samples([](SampleDraw& draw) {
          const DType d = draw.dtype();
          const auto shape = draw.shape(0, 4);
          Tensor self = draw.tensor(shape, d);
          return Stack{IValue(self), IValue(draw.tensor(shape, draw.coin(20) ? DType::Float64 : d, {}, true))};
        })
        .dtypes(kReal);
  }
}

// gelu.
void register_gelu(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::gelu(Tensor self, *, str approximate=\"none\") -> Tensor", kFamily,
                "x * Phi(x) (approximate='tanh': 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))))");
    const std::string name = b.name();
    auto check = [name](const Tensor& self, const std::string& approximate) {
      require_dtype(name, self, kFloating);
      OPCONFORM_CHECK(approximate == "none" || approximate == "tanh", ErrorCode::kInvalidArgument, name,
                      ": argument 'approximate' must be 'none' or 'tanh', got '", approximate, "'");
      return approximate == "tanh";
    };
    b.cpu([name, check](const Tensor& self, const std::string& approximate) {
       const bool tanh_form = check(self, approximate);
       return map_unary<Domain::FloatReal>(name, self, self.dtype(), self.dtype(), [tanh_form](double x) {
         if (tanh_form) {
           const double k = std::sqrt(2 / std::numbers::pi);
           return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
         }
         return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2));
       });
     })
        .fake([name, check](const Tensor& self, const std::string& approximate) {
          check(self, approximate);
          return empty_elementwise({self}, self.dtype(), name);
        })
        .autograd(
            [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
              const Tensor x = ctx.saved_tensors()[0];
              Tensor slope;
              if (saved_argument(ctx, 1).to_string_ref() == "tanh") {
                // u = k (x + c x^3), y = x (1 + tanh u) / 2:  y' = (1 + t)/2 + x (1 - t^2) k (1 + 3c x^2) / 2
                const double k = std::sqrt(2 / std::numbers::pi), c = 0.044715;
                Tensor x2 = ops.mul(x, x);
                Tensor t = ops.tensor("aten::tanh", {ops.mul(ops.add(ops.mul(ops.mul(x2, x), c), x), k)});
                Tensor dt = ops.add(ops.neg(ops.mul(t, t)), 1);
                Tensor du = ops.mul(ops.add(ops.mul(x2, 3 * c), 1), k);
                slope = ops.add(ops.mul(ops.add(t, 1), 0.5), ops.mul(ops.mul(ops.mul(x, dt), du), 0.5));
              } else {
                // y' = Phi(x) + x phi(x)
                Tensor cdf = ops.mul(ops.add(ops.tensor("aten::erf", {ops.mul(x, 1 / std::numbers::sqrt2)}), 1), 0.5);
                Tensor pdf = ops.mul(ops.tensor("aten::exp", {ops.mul(ops.mul(x, x), -0.5)}),
                                     1 / std::sqrt(2 * std::numbers::pi));
                slope = ops.add(cdf, ops.mul(x, pdf));
              }
              return {ops.mul(g[0], slope), Tensor()};
            },
            save_inputs_and_arguments)
        .vmap(elementwise_vmap_rule(r, name))
        .samples([](SampleDraw& draw) {
          Tensor self = draw.tensor(draw.shape(0, 4), draw.dtype());
          return Stack{IValue(self), IValue(std::string(draw.coin() ? "tanh" : "none"))};
        })
        .dtypes(kFloating);
  }
}

// leaky_relu.
void register_leaky_relu(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", kFamily,
                "x if x > 0 else negative_slope * x");
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Scalar& slope) {
       require_dtype(name, self, kFloating);
       const double s = slope.to_double();
       return map_unary<Domain::FloatReal>(name, self, self.dtype(), self.dtype(),
                                           [s](double x) { return x > 0 ? x : x * s; });
     })
        .fake([name](const Tensor& self, const Scalar&) {
          require_dtype(name, self, kFloating);
          return empty_elementwise({self}, self.dtype(), name);
        })
        .autograd(
            [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
              const Tensor x = ctx.saved_tensors()[0];
              const Scalar slope = saved_argument(ctx, 1).to_scalar();
              return {ops.where(compare(ops, "aten::gt.Scalar", x, 0), g[0], ops.mul(g[0], slope)), Tensor()};
            },
            save_inputs_and_arguments)
        .vmap(elementwise_vmap_rule(r, name))
        .constraints(InputConstraints().arg("negative_slope", scalar_in(-2, 2)))
        .dtypes(kFloating);
  }
}

// hardtanh.
void register_hardtanh(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor", kFamily,
                "clamp(x, min_val, max_val) in self's dtype (integer tensors: the bounds truncated to integers)");
    const std::string name = b.name();
    // PyTorch's hardtanh: no promotion; integer tensors take the bounds as integers, and an
    // unsigned tensor needs min_val 0 <= max_val.
    auto bounds = [name](const Tensor& self, const Scalar& lo, const Scalar& hi) {
      OPCONFORM_CHECK(self.dtype() != DType::Bool, ErrorCode::kNotImplemented, name,
                      ": argument 'self' is bool, which hardtanh does not support");
      require_dtype(name, self, kReal);
      if (is_floating(self.dtype())) {
        check_scalar_fits(name, "min_val", lo, self.dtype());
        check_scalar_fits(name, "max_val", hi, self.dtype());
        return std::make_pair(lo, hi);
      }
      for (const auto& [bound, arg] : {std::pair{lo, "min_val"}, std::pair{hi, "max_val"}}) {
        const double v = bound.to_double();  // truncated to an integer below
        OPCONFORM_CHECK(std::abs(v) < 9.2e18, ErrorCode::kInvalidArgument, name, ": argument '", arg, "' (", v,
                        ") cannot be converted to an integer without overflow");
      }
      const Scalar ilo(lo.to_int()), ihi(hi.to_int());
      OPCONFORM_CHECK(self.dtype() != DType::UInt8 || (ilo.to_int() == 0 && ihi.to_int() >= 0),
                      ErrorCode::kInvalidArgument, name,
                      ": arguments 'min_val' and 'max_val' must be 0 and >= 0 for an unsigned tensor");
      check_scalar_fits(name, "min_val", ilo, self.dtype());
      check_scalar_fits(name, "max_val", ihi, self.dtype());
      return std::make_pair(ilo, ihi);
    };
    b.cpu([name, bounds](const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
       auto [lo, hi] = bounds(self, min_val, max_val);
       return clamp_values(name, self, lo, hi, self.dtype());
     })
        .fake([name, bounds](const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
          bounds(self, min_val, max_val);
          return empty_elementwise({self}, self.dtype(), name);
        })
        .autograd(
            [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
              // 1 strictly inside (min_val, max_val), as PyTorch's hardtanh_backward
              const Tensor x = ctx.saved_tensors()[0];
              Tensor inside = logical_and(ops, compare(ops, "aten::gt.Scalar", x, *bound_arg(ctx, 1)),
                                          compare(ops, "aten::lt.Scalar", x, *bound_arg(ctx, 2)));
              return {keep_where(ops, inside, g[0]), Tensor(), Tensor()};
            },
            save_inputs_and_arguments)
        .vmap(elementwise_vmap_rule(r, name))
        .samples([](SampleDraw& draw) {
          const DType d = draw.dtype();
          Tensor self = draw.tensor(draw.shape(0, 4), d);
          if (d == DType::UInt8) return Stack{IValue(self), IValue(int64_t{0}), IValue(draw.integer(0, 5))};
          return Stack{IValue(self), draw_bound(draw, d, true), draw_bound(draw, d, true)};
        })
        .dtypes(kReal);
  }
}

// elu.
void register_elu(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor", kFamily,
                "scale * x if x > 0 else scale * alpha * (exp(input_scale * x) - 1)");
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale) {
       require_dtype(name, self, kFloating);
       const double a = alpha.to_double(), s = scale.to_double(), is = input_scale.to_double();
       return map_unary<Domain::FloatReal>(name, self, self.dtype(), self.dtype(), [a, s, is](double x) {
         return x <= 0 ? std::expm1(x * is) * a * s : x * s;
       });
     })
        .fake([name](const Tensor& self, const Scalar&, const Scalar&, const Scalar&) {
          require_dtype(name, self, kFloating);
          return empty_elementwise({self}, self.dtype(), name);
        })
        .autograd(
            [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
              const Tensor x = ctx.saved_tensors()[0];
              const double a = saved_argument(ctx, 1).to_scalar().to_double(),
                           s = saved_argument(ctx, 2).to_scalar().to_double(),
                           is = saved_argument(ctx, 3).to_scalar().to_double();
              Tensor negative = ops.mul(ops.mul(g[0], ops.tensor("aten::exp", {ops.mul(x, is)})), a * s * is);
              return {ops.where(compare(ops, "aten::le.Scalar", x, 0), negative, ops.mul(g[0], s)), Tensor(), Tensor(),
                      Tensor()};
            },
            save_inputs_and_arguments)
        .vmap(elementwise_vmap_rule(r, name))
        .constraints(InputConstraints()
                         .arg("alpha", scalar_in(-2, 2))
                         .arg("scale", scalar_in(-2, 2))
                         .arg("input_scale", scalar_in(-2, 2)))
        .dtypes(kFloating);
  }
}

// clamp with scalar bounds, in place, out=.
void register_clamp_scalar(Library& lib) {
  Registry& r = lib.registry();
  auto clamp_formula = [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
    return {clamp_backward(ops, g[0], ctx.saved_tensors()[0], bound_arg(ctx, 1), bound_arg(ctx, 2)), Tensor(), Tensor()};
  };
  {
    OpBuilder b(lib, "aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", kFamily,
                "min(max(x, min), max); integer tensors promote with the bounds; NaN kept");
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Bound& min, const Bound& max) {
       return clamp_values(name, self, min, max, clamp_result_dtype(name, self, min, max));
     })
        .fake([name](const Tensor& self, const Bound& min, const Bound& max) {
          return empty_elementwise({self}, clamp_result_dtype(name, self, min, max), name);
        })
        .autograd(clamp_formula, save_inputs_and_arguments)
        .vmap(elementwise_vmap_rule(r, name))
        .samples([](SampleDraw& draw) { return draw_clamp_args(draw, false); })
        .dtypes(kReal);
  }
  // clamp_'s formula reads self from before the write.
  auto clamp_inplace_setup = [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&,
                                const Tensor& original) {
    ctx.save_for_backward({original});
    save_arguments(ctx, inputs);
  };
  {
    OpBuilder b(lib, "aten::clamp_(Tensor(a!) self, Scalar? min=None, Scalar? max=None) -> Tensor(a!)", kFamily,
                "clamp in place (the bounds may not promote self's dtype)", {Tag::inplace});
    const std::string name = b.name();
    auto check = [name](const Tensor& self, const Bound& min, const Bound& max) {
      const DType rt = clamp_result_dtype(name, self, min, max);
      OPCONFORM_CHECK(rt == self.dtype(), ErrorCode::kInvalidArgument, name, ": the result type ", ::opconform::name(rt),
                      " can't be cast to the dtype of argument 'self' (", ::opconform::name(self.dtype()), ")");
    };
    b.cpu([name, check](const Tensor& self, const Bound& min, const Bound& max) {
       check(self, min, max);
       self.copy_(clamp_values(name, self, min, max, self.dtype()));
       return self;
     })
        .fake([check](const Tensor& self, const Bound& min, const Bound& max) {
          check(self, min, max);
          return self;
        });
    b.autograd_kernel(inplace_autograd_kernel(r, clamp_formula, clamp_inplace_setup));
    b.samples([](SampleDraw& draw) { return draw_clamp_args(draw, true); })
        .dtypes(kReal);
  }
  {
    OpBuilder b(lib, "aten::clamp.out(Tensor self, Scalar? min=None, Scalar? max=None, *, Tensor(a!) out) -> Tensor(a!)",
                kFamily, "clamp into out (out must have the result's dtype, as PyTorch's structured kernel)", {Tag::out});
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Bound& min, const Bound& max, const Tensor& out) {
       Tensor result = clamp_values(name, self, min, max, clamp_result_dtype(name, self, min, max));
       check_out(name, result, out, /*same_dtype=*/true);
       out.copy_(result);
       return out;
     })
        .fake([name](const Tensor& self, const Bound& min, const Bound& max, const Tensor& out) {
          check_out(name, empty_elementwise({self}, clamp_result_dtype(name, self, min, max), name), out, true);
          return out;
        })
        .samples([name](SampleDraw& draw) {
          Stack args = draw_clamp_args(draw, false);
          const Tensor& self = args[0].to_tensor();
          const DType rt = clamp_result_dtype(name, self, as_bound(args[1]), as_bound(args[2]));
          args.push_back(IValue(draw.tensor(std::vector<int64_t>(self.sizes().begin(), self.sizes().end()), rt, {}, true)));
          return args;
        })
        .dtypes(kReal);
  }
}

// clamp with tensor bounds.
void register_clamp_tensor(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", kFamily,
                "min(max(x, min), max) elementwise; self, min and max broadcast and promote together");
    const std::string name = b.name();
    auto check = [name](const Tensor& self, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
      OPCONFORM_CHECK(min || max, ErrorCode::kInvalidArgument, name,
                      ": at least one of 'min' or 'max' must not be None");
      std::vector<Tensor> all{self};
      for (const auto& [t, arg] : {std::pair{min, "min"}, std::pair{max, "max"}}) {
        if (!t) continue;
        OPCONFORM_CHECK(!is_complex(t->dtype()), ErrorCode::kNotImplemented, name, ": argument '", arg,
                        "' is complex, which clamp does not support");
        all.push_back(*t);
      }
      OPCONFORM_CHECK(!is_complex(self.dtype()), ErrorCode::kNotImplemented, name,
                      ": argument 'self' is complex, which clamp does not support");
      const DType rt = result_type(all);
      OPCONFORM_CHECK(rt != DType::Bool, ErrorCode::kNotImplemented, name,
                      ": arguments 'self', 'min' and 'max' promote to bool, which clamp does not support");
      return std::make_pair(all, rt);
    };
    b.cpu([name, check](const Tensor& self, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
       auto [all, rt] = check(self, min, max);
       // NaN anywhere gives NaN; a missing bound does not bind.
       auto lower = [](auto x, auto lo) { return is_nan(x) || is_nan(lo) ? lo + x : (x < lo ? lo : x); };
       auto upper = [](auto x, auto hi) { return is_nan(x) || is_nan(hi) ? hi + x : (x > hi ? hi : x); };
       if (min && max) {
         return map_elements<Domain::Real, 3>(name, {self, *min, *max}, rt, rt,
                                              [=](auto x, auto lo, auto hi) { return upper(lower(x, lo), hi); });
       }
       if (min) return map_binary<Domain::Real>(name, self, *min, rt, rt, lower);
       return map_binary<Domain::Real>(name, self, *max, rt, rt, upper);
     })
        .fake([name, check](const Tensor& self, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
          auto [all, rt] = check(self, min, max);
          return empty_elementwise(all, rt, name);
        })
        .autograd(
            [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
              // self: 1 where min <= x <= max; min: where x < min (and min < max); max: where
              // x > max (or max < min, when max wins everywhere) — PyTorch's clamp_backward_min_max.
              const auto saved = ctx.saved_tensors();
              const bool has_min = ctx.get("has_min").to_bool(), has_max = ctx.get("has_max").to_bool();
              const Tensor& x = saved[0];
              const Tensor lo = has_min ? saved[1] : Tensor(), hi = has_max ? saved[has_min ? 2 : 1] : Tensor();
              auto cmp = [&](std::string_view op, const Tensor& a, const Tensor& b) { return ops.tensor(op, {a, b}); };
              Tensor gx, gmin, gmax;
              if (has_min && has_max) {
                gx = keep_where(ops, logical_and(ops, cmp("aten::ge.Tensor", x, lo), cmp("aten::le.Tensor", x, hi)), g[0]);
                gmin = keep_where(ops, logical_and(ops, cmp("aten::lt.Tensor", x, lo), cmp("aten::lt.Tensor", lo, hi)), g[0]);
                gmax = keep_where(ops, ops.tensor("aten::logical_or", {cmp("aten::gt.Tensor", x, hi), cmp("aten::lt.Tensor", hi, lo)}),
                                  g[0]);
              } else if (has_min) {
                gx = keep_where(ops, cmp("aten::ge.Tensor", x, lo), g[0]);
                gmin = keep_where(ops, cmp("aten::lt.Tensor", x, lo), g[0]);
              } else {
                gx = keep_where(ops, cmp("aten::le.Tensor", x, hi), g[0]);
                gmax = keep_where(ops, cmp("aten::gt.Tensor", x, hi), g[0]);
              }
              auto reduce = [&](size_t arg, const Tensor& grad, const Tensor& like) {
                // In the argument's dtype through a registry op (autograd's own cast is not recorded).
                return ctx.needs_input_grad(arg) && grad.defined() ? ops.to(ops.sum_to(grad, like.sizes()), like.dtype())
                                                                   : Tensor();
              };
              return {reduce(0, gx, x), reduce(1, gmin, lo), reduce(2, gmax, hi)};
            },
            [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) {
              save_tensor_inputs(ctx, inputs, {});
              ctx.set("has_min", IValue(!inputs[1].is_none()));
              ctx.set("has_max", IValue(!inputs[2].is_none()));
            })
        .vmap(promoting_vmap_rule(r, name))
        .samples([](SampleDraw& draw) {
          const DType d = draw.dtype();
          const auto shape = draw.shape(0, 3);
          // A bound broadcasts with self: a suffix of its shape, some sizes 1.
          // With both bounds, min < 0 < max elementwise: min == max makes clamp constant, where
          // PyTorch's formula (1 at x == min == max) is no derivative.
          auto bound = [&](const ValueConstraint& values) {
            const int64_t rank = draw.integer(0, static_cast<int64_t>(shape.size()));
            std::vector<int64_t> sizes(shape.end() - rank, shape.end());
            for (auto& s : sizes)
              if (draw.coin(25)) s = 1;
            return IValue(draw.tensor(sizes, draw.coin(15) ? DType::Float64 : d, values));
          };
          Tensor self = draw.tensor(shape, d);
          const int64_t which = draw.integer(0, 2);
          ValueConstraint below, above;
          if (which == 2) {  // unsigned tensors have no negative values
            below.max = d == DType::UInt8 ? 2 : -1;
            above.min = d == DType::UInt8 ? 3 : 1;
          }
          IValue min = which != 1 ? bound(below) : IValue();
          IValue max = which != 0 ? bound(above) : IValue();
          return Stack{IValue(self), min, max};
        })
        .dtypes(kReal);
  }
}

// softmax, log_softmax.
void register_softmax(Library& lib) {
  Registry& r = lib.registry();
  struct Softmax {
    const char* schema;
    const char* doc;
    bool log;
  };
  for (Softmax op : {Softmax{"aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
                             "exp(x) / sum(exp(x)) along dim (half_to_float: CUDA only, an error here)", false},
                     Softmax{"aten::_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
                             "x - log(sum(exp(x))) along dim (half_to_float: CUDA only, an error here)", true}}) {
    OpBuilder b(lib, op.schema, kFamily, op.doc);
    const std::string name = b.name();
    const bool log = op.log;
    b.cpu([name, log](const Tensor& self, int64_t dim, bool half_to_float) {
       return softmax_values(self, softmax_dim(name, self, dim, half_to_float), log);
     })
        .fake([name](const Tensor& self, int64_t dim, bool half_to_float) {
          softmax_dim(name, self, dim, half_to_float);
          if (self.is_fake() && self.has_symbolic_sizes()) return make_fake_tensor(self.sym_sizes(), self.dtype(), self.device());
          return empty_like(self);
        })
        .autograd(
            [ops = Ops(r), log](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
              const Tensor y = ctx.saved_tensors().back();
              const std::vector<int64_t> dims{wrap_dim(saved_argument(ctx, 1).to_int(), y.dim(), "softmax backward")};
              if (log) {  // g - exp(y) * sum(g)
                return {ops.sub(g[0], ops.mul(ops.tensor("aten::exp", {y}), ops.sum_dims(g[0], dims, true))), Tensor(),
                        Tensor()};
              }
              // y * (g - sum(g * y))
              return {ops.mul(y, ops.sub(g[0], ops.sum_dims(ops.mul(g[0], y), dims, true))), Tensor(), Tensor()};
            },
            save_inputs_and_arguments)
        .vmap(softmax_vmap_rule(r, name))
        .samples(draw_softmax_args)
        .dtypes(kFloating);
  }
}

}  // namespace

void register_activation(Library& lib) {
  register_relu(lib);
  register_gelu(lib);
  register_leaky_relu(lib);
  register_hardtanh(lib);
  register_elu(lib);
  register_clamp_scalar(lib);
  register_clamp_tensor(lib);
  register_softmax(lib);
}

}  // namespace opconform::reference
