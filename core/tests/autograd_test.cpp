// The autograd engine: grad mode, leaf flags, the engine (backward / grad), accumulation,
// retain_graph, the ctx (saved tensors, attributes, needs_input_grad, non-differentiable
// outputs, materialised grads), double backward, the not-implemented fallback, the checks on
// what a formula returns, and in-place / identity outputs.
//
// The test operators t::{mul, add, neg, sin, cos, sum, expand_as} have CPU kernels and formulas
// written with the same operators through the dispatcher, so their gradients are differentiable.
#include "opconform/core/autograd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "opconform/core.h"

namespace opconform {
namespace {

using ::testing::HasSubstr;
using namespace autograd;

// ---------------------------------------------------------------- test operators

using Unary = TypedOperatorHandle<Tensor(const Tensor&)>;
using Binary = TypedOperatorHandle<Tensor(const Tensor&, const Tensor&)>;

Tensor map1(const Tensor& x, double (*f)(double)) {
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) e = f(e);
  return from_vector<double>(v, x.sizes()).to(x.dtype());
}

Tensor map2(const Tensor& a, const Tensor& b, double (*f)(double, double)) {
  OPCONFORM_CHECK(std::equal(a.sizes().begin(), a.sizes().end(), b.sizes().begin(), b.sizes().end()),
                  ErrorCode::kInvalidArgument, "test ops take equal shapes");
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i) va[i] = f(va[i], vb[i]);
  return from_vector<double>(va, a.sizes()).to(a.dtype());
}

Registry& reg() {
  static Registry registry;
  return registry;
}

struct Ops {
  Binary mul, add, expand_as;
  Unary neg, sin, cos, sum;
};

const Ops& ops();
Tensor tmul(const Tensor& a, const Tensor& b) { return ops().mul.call(a, b); }
Tensor tadd(const Tensor& a, const Tensor& b) { return ops().add.call(a, b); }
Tensor tneg(const Tensor& a) { return ops().neg.call(a); }
Tensor tsin(const Tensor& a) { return ops().sin.call(a); }
Tensor tcos(const Tensor& a) { return ops().cos.call(a); }
Tensor tsum(const Tensor& a) { return ops().sum.call(a); }
Tensor texpand_as(const Tensor& g, const Tensor& like) { return ops().expand_as.call(g, like); }

// Saves the inputs named by index in setup_context.
SetupContextFn save_inputs(std::vector<size_t> which) {
  return [which](AutogradContext& ctx, const Stack& in, const Stack&) {
    std::vector<Tensor> saved;
    for (size_t i : which) saved.push_back(in[i].to_tensor());
    ctx.save_for_backward(saved);
  };
}

const Ops& ops() {
  static Library lib = [] {
    Library l("t", LibraryKind::DEF, std::nullopt, reg());
    l.define("mul(Tensor a, Tensor b) -> Tensor");
    l.define("add(Tensor a, Tensor b) -> Tensor");
    l.define("neg(Tensor a) -> Tensor");
    l.define("sin(Tensor a) -> Tensor");
    l.define("cos(Tensor a) -> Tensor");
    l.define("sum(Tensor a) -> Tensor");
    l.define("expand_as(Tensor g, Tensor like) -> Tensor");
    l.impl("mul", [](const Tensor& a, const Tensor& b) { return map2(a, b, [](double x, double y) { return x * y; }); },
           DispatchKey::CPU);
    l.impl("add", [](const Tensor& a, const Tensor& b) { return map2(a, b, [](double x, double y) { return x + y; }); },
           DispatchKey::CPU);
    l.impl("neg", [](const Tensor& a) { return map1(a, [](double x) { return -x; }); }, DispatchKey::CPU);
    l.impl("sin", [](const Tensor& a) { return map1(a, [](double x) { return std::sin(x); }); }, DispatchKey::CPU);
    l.impl("cos", [](const Tensor& a) { return map1(a, [](double x) { return std::cos(x); }); }, DispatchKey::CPU);
    l.impl("sum", [](const Tensor& a) {
      double s = 0;
      for (double v : a.to_vector<double>()) s += v;
      return scalar_tensor(s, TensorOptions(a.dtype()));
    }, DispatchKey::CPU);
    l.impl("expand_as", [](const Tensor& g, const Tensor& like) {
      return full(like.sizes(), g.item(), TensorOptions(g.dtype()));
    }, DispatchKey::CPU);

    using G = const std::vector<Tensor>&;
    register_autograd(l, "mul", [](AutogradContext& ctx, G g) {
      auto s = ctx.saved_tensors();
      return std::vector<Tensor>{ctx.needs_input_grad(0) ? tmul(g[0], s[1]) : Tensor(),
                                 ctx.needs_input_grad(1) ? tmul(g[0], s[0]) : Tensor()};
    }, save_inputs({0, 1}));
    register_autograd(l, "add", [](AutogradContext&, G g) { return std::vector<Tensor>{g[0], g[0]}; });
    register_autograd(l, "neg", [](AutogradContext&, G g) { return std::vector<Tensor>{tneg(g[0])}; });
    register_autograd(l, "sin", [](AutogradContext& ctx, G g) {
      return std::vector<Tensor>{tmul(g[0], tcos(ctx.saved_tensors()[0]))};
    }, save_inputs({0}));
    register_autograd(l, "cos", [](AutogradContext& ctx, G g) {
      return std::vector<Tensor>{tmul(g[0], tneg(tsin(ctx.saved_tensors()[0])))};
    }, save_inputs({0}));
    register_autograd(l, "sum", [](AutogradContext& ctx, G g) {
      return std::vector<Tensor>{texpand_as(g[0], ctx.saved_tensors()[0])};
    }, save_inputs({0}));
    register_autograd(l, "expand_as", [](AutogradContext&, G g) { return std::vector<Tensor>{tsum(g[0]), Tensor()}; });
    return l;
  }();
  static Ops o{reg().get("t::mul").typed<Tensor(const Tensor&, const Tensor&)>(),
               reg().get("t::add").typed<Tensor(const Tensor&, const Tensor&)>(),
               reg().get("t::expand_as").typed<Tensor(const Tensor&, const Tensor&)>(),
               reg().get("t::neg").typed<Tensor(const Tensor&)>(),
               reg().get("t::sin").typed<Tensor(const Tensor&)>(),
               reg().get("t::cos").typed<Tensor(const Tensor&)>(),
               reg().get("t::sum").typed<Tensor(const Tensor&)>()};
  return o;
}

