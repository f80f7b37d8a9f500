// Elementwise binary operators: arithmetic (add, sub, mul, div, pow, fmod, remainder, atan2,
// maximum, minimum), where, comparisons, logical and bitwise ops, and the in-place / out=
// overloads of add and mul.
//
// Operands are promoted as PyTorch's TensorIterator promotes them (result_type, with Scalars as
// wrapped numbers), broadcast, read in the wide type of the compute dtype (Note [Reference
// arithmetic] in detail/elementwise.h), and the output is laid out by the original tensors
// (empty_elementwise). Formulas are written with registry ops (detail/calls.h), so they are
// differentiable again.
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "opconform/core/autograd.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/reference/detail/calls.h"
#include "opconform/reference/detail/elementwise.h"
#include "opconform/reference/detail/op_builder.h"
#include "opconform/reference/detail/op_support.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using namespace detail;
using opconform::detail::concat;
using Grads = std::vector<Tensor>;

// ---- operands and dtypes ----

// One operand of an elementwise op: a tensor, or a Scalar (a Python number: it takes part in
// promotion as a wrapped number and has no shape).
struct Operand {
  Tensor tensor;
  std::optional<Scalar> scalar;
  Operand(const Tensor& t) : tensor(t) {}
  Operand(const Scalar& s) : scalar(s) {}
  DType dtype() const { return scalar ? scalar_dtype(*scalar) : tensor.dtype(); }
};

std::vector<int64_t> sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

template <size_t N>
std::vector<Tensor> tensors_of(const std::array<Operand, N>& operands) {
  std::vector<Tensor> out;
  for (const auto& o : operands)
    if (!o.scalar) out.push_back(o.tensor);
  return out;
}

template <size_t N>
DType common_dtype(const std::array<Operand, N>& operands) {
  std::vector<Scalar> scalars;
  for (const auto& o : operands)
    if (o.scalar) scalars.push_back(*o.scalar);
  return result_type(tensors_of(operands), scalars);
}

// How an op's result dtype follows the common dtype of its operands.
enum class Result {
  common,    // the common dtype (add, maximum, bitwise_and)
  floating,  // integers and bool become float32 (true division, atan2)
  boolean,   // bool (comparisons, logical ops)
};

// The dtypes of one call: values are computed in `compute` (read in its wide type) and stored as `out`.
struct Plan {
  DType compute;
  DType out;
};

// Broadcasts (errors name the op), promotes, and refuses a compute dtype outside the op's Domain
// — for real and fake kernels alike, and for empty tensors too (as PyTorch's dispatch does).
template <Domain D, size_t N>
Plan plan_for(std::string_view op, const std::array<Operand, N>& promoted, const std::vector<Tensor>& shaped, Result r) {
  broadcast_all(op, shaped);
  const DType common = common_dtype(promoted);
  const DType compute = r == Result::floating ? to_floating(common) : common;
  visit_wide<D>(op, compute, [](auto) {});
  return {compute, r == Result::boolean ? DType::Bool : compute};
}
template <Domain D, size_t N>
Plan plan_for(std::string_view op, const std::array<Operand, N>& operands, Result r) {
  return plan_for<D>(op, operands, tensors_of(operands), r);
}

// How a kernel reads an operand: a tensor cast to the compute dtype (TensorIterator casts its
// inputs to the common dtype); a Scalar as a 0-d tensor, cast to the compute dtype too, except in
// the arithmetic kernels that read CPU scalars at op-math precision (add, sub, mul, div, pow: a
// float Scalar is not rounded to a float16 compute dtype first).
Tensor read_as(const Operand& o, DType compute, bool opmath) {
  if (!o.scalar) return o.tensor.to(compute);
  if (opmath && !is_integral(compute, /*include_bool=*/true)) {
    return scalar_tensor(*o.scalar, TensorOptions(wide_dtype(compute)));
  }
  return wrapped_scalar(*o.scalar, compute);
}

// out[i] = f(operand_0[i], ...) in the wide type, laid out as TensorIterator lays out an output
// of the `layout` tensors (a cast copy of a strided input may have other strides than it).
template <Domain D, size_t N, typename F>
Tensor compute(std::string_view op, const std::array<Operand, N>& operands, const std::vector<Tensor>& layout,
               const Plan& p, bool opmath, F&& f) {
  std::array<Tensor, N> read;
  for (size_t k = 0; k < N; ++k) read[k] = read_as(operands[k], p.compute, opmath);
  Tensor values = map_elements<D, N>(op, read, p.compute, p.out, std::forward<F>(f));
  Tensor out = empty_elementwise(layout, p.out, op);
  if (std::ranges::equal(values.strides(), out.strides())) return values;
  out.copy_(values);
  return out;
}
template <Domain D, size_t N, typename F>
Tensor compute(std::string_view op, const std::array<Operand, N>& operands, const Plan& p, bool opmath, F&& f) {
  return compute<D>(op, operands, tensors_of(operands), p, opmath, std::forward<F>(f));
}

// ---- arithmetic in the wide types ----

// Integer division by zero is an error (PyTorch raises ZeroDivisionError).
void check_divisor(std::string_view op, int64_t b) {
  OPCONFORM_CHECK(b != 0, ErrorCode::kInvalidArgument, op, ": ZeroDivisionError: integer division by zero (argument 'other')");
}
// Truncating integer division and remainder; b == -1 is handled apart (INT64_MIN / -1 traps).
int64_t trunc_div(int64_t a, int64_t b) { return b == -1 ? minus<int64_t>(0, a) : a / b; }
int64_t trunc_mod(int64_t a, int64_t b) { return b == -1 ? 0 : a % b; }
int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = trunc_div(a, b);
  return (a < 0) != (b < 0) && trunc_mod(a, b) != 0 ? q - 1 : q;
}
// PyTorch's floating floor division (Note [Floor Division in Python]): exact through fmod.
double floor_div(double a, double b) {
  if (b == 0) return a / b;
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return std::copysign(0.0, a / b);
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1;
  return floored;
}
// Python's modulo: the result takes the divisor's sign.
int64_t python_mod(int64_t a, int64_t b) {
  int64_t r = trunc_mod(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
double python_mod(double a, double b) {
  double r = std::fmod(a, b);
  return r != 0 && (b < 0) != (r < 0) ? r + b : r;
}

// Integer power by squaring (wrapping); negative exponents as c10's powi: 1 and -1 keep their
// powers, every other base gives 0.
int64_t int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return exp % 2 ? -1 : 1;
    return 0;
  }
  int64_t r = 1;
  for (; exp; exp >>= 1, base = times(base, base))
    if (exp & 1) r = times(r, base);
  return r;
}
template <typename W>
W power(W base, W exp) {
  if constexpr (std::is_same_v<W, int64_t>) return int_pow(base, exp);
  else return std::pow(base, exp);
}
// pow by a Scalar exponent, with PyTorch's special forms (exact for 0, 1, 2, 3; sqrt for 1/2).
template <typename W>
W power_by_scalar(W base, W exp) {
  if constexpr (std::is_same_v<W, int64_t>) {
    return int_pow(base, exp);
  } else {
    if (exp == W(0)) return W(1);
    if (exp == W(1)) return base;
    if (exp == W(2)) return base * base;
    if (exp == W(3)) return base * base * base;
    if (exp == W(0.5)) return std::sqrt(base);
    if (exp == W(-0.5)) return W(1) / std::sqrt(base);
    if (exp == W(-1)) return W(1) / base;
    if (exp == W(-2)) return W(1) / (base * base);
    return std::pow(base, exp);
  }
}

// ---- Scalar helpers ----

bool is_one(const Scalar& s) {
  return s.is_complex() ? s.to<complex128>() == complex128(1) : s.to_double() == 1.0;
}
bool is_zero(const Scalar& s) { return s.is_complex() ? s.to<complex128>() == complex128(0) : s.to_double() == 0.0; }
// s + k, keeping the kind of number (a bool becomes an int, as in Python).
Scalar shifted(const Scalar& s, int64_t k) {
  if (s.is_complex()) return Scalar(s.to<complex128>() + complex128(static_cast<double>(k)));
  if (s.is_floating()) return Scalar(s.to_double() + static_cast<double>(k));
  return Scalar(s.to_int() + k);
}
Scalar negated(const Scalar& s) {
  if (s.is_complex()) return Scalar(-s.to<complex128>());
  if (s.is_floating()) return Scalar(-s.to_double());
  return Scalar(-s.to_int());
}

// ---- checks shared by several ops ----

