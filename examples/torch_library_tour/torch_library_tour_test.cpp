// Every code example of the torch.library reference (PyTorch's torch.library documentation)
// in C++, each a test asserting the outcome the document states. Read it side by side with the
// document: names and values follow it. numpy's role is played by plain loops
// (core/tests/support/float_ops.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "opconform/core.h"
#include "opconform/core/autocast.h"
#include "opconform/core/autograd.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/dispatch_mode.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/vmap.h"
#include "support/float_ops.h"

namespace opconform {
namespace {

using testing::allclose;
using testing::map;
using testing::zip;

double sin_(double v) { return std::sin(v); }

Tensor randn(std::vector<int64_t> sizes, uint32_t seed = 1) {
  Tensor t = opconform::empty(sizes);
  float* p = t.mutable_data_ptr<float>();
  uint32_t s = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<float>(static_cast<int32_t>(s >> 8) % 2000) / 1000.0f;  // in (-2, 2)
  }
  return t;
}

// Each test gets a registry of its own, with the autograd, fake, vmap and dispatch-mode
// fallbacks PyTorch has built in.
class Tour : public ::testing::Test {
 protected:
  CustomOpOptions opts(CustomOpOptions o = {}) {
    o.registry = &registry;
    return o;
  }
  Registry registry;
  RegistrationHandle fallbacks = install_builtin_fallbacks(registry);
};

// opcheck's example: numpy_mul with a fake kernel and an autograd formula.
TEST_F(Tour, NumpyMulWithFakeAndAutograd) {
  auto numpy_mul = custom_op("mylib::numpy_mul", [](const Tensor& x, double y) { return map(x, [y](double v) { return v * y; }); },
                             opts(), {"x", "y"});
  numpy_mul.register_fake([](const Tensor& x, double) { return empty_like(x); });
  numpy_mul.register_autograd(
      [](autograd::AutogradContext& ctx, const std::vector<Tensor>& grad) {
        double y = ctx.get("y").to_double();
        return std::vector<Tensor>{map(grad[0], [y](double g) { return g * y; }), Tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) { ctx.set("y", inputs[1]); });

  Tensor x = randn({1, 10});
  x.set_requires_grad(true);
  Tensor z = numpy_mul(x, 1.234);
  EXPECT_TRUE(allclose(z.detach(), map(x.detach(), [](double v) { return v * 1.234; })));
  auto g = autograd::grad({z}, {x}, {ones({1, 10})});
  EXPECT_TRUE(allclose(g[0], full({1, 10}, 1.234)));

  Tensor real = randn({2, 3});
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor fake = mode.from_tensor(real);
  Tensor out = numpy_mul(fake, 2.718);
  EXPECT_TRUE(out.is_fake());
  EXPECT_EQ(std::vector<int64_t>(out.sizes().begin(), out.sizes().end()), (std::vector<int64_t>{2, 3}));
}

// The three contracts: add_inplace (Tag::inplace), add_out (Tag::out), add_mutate.
TEST_F(Tour, InplaceOutAndMutableForms) {
  auto add = [](const Tensor& a, const Tensor& b) { return zip(a, b, [](double p, double q) { return p + q; }); };
  auto add_inplace = custom_op("mylib::add_inplace", [add](const Tensor& x, const Tensor& y) { x.copy_(add(x, y)); return x; },
                               opts({.mutates_args = {"x"}, .tags = {Tag::inplace}}), {"x", "y"});
  auto add_out = custom_op("mylib::add_out", [add](const Tensor& x, const Tensor& y, const Tensor& out) { out.copy_(add(x, y)); return out; },
                           opts({.mutates_args = {"out"}, .tags = {Tag::out}}), {"x", "y", "*", "out"});
  auto add_mutate = custom_op("mylib::add_mutate", [add](const Tensor& x, const Tensor& y) { x.copy_(add(x, y)); },
                              opts({.mutates_args = {"x"}}), {"x", "y"});
  EXPECT_EQ(add_inplace.schema().to_string(), "mylib::add_inplace(Tensor(a!) x, Tensor y) -> Tensor(a!)");
  EXPECT_EQ(add_out.schema().to_string(), "mylib::add_out(Tensor x, Tensor y, *, Tensor(a!) out) -> Tensor(a!)");
  EXPECT_EQ(add_mutate.schema().to_string(), "mylib::add_mutate(Tensor(a0!) x, Tensor y) -> ()");

  Tensor x = randn({3}), y = randn({3}, 2), expected = add(x, y);
  EXPECT_TRUE(add_inplace(x, y).is_same(x));
  EXPECT_TRUE(allclose(x, expected));
  Tensor out = empty({3});
  EXPECT_TRUE(add_out(randn({3}), y, out).is_same(out));
  EXPECT_TRUE(allclose(out, add(randn({3}), y)));
  Tensor m = randn({3});
  Tensor m_expected = add(m, y);
  add_mutate(m, y);
  EXPECT_TRUE(allclose(m, m_expected));
}

// A host-memory "second device", so the register_kernel example runs without a GPU.
class HostMemory final : public Allocator {
 public:
  void* allocate(size_t n, Device) override { return n ? std::malloc(n) : nullptr; }
  void deallocate(void* p, Device) override { std::free(p); }
  void copy_from_host(void* d, const void* s, size_t n, Device) override { std::memcpy(d, s, n); }
  void copy_to_host(void* d, const void* s, size_t n, Device) override { std::memcpy(d, s, n); }
};

TEST_F(Tour, NumpySinOnCpuAndASecondDevice) {
  static HostMemory memory;
  DeviceType second = register_device_type("tour_device");
  set_allocator(second, &memory);
  auto numpy_sin = custom_op("mylib::numpy_sin", [](const Tensor& x) { return map(x, sin_); },
                             opts({.device_types = std::vector<DeviceType>{DeviceType::CPU}}), {"x"});
  Tensor x_cpu = randn({3});
  Tensor x_dev = x_cpu.to(Device(second, 0));
  EXPECT_THROW(numpy_sin(x_dev), Error);  // no kernel for the second device yet
  auto handle = register_kernel("mylib::numpy_sin", {second}, [](const Tensor& x) {
    return map(x.to(Device::cpu()), sin_).to(x.device());
  }, registry);
  EXPECT_TRUE(allclose(numpy_sin(x_cpu), map(x_cpu, sin_)));
  Tensor y_dev = numpy_sin(x_dev);
  EXPECT_EQ(y_dev.device().type, second);
  EXPECT_TRUE(allclose(y_dev.to(Device::cpu()), map(x_cpu, sin_)));
}

TEST_F(Tour, FactoryFunction) {
  auto bar = custom_op("mylib::bar", [](Device) { return ones({3}); },
                       opts({.device_types = std::vector<DeviceType>{DeviceType::CPU}}), {"device"});
  EXPECT_EQ(bar(Device::cpu()).to_vector<float>(), (std::vector<float>{1, 1, 1}));
}

TEST_F(Tour, WeightedSumOverATensorList) {
  auto weighted_sum = custom_op(
      "mylib::weighted_sum",
      [](const std::vector<Tensor>& tensors, const std::vector<double>& weights) {
        Tensor acc = zeros(tensors.at(0).sizes());
        for (size_t i = 0; i < tensors.size(); ++i) {
          double w = weights.at(i);
          acc = zip(acc, tensors[i], [w](double a, double t) { return a + t * w; });
        }
        return acc;
      },
      opts(), {"tensors", "weights"});
  EXPECT_EQ(weighted_sum.schema().to_string(), "mylib::weighted_sum(Tensor[] tensors, float[] weights) -> Tensor");
  Tensor x = randn({3}), y = randn({3}, 7);
  Tensor expected = zip(x, y, [](double a, double b) { return 0.3 * a + 0.7 * b; });
  EXPECT_TRUE(allclose(weighted_sum({x, y}, {0.3, 0.7}), expected));
}

TEST_F(Tour, CustomLinearFakeKernel) {
  auto custom_linear = custom_op("mylib::custom_linear", [](const Tensor&, const Tensor&, const Tensor&) -> Tensor {
    throw Error(ErrorCode::kNotImplemented, "Implementation goes here");
  }, opts(), {"x", "weight", "bias"});
  register_fake("mylib::custom_linear", [](const Tensor& x, const Tensor& weight, const Tensor& bias) {
    EXPECT_EQ(x.dim(), 2);
    EXPECT_EQ(weight.dim(), 2);
    EXPECT_EQ(bias.dim(), 1);
    EXPECT_EQ(x.size(1), weight.size(1));
    EXPECT_EQ(weight.size(0), bias.size(0));
    EXPECT_EQ(x.device(), weight.device());
    return empty({x.size(0), weight.size(0)}, x.options());  // (x @ weight.t()) + bias
  }, false, registry);
  // Real tensors entering the mode become fake (randn under the mode would be fake already;
  // ours writes data, so the inputs are made first).
  Tensor x = randn({2, 3}), w = randn({3, 3}), b = randn({3});
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor y = custom_linear(x, w, b);
  EXPECT_TRUE(y.is_fake());
  EXPECT_EQ(std::vector<int64_t>(y.sizes().begin(), y.sizes().end()), (std::vector<int64_t>{2, 3}));
}

TEST_F(Tour, CustomNonzeroFakeKernelWithADynamicSize) {
  auto custom_nonzero = custom_op("mylib::custom_nonzero", [](const Tensor& x) {
    std::vector<int64_t> idx;
    auto v = x.to_vector<int64_t>();
    for (size_t i = 0; i < v.size(); ++i) if (v[i] != 0) idx.push_back(static_cast<int64_t>(i));
    return from_vector<int64_t>(idx, {static_cast<int64_t>(idx.size()), 1});
  }, opts(), {"x"});
  custom_nonzero.register_fake([](const Tensor& x) {
    SymInt nnz = get_ctx().new_dynamic_size();
    return make_fake_tensor({nnz, SymInt(x.dim())}, DType::Int64, x.device());
  });
  Tensor x = from_vector<int64_t>({0, 1, 2, 3, 4, 0}, {6});
  Tensor real = custom_nonzero(x);
  EXPECT_EQ(real.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4}));
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Tensor fake = custom_nonzero(mode.from_tensor(x));
  ASSERT_TRUE(fake.has_symbolic_sizes());
  EXPECT_TRUE(fake.sym_sizes()[0].is_symbolic());
  EXPECT_EQ(fake.sym_sizes()[1], SymInt(1));
  EXPECT_THROW(get_ctx(), Error);  // only inside a fake kernel
}