// ---------------------------------------------------------------- helpers

Tensor vec(std::vector<double> v) { return from_vector<double>(v, {static_cast<int64_t>(v.size())}); }
Tensor leaf(std::vector<double> v) {
  Tensor t = vec(std::move(v));
  t.set_requires_grad(true);
  return t;
}

std::vector<double> apply(const Tensor& x, double (*f)(double)) { return map1(x, f).to_vector<double>(); }

void expect_values(const Tensor& t, const std::vector<double>& expected) {
  ASSERT_TRUE(t.defined());
  std::vector<double> got = t.to_vector<double>();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-9) << "element " << i;
}

// Runs f, expects an Error whose what() contains every fragment; returns it.
template <typename F>
Error expect_error(F&& f, std::initializer_list<const char*> fragments) {
  try {
    f();
  } catch (const Error& e) {
    for (const char* frag : fragments) EXPECT_THAT(e.what(), HasSubstr(frag));
    return e;
  }
  ADD_FAILURE() << "expected an opconform::Error";
  return Error(ErrorCode::kInternal, "no error");
}

// ---------------------------------------------------------------- grad mode and leaf flags

TEST(GradModeTest, GuardsNestRestoreAndAreThreadLocal) {
  EXPECT_TRUE(GradMode::is_enabled());
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(GradMode::is_enabled());
    bool other_thread = false;
    std::thread([&] { other_thread = GradMode::is_enabled(); }).join();
    EXPECT_TRUE(other_thread);
    {
      EnableGradGuard enable;
      EXPECT_TRUE(GradMode::is_enabled());
    }
    EXPECT_FALSE(GradMode::is_enabled());
  }
  EXPECT_TRUE(GradMode::is_enabled());
}

TEST(RequiresGradTest, LeafFlagsAndTheirErrors) {
  Tensor x = vec({1, 2});
  EXPECT_FALSE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(autograd_meta(x), nullptr);
  x.set_requires_grad(true);
  EXPECT_TRUE(x.requires_grad());
  EXPECT_EQ(grad_fn(x), nullptr);
  EXPECT_TRUE(zeros({2}, TensorOptions(DType::Complex64)).set_requires_grad(true).requires_grad());

  Tensor i = arange(3);
  expect_error([&] { i.set_requires_grad(true); },
               {"only Tensors of floating point and complex dtype can require gradients", "int64"});
  EXPECT_NO_THROW(i.set_requires_grad(false));

  Tensor y = tsin(x);
  EXPECT_FALSE(y.is_leaf());
  EXPECT_TRUE(y.requires_grad());
  expect_error([&] { y.set_requires_grad(false); }, {"you can only change requires_grad flags of leaf variables"});
  expect_error([&] { y.set_requires_grad(true); }, {"you can only change requires_grad flags of leaf variables"});
}