// PyTorch's alpha_check for add and sub.
void check_alpha(std::string_view op, DType result, const Scalar& alpha) {
  OPCONFORM_CHECK(!alpha.is_bool() || result == DType::Bool, ErrorCode::kInvalidArgument, op,
                  ": a bool 'alpha' is only supported for bool results (the result is ", name(result), ")");
  OPCONFORM_CHECK(is_floating(result) || is_complex(result) || alpha.is_integral() || alpha.is_bool(),
                  ErrorCode::kInvalidArgument, op, ": for integral inputs, argument 'alpha' must not be a floating point ",
                  "number (got ", alpha, ")");
  OPCONFORM_CHECK(is_complex(result) || !alpha.is_complex(), ErrorCode::kInvalidArgument, op,
                  ": for non-complex inputs, argument 'alpha' must not be a complex number (got ", alpha, ")");
}

// PyTorch's sub_check: bool tensors (and bool Scalars) are refused.
void refuse_bool(std::string_view op, const Operand& self, const Operand& other) {
  const bool a = self.dtype() == DType::Bool, b = other.dtype() == DType::Bool;
  OPCONFORM_CHECK(!(a && b), ErrorCode::kInvalidArgument, op, ": subtraction, the `-` operator, with two bool tensors ",
                  "is not supported ('self' and 'other'); use the `^` or `logical_xor()` operator instead");
  OPCONFORM_CHECK(!a && !b, ErrorCode::kInvalidArgument, op, ": subtraction, the `-` operator, with a bool tensor is not ",
                  "supported (argument '", a ? "self" : "other", "'); to invert a mask, use `~` or `logical_not()`");
}

// PyTorch's can_cast: no complex -> real, floating -> integral, or non-bool -> bool.
bool can_cast(DType from, DType to) {
  if (is_complex(from) && !is_complex(to)) return false;
  if (is_floating(from) && is_integral(to)) return false;
  return from == DType::Bool || to != DType::Bool;
}

// A result of `shape` and `dtype` written into `target` (self of an in-place op, out of an out=
// op): it must already have that shape (out= tensors are not resized here: see the report of
// this family) and a dtype the result can be cast to.
void check_target(std::string_view op, std::string_view arg, const Tensor& target, IntArrayRef shape, DType dtype) {
  OPCONFORM_CHECK(can_cast(dtype, target.dtype()), ErrorCode::kInvalidArgument, op, ": result type ", name(dtype),
                  " can't be cast to the desired output type ", name(target.dtype()), " of argument '", arg, "'");
  OPCONFORM_CHECK(std::ranges::equal(target.sizes(), shape), ErrorCode::kInvalidArgument, op, ": argument '", arg,
                  "' has shape ", shape_string(target.sizes()), " but the broadcast shape of the inputs is ",
                  shape_string(shape), (arg == "out" ? " (out= tensors must have the result's shape)" : ""));
  for (int64_t d = 0; d < target.dim(); ++d) {
    OPCONFORM_CHECK(target.stride(d) != 0 || target.size(d) <= 1, ErrorCode::kInvalidArgument, op, ": argument '", arg,
                    "' is written but more than one of its elements refers to a single memory location (stride 0 ",
                    "in dim ", d, "); clone it first");
  }
}

// ---- sample builders ----

// Sizes that broadcast with `full`: a suffix of it with some sizes set to 1.
std::vector<int64_t> broadcast_partner(SampleDraw& draw, const std::vector<int64_t>& full) {
  const auto drop = static_cast<size_t>(draw.integer(0, static_cast<int64_t>(full.size())));
  std::vector<int64_t> out(full.begin() + static_cast<std::ptrdiff_t>(drop), full.end());
  for (auto& s : out)
    if (draw.coin(20)) s = 1;
  return out;
}

// Moves every element with |v| < margin to ±margin (by its sign bit; integers to ±ceil(margin)),
// writing through the tensor's own layout: divisors and singular points stay off zero.
// An expanded (stride 0) tensor is written through the view of its distinct elements.
void keep_off_zero(const Tensor& t, double margin) {
  if (margin <= 0) return;
  if (is_integral(t.dtype(), true)) margin = std::ceil(margin);
  Tensor distinct = t;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0 && t.size(d) > 1) distinct = distinct.narrow(d, 0, 1);
  for_each_index(distinct.sizes(), [&](IntArrayRef index) {
    const Scalar v = distinct.get(index);
    if (is_complex(t.dtype())) {
      if (std::abs(v.to<complex128>()) < margin) distinct.set(index, Scalar(complex128(margin, 0)));
    } else if (const double x = v.to_double(); std::abs(x) < margin) {
      distinct.set(index, Scalar(std::signbit(x) ? -margin : margin));
    }
  });
}

ValueConstraint values_in(std::optional<double> lo, std::optional<double> hi) {
  ValueConstraint v;
  v.min = lo;
  v.max = hi;
  return v;
}

enum class Number : uint8_t { integer, real, boolean, complex };

// A number as the sample's floating dtype holds it: kernels that cast a Scalar to the common
// dtype (fmod, comparisons, ...) then see the value a float64 run sees (dtype_consistency).
Scalar representable(const Scalar& s, DType d) {
  if (!(is_floating(d) || is_complex(d)) || s.is_integral() || s.is_bool()) return s;
  return wrapped_scalar(s, s.is_complex() ? to_complex(to_real(d)) : to_real(d)).item();
}

// A Python number of one of `kinds` (the first is the simplest), in [-span, span]; with a
// margin, |value| >= margin (0 becomes 1 for integers); real ones are sometimes ±inf or NaN.
Scalar draw_number(SampleDraw& draw, const std::vector<Number>& kinds, double span = 5, double margin = 0,
                   bool specials = true) {
  const Number kind = kinds[static_cast<size_t>(draw.integer(0, static_cast<int64_t>(kinds.size()) - 1))];
  auto real = [&] {
    double v = draw.real(-span, span);
    if (std::abs(v) < margin) v = v < 0 ? -margin : margin;
    return v;
  };
  switch (kind) {
    case Number::boolean: return Scalar(margin > 0 || draw.coin());  // a divisor is not False
    case Number::integer: {
      int64_t v = draw.integer(-static_cast<int64_t>(span), static_cast<int64_t>(span));
      return Scalar(v == 0 && margin > 0 ? int64_t{1} : v);
    }
    case Number::complex: return Scalar(complex128(real(), real()));
    case Number::real: break;
  }
  if (specials && margin == 0 && draw.coin(5)) {
    const double special[] = {INFINITY, -INFINITY, NAN};
    return Scalar(special[draw.integer(0, 2)]);
  }
  return Scalar(real());
}

// The numbers a Scalar operand of a sample of dtype d may be: complex ones only for complex
// samples (a complex number would make a real sample's result complex).
std::vector<Number> numbers_for(DType d, bool allow_bool = true, bool allow_real = true) {
  std::vector<Number> kinds{Number::integer};
  if (allow_real) kinds.push_back(Number::real);
  if (allow_bool) kinds.push_back(Number::boolean);
  if (is_complex(d)) kinds.push_back(Number::complex);
  return kinds;
}

// An `alpha` that add / sub accept for a result of dtype `result` (PyTorch's alpha_check).
Scalar draw_alpha(SampleDraw& draw, DType result) {
  if (result == DType::Bool) return draw.coin(70) ? Scalar(true) : Scalar(draw.coin());
  if (is_integral(result)) return draw_number(draw, {Number::integer}, 3);
  return draw_number(draw, is_complex(result) ? std::vector<Number>{Number::integer, Number::real, Number::complex}
                                              : std::vector<Number>{Number::integer, Number::real},
                     3, 0, /*specials=*/false);
}

// What a sample of a binary op holds beyond its two operands.
struct SampleSpec {
  enum class Other : uint8_t { tensor, scalar } other = Other::tensor;
  std::vector<Number> (*scalar_kinds)(DType) = nullptr;  // for a Scalar `other`: numbers_for(d) when null
  bool alpha = false;          // `Scalar alpha` (add, sub)
  bool rounding_mode = false;  // `str? rounding_mode` (div): None, "trunc" or "floor"
  bool in_place = false;       // self is written: it has the result's shape and no stride-0 dims
  bool out = false;            // an `out` tensor of the result's shape
  bool floating_out = false;   // ... and of a floating dtype: integral inputs give float32 (atan2)
  ValueConstraint self_values, other_values;
  double self_margin = 0, other_margin = 0;  // |v| >= margin (keep_off_zero)
  // Floating samples only: the operand of the result's shape is made from the other one so that
  // the op is differentiable at the sample (gradcheck's finite differences need that).
  enum class Relation : uint8_t {
    none,
    offset,  // self - other is at least 0.5 away from 0: no ties (maximum, minimum)
    ratio,   // self / other is at least 0.25 away from an integer: no jumps (rounded division, fmod, remainder)
  } relation = Relation::none;
};