TEST_F(Tour, NumpyCubeAndNumpyMulVmap) {
  int cube_rule_calls = 0;
  auto numpy_cube = custom_op("mylib::numpy_cube", [](const Tensor& x) {
    return std::make_tuple(map(x, [](double v) { return v * v * v; }), map(x, [](double v) { return 3 * v * v; }));
  }, opts(), {"x"});
  numpy_cube.register_vmap([&](const VmapInfo&, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
    ++cube_rule_calls;
    Stack out{IValue(map(inputs[0].to_tensor(), [](double v) { return v * v * v; })),
              IValue(map(inputs[0].to_tensor(), [](double v) { return 3 * v * v; }))};
    return std::make_pair(out, std::vector<std::optional<int64_t>>{in_dims[0], in_dims[0]});
  });
  Tensor x = randn({3});
  auto cubed = vmap([&](const std::vector<Tensor>& a) {
    auto [c, d] = numpy_cube(a[0]);
    return std::vector<Tensor>{c, d};
  }, {0}, {0, 0})({x});
  EXPECT_EQ(cube_rule_calls, 1);
  EXPECT_TRUE(allclose(cubed[0], map(x, [](double v) { return v * v * v; })));
  EXPECT_TRUE(allclose(cubed[1], map(x, [](double v) { return 3 * v * v; })));

  auto numpy_mul = custom_op("mylib::numpy_mul", [](const Tensor& x, const Tensor& y) {
    return zip(x, y, [](double a, double b) { return a * b; });
  }, opts(), {"x", "y"});
  register_vmap("mylib::numpy_mul", [](const VmapInfo& info, const Stack& inputs, const std::vector<std::optional<int64_t>>& in_dims) {
    // Both batched at dim 0 here: multiply the physical tensors directly.
    Tensor r = zip(inputs[0].to_tensor(), inputs[1].to_tensor(), [](double a, double b) { return a * b; });
    return std::make_pair(Stack{IValue(r)}, std::vector<std::optional<int64_t>>{in_dims[0]});
  }, registry);
  Tensor a = randn({3}), b = randn({3}, 9);
  auto prod = vmap([&](const std::vector<Tensor>& t) { return std::vector<Tensor>{numpy_mul(t[0], t[1])}; }, {0, 0})({a, b});
  EXPECT_TRUE(allclose(prod[0], zip(a, b, [](double p, double q) { return p * q; })));
  EXPECT_EQ(vmap_fallback_count("mylib::numpy_mul"), 0);
}