TEST(RequiresGradTest, DetachSharesStorageWithoutHistory) {
  Tensor x = leaf({0.5, 1.0});
  Tensor y = tsin(x);
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_TRUE(d.is_alias_of(y));
  EXPECT_FALSE(d.is_same(y));
  uint64_t before = y.version();
  d.fill_(0);
  EXPECT_EQ(y.version(), before + 1);  // one version counter for both
  expect_values(y, {0, 0});
}

// ---------------------------------------------------------------- the engine

TEST(EngineTest, ComposedExpressionMatchesHandDerivatives) {
  std::vector<double> xv{0.3, -1.2, 2.0}, yv{1.5, 0.25, -3.0};
  Tensor x = leaf(xv), y = leaf(yv);
  // z = sum(sin(x) * y + (-x)):  dz/dx = cos(x) * y - 1,  dz/dy = sin(x)
  Tensor z = tsum(tadd(tmul(tsin(x), y), tneg(x)));
  EXPECT_EQ(z.dim(), 0);
  ASSERT_NE(grad_fn(z), nullptr);
  EXPECT_EQ(grad_fn(z)->name(), "t::sum_backward");
  z.backward();
  std::vector<double> dx, dy;
  for (size_t i = 0; i < xv.size(); ++i) {
    dx.push_back(std::cos(xv[i]) * yv[i] - 1);
    dy.push_back(std::sin(xv[i]));
  }
  expect_values(x.grad(), dx);
  expect_values(y.grad(), dy);
  EXPECT_FALSE(x.grad().requires_grad());
}

TEST(EngineTest, GraphEdgesLeadToTheLeavesAccumulators) {
  Tensor x = leaf({1}), c = vec({2});
  Tensor y = tmul(x, c);
  auto node = grad_fn(y);
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->name(), "t::mul_backward");
  ASSERT_EQ(node->next_edges().size(), 2u);
  auto acc = std::dynamic_pointer_cast<AccumulateGrad>(node->next_edge(0).function);
  ASSERT_NE(acc, nullptr);
  EXPECT_TRUE(acc->variable().is_same(x));
  EXPECT_EQ(gradient_edge(x).function, acc);  // one accumulator per leaf
  EXPECT_FALSE(node->next_edge(1).is_valid());  // c does not require grad
  EXPECT_EQ(node->num_inputs(), 1u);
}

TEST(EngineTest, AccumulatesSeveralUsesOfOneLeaf) {
  Tensor x = leaf({0.5, -2.0});
  tsum(tmul(x, x)).backward();
  expect_values(x.grad(), {1.0, -4.0});

  Tensor w = leaf({0.5, -2.0});
  tsum(tadd(w, tsin(w))).backward();
  expect_values(w.grad(), {1 + std::cos(0.5), 1 + std::cos(-2.0)});
}

TEST(EngineTest, AccumulatesAcrossBackwardCallsInPlace) {
  Tensor x = leaf({0.1, 0.7});
  tsum(tsin(x)).backward();
  Tensor first = x.grad();
  tsum(tsin(x)).backward();
  std::vector<double> twice = apply(x, [](double v) { return 2 * std::cos(v); });
  expect_values(x.grad(), twice);
  expect_values(first, twice);  // the reference taken earlier sees the sum
  x.set_grad(Tensor());
  EXPECT_FALSE(x.grad().defined());
}

TEST(EngineTest, SeveralRootsWaitForEachOther) {
  // a = sum(sin(x)), b = a * a: backward({a, b}) gives (1 + 2a) cos(x); a's node runs once,
  // after b's gradient reached it.
  Tensor x = leaf({0.2, 0.9});
  Tensor a = tsum(tsin(x));
  Tensor b = tmul(a, a);
  backward({a, b});
  double av = a.item().to<double>();
  expect_values(x.grad(), {(1 + 2 * av) * std::cos(0.2), (1 + 2 * av) * std::cos(0.9)});
}