// Rewrites `full` (the operand of the result's shape, not expanded) from `partner` (a tensor that
// broadcasts to it, or a Scalar) per the relation; full_is_self says which side of a ratio it is.
void relate(SampleDraw& draw, SampleSpec::Relation relation, const Tensor& full, const Operand& partner, bool full_is_self) {
  const Tensor t = draw.tensor(sizes_of(full), DType::Float64, values_in(-5, 5));
  Tensor partner_values;
  if (!partner.scalar) {
    keep_off_zero(partner.tensor, 0.5);
    partner_values = partner.tensor.expand(full.sizes());
  }
  for_each_index(full.sizes(), [&](IntArrayRef index) {
    const double p = partner.scalar ? partner.scalar->to_double() : partner_values.get(index).to_double();
    const double v = t.get(index).to_double();
    double value;
    if (relation == SampleSpec::Relation::offset) {
      value = p + (std::abs(v) < 0.5 ? std::copysign(0.5, v) : v);
    } else {
      const double q = std::floor(v) + 0.25 + 0.5 * (v - std::floor(v));  // fractional part in [0.25, 0.75]
      value = full_is_self ? p * q : p / q;
    }
    full.set(index, Scalar(value));
  });
}

// Samples of `op(self, other, ...)` per spec, self of the sample's dtype (one of `dtypes`).
SampleBuilder binary_samples(SampleSpec spec, std::vector<DType> dtypes) {
  return [spec, dtypes](SampleDraw& draw) {
    const DType d = draw.dtype(dtypes);
    const bool scalar_other = spec.other == SampleSpec::Other::scalar;
    const bool related = spec.relation != SampleSpec::Relation::none && is_floating(d);
    std::vector<int64_t> self_shape = draw.shape(0, 4), other_shape = broadcast_partner(draw, self_shape);
    const bool self_full = spec.in_place || scalar_other || !draw.coin(25);
    if (!self_full) std::swap(self_shape, other_shape);
    Tensor self = draw.tensor(self_shape, d, spec.self_values, spec.in_place || (related && self_full));
    keep_off_zero(self, spec.self_margin);
    Stack args{IValue(self)};
    DType result = d;
    if (scalar_other) {
      const Scalar other = representable(
          draw_number(draw, spec.scalar_kinds ? spec.scalar_kinds(d) : numbers_for(d), 5, spec.other_margin), d);
      if (related) relate(draw, spec.relation, self, other, true);
      result = result_type({self}, {other});
      args.emplace_back(other);
    } else {
      Tensor other = draw.tensor(other_shape, d, spec.other_values, related && !self_full);
      keep_off_zero(other, spec.other_margin);
      if (related) relate(draw, spec.relation, self_full ? self : other, self_full ? other : self, self_full);
      args.emplace_back(other);
    }
    if (spec.alpha) args.emplace_back(draw_alpha(draw, result));
    if (spec.rounding_mode) {
      // Bool and complex inputs allow true division only.
      const int64_t mode = is_complex(d) || d == DType::Bool ? 0 : draw.integer(0, 2);
      args.push_back(mode == 0 ? IValue() : IValue(std::string(mode == 1 ? "trunc" : "floor")));
    }
    if (spec.out) {
      // out of the result's dtype: a wider one is cast on the write (unit-tested), but
      // dtype_consistency then compares a float16 computation with float64 tolerances.
      const DType out = spec.floating_out && is_integral(result, /*include_bool=*/true) ? DType::Float32 : result;
      args.emplace_back(draw.tensor(broadcast_shapes(self_shape, other_shape), out, {}, /*mutable_input=*/true));
    }
    return args;
  };
}

// ---- autograd helpers ----

// setup_context: the non-tensor arguments kept (save_arguments: alpha of add is argument 2), the
// sizes of the tensor ones ("sizes0"); with save_values also the tensor arguments (saved in
// order) and, with save_result, the output after them.
autograd::SetupContextFn keep_arguments(bool save_values, bool save_result = false) {
  return [=](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
    save_arguments(ctx, inputs);
    std::vector<Tensor> saved;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].is_tensor()) continue;
      ctx.set("sizes" + std::to_string(i), IValue(sizes_of(inputs[i].to_tensor())));
      saved.push_back(inputs[i].to_tensor());
    }
    if (save_result) saved.push_back(outputs.at(0).to_tensor());
    if (save_values || save_result) ctx.save_for_backward(std::move(saved));
  };
}
std::vector<int64_t> saved_sizes(const autograd::AutogradContext& ctx, size_t i) {
  return ctx.get("sizes" + std::to_string(i)).to<std::vector<int64_t>>();
}
Scalar saved_scalar(const autograd::AutogradContext& ctx, size_t i) { return saved_argument(ctx, i).to_scalar(); }

Tensor scaled(const Ops& ops, const Tensor& t, const Scalar& s) { return is_one(s) ? t : ops.mul(t, s); }
Tensor call_with(const Ops& ops, std::string_view op, const Tensor& a, const IValue& b) { return ops.tensor(op, {a, b}); }
Tensor div_mode(const Ops& ops, const Tensor& a, const Tensor& b, const char* mode) {
  return ops.tensor("aten::div.Tensor_mode", {a, b, IValue(std::string(mode))});
}

// The gradients of a binary op from d/dself and d/dother (each given the incoming gradient,
// called only when that argument needs one), reduced to the arguments' shapes.
using Partial = std::function<Tensor(const Ops&, autograd::AutogradContext&, const Tensor& grad)>;
autograd::BackwardFn binary_backward(Registry& r, size_t num_args, Partial d_self, Partial d_other) {
  return [ops = Ops(r), num_args, d_self, d_other](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
    Grads grads(num_args);
    if (d_self && ctx.needs_input_grad(0)) grads[0] = ops.sum_to(d_self(ops, ctx, g[0]), saved_sizes(ctx, 0));
    if (d_other && ctx.needs_input_grad(1)) grads[1] = ops.sum_to(d_other(ops, ctx, g[0]), saved_sizes(ctx, 1));
    return grads;
  };
}
Tensor saved(autograd::AutogradContext& ctx, size_t i) { return ctx.saved_tensors().at(i); }
// d/dself of self + other and of fmod / remainder: the gradient itself.
Tensor pass_through(const Ops&, autograd::AutogradContext&, const Tensor& g) { return g; }

// ---- registration helpers ----

const std::string kFamily = "elementwise_binary";

// The tensor arguments broadcast together (what the sample builders draw, declared for the table).
InputConstraints broadcasting(std::vector<std::string> names = {"self", "other"}) {
  InputConstraints c;
  for (size_t i = 1; i < names.size(); ++i) c.relate(broadcastable(names[0], names[i]));
  return c;
}

// A dtype rule beyond the Domain (checked by both kernels): pow refuses bool, ...
using PlanRule = void (*)(std::string_view op, const Plan& p);

// The CPU and fake kernels and the vmap rule of `name(A self, B other) -> Tensor` (A, B: Tensor
// or Scalar), whose value is f(a, b) in the wide type.

template <Domain D, typename A, typename B, typename F>
OpBuilder& binary(OpBuilder& b, Result r, F f, bool opmath = false, PlanRule rule = nullptr) {
  const std::string name = b.name();
  auto plan = [=](const std::array<Operand, 2>& operands) {
    const Plan p = plan_for<D>(name, operands, r);
    if (rule) rule(name, p);
    return p;
  };
  b.cpu([=](const A& x, const B& y) {
    const std::array<Operand, 2> operands{Operand(x), Operand(y)};
    return compute<D>(name, operands, plan(operands), opmath, f);
  });
  b.fake([=](const A& x, const B& y) {
    const std::array<Operand, 2> operands{Operand(x), Operand(y)};
    return empty_elementwise(tensors_of(operands), plan(operands).out, name);
  });
  b.vmap(elementwise_vmap_rule(b.registry(), name));
  b.rounding();  // computed in double, rounded once (Note [Reference arithmetic])
  return b;
}

// ---- add, sub ----

Plan plan_add(std::string_view op, const std::array<Operand, 2>& operands, const Scalar& alpha, bool subtract) {
  if (subtract) refuse_bool(op, operands[0], operands[1]);
  const Plan p = plan_for<Domain::All>(op, operands, Result::common);
  check_alpha(op, p.out, alpha);
  return p;
}

