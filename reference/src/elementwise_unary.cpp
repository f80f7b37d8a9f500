// Elementwise unary operators: one tensor in, one tensor out, value by value.
// Kernels compute in the wide type (Note [Reference arithmetic] in detail/elementwise.h);
// formulas are written with registry ops (detail/calls.h) so that they are differentiable again.
#include <cmath>
#include <complex>
#include <numbers>

#include "opconform/reference/detail/calls.h"
#include "opconform/reference/detail/elementwise.h"
#include "opconform/reference/detail/op_builder.h"
#include "opconform/reference/detail/op_support.h"
#include "opconform/reference/reference.h"

namespace opconform::reference {
namespace {

using namespace detail;
using Grads = std::vector<Tensor>;

// How an op's output dtype follows its input's.
enum class Result {
  same,        // the input's dtype (neg, abs of reals, ceil)
  floating,    // integers and bool become float32 (exp, sin)
  boolean,     // bool (isnan, logical_not)
  real_of,     // complex becomes its real dtype, the rest unchanged (abs)
};

DType compute_dtype(Result r, DType in) { return r == Result::floating ? to_floating(in) : in; }
DType result_dtype(Result r, DType in) {
  switch (r) {
    case Result::same: return in;
    case Result::floating: return to_floating(in);
    case Result::boolean: return DType::Bool;
    case Result::real_of: return is_complex(in) ? to_real(in) : in;
  }
  return in;
}

// Registers the CPU and fake kernels of a unary op computing f in the wide type.
template <Domain D, typename F>
OpBuilder& unary(OpBuilder& b, Result result, F f) {
  const std::string name = b.name();
  b.cpu([name, result, f](const Tensor& self) {
    return map_unary<D>(name, self, compute_dtype(result, self.dtype()), result_dtype(result, self.dtype()), f);
  });
  b.fake([name, result](const Tensor& self) {
    // Checked like the real kernel, so fake and real runs fail alike on a dtype the op refuses.
    visit_wide<D>(name, compute_dtype(result, self.dtype()), [](auto) {});
    return empty_elementwise({self}, result_dtype(result, self.dtype()), name);
  });
  b.vmap(elementwise_vmap_rule(b.registry(), name));
  b.rounding();  // computed in double, rounded once (Note [Reference arithmetic])
  return b;
}

ArgConstraint values_in(std::optional<double> lo, std::optional<double> hi, bool positive = false) {
  ArgConstraint c;
  c.values.min = lo;
  c.values.max = hi;
  c.values.positive = positive;
  return c;
}

// A backward of the form grad * df(x, result), df built from registry ops.
template <typename DF>
autograd::BackwardFn chain(Registry& registry, DF df) {
  return [ops = Ops(registry), df](autograd::AutogradContext& ctx, const Grads& g) -> Grads {
    auto saved = ctx.saved_tensors();  // [self, result]
    return {ops.mul(g[0], df(ops, saved[0], saved[1]))};
  };
}

// Floating ops on complex values use the principal branches of <complex>.
template <typename W>
W sigmoid_of(W v) {
  return W(1) / (W(1) + std::exp(-v));
}

// Floating functions of integer and bool inputs too (their results are float32, as PyTorch).
const std::vector<DType> kFloatInputs = concat_dtypes(kFloatingAndComplex, {DType::Int64, DType::Bool});
const std::vector<DType> kRealFloatInputs = concat_dtypes(kFloating, {DType::Int64, DType::Bool});

const std::string kFamily = "elementwise_unary";

// sign and magnitude.
void register_sign_magnitude(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::abs(Tensor self) -> Tensor", kFamily, "absolute value |x| (complex: modulus, real result)");
    unary<Domain::All>(b, Result::real_of, [](auto v) {
      if constexpr (is_complex_v<decltype(v)>) return std::abs(v);
      else return v < 0 ? minus(decltype(v)(0), v) : v;
    });
    b.dtypes(kRealAndComplex).autograd(
        chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) { return ops.tensor("aten::sign", {x}); }), save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::neg(Tensor self) -> Tensor", kFamily, "negation -x");
    // Integers wrap (-INT64_MIN is INT64_MIN), as PyTorch.
    unary<Domain::All>(b, Result::same, [](auto v) { return minus(decltype(v)(0), v); });
    b.dtypes(kRealAndComplex)
        .autograd([ops = Ops(r)](autograd::AutogradContext&, const Grads& g) -> Grads { return {ops.neg(g[0])}; });
  }
  {
    OpBuilder b(lib, "aten::sign(Tensor self) -> Tensor", kFamily, "sign of x: -1, 0 or 1 (bool: itself)");
    unary<Domain::Real>(b, Result::same, [](auto v) -> decltype(v) { return (v > 0) - (v < 0); });
    b.dtypes(concat_dtypes(kReal, {DType::Bool}))
        .autograd([ops = Ops(r)](autograd::AutogradContext&, const Grads& g) -> Grads {
          return {ops.mul(g[0], 0)};  // zero, recorded (not a constant), so double backward holds
        });
  }
}