TEST(EngineTest, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({3.0});
  Tensor y = tsum(tmul(x, x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  expect_values(x.grad(), {12.0});
  Error e = expect_error([&] { y.backward(); },
                         {"Trying to backward through the graph a second time", "retain_graph=true"});
  EXPECT_THAT(e.what(), HasSubstr("t::"));  // the context names the node that failed
}

TEST(EngineTest, NonScalarRootNeedsAGradientOfItsShape) {
  Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  x.set_requires_grad(true);
  Tensor y = tmul(x, x);
  expect_error([&] { y.backward(); }, {"grad can be implicitly created only for scalar outputs", "[2, 3]"});
  expect_error([&] { y.backward(vec({1, 1, 1})); }, {"Mismatch in shape", "[3]", "[2, 3]"});
  y.backward(full(std::vector<int64_t>{2, 3}, 0.5, TensorOptions(DType::Float64)));
  expect_values(x.grad(), {1, 2, 3, 4, 5, 6});  // 2x * 0.5
}

TEST(EngineTest, RootThatDoesNotRequireGradIsAnError) {
  expect_error([] { vec({1}).backward(); }, {"element 0 of tensors does not require grad"});
}

TEST(EngineTest, LeafRootAccumulatesOverAnyDtypeAndStrides) {
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64, DType::Complex64,
                   DType::Complex128}) {
    SCOPED_TRACE(name(dt));
    Tensor x = ones({2, 3}, TensorOptions(dt)).set_requires_grad(true);
    // A transposed (non-contiguous) existing gradient: [[0, 2, 4], [1, 3, 5]].
    Tensor g = arange(6).to(dt).view({3, 2}).transpose(0, 1);
    ASSERT_FALSE(g.is_contiguous());
    x.set_grad(g);
    x.backward(full(std::vector<int64_t>{2, 3}, 1, TensorOptions(dt)));
    expect_values(x.grad(), {1, 3, 5, 2, 4, 6});
    EXPECT_EQ(x.grad().dtype(), dt);
  }
}

TEST(EngineTest, SetGradChecksAndLeafHooks) {
  Tensor x = leaf({0.0, 1.0});
  expect_error([&] { x.set_grad(vec({1})); }, {"assigned grad has data of a different size"});
  expect_error([&] { x.set_grad(zeros({2})); }, {"assigned grad has data of a different type", "float32"});
  int calls = 0;
  register_hook(x, [&](const Tensor& g) {
    ++calls;
    return tadd(g, g);
  });
  tsum(tsin(x)).backward();
  EXPECT_EQ(calls, 1);
  expect_values(x.grad(), {2 * std::cos(0.0), 2 * std::cos(1.0)});
  expect_error([&] { register_hook(tsin(x), [](const Tensor& g) { return g; }); }, {"leaf"});
}

// ---------------------------------------------------------------- grad mode and recording