// self + alpha * other (sub: self - alpha * other); a bool result takes alpha as a bool.
Tensor add_values(std::string_view op, const Operand& self, const Operand& other, const Scalar& alpha, bool subtract) {
  const std::array<Operand, 2> operands{self, other};
  const Plan p = plan_add(op, operands, alpha, subtract);
  const Scalar a = p.out == DType::Bool ? Scalar(alpha.to<bool>()) : alpha;
  return compute<Domain::All>(op, operands, p, /*opmath=*/true, [&](auto x, auto y) {
    using W = decltype(x);
    const W scaled_y = times(scalar_as<W>(a), y);
    return subtract ? minus(x, scaled_y) : plus(x, scaled_y);
  });
}

template <typename Other>
void define_add_like(Library& lib, const char* schema, const char* doc, bool subtract, const std::vector<DType>& dtypes) {
  OpBuilder b(lib, schema, kFamily, doc, {Tag::pointwise});
  const std::string name = b.name();
  b.cpu([=](const Tensor& self, const Other& other, const Scalar& alpha) {
    return add_values(name, self, other, alpha, subtract);
  });
  b.fake([=](const Tensor& self, const Other& other, const Scalar& alpha) {
    const std::array<Operand, 2> operands{Operand(self), Operand(other)};
    return empty_elementwise(tensors_of(operands), plan_add(name, operands, alpha, subtract).out, name);
  });
  const Partial d_other = [subtract](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
    const Scalar alpha = saved_scalar(ctx, 2);
    return scaled(ops, g, subtract ? negated(alpha) : alpha);
  };
  SampleSpec spec;
  spec.other = std::is_same_v<Other, Scalar> ? SampleSpec::Other::scalar : SampleSpec::Other::tensor;
  if (subtract) spec.scalar_kinds = [](DType d) { return numbers_for(d, /*allow_bool=*/false); };
  spec.alpha = true;
  b.vmap(elementwise_vmap_rule(b.registry(), name))
      .autograd(binary_backward(lib.registry(), 3, pass_through,
                                d_other),
                keep_arguments(false))
      .dtypes(dtypes)
      .samples(binary_samples(spec, dtypes))
      .rounding();  // computed in double, rounded once (Note [Reference arithmetic])
  if constexpr (std::is_same_v<Other, Tensor>) b.constraints(broadcasting());
}

// In-place and out= add: the functional result written into self / out.
void define_add_inplace_and_out(Library& lib) {
  {
    OpBuilder b(lib, "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", kFamily,
                "in-place self += alpha * other", {Tag::inplace});
    const std::string name = b.name();
    auto check = [name](const Tensor& self, const Tensor& other, const Scalar& alpha) {
      const std::array<Operand, 2> operands{Operand(self), Operand(other)};
      check_target(name, "self", self, broadcast_all(name, {self, other}), plan_add(name, operands, alpha, false).out);
    };
    b.cpu([=](const Tensor& self, const Tensor& other, const Scalar& alpha) {
      check(self, other, alpha);
      self.copy_(add_values(name, self, other, alpha, false));  // computed apart: other may alias self
      return self;
    });
    b.fake([=](const Tensor& self, const Tensor& other, const Scalar& alpha) {
      check(self, other, alpha);
      return self;
    });
    SampleSpec spec;
    spec.alpha = spec.in_place = true;
    b.autograd(binary_backward(lib.registry(), 3, pass_through,
                               [](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
                                 return scaled(ops, g, saved_scalar(ctx, 2));
                               }),
               keep_arguments(false))
        .dtypes(kAll)
        .constraints(broadcasting())
        .samples(binary_samples(spec, kAll));
  }
  {
    OpBuilder b(lib, "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)", kFamily,
                "self + alpha * other written into out", {Tag::out});
    const std::string name = b.name();
    auto check = [name](const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
      const std::array<Operand, 2> operands{Operand(self), Operand(other)};
      check_target(name, "out", out, broadcast_all(name, {self, other}), plan_add(name, operands, alpha, false).out);
    };
    b.cpu([=](const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
      check(self, other, alpha, out);
      out.copy_(add_values(name, self, other, alpha, false));
      return out;
    });
    b.fake([=](const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
      check(self, other, alpha, out);
      return out;
    });
    SampleSpec spec;
    spec.alpha = spec.out = true;
    b.dtypes(kAll).constraints(broadcasting()).samples(binary_samples(spec, kAll));
  }
}

// ---- mul ----

Tensor mul_values(std::string_view op, const Operand& self, const Operand& other) {
  const std::array<Operand, 2> operands{self, other};
  return compute<Domain::All>(op, operands, plan_for<Domain::All>(op, operands, Result::common), /*opmath=*/true,
                              [](auto x, auto y) { return times(x, y); });
}

void define_mul_inplace_and_out(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)", kFamily, "in-place self *= other",
                {Tag::inplace});
    const std::string name = b.name();
    auto check = [name](const Tensor& self, const Tensor& other) {
      const std::array<Operand, 2> operands{Operand(self), Operand(other)};
      check_target(name, "self", self, broadcast_all(name, {self, other}),
                   plan_for<Domain::All>(name, operands, Result::common).out);
    };
    b.cpu([=](const Tensor& self, const Tensor& other) {
      check(self, other);
      self.copy_(mul_values(name, self, other));
      return self;
    });
    b.fake([=](const Tensor& self, const Tensor& other) {
      check(self, other);
      return self;
    });
    SampleSpec spec;
    spec.in_place = true;
    b.dtypes(kAll).constraints(broadcasting()).samples(binary_samples(spec, kAll));
    // The formula: d/dself = grad * other, d/dother = grad * (self before the call).
    auto backward = binary_backward(
        r, 2, [](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) { return ops.mul(g, saved(ctx, 0)); },
        [](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) { return ops.mul(g, saved(ctx, 1)); });
    auto setup = [keep = keep_arguments(false)](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs,
                                                const Tensor& original) {
      keep(ctx, inputs, outputs);
      ctx.save_for_backward({inputs[1].to_tensor(), original});
    };
    b.autograd_kernel(inplace_autograd_kernel(r, backward, setup));
  }
  {
    OpBuilder b(lib, "aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", kFamily,
                "self * other written into out", {Tag::out});
    const std::string name = b.name();
    auto check = [name](const Tensor& self, const Tensor& other, const Tensor& out) {
      const std::array<Operand, 2> operands{Operand(self), Operand(other)};
      check_target(name, "out", out, broadcast_all(name, {self, other}),
                   plan_for<Domain::All>(name, operands, Result::common).out);
    };
    b.cpu([=](const Tensor& self, const Tensor& other, const Tensor& out) {
      check(self, other, out);
      out.copy_(mul_values(name, self, other));
      return out;
    });
    b.fake([=](const Tensor& self, const Tensor& other, const Tensor& out) {
      check(self, other, out);
      return out;
    });
    SampleSpec spec;
    spec.out = true;
    b.dtypes(kAll).constraints(broadcasting()).samples(binary_samples(spec, kAll));
  }
}

// ---- div ----

enum class Rounding : uint8_t { none, trunc, floor };

Rounding parse_rounding(std::string_view op, const std::optional<std::string>& mode) {
  if (!mode) return Rounding::none;
  if (*mode == "trunc") return Rounding::trunc;
  if (*mode == "floor") return Rounding::floor;
  throw Error(ErrorCode::kInvalidArgument, concat(op, ": argument 'rounding_mode' must be None, 'trunc' or 'floor', but got '",
                                                  *mode, "'"));
}

// True division computes in floating point (integers and bool promote to float32); trunc and
// floor keep the common dtype and refuse bool and complex.
Plan plan_div(std::string_view op, const std::array<Operand, 2>& operands, Rounding mode) {
  if (mode == Rounding::none) return plan_for<Domain::Floating>(op, operands, Result::floating);
  const Plan p = plan_for<Domain::Real>(op, operands, Result::common);
  OPCONFORM_CHECK(p.compute != DType::Bool, ErrorCode::kNotImplemented, op, ": rounding_mode '",
                  mode == Rounding::trunc ? "trunc" : "floor", "' does not support dtype bool");
  return p;
}

// The quotient trunc sees in PyTorch's CPU kernel, std::trunc(a / b) in the compute dtype: the
// quotient is rounded to it first (a float32 one to float; a float16/bfloat16 one to float, then
// to the dtype, as their operator/ does). bf16 -6.3125 / 1.0546875 = -5.985 rounds to -6: -6.
double dtype_quotient(DType compute, double quotient) {
  switch (compute) {
    case DType::Float32: return static_cast<float>(quotient);
    case DType::Float16: return static_cast<float>(Half(static_cast<float>(quotient)));
    case DType::BFloat16: return static_cast<float>(BFloat16(static_cast<float>(quotient)));
    default: return quotient;
  }
}

