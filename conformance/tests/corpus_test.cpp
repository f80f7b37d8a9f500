// The seeded-bug corpus (issue 4): operators with exactly one planted bug, each of which the one
// check named beside it must flag — and no check that should not — plus correct operators that
// must pass every check (no false positives). Every op is built in a registry of its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <set>

#include "opconform/conformance/opcheck.h"
#include "opconform/core.h"
#include "support/float_ops.h"

namespace opconform::conformance {
namespace {

using opconform::testing::map;
using opconform::testing::zip;

double sin_(double v) { return std::sin(v); }
double cos_(double v) { return std::cos(v); }

Tensor values(std::vector<double> v, std::vector<int64_t> sizes, DType dtype = DType::Float32) {
  Tensor t = from_vector<double>(v, sizes);
  return t.to(dtype);
}

Tensor leaf(Tensor t) {
  t.set_requires_grad(true);
  return t;
}

// The environment PyTorch has built in: the autograd, fake, vmap and dispatch-mode fallbacks.
struct Env {
  Registry registry;
  RegistrationHandle fallbacks = install_builtin_fallbacks(registry);
  std::vector<std::shared_ptr<void>> keep;  // op definitions and libraries of the case
  CustomOpOptions opts(CustomOpOptions o = {}) {
    o.registry = &registry;
    return o;
  }
  template <typename T>
  T& hold(T value) {
    auto p = std::make_shared<T>(std::move(value));
    keep.push_back(p);
    return *p;
  }
};

// A custom op (a, b) -> Tensor computed by `kernel`, with a fake kernel keeping a's symbolic
// sizes, for backward formulas to call instead of computing through map/zip themselves: a formula
// must be a program of operators for graph capture to trace it (test_aot_dispatch_dynamic fails a
// formula that reads data), as in PyTorch, where an opaque backward is a custom op too. It is
// called without recording (PyTorch's @once_differentiable): the formula then claims no second
// derivative, which the op has no formula for (gradgradcheck skips such ops).
struct BackwardOp {
  TypedOperatorHandle<Tensor(const Tensor&, const Tensor&)> op;
  Tensor operator()(const Tensor& a, const Tensor& b) const {
    autograd::NoGradGuard once_differentiable;
    return op.call(a, b);
  }
};

BackwardOp binary_op(Env& env, const std::string& name, std::function<Tensor(const Tensor&, const Tensor&)> kernel) {
  auto& op = env.hold(CustomOpDef(custom_op(name, [kernel](const Tensor& a, const Tensor& b) { return kernel(a, b); },
                                            env.opts(), {"a", "b"})));
  op.register_fake([](const Tensor& a, const Tensor&) { return empty_like(a); });
  return {op.handle().typed<Tensor(const Tensor&, const Tensor&)>()};
}

// The elementwise binary op f(a, b) (see binary_op).
BackwardOp pointwise(Env& env, const std::string& name, std::function<double(double, double)> f) {
  return binary_op(env, name, [f](const Tensor& a, const Tensor& b) { return zip(a, b, f); });
}

// A unary elementwise op with a fake kernel, an autograd formula and (optionally) a vmap rule.
CustomOpDef& unary(Env& env, const std::string& name, std::function<double(double)> f,
                   std::function<double(double)> df) {
  auto& op = env.hold(CustomOpDef(custom_op(name, [f](const Tensor& x) { return map(x, f); }, env.opts(), {"x"})));
  op.register_fake([](const Tensor& x) { return empty_like(x); });
  BackwardOp grad = pointwise(env, name + "_grad", [df](double gv, double xv) { return gv * df(xv); });
  op.register_autograd(
      [grad](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
        return std::vector<Tensor>{grad(g[0], ctx.saved_tensors().at(0))};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) { ctx.save_for_backward({inputs[0].to_tensor()}); });
  return op;
}

std::vector<Sample> unary_samples() {
  return {Sample({IValue(leaf(values({0.5, -1.25, 2.0}, {3}, DType::Float64)))}),
          Sample({IValue(values({0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, {2, 3}))}),
          Sample({IValue(values({1.5, -0.5, 0.25, 3.0}, {2, 2}).transpose(0, 1))})};
}

struct Case {
  std::string name;
  std::function<OperatorHandle(Env&)> make;  // defines the op, returns its handle
  std::function<std::vector<Sample>()> samples;
  std::string must_flag;                     // empty: a correct op, every check passes
  std::set<std::string> may_also_flag = {};
};

OpcheckResults run_all(Env& env, const OperatorHandle& op, const std::vector<Sample>& samples) {
  OpcheckOptions options;
  options.test_utils = check_names();
  options.raise_exception = false;
  return opcheck(op, samples, options, env.registry);
}

// ---------------------------------------------------------------- correct operators

std::vector<Case> correct_cases() {
  std::vector<Case> cases;
  cases.push_back({"sin", [](Env& e) { return unary(e, "ok::sin", sin_, cos_).handle(); }, unary_samples, ""});
  cases.push_back({"square", [](Env& e) { return unary(e, "ok::square", [](double v) { return v * v; }, [](double v) { return 2 * v; }).handle(); },
                   unary_samples, ""});
  cases.push_back({"neg", [](Env& e) { return unary(e, "ok::neg", [](double v) { return -v; }, [](double) { return -1.0; }).handle(); },
                   unary_samples, ""});
  cases.push_back({"tanh", [](Env& e) { return unary(e, "ok::tanh", [](double v) { return std::tanh(v); },
                                                     [](double v) { return 1 - std::tanh(v) * std::tanh(v); }).handle(); },
                   unary_samples, ""});
  cases.push_back({"exp", [](Env& e) { return unary(e, "ok::exp", [](double v) { return std::exp(v); }, [](double v) { return std::exp(v); }).handle(); },
                   unary_samples, ""});
  cases.push_back({"mul", [](Env& e) {
                     auto& op = e.hold(CustomOpDef(custom_op("ok::mul", [](const Tensor& a, const Tensor& b) {
                       return zip(a, b, [](double x, double y) { return x * y; });
                     }, e.opts(), {"a", "b"})));
                     op.register_fake([](const Tensor& a, const Tensor&) { return empty_like(a); });
                     BackwardOp times = pointwise(e, "ok::times", [](double gv, double v) { return gv * v; });
                     op.register_autograd(
                         [times](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
                           auto s = ctx.saved_tensors();
                           return std::vector<Tensor>{times(g[0], s[1]), times(g[0], s[0])};
                         },
                         [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) {
                           ctx.save_for_backward({in[0].to_tensor(), in[1].to_tensor()});
                         });
                     return op.handle();
                   },
                   [] {
                     return std::vector<Sample>{
                         Sample({IValue(leaf(values({1, 2, 3}, {3}, DType::Float64))), IValue(leaf(values({4, 5, 6}, {3}, DType::Float64)))}),
                         Sample({IValue(values({1, 2, 3, 4}, {2, 2})), IValue(values({0.5, 0.25, 2, 4}, {2, 2}))})};
                   },
                   ""});
  cases.push_back({"scale", [](Env& e) {
                     auto& op = e.hold(CustomOpDef(custom_op("ok::scale", [](const Tensor& x, double a) {
                       return map(x, [a](double v) { return v * a; });
                     }, e.opts(), {"x", "a"})));
                     op.register_fake([](const Tensor& x, double) { return empty_like(x); });
                     auto scale = op.handle().typed<Tensor(const Tensor&, double)>();
                     op.register_autograd(
                         [scale](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {  // linear: scale(g, a)
                           return std::vector<Tensor>{scale.call(g[0], ctx.get("a").to_double()), Tensor()};
                         },
                         [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) { ctx.set("a", in[1]); });
                     return op.handle();
                   },
                   [] { return std::vector<Sample>{Sample({IValue(leaf(values({1, -2}, {2}, DType::Float64))), IValue(2.5)})}; }, ""});
  cases.push_back({"add_inplace", [](Env& e) {
                     auto& op = e.hold(CustomOpDef(custom_op("ok::add_", [](const Tensor& x, const Tensor& y) {
                       x.copy_(zip(x, y, [](double a, double b) { return a + b; }));
                       return x;
                     }, e.opts({.mutates_args = {"x"}, .tags = {Tag::inplace}}), {"x", "y"})));
                     return op.handle();
                   },
                   [] { return std::vector<Sample>{Sample({IValue(values({1, 2}, {2})), IValue(values({3, 4}, {2}))})}; }, ""});
  cases.push_back({"add_out", [](Env& e) {
                     auto& op = e.hold(CustomOpDef(custom_op("ok::add_out", [](const Tensor& x, const Tensor& y, const Tensor& out) {
                       out.copy_(zip(x, y, [](double a, double b) { return a + b; }));
                       return out;
                     }, e.opts({.mutates_args = {"out"}, .tags = {Tag::out}}), {"x", "y", "*", "out"})));
                     return op.handle();
                   },
                   [] { return std::vector<Sample>{Sample({IValue(values({1, 2}, {2})), IValue(values({3, 4}, {2})), IValue(empty({2}))})}; }, ""});
  cases.push_back({"fill_mutate", [](Env& e) {
                     auto& op = e.hold(CustomOpDef(custom_op("ok::fill_", [](const Tensor& x, double v) { x.fill_(v); },
                                                             e.opts({.mutates_args = {"x"}}), {"x", "v"})));
                     return op.handle();
                   },
                   [] { return std::vector<Sample>{Sample({IValue(values({1, 2}, {2})), IValue(7.0)})}; }, ""});
  return cases;
}

TEST(Corpus, CorrectOperatorsPassEveryCheck) {
  auto cases = correct_cases();
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    Env env;
    OperatorHandle op = c.make(env);
    auto results = run_all(env, op, c.samples());
    for (const auto& [check, r] : results) {
      EXPECT_TRUE(r.ok()) << c.name << ": " << check << " " << to_string(r.outcome) << ": " << r.message;
    }
  }
}

// ---------------------------------------------------------------- seeded bugs

Tensor plain_sin(const Tensor& x) { return map(x, sin_); }

// A Library op with CPU and Fake kernels given, for bugs custom_op itself would refuse.
template <typename Cpu, typename Fake>
OperatorHandle library_op(Env& env, const std::string& schema, Cpu cpu, Fake fake, std::vector<Tag> tags = {}) {
  auto& lib = env.hold(Library("bug", LibraryKind::FRAGMENT, std::nullopt, env.registry));
  std::string name = lib.define(schema, tags);
  lib.impl(name, std::move(cpu), DispatchKey::CPU);
  lib.impl(name, std::move(fake), DispatchKey::Fake);
  return env.registry.get(name);
}

std::vector<Sample> one_tensor() { return {Sample({IValue(values({0.5, -1.0, 2.0}, {3}))})}; }
std::vector<Sample> two_tensors() { return {Sample({IValue(values({1, 2}, {2})), IValue(values({3, 4}, {2}))})}; }

std::vector<Case> bug_cases() {
  std::vector<Case> cases;
  auto fake_like = [](const Tensor& x) { return empty_like(x); };

  // test_schema
  cases.push_back({"undeclared_mutation", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::undeclared", [](const Tensor& x) {
      Tensor r = map(x, sin_);
      x.fill_(0);  // writes x, but mutates_args is empty
      return r;
    }, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    return op.handle();
  }, one_tensor, "test_schema",
     {"stride_invariance",            // the write also changes what later runs see
      "test_aot_dispatch_dynamic"}});  // and a replayed graph makes a write nothing in it declares
  cases.push_back({"declared_never_written", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::never_written", [](const Tensor& x, const Tensor& y) {
      (void)y;
      return map(x, sin_);
    }, e.opts({.mutates_args = {"y"}}), {"x", "y"})));
    op.register_fake([](const Tensor& x, const Tensor&) { return empty_like(x); });
    return op.handle();
  }, two_tensors, "test_schema", {"error_inputs"}});  // y is never looked at, so a meta y goes unnoticed too
  cases.push_back({"output_aliases_input", [fake_like](Env& e) {
    return library_op(e, "alias(Tensor x) -> Tensor", [](const Tensor& x) { return x.view({-1}); },
                      [](const Tensor& x) { return x.view({-1}); });
  }, one_tensor, "test_schema"});
  cases.push_back({"outputs_alias_each_other", [](Env& e) {
    return library_op(e, "pair(Tensor x) -> (Tensor, Tensor)",
                      [](const Tensor& x) { Tensor r = map(x, sin_); return std::make_tuple(r, r.view({-1})); },
                      [](const Tensor& x) { Tensor r = empty_like(x); return std::make_tuple(r, r.view({-1})); });
  }, one_tensor, "test_schema"});
  cases.push_back({"inplace_returns_new_tensor", [](Env& e) {
    return library_op(e, "sin_(Tensor(a!) x) -> Tensor(a!)",
                      [](const Tensor& x) { x.copy_(map(x, sin_)); return x.clone(); },
                      [](const Tensor& x) { return x; }, {Tag::inplace});
  }, one_tensor, "test_schema",
     // the fake kernel (rightly) returns x: the real kernel's fresh tensor disagrees with it
     {"test_faketensor", "determinism", "stride_invariance", "dtype_consistency", "vmap_consistency", "edge_shapes"}});
  cases.push_back({"out_reads_its_out_buffer", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::add_out", [](const Tensor& x, const Tensor& out) {
      out.copy_(zip(x, out, [](double a, double o) { return a + o; }));  // reads out
      return out;
    }, e.opts({.mutates_args = {"out"}, .tags = {Tag::out}}), {"x", "*", "out"})));
    return op.handle();
  }, [] { return std::vector<Sample>{Sample({IValue(values({1, 2}, {2})), IValue(zeros({2}))})}; }, "test_schema"});
  cases.push_back({"out_returns_wrong_order", [](Env& e) {
    return library_op(e, "two_out(Tensor x, *, Tensor(a!) out0, Tensor(b!) out1) -> (Tensor(a!), Tensor(b!))",
                      [](const Tensor& x, const Tensor& o0, const Tensor& o1) {
                        o0.copy_(x); o1.copy_(x);
                        return std::make_tuple(o1, o0);
                      },
                      [](const Tensor&, const Tensor& o0, const Tensor& o1) { return std::make_tuple(o0, o1); }, {Tag::out});
  }, [] { return std::vector<Sample>{Sample({IValue(values({1, 2}, {2})), IValue(zeros({2})), IValue(zeros({2}))})}; }, "test_schema",
     {"test_faketensor"}});

  // test_faketensor
  cases.push_back({"missing_fake_kernel", [](Env& e) {
    return e.hold(CustomOpDef(custom_op("bug::no_fake", plain_sin, e.opts(), {"x"}))).handle();
  }, one_tensor, "test_faketensor", {"test_aot_dispatch_dynamic"}});  // capture runs fake kernels too
  cases.push_back({"fake_wrong_shape", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::fake_shape", plain_sin, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty({x.numel() + 1}, x.options()); });
    return op.handle();
  }, one_tensor, "test_faketensor", {"test_aot_dispatch_dynamic"}});
  cases.push_back({"fake_wrong_dtype", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::fake_dtype", plain_sin, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x, TensorOptions(DType::Float64, x.device())); });
    return op.handle();
  }, one_tensor, "test_faketensor", {"test_aot_dispatch_dynamic"}});
  cases.push_back({"fake_wrong_strides", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::fake_strides", plain_sin, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) {
      return empty(std::vector<SymInt>{x.sym_sizes()[1], x.sym_sizes()[0]}, x.options())
          .transpose(0, 1);  // column-major: the real one is not
    });
    return op.handle();
  }, [] { return std::vector<Sample>{Sample({IValue(values({1, 2, 3, 4, 5, 6}, {2, 3}))})}; }, "test_faketensor"});
  cases.push_back({"fake_reads_data", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::fake_reads", plain_sin, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { (void)x.item(); return empty_like(x); });
    return op.handle();
  }, [] { return std::vector<Sample>{Sample({IValue(values({1}, {1}))})}; }, "test_faketensor", {"test_aot_dispatch_dynamic"}});

  // test_autograd_registration
  cases.push_back({"no_autograd_formula", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::no_formula", plain_sin, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    return op.handle();
  }, [] { return std::vector<Sample>{Sample({IValue(leaf(values({0.5, 1.0}, {2}, DType::Float64)))})}; },
     "test_autograd_registration", {"gradcheck", "gradgradcheck"}});
  cases.push_back({"autograd_at_backend_key", [](Env& e) {
    return library_op(e, "backend_grad(Tensor x) -> Tensor",
                      [](const Tensor& x) { Tensor r = map(x.detach(), sin_); r.set_requires_grad(x.requires_grad()); return r; },
                      [](const Tensor& x) { return empty_like(x); });
  }, [] { return std::vector<Sample>{Sample({IValue(leaf(values({0.5, 1.0}, {2}, DType::Float64)))})}; },
     "test_autograd_registration", {"gradcheck", "gradgradcheck"}});

  // gradcheck
  auto wrong_grad = [](const std::string& name, std::function<double(double, int64_t)> dfi) {
    return [name, dfi](Env& e) {
      auto& op = e.hold(CustomOpDef(custom_op(name, plain_sin, e.opts(), {"x"})));
      op.register_fake([](const Tensor& x) { return empty_like(x); });
      BackwardOp grad = binary_op(e, name + "_grad", [dfi](const Tensor& g, const Tensor& x_) {
        Tensor x = x_.contiguous();
        Tensor out = empty_like(x);
        for (int64_t i = 0; i < x.numel(); ++i) {
          out.set({i}, Scalar(g.contiguous().get({i}).to_double() * dfi(x.get({i}).to_double(), i)));
        }
        return out;
      });
      op.register_autograd(
          [grad](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
            return std::vector<Tensor>{grad(g[0], ctx.saved_tensors().at(0))};
          },
          [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) { ctx.save_for_backward({in[0].to_tensor()}); });
      return op.handle();
    };
  };
  // backward = cos(x), whatever grad_output says
  auto wrong_grad_ignoring_g = [] {
    return [](Env& e) {
      auto& op = e.hold(CustomOpDef(custom_op("bug::ignores_g", plain_sin, e.opts(), {"x"})));
      op.register_fake([](const Tensor& x) { return empty_like(x); });
      BackwardOp grad = binary_op(e, "bug::ignores_g_grad", [](const Tensor&, const Tensor& x) { return map(x, cos_); });
      op.register_autograd(
          [grad](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
            return std::vector<Tensor>{grad(g[0], ctx.saved_tensors().at(0))};
          },
          [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) { ctx.save_for_backward({in[0].to_tensor()}); });
      return op.handle();
    };
  };
  auto grad_sample = [] { return std::vector<Sample>{Sample({IValue(leaf(values({0.5, -1.0, 2.0}, {3}, DType::Float64)))})}; };
  cases.push_back({"wrong_gradient", wrong_grad("bug::grad_sin", [](double x, int64_t) { return std::sin(x); }), grad_sample, "gradcheck"});
  cases.push_back({"gradient_wrong_in_one_element",
                   wrong_grad("bug::grad_one", [](double x, int64_t i) { return i == 2 ? 0.0 : std::cos(x); }), grad_sample, "gradcheck"});
  cases.push_back({"non_reentrant_backward", [](Env& e) {
    auto calls = std::make_shared<int>(0);
    auto& op = e.hold(CustomOpDef(custom_op("bug::reentrant", plain_sin, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    BackwardOp grad = binary_op(e, "bug::reentrant_grad", [calls](const Tensor& g, const Tensor& x) {
      double drift = 1e-3 * (*calls)++;  // each backward differs from the last
      return zip(g, x, [drift](double gv, double xv) { return gv * std::cos(xv) + drift; });
    });
    op.register_autograd(
        [grad](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
          return std::vector<Tensor>{grad(g[0], ctx.saved_tensors().at(0))};
        },
        [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) { ctx.save_for_backward({in[0].to_tensor()}); });
    return op.handle();
  }, grad_sample, "gradcheck", {"test_aot_dispatch_dynamic"}});  // eager and captured backward differ too

  // properties
  cases.push_back({"wrong_only_for_non_contiguous", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::strided", [](const Tensor& x) {
      // Reads the storage as if x were contiguous: right for contiguous inputs only.
      Tensor out = empty_like(x);
      for (int64_t i = 0; i < x.numel(); ++i) {
        double v = static_cast<const float*>(x.const_data_ptr())[i];
        static_cast<float*>(out.mutable_data_ptr())[i] = static_cast<float>(std::sin(v));
      }
      return out;
    }, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    return op.handle();
  }, [] { return std::vector<Sample>{Sample({IValue(values({1, 2, 3, 4, 5, 6}, {2, 3}))})}; }, "stride_invariance",
     {"dtype_consistency"}});  // its float64 run goes through a non-contiguous path too
  cases.push_back({"error_on_empty_input", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::empty_crash", [](const Tensor& x) {
      if (x.numel() == 0) throw std::out_of_range("vector::at");  // not an opconform::Error
      return map(x, sin_);
    }, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    return op.handle();
  }, one_tensor, "edge_shapes"});
  cases.push_back({"nondeterministic", [](Env& e) {
    auto counter = std::make_shared<int>(0);
    auto& op = e.hold(CustomOpDef(custom_op("bug::nondet", [counter](const Tensor& x) {
      double bump = 1e-3 * ((*counter)++ % 7);
      return map(x, [bump](double v) { return std::sin(v) + bump; });
    }, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    return op.handle();
  }, one_tensor, "determinism",
     {"stride_invariance", "vmap_consistency", "dtype_consistency", "test_aot_dispatch_dynamic", "thread_safety"}});  // all compare runs
  cases.push_back({"float32_computed_in_float16", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::half_inside", [](const Tensor& x) {
      Tensor y = map(x, sin_);
      return x.dtype() == DType::Float32 ? y.to(DType::Float16).to(DType::Float32) : y;
    }, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    return op.handle();
  }, [] { return std::vector<Sample>{Sample({IValue(values({0.123456, 1.234567, 2.345678}, {3}))})}; }, "dtype_consistency"});
  cases.push_back({"wrong_vmap_rule", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::vmap_rule", plain_sin, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    op.register_vmap([](const VmapInfo&, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
      Tensor r = map(inputs[0].to_tensor(), cos_);  // cos instead of sin
      return std::make_pair(Stack{IValue(r)}, std::vector<std::optional<int64_t>>{in_dims[0]});
    });
    return op.handle();
  }, one_tensor, "vmap_consistency"});
  cases.push_back({"autocast_casts_float64", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::autocast64", plain_sin, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    auto& lib = e.hold(Library("bug", LibraryKind::IMPL, std::nullopt, e.registry));
    lib.impl("autocast64", [](const OperatorHandle& o, DispatchKeySet keys, Stack& stack) {
      stack.back() = IValue(stack.back().to_tensor().to(DType::Float16));  // float64 too: wrong
      ExcludeDispatchKeyGuard no_autocast(DispatchKeySet({DispatchKey::AutocastCPU, DispatchKey::AutocastCUDA}));
      o.redispatch_boxed(keys.after(DispatchKey::AutocastCPU), stack);
    }, DispatchKey::AutocastCPU);
    return op.handle();
  }, [] { return std::vector<Sample>{Sample({IValue(values({0.5, 1.5}, {2}, DType::Float64))})}; }, "autocast_consistency"});
  cases.push_back({"fake_wrong_device", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::fake_device", plain_sin, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x, TensorOptions(x.dtype(), Device::meta())); });
    return op.handle();
  }, one_tensor, "test_faketensor"});
  cases.push_back({"fake_wrong_storage_offset", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::fake_offset", plain_sin, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) {
      SymInt n = x.sym_sizes()[0];  // its sample is 1-d
      return empty(std::vector<SymInt>{n + 1}, x.options()).slice(0, 1, std::nullopt, 1);
    });
    return op.handle();
  }, one_tensor, "test_faketensor"});
  cases.push_back({"backward_ignores_grad_output", wrong_grad_ignoring_g(), grad_sample, "gradcheck"});
  cases.push_back({"float64_computed_in_float32", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::single", [](const Tensor& x) {
      return map(x.to(DType::Float32), sin_).to(x.dtype());  // float64 in, float32 precision out
    }, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    BackwardOp grad = pointwise(e, "bug::single_grad", [](double gv, double xv) { return gv * std::cos(xv); });
    op.register_autograd(
        [grad](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
          return std::vector<Tensor>{grad(g[0], ctx.saved_tensors().at(0))};
        },
        [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) { ctx.save_for_backward({in[0].to_tensor()}); });
    return op.handle();
  }, grad_sample, "gradcheck"});
  cases.push_back({"write_seen_only_by_the_version_counter", [](Env& e) {
    auto& op = e.hold(CustomOpDef(custom_op("bug::bumps", [](const Tensor& x) {
      x.bump_version();  // a write through the API that happens to store the same bytes
      return map(x, sin_);
    }, e.opts(), {"x"})));
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    return op.handle();
  }, one_tensor, "test_schema"});
  cases.push_back({"wrong_second_derivative", [](Env& e) {
    // sq(x) = x^2 with backward mul(g, twice(x)): the first derivative is right, but twice's own
    // formula says 3 instead of 2, so the second derivative is wrong.
    auto& mul = e.hold(CustomOpDef(custom_op("bug::mul", [](const Tensor& a, const Tensor& b) {
      return zip(a, b, [](double x, double y) { return x * y; });
    }, e.opts(), {"a", "b"})));
    mul.register_fake([](const Tensor& a, const Tensor&) { return empty_like(a); });
    auto mul_op = mul.handle().typed<Tensor(const Tensor&, const Tensor&)>();
    mul.register_autograd(
        [mul_op](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
          auto s = ctx.saved_tensors();
          return std::vector<Tensor>{mul_op.call(g[0], s[1]), mul_op.call(g[0], s[0])};
        },
        [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) { ctx.save_for_backward({in[0].to_tensor(), in[1].to_tensor()}); });
    auto& twice = e.hold(CustomOpDef(custom_op("bug::twice", [](const Tensor& x) { return map(x, [](double v) { return 2 * v; }); },
                                               e.opts(), {"x"})));
    twice.register_fake([](const Tensor& x) { return empty_like(x); });
    twice.register_autograd([](autograd::AutogradContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{map(g[0], [](double v) { return 3 * v; })};  // should be 2
    });
    auto twice_op = twice.handle().typed<Tensor(const Tensor&)>();
    auto& sq = e.hold(CustomOpDef(custom_op("bug::sq", [](const Tensor& x) { return map(x, [](double v) { return v * v; }); },
                                            e.opts(), {"x"})));
    sq.register_fake([](const Tensor& x) { return empty_like(x); });
    sq.register_autograd(
        [mul_op, twice_op](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
          return std::vector<Tensor>{mul_op.call(g[0], twice_op.call(ctx.saved_tensors().at(0)))};
        },
        [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) { ctx.save_for_backward({in[0].to_tensor()}); });
    return sq.handle();
  }, [] { return std::vector<Sample>{Sample({IValue(leaf(values({0.5, -1.5, 2.0}, {3}, DType::Float64)))})}; }, "gradgradcheck"});
  return cases;
}