TEST(RecordingTest, NoGradRecordsNothingAndEnableGradRecordsAgain) {
  Tensor x = leaf({0.5});
  {
    NoGradGuard no_grad;
    Tensor y = tsin(x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(autograd_meta(y), nullptr);
    expect_values(y, {std::sin(0.5)});
    {
      EnableGradGuard enable;
      Tensor z = tsin(x);
      EXPECT_TRUE(z.requires_grad());
      ASSERT_NE(grad_fn(z), nullptr);
      EXPECT_EQ(grad_fn(z)->name(), "t::sin_backward");
    }
  }
  EXPECT_EQ(autograd_meta(tsin(vec({1}))), nullptr);  // no input requires grad
}

TEST(RecordingTest, SetupContextRunsOnlyWhenRecording) {
  Library lib("ctx", LibraryKind::DEF, std::nullopt, reg());
  lib.define("probe(Tensor a) -> Tensor");
  lib.impl("probe", [](const Tensor& a) { return a.clone(); }, DispatchKey::CPU);
  int setups = 0;
  register_autograd(lib, "probe", [](AutogradContext&, const std::vector<Tensor>& g) { return g; },
                    [&](AutogradContext&, const Stack&, const Stack&) { ++setups; });
  auto probe = reg().get("ctx::probe").typed<Tensor(const Tensor&)>();
  probe.call(vec({1}));
  {
    NoGradGuard no_grad;
    probe.call(leaf({1}));
  }
  EXPECT_EQ(setups, 0);
  EXPECT_TRUE(probe.call(leaf({1})).requires_grad());
  EXPECT_EQ(setups, 1);
}

// ---------------------------------------------------------------- grad()

TEST(GradTest, AllowUnusedBothWays) {
  Tensor x = leaf({0.4, 0.8}), w = leaf({1.0});
  Tensor y = tsum(tsin(x));
  expect_error([&] { grad({y}, {x, w}, {}, /*retain_graph=*/true); },
               {"input 1", "appears to not have been used in the graph", "allow_unused=true"});
  auto g = grad({y}, {x, w}, {}, false, false, /*allow_unused=*/true);
  ASSERT_EQ(g.size(), 2u);
  expect_values(g[0], {std::cos(0.4), std::cos(0.8)});
  EXPECT_FALSE(g[1].defined());
  EXPECT_FALSE(x.grad().defined());  // grad() leaves .grad alone
  expect_error([&] { grad({tsum(tsin(x))}, {vec({1})}); }, {"does not require grad"});
}

TEST(GradTest, OfAnIntermediateAndRunsOnlyNeededNodes) {
  Library lib("ctx", LibraryKind::DEF, std::nullopt, reg());
  lib.define("probe(Tensor a) -> Tensor");
  lib.impl("probe", [](const Tensor& a) { return a.clone(); }, DispatchKey::CPU);
  int backwards = 0;
  register_autograd(lib, "probe", [&](AutogradContext&, const std::vector<Tensor>& g) {
    ++backwards;
    return g;
  });
  auto probe = reg().get("ctx::probe").typed<Tensor(const Tensor&)>();
  Tensor a = leaf({2.0}), b = leaf({3.0});
  Tensor pa = probe.call(a);
  Tensor h = tmul(pa, b);
  Tensor y = tsum(tmul(h, h));
  auto g = grad({y}, {b, h}, {}, /*retain_graph=*/true);
  expect_values(g[0], {2 * 6.0 * 2.0});  // dy/db = 2h * a
  expect_values(g[1], {2 * 6.0});         // dy/dh = 2h
  EXPECT_EQ(backwards, 0);                // the path to a was not needed
  grad({y}, {a});
  EXPECT_EQ(backwards, 1);
}

// ---------------------------------------------------------------- the ctx

TEST(ContextTest, NeedsInputGradPerArgument) {
  Library lib("ctx", LibraryKind::DEF, std::nullopt, reg());
  lib.define("probe(Tensor a, Tensor b, float s) -> Tensor");
  lib.impl("probe", [](const Tensor& a, const Tensor&, double) { return a.clone(); }, DispatchKey::CPU);
  std::vector<bool> seen;
  bool out_of_range_threw = false;
  register_autograd(lib, "probe", [&](AutogradContext& ctx, const std::vector<Tensor>& g) {
    seen = {ctx.needs_input_grad(0), ctx.needs_input_grad(1), ctx.needs_input_grad(2)};
    try {
      ctx.needs_input_grad(3);
    } catch (const Error& e) {
      out_of_range_threw = std::string(e.what()).find("ctx::probe") != std::string::npos;
    }
    return std::vector<Tensor>{g[0], g[0], Tensor()};
  });
  auto probe = reg().get("ctx::probe").typed<Tensor(const Tensor&, const Tensor&, double)>();
  Tensor x = leaf({1.0}), c = vec({2.0});
  tsum(probe.call(c, x, 2.0)).backward();
  EXPECT_EQ(seen, (std::vector<bool>{false, true, false}));
  EXPECT_TRUE(out_of_range_threw);
  expect_values(x.grad(), {1.0});  // the gradient for c was dropped, x's routed
  EXPECT_FALSE(c.grad().defined());
}

TEST(ContextTest, SavedTensorsAttributesAndSavedOutputs) {
  Library lib("ctx", LibraryKind::DEF, std::nullopt, reg());
  lib.define("scale(Tensor x, float f) -> Tensor");
  lib.impl("scale", [](const Tensor& x, double f) {
    return tmul(x, full(x.sizes(), f, TensorOptions(x.dtype())));
  }, DispatchKey::CPU);
  std::vector<Tensor> saved_at_setup, saved_at_backward;
  std::string missing_error;
  register_autograd(lib, "scale", [&](AutogradContext& ctx, const std::vector<Tensor>& g) {
    saved_at_backward = ctx.saved_tensors();
    try {
      ctx.get("missing");
    } catch (const Error& e) {
      missing_error = e.what();
    }
    EXPECT_EQ(std::any_cast<std::string>(ctx.user_data), "hello");
    double f = ctx.get("f").to_double();
    return std::vector<Tensor>{tmul(g[0], full(g[0].sizes(), f, TensorOptions(g[0].dtype()))), Tensor()};
  }, [&](AutogradContext& ctx, const Stack& in, const Stack& out) {
    ctx.save_for_backward({in[0].to_tensor(), out[0].to_tensor()});
    saved_at_setup = ctx.saved_tensors();
    ctx.set("f", in[1]);
    ctx.user_data = std::string("hello");
  });
  auto scale = reg().get("ctx::scale").typed<Tensor(const Tensor&, double)>();
  Tensor x = leaf({1.0, 2.0});
  Tensor y = scale.call(x, 3.0);
  auto node = grad_fn(y);
  ASSERT_EQ(saved_at_setup.size(), 2u);
  EXPECT_TRUE(saved_at_setup[1].is_same(y));
  tsum(y).backward();
  expect_values(x.grad(), {3.0, 3.0});
  ASSERT_EQ(saved_at_backward.size(), 2u);
  EXPECT_TRUE(saved_at_backward[0].is_same(x));  // inputs come back as they are
  // The output comes back with its node as grad_fn (stored without it: no cycle).
  expect_values(saved_at_backward[1], {3.0, 6.0});
  EXPECT_EQ(grad_fn(saved_at_backward[1]), node);
  EXPECT_THAT(missing_error, HasSubstr("no attribute 'missing'"));
  // Dropping the outputs frees the graph: nothing keeps the node alive but our reference.
  y = Tensor();
  saved_at_backward.clear();
  saved_at_setup.clear();
  EXPECT_EQ(node.use_count(), 1);
}

TEST(ContextTest, InPlaceChangeOfASavedTensorIsDetected) {
  Tensor x = leaf({1.0, 2.0}), c = vec({2.0, 2.0});
  Tensor y = tsum(tmul(x, c));
  c.fill_(3.0);
  expect_error([&] { y.backward(); }, {"modified by an inplace operation", "t::mul", "version 1"});
}

TEST(ContextTest, NonDifferentiableOutputsAndMaterializedZeros) {
  Library lib("ctx", LibraryKind::DEF, std::nullopt, reg());
  lib.define("split3(Tensor x) -> (Tensor, Tensor, Tensor)");
  lib.impl("split3", [](const Tensor& x) {
    return std::make_tuple(map1(x, [](double v) { return -v; }), x.clone(), arange(x.numel()));
  }, DispatchKey::CPU);
  std::vector<Tensor> grads_seen;
  register_autograd(lib, "split3", [&](AutogradContext&, const std::vector<Tensor>& g) {
    grads_seen = g;
    return std::vector<Tensor>{tneg(g[0])};
  }, [](AutogradContext& ctx, const Stack&, const Stack& out) { ctx.mark_non_differentiable({out[1].to_tensor()}); });
  auto split3 = reg().get("ctx::split3").typed<std::tuple<Tensor, Tensor, Tensor>(const Tensor&)>();
  Tensor x = leaf({1.0, 2.0});
  auto [a, b, i] = split3.call(x);
  EXPECT_TRUE(a.requires_grad());
  EXPECT_FALSE(b.requires_grad());  // marked
  EXPECT_FALSE(i.requires_grad());  // integer
  tsum(a).backward();
  expect_values(x.grad(), {-1.0, -1.0});
  ASSERT_EQ(grads_seen.size(), 3u);  // one per returned tensor
  expect_values(grads_seen[1], {0.0, 0.0});
  EXPECT_EQ(grads_seen[2].dtype(), DType::Int64);
  expect_values(grads_seen[2], {0.0, 0.0});
}

TEST(ContextTest, MaterializeGradsCanBeTurnedOff) {
  for (bool materialize : {true, false}) {
    SCOPED_TRACE(materialize);
    Library lib("ctx", LibraryKind::DEF, std::nullopt, reg());
    lib.define("two(Tensor x) -> (Tensor, Tensor)");
    lib.impl("two", [](const Tensor& x) { return std::make_tuple(x.clone(), x.clone()); }, DispatchKey::CPU);
    std::vector<Tensor> grads_seen;
    register_autograd(lib, "two", [&](AutogradContext&, const std::vector<Tensor>& g) {
      grads_seen = g;
      return std::vector<Tensor>{g[0]};
    }, [materialize](AutogradContext& ctx, const Stack&, const Stack&) { ctx.set_materialize_grads(materialize); });
    Tensor x = leaf({1.0, 2.0});
    auto [a, b] = reg().get("ctx::two").typed<std::tuple<Tensor, Tensor>(const Tensor&)>().call(x);
    EXPECT_TRUE(b.requires_grad());
    tsum(a).backward();
    ASSERT_EQ(grads_seen.size(), 2u);
    EXPECT_EQ(grads_seen[1].defined(), materialize);
    if (materialize) expect_values(grads_seen[1], {0.0, 0.0});
  }
}

// ---------------------------------------------------------------- double backward

TEST(DoubleBackwardTest, SecondAndThirdDerivativesOfSin) {
  std::vector<double> xv{0.3, 1.1, -2.0};
  Tensor x = leaf(xv);
  Tensor g = grad({tsum(tsin(x))}, {x}, {}, false, /*create_graph=*/true)[0];
  EXPECT_TRUE(g.requires_grad());
  expect_values(g, apply(x, [](double v) { return std::cos(v); }));
  Tensor gg = grad({tsum(g)}, {x}, {}, false, /*create_graph=*/true)[0];
  expect_values(gg, apply(x, [](double v) { return -std::sin(v); }));
  Tensor ggg = grad({tsum(gg)}, {x})[0];
  expect_values(ggg, apply(x, [](double v) { return -std::cos(v); }));
  EXPECT_FALSE(ggg.requires_grad());
}

// Defines aten::add.Tensor in `lib`'s registry with a formula, counting its calls in `adds`.
void define_counting_add(Library& lib, int& adds) {
  lib.define("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  lib.impl("add.Tensor", [&adds](const Tensor& a, const Tensor& b, const Scalar&) {
    ++adds;
    return map2(a, b, [](double p, double q) { return p + q; });
  }, DispatchKey::CPU);
  register_autograd(lib, "add.Tensor", [](AutogradContext&, const std::vector<Tensor>& go) {
    return std::vector<Tensor>{go[0], go[0], Tensor()};
  });
}