Tensor div_values(std::string_view op, const Operand& self, const Operand& other, Rounding mode) {
  const std::array<Operand, 2> operands{self, other};
  const Plan p = plan_div(op, operands, mode);
  return compute<Domain::All>(op, operands, p, /*opmath=*/mode == Rounding::none, [&](auto a, auto b) {
    using W = decltype(a);
    if constexpr (std::is_same_v<W, int64_t>) {
      check_divisor(op, b);
      return mode == Rounding::trunc ? trunc_div(a, b) : floor_div(a, b);
    } else if constexpr (std::is_same_v<W, double>) {
      if (mode == Rounding::none) return a / b;
      return mode == Rounding::trunc ? std::trunc(dtype_quotient(p.compute, a / b)) : floor_div(a, b);
    } else {
      return a / b;  // complex: true division only (plan_div)
    }
  });
}

// d(self / other) = grad / other, -grad * (self / other) / other; rounded divisions have zero gradients.
void div_autograd(OpBuilder& b, Registry& r, size_t num_args, bool other_is_scalar, bool has_mode) {
  auto rounded = [has_mode](autograd::AutogradContext& ctx) {
    return has_mode && !saved_argument(ctx, 2).is_none();
  };
  Partial d_self = [=](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
    if (rounded(ctx)) return ops.zeros_like(g);
    return other_is_scalar ? call_with(ops, "aten::div.Scalar", g, IValue(saved_scalar(ctx, 1))) : ops.div(g, saved(ctx, 1));
  };
  Partial d_other = [=](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
    if (rounded(ctx)) return ops.zeros_like(g);
    const Tensor self = saved(ctx, 0), other = saved(ctx, 1);
    return ops.neg(ops.mul(g, ops.div(ops.div(self, other), other)));
  };
  b.autograd(binary_backward(r, num_args, d_self, other_is_scalar ? Partial() : d_other), keep_arguments(true));
}

// ---- pow ----

// PyTorch's pow.Tensor_Scalar meta check.
void check_integer_power(std::string_view op, DType base, const Scalar& exponent) {
  OPCONFORM_CHECK(!(is_integral(base, true) && (exponent.is_integral() || exponent.is_bool()) && exponent.to_int() < 0),
                  ErrorCode::kInvalidArgument, op, ": integers to negative integer powers are not allowed (argument ",
                  "'exponent' is ", exponent, " for an integral 'self')");
}

// A contiguous tensor of t's sizes (symbolic when t is a fake with symbolic sizes): the layout
// template of an output PyTorch allocates contiguously.
Tensor contiguous_layout(const Tensor& t) {
  if (t.is_fake() && t.has_symbolic_sizes()) return make_fake_tensor(t.sym_sizes(), t.dtype(), t.device());
  return empty_strided(t.sizes(), contiguous_strides(t.sizes()), t.options());
}

// pow.Tensor_Scalar lays out a unary op of self cast to the result dtype (a strided, non-dense
// self becomes contiguous by the cast, as Tensor::to does).
Tensor layout_of_cast(const Tensor& self, DType dtype) {
  if (self.dtype() == dtype || self.is_non_overlapping_and_dense()) return self;
  return contiguous_layout(self);
}

// ---- where ----

Plan plan_where(std::string_view op, const Tensor& condition, const std::array<Operand, 2>& values) {
  OPCONFORM_CHECK(condition.dtype() == DType::Bool, ErrorCode::kInvalidArgument, op, ": argument 'condition' must be a ",
                  "bool tensor, but got dtype ", name(condition.dtype()));
  return plan_for<Domain::All>(op, values, {condition, values[0].tensor, values[1].tensor}, Result::common);
}

SampleBuilder where_samples() {
  return [](SampleDraw& draw) {
    const DType d = draw.dtype(kAll);
    const std::vector<int64_t> full = draw.shape(0, 4);
    std::array<std::vector<int64_t>, 3> shapes{full, broadcast_partner(draw, full), broadcast_partner(draw, full)};
    // Any of the three may be the one of full shape.
    std::swap(shapes[0], shapes[static_cast<size_t>(draw.integer(0, 2))]);
    return Stack{IValue(draw.tensor(shapes[0], DType::Bool)), IValue(draw.tensor(shapes[1], d)),
                 IValue(draw.tensor(shapes[2], d))};
  };
}


// pow.Tensor_Tensor and pow.Scalar compute in bool for bool operands only: PyTorch has no bool pow.
void refuse_bool_compute(std::string_view op, const Plan& p) {
  OPCONFORM_CHECK(p.compute != DType::Bool, ErrorCode::kNotImplemented, op, ": dtype bool is not supported");
}

// A Scalar equal to the number 1 (a bool never is, as c10's Scalar::equal).
bool is_number_one(const Scalar& s) { return !s.is_bool() && is_one(s); }

enum class PowForm : uint8_t { tensor_tensor, tensor_scalar, scalar_tensor };

// pow's samples: real floating bases are positive (a negative base has no real non-integer
// power, and log(base) is in the exponent's gradient) unless the exponent is an integer Scalar;
// bases stay off zero (negative powers of 0); exponents lie in [-3, 3] ([-2, 4] for integers);
// an integral self has a non-negative integer Scalar exponent (a negative one is an error).
SampleBuilder pow_samples(PowForm form, std::vector<DType> dtypes) {
  return [form, dtypes](SampleDraw& draw) {
    const DType d = draw.dtype(dtypes);
    const bool floating = is_floating(d), integral = is_integral(d, true);
    const ValueConstraint exponents = integral ? values_in(-2, 4) : values_in(-3, 3);
    const ValueConstraint bases = floating ? values_in(0.25, 4) : values_in(-4, 4);
    if (form == PowForm::scalar_tensor) {
      const Scalar base = draw.coin() ? Scalar(draw.integer(1, 4)) : representable(Scalar(draw.real(0.25, 4)), d);
      return Stack{IValue(base), IValue(draw.tensor(draw.shape(0, 4), d, exponents))};
    }
    std::vector<int64_t> self_shape = draw.shape(0, 4);
    if (form == PowForm::tensor_tensor) {
      std::vector<int64_t> exponent_shape = broadcast_partner(draw, self_shape);
      if (draw.coin(25)) std::swap(self_shape, exponent_shape);
      const Tensor self = draw.tensor(self_shape, d, bases);
      if (!integral) keep_off_zero(self, 0.25);
      return Stack{IValue(self), IValue(draw.tensor(exponent_shape, d, exponents))};
    }
    Scalar exponent;
    if (integral) exponent = draw.coin(70) ? Scalar(draw.integer(0, 4)) : representable(Scalar(draw.real(-3, 3)), DType::Float32);
    else if (draw.coin(20)) exponent = Scalar(draw.coin() ? 0.5 : -0.5);
    else exponent = representable(draw_number(draw, numbers_for(d, /*allow_bool=*/false), 3, 0, false), d);
    const Tensor self = draw.tensor(self_shape, d, exponent.is_integral() ? values_in(-4, 4) : bases);
    if (!integral) keep_off_zero(self, 0.25);
    return Stack{IValue(self), IValue(exponent)};
  };
}

// log of a Scalar base in the exponent's gradient (complex when the exponent is).
Scalar log_of(const Scalar& base, bool complex) {
  if (complex || base.is_complex()) return Scalar(std::log(base.to<complex128>()));
  return Scalar(std::log(base.to_double()));
}

// maximum / minimum: NaN propagates; otherwise (a < b) ? b : a as std::max (minimum: std::min).
template <typename W>
W max_of(W a, W b) {
  if constexpr (std::is_same_v<W, double>) {
    if (a != a || b != b) return std::numeric_limits<double>::quiet_NaN();
  }
  return a < b ? b : a;
}
template <typename W>
W min_of(W a, W b) {
  if constexpr (std::is_same_v<W, double>) {
    if (a != a || b != b) return std::numeric_limits<double>::quiet_NaN();
  }
  return b < a ? b : a;
}

// The gradient maximum / minimum send to one argument: grad where it won, half of it on ties,
// 0 where `loses` (self < other for maximum's self, ...).
Tensor extremum_partial(const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g, const char* loses) {
  const Tensor self = saved(ctx, 0), other = saved(ctx, 1);
  const Tensor tied = ops.where(ops.tensor("aten::eq.Tensor", {self, other}), ops.mul(g, Scalar(0.5)), g);
  return ops.where(ops.tensor(loses, {self, other}), ops.scalar_like(0, g), tied);
}