// rounding (zero gradient almost everywhere, as PyTorch).
void register_rounding(Library& lib) {
  Registry& r = lib.registry();
  struct Rounding {
    const char* schema;
    const char* doc;
    double (*f)(double);
  };
  for (Rounding op : {Rounding{"aten::ceil(Tensor self) -> Tensor", "smallest integer >= x", [](double v) { return std::ceil(v); }},
                      Rounding{"aten::floor(Tensor self) -> Tensor", "largest integer <= x", [](double v) { return std::floor(v); }},
                      Rounding{"aten::round(Tensor self) -> Tensor", "nearest integer, ties to even",
                               [](double v) { return std::nearbyint(v); }},
                      Rounding{"aten::trunc(Tensor self) -> Tensor", "integer part, toward zero", [](double v) { return std::trunc(v); }}}) {
    OpBuilder b(lib, op.schema, kFamily, op.doc);
    unary<Domain::Real>(b, Result::same, [f = op.f](auto v) -> decltype(v) {
      if constexpr (std::is_same_v<decltype(v), double>) return f(v);
      else return v;  // integers are already integral
    });
    b.dtypes(kReal).autograd(
        [ops = Ops(r)](autograd::AutogradContext&, const Grads& g) -> Grads {
          return {ops.mul(g[0], 0)};  // zero, recorded (not a constant), so double backward holds
        });
  }
}