TEST(Corpus, EverySeededBugIsFlaggedByItsCheckOnly) {
  auto cases = bug_cases();
  EXPECT_GE(cases.size(), 25u);
  for (const auto& c : cases) {
    Env env;
    OperatorHandle op = c.make(env);
    auto results = run_all(env, op, c.samples());
    ASSERT_TRUE(results.count(c.must_flag)) << c.name << ": no check named " << c.must_flag;
    const CheckResult& flagged = results.at(c.must_flag);
    EXPECT_EQ(flagged.outcome, Outcome::failed) << c.name << ": " << c.must_flag << " said " << to_string(flagged.outcome)
                                                << ": " << flagged.message;
    EXPECT_FALSE(flagged.message.empty()) << c.name;
    std::string flagged_by;
    for (const auto& [check, r] : results) {
      if (!r.ok()) flagged_by += " " + check;
    }
    std::cout << "[ corpus   ] " << c.name << ": flagged by" << flagged_by << "\n";
    for (const auto& [check, r] : results) {
      if (check == c.must_flag || c.may_also_flag.count(check)) continue;
      EXPECT_TRUE(r.ok()) << c.name << ": " << check << " should not flag it but said " << to_string(r.outcome) << ": "
                          << r.message;
    }
  }
}

}  // namespace
}  // namespace opconform::conformance