// fmod and remainder: integer division by zero is an error; a remainder takes the dividend's
// sign (fmod) or the divisor's (remainder).
template <bool python>
auto modulo(std::string op) {
  return [op](auto a, auto b) {
    if constexpr (std::is_same_v<decltype(a), int64_t>) {
      check_divisor(op, b);
      return python ? python_mod(a, b) : trunc_mod(a, b);
    } else {
      return python ? python_mod(a, b) : std::fmod(a, b);
    }
  };
}

// A comparison / logical / bitwise op of the Tensor and the Scalar overload.
template <Domain D, typename F>
void define_tensor_and_scalar(Library& lib, const std::string& op, const std::string& doc, Result r, F f,
                              const std::vector<DType>& dtypes, std::vector<Number> (*scalar_kinds)(DType) = nullptr) {
  {
    OpBuilder b(lib, "aten::" + op + ".Tensor(Tensor self, Tensor other) -> Tensor", kFamily, doc, {Tag::pointwise});
    binary<D, Tensor, Tensor>(b, r, f);
    b.dtypes(dtypes).constraints(broadcasting());
  }
  {
    OpBuilder b(lib, "aten::" + op + ".Scalar(Tensor self, Scalar other) -> Tensor", kFamily, doc + ", for a number other",
                {Tag::pointwise});
    binary<D, Tensor, Scalar>(b, r, f);
    SampleSpec spec;
    spec.other = SampleSpec::Other::scalar;
    spec.scalar_kinds = scalar_kinds;
    b.dtypes(dtypes).samples(binary_samples(spec, dtypes));
  }
}

const std::vector<DType> kBoolAndReal = concat_dtypes({DType::Bool}, kReal);
// The least |divisor| div, fmod and remainder samples draw (keep_off_zero).
constexpr double kDivisorMargin = 0.5;

// add, sub, mul, div (other families' formulas need these first).
void register_arithmetic(Library& lib) {
  Registry& r = lib.registry();
  define_add_like<Tensor>(lib, "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                          "self + alpha * other", false, kAll);
  define_add_like<Scalar>(lib, "aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
                          "self + alpha * other for a number other", false, kAll);
  define_add_like<Tensor>(lib, "aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                          "self - alpha * other (not for bool)", true, kRealAndComplex);
  define_add_like<Scalar>(lib, "aten::sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
                          "self - alpha * other for a number other (not for bool)", true, kRealAndComplex);
  define_add_inplace_and_out(lib);

  {
    OpBuilder b(lib, "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor", kFamily, "self * other (bool: logical and)",
                {Tag::pointwise});
    binary<Domain::All, Tensor, Tensor>(b, Result::common, [](auto x, auto y) { return times(x, y); }, true);
    b.dtypes(kAll)
        .constraints(broadcasting())
        .autograd(binary_backward(
                      r, 2, [](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) { return ops.mul(g, saved(ctx, 1)); },
                      [](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) { return ops.mul(g, saved(ctx, 0)); }),
                  keep_arguments(true));
  }
  {
    OpBuilder b(lib, "aten::mul.Scalar(Tensor self, Scalar other) -> Tensor", kFamily, "self * other for a number other",
                {Tag::pointwise});
    binary<Domain::All, Tensor, Scalar>(b, Result::common, [](auto x, auto y) { return times(x, y); }, true);
    SampleSpec spec;
    spec.other = SampleSpec::Other::scalar;
    b.dtypes(kAll)
        .samples(binary_samples(spec, kAll))
        .autograd(binary_backward(r, 2,
                                  [](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
                                    return ops.mul(g, saved_scalar(ctx, 1));
                                  },
                                  nullptr),
                  keep_arguments(false));
  }
  define_mul_inplace_and_out(lib);

  // Divisors stay off zero in samples: integer division by zero is an error, and gradcheck needs
  // a neighbourhood without the pole.
  {
    OpBuilder b(lib, "aten::div.Tensor(Tensor self, Tensor other) -> Tensor", kFamily,
                "true division self / other (integers and bool give float32)", {Tag::pointwise});
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Tensor& other) { return div_values(name, self, other, Rounding::none); });
    b.fake([name](const Tensor& self, const Tensor& other) {
      return empty_elementwise({self, other}, plan_div(name, {Operand(self), Operand(other)}, Rounding::none).out, name);
    });
    SampleSpec spec;
    spec.other_margin = kDivisorMargin;
    b.vmap(elementwise_vmap_rule(r, name)).dtypes(kAll).constraints(broadcasting()).samples(binary_samples(spec, kAll));
    div_autograd(b, r, 2, false, false);
  }
  {
    OpBuilder b(lib, "aten::div.Scalar(Tensor self, Scalar other) -> Tensor", kFamily,
                "true division self / other for a number other", {Tag::pointwise});
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Scalar& other) { return div_values(name, self, other, Rounding::none); });
    b.fake([name](const Tensor& self, const Scalar& other) {
      return empty_elementwise({self}, plan_div(name, {Operand(self), Operand(other)}, Rounding::none).out, name);
    });
    SampleSpec spec;
    spec.other = SampleSpec::Other::scalar;
    spec.other_margin = kDivisorMargin;
    b.vmap(elementwise_vmap_rule(r, name)).dtypes(kAll).samples(binary_samples(spec, kAll));
    div_autograd(b, r, 2, true, false);
  }
  {
    OpBuilder b(lib, "aten::div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor", kFamily,
                "self / other rounded: None (true division), 'trunc' (toward zero) or 'floor'", {Tag::pointwise});
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Tensor& other, const std::optional<std::string>& mode) {
      return div_values(name, self, other, parse_rounding(name, mode));
    });
    b.fake([name](const Tensor& self, const Tensor& other, const std::optional<std::string>& mode) {
      return empty_elementwise({self, other}, plan_div(name, {Operand(self), Operand(other)}, parse_rounding(name, mode)).out,
                               name);
    });
    SampleSpec spec;
    spec.rounding_mode = true;
    spec.other_margin = kDivisorMargin;
    spec.relation = SampleSpec::Relation::ratio;
    b.vmap(elementwise_vmap_rule(r, name)).dtypes(kAll).constraints(broadcasting()).samples(binary_samples(spec, kAll));
    div_autograd(b, r, 3, false, true);
  }
  {
    OpBuilder b(lib, "aten::div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor", kFamily,
                "self / other rounded (None, 'trunc' or 'floor') for a number other", {Tag::pointwise});
    const std::string name = b.name();
    b.cpu([name](const Tensor& self, const Scalar& other, const std::optional<std::string>& mode) {
      return div_values(name, self, other, parse_rounding(name, mode));
    });
    b.fake([name](const Tensor& self, const Scalar& other, const std::optional<std::string>& mode) {
      return empty_elementwise({self}, plan_div(name, {Operand(self), Operand(other)}, parse_rounding(name, mode)).out, name);
    });
    SampleSpec spec;
    spec.other = SampleSpec::Other::scalar;
    spec.rounding_mode = true;
    spec.other_margin = kDivisorMargin;
    spec.relation = SampleSpec::Relation::ratio;
    b.vmap(elementwise_vmap_rule(r, name)).dtypes(kAll).samples(binary_samples(spec, kAll));
    div_autograd(b, r, 3, true, true);
  }
}

// where.
void register_where(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::where.self(Tensor condition, Tensor self, Tensor other) -> Tensor", kFamily,
                "condition ? self : other, elementwise (self and other promoted)", {Tag::pointwise});
    const std::string name = b.name();
    b.cpu([name](const Tensor& condition, const Tensor& self, const Tensor& other) {
      const std::array<Operand, 2> values{Operand(self), Operand(other)};
      const Plan p = plan_where(name, condition, values);
      return compute<Domain::All>(name, std::array<Operand, 3>{Operand(condition), values[0], values[1]},
                                  {condition, self, other}, p, false,
                                  [](auto c, auto x, auto y) { return c != decltype(c)(0) ? x : y; });
    });
    b.fake([name](const Tensor& condition, const Tensor& self, const Tensor& other) {
      return empty_elementwise({condition, self, other}, plan_where(name, condition, {Operand(self), Operand(other)}).out, name);
    });
    // d/dself = where(condition, grad, 0), d/dother = where(condition, 0, grad).
    auto backward = [ops = Ops(r)](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
      Grads grads(3);
      const Tensor condition = saved(ctx, 0), zero = ops.scalar_like(0, g[0]);
      if (ctx.needs_input_grad(1)) grads[1] = ops.sum_to(ops.where(condition, g[0], zero), saved_sizes(ctx, 1));
      if (ctx.needs_input_grad(2)) grads[2] = ops.sum_to(ops.where(condition, zero, g[0]), saved_sizes(ctx, 2));
      return grads;
    };
    b.vmap(elementwise_vmap_rule(r, name)).dtypes(kAll).constraints(broadcasting({"condition", "self", "other"})).samples(where_samples()).autograd(backward, keep_arguments(true));
  }
}