TEST(DoubleBackwardTest, CreateGraphSumsThroughAtenAddWhenItExists) {
  Tensor x = leaf({1.5, -0.5});
  // Without aten::add.Tensor in the ops' registry or the global one, the two contributions of
  // x * x are summed by the CPU helper: the value is right, but the sum is not recorded.
  Tensor g = grad({tsum(tmul(x, x))}, {x}, {}, false, true)[0];
  expect_values(g, {3.0, -1.0});
  EXPECT_FALSE(g.requires_grad());

  Library aten("aten", LibraryKind::FRAGMENT, std::nullopt, Registry::global());
  int adds = 0;
  define_counting_add(aten, adds);
  g = grad({tsum(tmul(x, x))}, {x}, {}, false, true)[0];
  expect_values(g, {3.0, -1.0});
  EXPECT_EQ(adds, 1);
  ASSERT_TRUE(g.requires_grad());
  EXPECT_EQ(grad_fn(g)->name(), "aten::add.Tensor_backward");
  expect_values(grad({tsum(g)}, {x})[0], {2.0, 2.0});
}

// A mode that counts the calls it sees.
struct CountingMode final : DispatchMode {
  std::vector<std::string> seen;
  void dispatch(const OperatorHandle& op, Stack& stack) override {
    seen.push_back(op.name());
    redispatch(op, stack);
  }
};