TEST_F(Tour, MySinAutocast) {
  auto my_sin = custom_op("mylib::my_sin", [](const Tensor& x) { return map(x, sin_); }, opts(), {"x"});
  register_autocast("mylib::my_sin", DeviceType::CPU, DType::Float16, registry);
  Tensor x = randn({3});
  {
    AutocastGuard autocast(DeviceType::CPU, DType::Float16);
    EXPECT_EQ(my_sin(x).dtype(), DType::Float16);
  }
  EXPECT_EQ(my_sin(x).dtype(), DType::Float32);
}

struct MyMode : DispatchMode {};

TEST_F(Tour, FooWithADispatchModeRule) {
  auto foo = custom_op("mylib::foo", [](const Tensor& x) { return x.clone(); }, opts(), {"x"});
  foo.register_dispatch_rule<MyMode>([](DispatchMode&, const OperatorHandle&, Stack& stack) {
    Tensor x = stack.back().to_tensor();
    stack.back() = IValue(map(x, [](double v) { return v + 1; }));
  });
  Tensor x = randn({3});
  EXPECT_TRUE(allclose(foo(x), x));
  {
    DispatchModeGuard mode(std::make_shared<MyMode>());
    EXPECT_TRUE(allclose(foo(x), map(x, [](double v) { return v + 1; })));
  }
  EXPECT_TRUE(allclose(foo(x), x));
}