// exponentials and logarithms.
void register_exp_log(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::exp(Tensor self) -> Tensor", kFamily, "e^x");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::exp(v); });
    b.dtypes(kFloatInputs).autograd(chain(r, [](const Ops&, const Tensor&, const Tensor& y) { return y; }), save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::expm1(Tensor self) -> Tensor", kFamily, "e^x - 1, accurate near 0");
    unary<Domain::Floating>(b, Result::floating, [](auto v) {
      if constexpr (is_complex_v<decltype(v)>) return std::exp(v) - 1.0;
      else return std::expm1(v);
    });
    b.dtypes(kFloatInputs).autograd(chain(r, [](const Ops& ops, const Tensor&, const Tensor& y) { return ops.add(y, 1); }),
                                    save_inputs_and_outputs);
  }
  const ArgConstraint positive = values_in(std::nullopt, std::nullopt, true);
  struct Log {
    const char* schema;
    const char* doc;
    double base_log;  // d/dx log_b(x) = 1 / (x ln b)
  };
  for (Log op : {Log{"aten::log(Tensor self) -> Tensor", "natural logarithm", 1.0},
                 Log{"aten::log2(Tensor self) -> Tensor", "base-2 logarithm", std::numbers::ln2},
                 Log{"aten::log10(Tensor self) -> Tensor", "base-10 logarithm", std::numbers::ln10}}) {
    OpBuilder b(lib, op.schema, kFamily, op.doc);
    const double k = op.base_log;
    unary<Domain::Floating>(b, Result::floating, [k](auto v) { return std::log(v) / k; });
    b.dtypes(kFloatInputs)
        .constraints(InputConstraints().arg("self", positive))
        .autograd(chain(r, [k](const Ops& ops, const Tensor& x, const Tensor&) {
                    return ops.tensor("aten::reciprocal", {ops.mul(x, k)});
                  }),
                  save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::log1p(Tensor self) -> Tensor", kFamily, "log(1 + x), accurate near 0");
    unary<Domain::Floating>(b, Result::floating, [](auto v) {
      if constexpr (is_complex_v<decltype(v)>) return std::log(v + 1.0);
      else return std::log1p(v);
    });
    b.dtypes(kFloatInputs)
        .constraints(InputConstraints().arg("self", values_in(-0.9, std::nullopt)))
        .autograd(chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) {
                    return ops.tensor("aten::reciprocal", {ops.add(x, 1)});
                  }),
                  save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::sqrt(Tensor self) -> Tensor", kFamily, "square root");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::sqrt(v); });
    b.dtypes(kFloatInputs)
        .constraints(InputConstraints().arg("self", positive))
        .autograd(chain(r, [](const Ops& ops, const Tensor&, const Tensor& y) {
                    return ops.tensor("aten::reciprocal", {ops.mul(y, 2)});
                  }),
                  save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::rsqrt(Tensor self) -> Tensor", kFamily, "1 / sqrt(x)");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return 1.0 / std::sqrt(v); });
    b.dtypes(kFloatInputs)
        .constraints(InputConstraints().arg("self", positive))
        .autograd(chain(r, [](const Ops& ops, const Tensor&, const Tensor& y) { return ops.mul(ops.mul(ops.mul(y, y), y), -0.5); }),
                  save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::reciprocal(Tensor self) -> Tensor", kFamily, "1 / x");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return 1.0 / v; });
    b.dtypes(kFloatInputs)
        .constraints(InputConstraints().arg("self", values_in(0.25, std::nullopt)))
        .autograd(chain(r, [](const Ops& ops, const Tensor&, const Tensor& y) { return ops.neg(ops.mul(y, y)); }), save_inputs_and_outputs);
  }
}

// trigonometric and hyperbolic.
void register_trigonometric(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::sin(Tensor self) -> Tensor", kFamily, "sine");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::sin(v); });
    b.dtypes(kFloatInputs).autograd(
        chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) { return ops.tensor("aten::cos", {x}); }), save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::cos(Tensor self) -> Tensor", kFamily, "cosine");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::cos(v); });
    b.dtypes(kFloatInputs).autograd(
        chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) { return ops.neg(ops.tensor("aten::sin", {x})); }),
        save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::tan(Tensor self) -> Tensor", kFamily, "tangent");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::tan(v); });
    b.dtypes(kFloatInputs)
        .constraints(InputConstraints().arg("self", values_in(-1.2, 1.2)))
        .autograd(chain(r, [](const Ops& ops, const Tensor&, const Tensor& y) { return ops.add(ops.mul(y, y), 1); }), save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::tanh(Tensor self) -> Tensor", kFamily, "hyperbolic tangent");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::tanh(v); });
    b.dtypes(kFloatInputs).autograd(
        chain(r, [](const Ops& ops, const Tensor&, const Tensor& y) { return ops.add(ops.neg(ops.mul(y, y)), 1); }), save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::sigmoid(Tensor self) -> Tensor", kFamily, "logistic function 1 / (1 + e^-x)");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return sigmoid_of(v); });
    b.dtypes(kFloatInputs).autograd(
        chain(r, [](const Ops& ops, const Tensor&, const Tensor& y) { return ops.mul(y, ops.add(ops.neg(y), 1)); }), save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::sinh(Tensor self) -> Tensor", kFamily, "hyperbolic sine");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::sinh(v); });
    b.dtypes(kFloatInputs).autograd(
        chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) { return ops.tensor("aten::cosh", {x}); }), save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::cosh(Tensor self) -> Tensor", kFamily, "hyperbolic cosine");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::cosh(v); });
    b.dtypes(kFloatInputs).autograd(
        chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) { return ops.tensor("aten::sinh", {x}); }), save_inputs_and_outputs);
  }
  const ArgConstraint open_unit = values_in(-0.9, 0.9);
  {
    OpBuilder b(lib, "aten::asin(Tensor self) -> Tensor", kFamily, "inverse sine");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::asin(v); });
    b.dtypes(kFloatInputs)
        .constraints(InputConstraints().arg("self", open_unit))
        .autograd(chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) {
                    return ops.tensor("aten::rsqrt", {ops.add(ops.neg(ops.mul(x, x)), 1)});
                  }),
                  save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::acos(Tensor self) -> Tensor", kFamily, "inverse cosine");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::acos(v); });
    b.dtypes(kFloatInputs)
        .constraints(InputConstraints().arg("self", open_unit))
        .autograd(chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) {
                    return ops.neg(ops.tensor("aten::rsqrt", {ops.add(ops.neg(ops.mul(x, x)), 1)}));
                  }),
                  save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::atan(Tensor self) -> Tensor", kFamily, "inverse tangent");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::atan(v); });
    b.dtypes(kFloatInputs).autograd(chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) {
                                      return ops.tensor("aten::reciprocal", {ops.add(ops.mul(x, x), 1)});
                                    }),
                                    save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::asinh(Tensor self) -> Tensor", kFamily, "inverse hyperbolic sine");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::asinh(v); });
    b.dtypes(kFloatInputs).autograd(chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) {
                                      return ops.tensor("aten::rsqrt", {ops.add(ops.mul(x, x), 1)});
                                    }),
                                    save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::acosh(Tensor self) -> Tensor", kFamily, "inverse hyperbolic cosine");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::acosh(v); });
    b.dtypes(concat_dtypes(kFloatingAndComplex, {DType::Int64}))  // bool has no value in the domain
        .constraints(InputConstraints().arg("self", values_in(1.25, std::nullopt)))
        .autograd(chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) {
                    return ops.tensor("aten::rsqrt", {ops.add(ops.mul(x, x), -1)});
                  }),
                  save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::atanh(Tensor self) -> Tensor", kFamily, "inverse hyperbolic tangent");
    unary<Domain::Floating>(b, Result::floating, [](auto v) { return std::atanh(v); });
    b.dtypes(kFloatInputs)
        .constraints(InputConstraints().arg("self", open_unit))
        .autograd(chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) {
                    return ops.tensor("aten::reciprocal", {ops.add(ops.neg(ops.mul(x, x)), 1)});
                  }),
                  save_inputs_and_outputs);
  }
  {
    OpBuilder b(lib, "aten::erf(Tensor self) -> Tensor", kFamily, "error function");
    unary<Domain::FloatReal>(b, Result::floating, [](double v) { return std::erf(v); });
    b.dtypes(kRealFloatInputs)
        .autograd(chain(r, [](const Ops& ops, const Tensor& x, const Tensor&) {
                    // d/dx erf(x) = 2/sqrt(pi) * e^(-x^2)
                    return ops.mul(ops.tensor("aten::exp", {ops.neg(ops.mul(x, x))}), 2.0 / std::sqrt(std::numbers::pi));
                  }),
                  save_inputs_and_outputs);
  }
}