TEST(DoubleBackwardTest, SumsUseTheAddOfTheRegistryThatRecordedTheNodes) {
  // The ops of reg() (not the global registry) sum with reg()'s add under create_graph, and under
  // a dispatch mode (graph capture must see every sum); a plain backward sums on the CPU helper.
  Tensor x = leaf({1.5, -0.5});
  Library aten("aten", LibraryKind::FRAGMENT, std::nullopt, reg());
  int adds = 0;
  define_counting_add(aten, adds);
  Tensor g = grad({tsum(tmul(x, x))}, {x}, {}, false, /*create_graph=*/true)[0];
  expect_values(g, {3.0, -1.0});
  EXPECT_EQ(adds, 1);
  ASSERT_TRUE(g.requires_grad());
  expect_values(grad({tsum(g)}, {x})[0], {2.0, 2.0});

  adds = 0;
  g = grad({tsum(tmul(x, x))}, {x})[0];
  expect_values(g, {3.0, -1.0});
  EXPECT_EQ(adds, 0);
  EXPECT_FALSE(g.requires_grad());

  RegistrationHandle fallback = install_dispatch_mode_fallback(reg());
  auto mode = std::make_shared<CountingMode>();
  Tensor root = tsum(tmul(x, x));
  {
    DispatchModeGuard guard(mode);
    g = grad({root}, {x})[0];
  }
  expect_values(g, {3.0, -1.0});
  EXPECT_EQ(adds, 1);
  EXPECT_EQ(std::count(mode->seen.begin(), mode->seen.end(), "aten::add.Tensor"), 1);
}

// ---------------------------------------------------------------- fallback and checks

TEST(FallbackTest, NotImplementedFormulaErrorNamesTheOperator) {
  Library lib("nf", LibraryKind::DEF, std::nullopt, reg());
  lib.define("twice(Tensor x) -> Tensor");
  lib.impl("twice", [](const Tensor& x) { return map1(x, [](double v) { return 2 * v; }); }, DispatchKey::CPU);
  auto twice = reg().get("nf::twice").typed<Tensor(const Tensor&)>();
  Tensor x = leaf({1.0});
  EXPECT_FALSE(twice.call(x).requires_grad());  // no fallback: AutogradCPU is skipped

  RegistrationHandle fallback = install_autograd_fallback(reg());
  Tensor y = twice.call(x);
  expect_values(y, {2.0});
  ASSERT_TRUE(y.requires_grad());
  EXPECT_EQ(grad_fn(y)->name(), "nf::twice_not_implemented");
  EXPECT_EQ(autograd_meta(twice.call(vec({1.0}))), nullptr);  // nothing to record
  Error e = expect_error([&] { tsum(tsin(y)).backward(); },
                         {"autograd: 'nf::twice' has no autograd formula; register one with register_autograd"});
  EXPECT_EQ(e.code(), ErrorCode::kNotImplemented);

  // Operators with a formula keep it.
  EXPECT_EQ(grad_fn(tsin(x))->name(), "t::sin_backward");
  fallback.reset();
  EXPECT_FALSE(twice.call(x).requires_grad());
}