// pow.
void register_pow(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", kFamily,
                "self ** exponent (integers: exact, negative exponents as c10's powi)", {Tag::pointwise});
    binary<Domain::All, Tensor, Tensor>(b, Result::common, [](auto x, auto y) { return power(x, y); }, false,
                                        refuse_bool_compute);
    // d/dself = grad * exponent * self^(exponent - 1), with self^(exponent - 1) taken as 0 where
    // self == 0 and exponent == 0 (PyTorch masks the whole term where exponent == 0: the same
    // values, but then the derivative of the gradient by the exponent is lost there);
    // d/dexponent = grad * where(self == 0 & exponent >= 0, 0, result * log(self)).
    Partial d_self = [](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
      const Tensor self = saved(ctx, 0), exponent = saved(ctx, 1);
      const Tensor power = ops.tensor("aten::pow.Tensor_Tensor", {self, ops.add(exponent, Scalar(int64_t{-1}))});
      const Tensor undefined = ops.tensor("aten::logical_and", {call_with(ops, "aten::eq.Scalar", self, IValue(int64_t{0})),
                                                               call_with(ops, "aten::eq.Scalar", exponent, IValue(int64_t{0}))});
      return ops.mul(g, ops.mul(exponent, ops.where(undefined, ops.scalar_like(0, power), power)));
    };
    Partial d_exponent = [](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
      const Tensor self = saved(ctx, 0), exponent = saved(ctx, 1), result = saved(ctx, 2);
      const Tensor at_zero = ops.tensor("aten::logical_and", {call_with(ops, "aten::eq.Scalar", self, IValue(int64_t{0})),
                                                             call_with(ops, "aten::ge.Scalar", exponent, IValue(int64_t{0}))});
      const Tensor log_self = ops.tensor("aten::log", {self});
      return ops.mul(g, ops.where(at_zero, ops.scalar_like(0, g), ops.mul(result, log_self)));
    };
    b.dtypes(kRealAndComplex)
        .constraints(broadcasting({"self", "exponent"}))
        .samples(pow_samples(PowForm::tensor_tensor, kRealAndComplex))
        .autograd(binary_backward(r, 2, d_self, d_exponent), keep_arguments(true, true));
  }
  {
    OpBuilder b(lib, "aten::pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", kFamily,
                "self ** exponent for a number exponent (integral self: no negative integer exponent)", {Tag::pointwise});
    const std::string name = b.name();
    auto plan = [name](const Tensor& self, const Scalar& exponent) {
      check_integer_power(name, self.dtype(), exponent);
      const Plan p = plan_for<Domain::All>(name, std::array<Operand, 2>{Operand(self), Operand(exponent)}, Result::common);
      refuse_bool_compute(name, p);
      return p;
    };
    b.cpu([name, plan](const Tensor& self, const Scalar& exponent) {
      const Plan p = plan(self, exponent);
      return compute<Domain::All>(name, std::array<Operand, 2>{Operand(self), Operand(exponent)},
                                  {layout_of_cast(self, p.out)}, p, /*opmath=*/true,
                                  [](auto x, auto e) { return power_by_scalar(x, e); });
    });
    b.fake([name, plan](const Tensor& self, const Scalar& exponent) {
      const Plan p = plan(self, exponent);
      return empty_elementwise({layout_of_cast(self, p.out)}, p.out, name);
    });
    // d/dself = grad * exponent * self^(exponent - 1) (0 for exponent 0).
    Partial d_self = [](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
      const Scalar exponent = saved_scalar(ctx, 1);
      if (is_zero(exponent)) return ops.zeros_like(g);
      const Tensor power = call_with(ops, "aten::pow.Tensor_Scalar", saved(ctx, 0), IValue(shifted(exponent, -1)));
      return ops.mul(g, ops.mul(power, exponent));
    };
    b.vmap(elementwise_vmap_rule(r, name))
        .dtypes(kAll)
        .samples(pow_samples(PowForm::tensor_scalar, kAll))
        .autograd(binary_backward(r, 2, d_self, nullptr), keep_arguments(true));
  }
  {
    OpBuilder b(lib, "aten::pow.Scalar(Scalar self, Tensor exponent) -> Tensor", kFamily,
                "self ** exponent for a number base", {Tag::pointwise});
    const std::string name = b.name();
    auto plan = [name](const Scalar& self, const Tensor& exponent) {
      const Plan p = plan_for<Domain::All>(name, std::array<Operand, 2>{Operand(self), Operand(exponent)}, Result::common);
      refuse_bool_compute(name, p);
      return p;
    };
    // A base of 1 gives ones for every exponent, NaN included (complex: 1+0j, where pow(1, nan)
    // would be nan+nanj), laid out contiguously: PyTorch's pow_Scalar_out fills a result resized
    // like exponent with 1 and never computes a power.
    auto layout = [](const Scalar& self, const Tensor& exponent) {
      return is_number_one(self) ? contiguous_layout(exponent) : exponent;
    };
    b.cpu([name, plan, layout](const Scalar& self, const Tensor& exponent) {
      const Plan p = plan(self, exponent);
      const bool one = is_number_one(self);
      return compute<Domain::All>(name, std::array<Operand, 2>{Operand(self), Operand(exponent)}, {layout(self, exponent)}, p,
                                  /*opmath=*/false, [one](auto x, auto e) { return one ? decltype(x)(1) : power(x, e); });
    });
    b.fake([name, plan, layout](const Scalar& self, const Tensor& exponent) {
      return empty_elementwise({layout(self, exponent)}, plan(self, exponent).out, name);
    });
    // d/dexponent = grad * result * log(self) (0 where self == 0 and exponent >= 0; 0 for a base
    // of 1, where result is 1 and log(1) is 0, NaN exponents included).
    Partial d_exponent = [](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
      const Scalar base = saved_scalar(ctx, 0);
      const Tensor exponent = saved(ctx, 0), result = saved(ctx, 1);
      const Tensor slope = ops.mul(result, log_of(base, is_complex(exponent.dtype())));
      if (!is_zero(base)) return ops.mul(g, slope);
      return ops.mul(g, ops.where(call_with(ops, "aten::ge.Scalar", exponent, IValue(int64_t{0})), ops.scalar_like(0, g), slope));
    };
    b.vmap(elementwise_vmap_rule(r, name))
        .dtypes(kAll)
        .samples(pow_samples(PowForm::scalar_tensor, kAll))
        .autograd(binary_backward(r, 2, nullptr, d_exponent), keep_arguments(true, true));
  }
}