Tensor foo_impl(const Tensor& x) { return x.clone(); }

TEST_F(Tour, InferSchema) {
  EXPECT_EQ(infer_schema<decltype(foo_impl)>({"x"}, {}, "foo").to_string(), "foo(Tensor x) -> Tensor");
  EXPECT_EQ(infer_schema<decltype(foo_impl)>({"x"}, {}).to_string(), "(Tensor x) -> Tensor");
}

TEST_F(Tour, SetKernelEnabled) {
  Tensor inp = randn({1});
  auto f = custom_op("mylib::f", [](const Tensor&) { return zeros({1}); }, opts(), {"x"});
  EXPECT_EQ(f(inp).item().to<float>(), 0.0f);  // default kernel
  f.register_kernel({DeviceType::CPU}, [](const Tensor&) { return ones({1}); });
  EXPECT_EQ(f(inp).item().to<float>(), 1.0f);  // CPU kernel
  {
    auto disabled = f.set_kernel_enabled(DeviceType::CPU, false);
    EXPECT_EQ(f(inp).item().to<float>(), 0.0f);  // CPU kernel disabled
  }
  EXPECT_EQ(f(inp).item().to<float>(), 1.0f);  // enabled again
}

TEST_F(Tour, GetKernelWithConditionalSin) {
  Library aten("aten", LibraryKind::FRAGMENT, std::nullopt, registry);
  aten.define("sin(Tensor self) -> Tensor");
  aten.impl("sin", [](const Tensor& x) { return map(x, sin_); }, DispatchKey::CPU);
  SafeKernelFunction original_sin_kernel = get_kernel("aten::sin", DispatchKey::CPU, registry);
  Library lib("aten", LibraryKind::IMPL, std::nullopt, registry);
  lib.impl("sin", [original_sin_kernel](DispatchKeySet dispatch_keys, const Tensor& x) -> Tensor {
    bool any_negative = false;
    for (double v : testing::values(x)) any_negative = any_negative || v < 0;
    if (any_negative) return original_sin_kernel.call_boxed(dispatch_keys, x)[0].to_tensor();
    return zeros(x.sizes(), x.options());
  }, DispatchKey::CPU, {.with_keyset = true});
  auto sin = registry.get("aten::sin").typed<Tensor(const Tensor&)>();
  EXPECT_EQ(sin.call(from_vector<float>({1, 2}, {2})).to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_TRUE(allclose(sin.call(from_vector<float>({-1, 2}, {2})), from_vector<float>({-0.8415f, 0.9093f}, {2}), 1e-4));
}

// register_autograd's examples: numpy_sin, and numpy_mul with a keyword-only argument.
TEST_F(Tour, RegisterAutograd) {
  auto numpy_sin = custom_op("mylib::numpy_sin", [](const Tensor& x) { return map(x, sin_); }, opts(), {"x"});
  register_autograd(
      "mylib::numpy_sin",
      [](autograd::AutogradContext& ctx, const std::vector<Tensor>& grad) {
        Tensor x = ctx.saved_tensors().at(0);
        return std::vector<Tensor>{zip(grad[0], x, [](double g, double v) { return g * std::cos(v); })};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) { ctx.save_for_backward({inputs[0].to_tensor()}); },
      registry);
  Tensor x = randn({3});
  x.set_requires_grad(true);
  Tensor y = numpy_sin(x);
  auto grad_x = autograd::grad({y}, {x}, {ones({3})});
  EXPECT_TRUE(allclose(grad_x[0], map(x.detach(), [](double v) { return std::cos(v); })));

  auto numpy_mul = custom_op("mylib::numpy_mul", [](const Tensor& t, double val) { return map(t, [val](double v) { return v * val; }); },
                             opts(), {"x", "*", "val"});
  numpy_mul.register_autograd(
      [](autograd::AutogradContext& ctx, const std::vector<Tensor>& grad) {
        double val = ctx.get("val").to_double();
        return std::vector<Tensor>{map(grad[0], [val](double g) { return g * val; }), Tensor()};
      },
      KeywordSetupContextFn([](autograd::AutogradContext& ctx, const Stack&, const Stack& keyword_only_inputs, const Stack&) {
        ctx.set("val", keyword_only_inputs.at(0));
      }));
  Tensor x2 = randn({3});
  x2.set_requires_grad(true);
  auto g = autograd::grad({numpy_mul(x2, 3.14)}, {x2}, {ones({3})});
  EXPECT_TRUE(allclose(g[0], full({3}, 3.14)));
}

// torch.library.define and torch.library.impl, with and without a decorator.
TEST_F(Tour, DefineAndImpl) {
  auto def = define("mylib::sin", "(Tensor x) -> Tensor", {}, registry);
  auto cpu = impl("mylib::sin", DispatchKey::CPU, [](const Tensor& x) { return map(x, sin_); }, registry);
  Tensor x = randn({3});
  EXPECT_TRUE(allclose(registry.get("mylib::sin").typed<Tensor(const Tensor&)>().call(x), map(x, sin_)));

  auto custom_decorator = [](auto func) {
    return [func](const Tensor& t) { return map(func(t), [](double v) { return v + 1; }); };
  };
  auto def2 = define("mylib::sin_plus_one", "(Tensor x) -> Tensor", {}, registry);
  auto cpu2 = impl("mylib::sin_plus_one", DispatchKey::CPU,
                   custom_decorator([](const Tensor& t) { return map(t, sin_); }), registry);
  Tensor y1 = registry.get("mylib::sin_plus_one").typed<Tensor(const Tensor&)>().call(x);
  EXPECT_TRUE(allclose(y1, map(x, [](double v) { return std::sin(v) + 1; })));
}

TEST_F(Tour, LibraryDefineImplFallback) {
  Library my_lib("mylib", LibraryKind::DEF, std::nullopt, registry);
  EXPECT_EQ(my_lib.define("sum(Tensor self) -> Tensor"), "mylib::sum");
  my_lib.impl("sum", [](const Tensor& x) {
    double s = 0;
    for (double v : testing::values(x)) s += v;
    return scalar_tensor(s);
  }, DispatchKey::CPU);
  EXPECT_DOUBLE_EQ(registry.get("mylib::sum").typed<Tensor(const Tensor&)>().call(ones({4})).item().to_double(), 4.0);

  // Library("aten", "IMPL") overriding div.Tensor with self * (1 / other).
  Library aten_def("aten", LibraryKind::FRAGMENT, std::nullopt, registry);
  aten_def.define("div.Tensor(Tensor self, Tensor other) -> Tensor");
  Library aten("aten", LibraryKind::IMPL, std::nullopt, registry);
  aten.impl("div.Tensor", [](const Tensor& self, const Tensor& other) {
    return zip(self, other, [](double a, double b) { return a * (1 / b); });
  }, DispatchKey::CPU);
  auto div = registry.get("aten::div.Tensor").typed<Tensor(const Tensor&, const Tensor&)>();
  EXPECT_TRUE(allclose(div.call(full({2}, 3.0), full({2}, 4.0)), full({2}, 0.75)));

  // A fallback for every op at one key (here: counting calls under autocast).
  int seen = 0;
  Library fallbacks("_", LibraryKind::IMPL, std::nullopt, registry);
  fallbacks.fallback([&](const OperatorHandle& op, DispatchKeySet keys, Stack& stack) {
    ++seen;
    op.redispatch_boxed(keys.after(DispatchKey::AutocastCPU), stack);
  }, DispatchKey::AutocastCPU);
  IncludeDispatchKeyGuard autocast(DispatchKey::AutocastCPU);
  div.call(ones({1}), ones({1}));
  EXPECT_EQ(seen, 1);
}

}  // namespace
}  // namespace opconform