TEST(FormulaCheckTest, BuggyBackwardsAreReportedWithOperatorAndArgument) {
  Library lib("bug", LibraryKind::DEF, std::nullopt, reg());
  lib.define("f(Tensor self, Tensor other, int k) -> Tensor");
  lib.impl("f", [](const Tensor& a, const Tensor&, int64_t) { return a.clone(); }, DispatchKey::CPU);
  int mode = 0;
  register_autograd(lib, "f", [&](AutogradContext&, const std::vector<Tensor>& g) -> std::vector<Tensor> {
    switch (mode) {
      case 0: return {g[0], vec({1, 2, 3}), Tensor()};           // wrong shape for `other`
      case 1: return {g[0]};                                     // too few
      case 2: return {g[0], g[0], g[0]};                         // a gradient for `k`
      default: return {g[0], arange(2), Tensor()};               // an integer gradient
    }
  });
  auto f = reg().get("bug::f").typed<Tensor(const Tensor&, const Tensor&, int64_t)>();
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  auto run = [&] { tsum(f.call(a, b, 7)).backward(); };
  mode = 0;
  Error e = expect_error(run, {"'bug::f'", "argument 'other'", "shape [3]", "[2]"});
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  mode = 1;
  e = expect_error(run, {"'bug::f' returned 1 gradients, expected 3"});
  EXPECT_EQ(e.code(), ErrorCode::kSchemaMismatch);
  mode = 2;
  expect_error(run, {"'bug::f'", "argument 'k' of type int, which is not a Tensor"});
  mode = 3;
  expect_error(run, {"'bug::f'", "argument 'other'", "dtype int64"});
}

// ---------------------------------------------------------------- aliasing and mutation

TEST(AliasingTest, InPlaceOpRebasesHistoryAndRejectsLeaves) {
  Library lib("ip", LibraryKind::DEF, std::nullopt, reg());
  lib.define("scale_(Tensor(a!) self, float f) -> Tensor(a!)");
  lib.impl("scale_", [](const Tensor& self, double f) {
    self.copy_(tmul(self, full(self.sizes(), f, TensorOptions(self.dtype()))));
    return self;
  }, DispatchKey::CPU);
  register_autograd(lib, "scale_", [](AutogradContext& ctx, const std::vector<Tensor>& g) {
    double f = ctx.get("f").to_double();
    return std::vector<Tensor>{tmul(g[0], full(g[0].sizes(), f, TensorOptions(g[0].dtype()))), Tensor()};
  }, [](AutogradContext& ctx, const Stack& in, const Stack&) { ctx.set("f", in[1]); });
  auto scale_ = reg().get("ip::scale_").typed<Tensor(const Tensor&, double)>();

  Tensor x = leaf({1.0, 2.0});
  expect_error([&] { scale_.call(x, 3.0); },
               {"a leaf Variable that requires grad is being used in an in-place operation", "ip::scale_"});
  expect_values(x, {1.0, 2.0});  // refused before running

  Tensor y = tneg(x);
  Tensor r = scale_.call(y, 3.0);
  EXPECT_TRUE(r.is_same(y));
  EXPECT_EQ(grad_fn(y)->name(), "ip::scale__backward");
  EXPECT_EQ(grad_fn(y)->next_edge(0).function->name(), "t::neg_backward");
  tsum(y).backward();
  expect_values(x.grad(), {-3.0, -3.0});
}

TEST(AliasingTest, OutputThatIsAnInputBecomesANewTensor) {
  Library lib("al", LibraryKind::DEF, std::nullopt, reg());
  lib.define("ident(Tensor(a) self) -> Tensor(a)");
  lib.impl("ident", [](const Tensor& self) { return self; }, DispatchKey::CPU);
  register_autograd(lib, "ident", [](AutogradContext&, const std::vector<Tensor>& g) { return g; });
  Tensor x = leaf({1.0, 2.0});
  Tensor y = reg().get("al::ident").typed<Tensor(const Tensor&)>().call(x);
  EXPECT_FALSE(y.is_same(x));
  EXPECT_TRUE(y.is_alias_of(x));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(grad_fn(y)->name(), "al::ident_backward");
  tsum(tmul(y, y)).backward();
  expect_values(x.grad(), {2.0, 4.0});
}

}  // namespace
}  // namespace opconform