// maximum, minimum, atan2.
void register_extrema(Library& lib) {
  Registry& r = lib.registry();
  SampleSpec no_ties;  // ties are where the gradient jumps
  no_ties.relation = SampleSpec::Relation::offset;
  for (bool largest : {true, false}) {
    OpBuilder b(lib,
                largest ? "aten::maximum(Tensor self, Tensor other) -> Tensor" : "aten::minimum(Tensor self, Tensor other) -> Tensor",
                kFamily, largest ? "larger of self and other (NaN propagates)" : "smaller of self and other (NaN propagates)",
                {Tag::pointwise});
    if (largest) binary<Domain::Real, Tensor, Tensor>(b, Result::common, [](auto x, auto y) { return max_of(x, y); });
    else binary<Domain::Real, Tensor, Tensor>(b, Result::common, [](auto x, auto y) { return min_of(x, y); });
    // Where an argument loses it gets no gradient (maximum: self where self < other, other where self > other).
    const char* self_loses = largest ? "aten::lt.Tensor" : "aten::gt.Tensor";
    const char* other_loses = largest ? "aten::gt.Tensor" : "aten::lt.Tensor";
    b.dtypes(kBoolAndReal)
        .constraints(broadcasting())
        .samples(binary_samples(no_ties, kBoolAndReal))
        .autograd(binary_backward(
                      r, 2,
                      [self_loses](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
                        return extremum_partial(ops, ctx, g, self_loses);
                      },
                      [other_loses](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
                        return extremum_partial(ops, ctx, g, other_loses);
                      }),
                  keep_arguments(true));
  }
  {
    OpBuilder b(lib, "aten::atan2(Tensor self, Tensor other) -> Tensor", kFamily,
                "angle of the point (other, self): atan(self / other) in the right quadrant", {Tag::pointwise});
    binary<Domain::FloatReal, Tensor, Tensor>(b, Result::floating, [](double y, double x) { return std::atan2(y, x); });
    // d/dself = grad * other / (self^2 + other^2), d/dother = -grad * self / (self^2 + other^2).
    auto radius2 = [](const Ops& ops, const Tensor& y, const Tensor& x) { return ops.add(ops.mul(y, y), ops.mul(x, x)); };
    Partial d_self = [radius2](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
      const Tensor y = saved(ctx, 0), x = saved(ctx, 1);
      return ops.div(ops.mul(g, x), radius2(ops, y, x));
    };
    Partial d_other = [radius2](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
      const Tensor y = saved(ctx, 0), x = saved(ctx, 1);
      return ops.neg(ops.div(ops.mul(g, y), radius2(ops, y, x)));
    };
    // Both stay off zero: atan2 is singular at the origin and jumps across the negative x axis.
    SampleSpec spec;
    spec.self_margin = spec.other_margin = 0.5;
    const auto dtypes = concat_dtypes(kFloating, kIntegralAndBool);
    b.dtypes(dtypes).constraints(broadcasting()).samples(binary_samples(spec, dtypes));
    b.autograd(binary_backward(r, 2, d_self, d_other), keep_arguments(true));
  }
  {
    OpBuilder b(lib, "aten::atan2.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", kFamily,
                "atan2(self, other) written into out", {Tag::out});
    const std::string name = b.name();
    auto plan = [name](const Tensor& self, const Tensor& other) {
      const std::array<Operand, 2> operands{Operand(self), Operand(other)};
      return plan_for<Domain::FloatReal>(name, operands, Result::floating);
    };
    auto check = [=](const Tensor& self, const Tensor& other, const Tensor& out) {
      check_target(name, "out", out, broadcast_all(name, {self, other}), plan(self, other).out);
    };
    b.cpu([=](const Tensor& self, const Tensor& other, const Tensor& out) {
      check(self, other, out);
      const std::array<Operand, 2> operands{Operand(self), Operand(other)};
      out.copy_(compute<Domain::FloatReal>(name, operands, plan(self, other), /*opmath=*/false,
                                           [](double y, double x) { return std::atan2(y, x); }));
      return out;
    });
    b.fake([=](const Tensor& self, const Tensor& other, const Tensor& out) {
      check(self, other, out);
      return out;
    });
    SampleSpec spec;
    spec.out = spec.floating_out = true;
    spec.self_margin = spec.other_margin = 0.5;
    const auto dtypes = concat_dtypes(kFloating, kIntegralAndBool);
    b.dtypes(dtypes).constraints(broadcasting()).samples(binary_samples(spec, dtypes));
  }
}

// fmod, remainder.
void register_fmod_remainder(Library& lib) {
  Registry& r = lib.registry();
  struct Modulo {
    const char* op;
    const char* doc;
    bool python;              // remainder: the divisor's sign
    const char* quotient;     // the rounding of the quotient in d/dother = -grad * quotient
  };
  for (Modulo m : {Modulo{"fmod", "remainder of self / other with the sign of self (C's fmod)", false, "trunc"},
                   Modulo{"remainder", "remainder of self / other with the sign of other (Python's %)", true, "floor"}}) {
    SampleSpec spec;
    spec.other_margin = kDivisorMargin;
    spec.relation = SampleSpec::Relation::ratio;
    spec.scalar_kinds = [](DType d) { return numbers_for(d, /*allow_bool=*/false); };
    const std::string quotient = m.quotient;
    {
      OpBuilder b(lib, std::string("aten::") + m.op + ".Tensor(Tensor self, Tensor other) -> Tensor", kFamily, m.doc,
                  {Tag::pointwise});
      if (m.python) binary<Domain::Real, Tensor, Tensor>(b, Result::common, modulo<true>(b.name()), false, refuse_bool_compute);
      else binary<Domain::Real, Tensor, Tensor>(b, Result::common, modulo<false>(b.name()), false, refuse_bool_compute);
      Partial d_other = [quotient](const Ops& ops, autograd::AutogradContext& ctx, const Tensor& g) {
        return ops.neg(ops.mul(g, div_mode(ops, saved(ctx, 0), saved(ctx, 1), quotient.c_str())));
      };
      b.dtypes(kReal).constraints(broadcasting()).samples(binary_samples(spec, kReal));
      b.autograd(binary_backward(r, 2, pass_through, d_other), keep_arguments(true));
    }
    {
      OpBuilder b(lib, std::string("aten::") + m.op + ".Scalar(Tensor self, Scalar other) -> Tensor", kFamily,
                  std::string(m.doc) + ", for a number other", {Tag::pointwise});
      if (m.python) binary<Domain::Real, Tensor, Scalar>(b, Result::common, modulo<true>(b.name()), false, refuse_bool_compute);
      else binary<Domain::Real, Tensor, Scalar>(b, Result::common, modulo<false>(b.name()), false, refuse_bool_compute);
      SampleSpec scalar_spec = spec;
      scalar_spec.other = SampleSpec::Other::scalar;
      b.dtypes(kReal).samples(binary_samples(scalar_spec, kReal)).autograd(binary_backward(r, 2, pass_through, nullptr),
                                                                           keep_arguments(false));
    }
  }
}

// comparisons (bool results, not differentiable).
void register_comparisons(Library& lib) {
  define_tensor_and_scalar<Domain::All>(lib, "eq", "self == other, elementwise", Result::boolean,
                                        [](auto x, auto y) { return x == y; }, kAll);
  define_tensor_and_scalar<Domain::All>(lib, "ne", "self != other, elementwise", Result::boolean,
                                        [](auto x, auto y) { return x != y; }, kAll);
  define_tensor_and_scalar<Domain::Real>(lib, "lt", "self < other, elementwise", Result::boolean,
                                         [](auto x, auto y) { return x < y; }, kBoolAndReal);
  define_tensor_and_scalar<Domain::Real>(lib, "le", "self <= other, elementwise", Result::boolean,
                                         [](auto x, auto y) { return x <= y; }, kBoolAndReal);
  define_tensor_and_scalar<Domain::Real>(lib, "gt", "self > other, elementwise", Result::boolean,
                                         [](auto x, auto y) { return x > y; }, kBoolAndReal);
  define_tensor_and_scalar<Domain::Real>(lib, "ge", "self >= other, elementwise", Result::boolean,
                                         [](auto x, auto y) { return x >= y; }, kBoolAndReal);
}

// logical (bool results: nonzero is true).
void register_logical(Library& lib) {
  struct Logical {
    const char* schema;
    const char* doc;
    bool (*f)(bool, bool);
  };
  for (Logical op : {Logical{"aten::logical_and(Tensor self, Tensor other) -> Tensor", "self != 0 and other != 0",
                             [](bool x, bool y) { return x && y; }},
                     Logical{"aten::logical_or(Tensor self, Tensor other) -> Tensor", "self != 0 or other != 0",
                             [](bool x, bool y) { return x || y; }},
                     Logical{"aten::logical_xor(Tensor self, Tensor other) -> Tensor", "(self != 0) != (other != 0)",
                             [](bool x, bool y) { return x != y; }}}) {
    OpBuilder b(lib, op.schema, kFamily, op.doc, {Tag::pointwise});
    binary<Domain::All, Tensor, Tensor>(b, Result::boolean, [f = op.f](auto x, auto y) {
      using W = decltype(x);
      return f(x != W(0), y != W(0));
    });
    b.dtypes(kAll).constraints(broadcasting());
  }
}

// bitwise (integral and bool only).
void register_bitwise(Library& lib) {
  const auto integer_numbers = [](DType d) { return numbers_for(d, /*allow_bool=*/true, /*allow_real=*/false); };
  define_tensor_and_scalar<Domain::Integral>(lib, "bitwise_and", "self & other (bool: logical and)", Result::common,
                                             [](int64_t x, int64_t y) { return x & y; }, kIntegralAndBool, integer_numbers);
  define_tensor_and_scalar<Domain::Integral>(lib, "bitwise_or", "self | other (bool: logical or)", Result::common,
                                             [](int64_t x, int64_t y) { return x | y; }, kIntegralAndBool, integer_numbers);
  define_tensor_and_scalar<Domain::Integral>(lib, "bitwise_xor", "self ^ other (bool: logical xor)", Result::common,
                                             [](int64_t x, int64_t y) { return x ^ y; }, kIntegralAndBool, integer_numbers);
}

}  // namespace

void register_elementwise_binary(Library& lib) {
  register_arithmetic(lib);
  register_where(lib);
  register_pow(lib);
  register_extrema(lib);
  register_fmod_remainder(lib);
  register_comparisons(lib);
  register_logical(lib);
  register_bitwise(lib);
}

}  // namespace opconform::reference