// predicates and logical / bitwise not (no gradient: boolean or integral results).
void register_predicates(Library& lib) {
  Registry& r = lib.registry();
  {
    OpBuilder b(lib, "aten::isnan(Tensor self) -> Tensor", kFamily, "x != x");
    unary<Domain::All>(b, Result::boolean, [](auto v) { return v != v; });
    b.dtypes(kAll);
  }
  {
    OpBuilder b(lib, "aten::isinf(Tensor self) -> Tensor", kFamily, "x is +inf or -inf (complex: either part)");
    unary<Domain::All>(b, Result::boolean, [](auto v) {
      if constexpr (is_complex_v<decltype(v)>) return std::isinf(v.real()) || std::isinf(v.imag());
      else if constexpr (std::is_same_v<decltype(v), double>) return std::isinf(v);
      else return false;
    });
    b.dtypes(kAll);
  }
  {
    OpBuilder b(lib, "aten::logical_not(Tensor self) -> Tensor", kFamily, "x == 0, as bool");
    unary<Domain::All>(b, Result::boolean, [](auto v) { return v == decltype(v)(0); });
    b.dtypes(kAll);
  }
  {
    OpBuilder b(lib, "aten::bitwise_not(Tensor self) -> Tensor", kFamily, "~x (bool: not x)");
    const std::string name = b.name();
    b.cpu([name](const Tensor& self) {
      const bool is_bool = self.dtype() == DType::Bool;
      return map_unary<Domain::Integral>(name, self, self.dtype(), self.dtype(),
                                         [is_bool](int64_t v) -> int64_t { return is_bool ? !v : ~v; });
    });
    b.fake([name](const Tensor& self) {
      visit_wide<Domain::Integral>(name, self.dtype(), [](auto) {});
      return empty_elementwise({self}, self.dtype(), name);
    });
    b.vmap(elementwise_vmap_rule(r, name)).dtypes(kIntegralAndBool);
  }
}

}  // namespace

void register_elementwise_unary(Library& lib) {
  register_sign_magnitude(lib);
  register_rounding(lib);
  register_exp_log(lib);
  register_trigonometric(lib);
  register_predicates(lib);
}

}  // namespace opconform::reference
