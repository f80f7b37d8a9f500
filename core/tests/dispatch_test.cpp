// The registry and dispatcher: Library define/impl/fallback, priorities, alias keys, thread-local
// key sets, redispatch, boxed and unboxed calls, get_kernel, error messages, table dumps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "opconform/core.h"

namespace opconform {
namespace {

using ::testing::HasSubstr;

// out[i] = x[i] * factor, for contiguous float32 CPU tensors.
Tensor scale(const Tensor& x, double factor) {
  Tensor c = x.contiguous();
  Tensor out = empty_like(x);
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = static_cast<float>(in[i] * factor);
  return out;
}

Tensor sin_cpu(const Tensor& x) {
  Tensor c = x.contiguous();
  Tensor out = empty_like(x);
  const float* in = c.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = std::sin(in[i]);
  return out;
}

Tensor vec(std::vector<float> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return from_vector<float>(v, {n});
}

// A fake tensor on any device: metadata only, so CUDA and vendor backends can be dispatched to
// without their hardware.
Tensor meta_on(Device d) { return make_metadata_tensor(std::vector<int64_t>{2}, std::vector<int64_t>{1}, DType::Float32, d); }

class DispatchTest : public ::testing::Test {
 protected:
  Registry registry;
};

TEST_F(DispatchTest, DefineImplAndCallTypedAndBoxed) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  EXPECT_EQ(lib.define("scale(Tensor self, float factor) -> Tensor"), "t::scale");
  lib.impl("scale", scale, DispatchKey::CPU);
  auto op = registry.get("t::scale");
  Tensor y = op.typed<Tensor(const Tensor&, double)>().call(vec({1, 2, 3}), 2.0);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 4, 6}));

  Stack stack{IValue(vec({1, 2})), IValue(3.0)};
  op.call_boxed(stack);
  ASSERT_EQ(stack.size(), 1u);
  EXPECT_EQ(stack[0].to_tensor().to_vector<float>(), (std::vector<float>{3, 6}));
}

// Note [Call context without a rethrow]: an error leaving nested calls names each operator once,
// innermost first, boxed and typed alike; an error made after a call failed, outside any call,
// names none (the failed calls left nothing behind), and a handled error inside a kernel does not
// leak into the next one.
TEST_F(DispatchTest, AnErrorNamesTheCallsItLeavesAndNoOthers) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("inner(Tensor x) -> Tensor");
  lib.define("outer(Tensor x) -> Tensor");
  lib.define("again(Tensor x) -> Tensor");
  lib.impl("inner", [](const Tensor&) -> Tensor { throw Error(ErrorCode::kInvalidArgument, "deep failure"); }, DispatchKey::CPU);
  lib.impl("outer", [this](const Tensor& x) {
    // A failure handled inside the kernel, then a nested call that fails.
    try {
      registry.get("t::inner").typed<Tensor(const Tensor&)>().call(x);
    } catch (const Error&) {
    }
    return registry.get("t::inner").typed<Tensor(const Tensor&)>().call(x);
  }, DispatchKey::CPU);
  lib.impl("again", [this](const Tensor& x) -> Tensor {  // calls itself once, then fails
    if (x.numel() == 0) throw Error(ErrorCode::kInvalidArgument, "empty");
    return registry.get("t::again").typed<Tensor(const Tensor&)>().call(vec({}));
  }, DispatchKey::CPU);

  Stack stack{IValue(vec({1}))};
  try {
    registry.get("t::outer").call_boxed(stack);
    FAIL() << "t::outer did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.context(), (std::vector<std::string>{"while calling 't::inner'", "while calling 't::outer'"}));
    EXPECT_THAT(e.what(), HasSubstr("deep failure\n  while calling 't::inner'\n  while calling 't::outer'"));
  }
  EXPECT_TRUE(Error(ErrorCode::kInternal, "outside").context().empty());
  try {
    registry.get("t::outer").typed<Tensor(const Tensor&)>().call(vec({1}));
    FAIL() << "t::outer did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.context().size(), 2u) << e.what();
  }
  EXPECT_TRUE(Error(ErrorCode::kInternal, "outside").context().empty());
  try {
    registry.get("t::again").typed<Tensor(const Tensor&)>().call(vec({1}));
    FAIL() << "t::again did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.context(), (std::vector<std::string>{"while calling 't::again'"}));  // once per operator
  }
}

TEST_F(DispatchTest, TypedCallWithOtherSignatureGoesThroughBoxing) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("scale(Tensor self, float factor) -> Tensor");
  lib.impl("scale", scale, DispatchKey::CPU);
  // int64_t instead of double: no unboxed match, boxed conversion int -> float applies.
  Tensor y = registry.get("t::scale").typed<Tensor(const Tensor&, int64_t)>().call(vec({1, 2}), 3);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3, 6}));
}

TEST_F(DispatchTest, BoxedKernelCalledTyped) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("first(Tensor a, Tensor b) -> Tensor");
  int calls = 0;
  lib.impl("first", [&](const OperatorHandle& op, DispatchKeySet, Stack& stack) {
    ++calls;
    EXPECT_EQ(op.name(), "t::first");
    IValue a = stack[stack.size() - 2];
    stack.resize(stack.size() - 2);
    stack.push_back(a);
  }, DispatchKey::CPU);
  Tensor a = vec({1}), b = vec({2});
  Tensor r = registry.get("t::first").typed<Tensor(const Tensor&, const Tensor&)>().call(a, b);
  EXPECT_TRUE(r.is_same(a));
  EXPECT_EQ(calls, 1);
}

TEST_F(DispatchTest, MissingBackendErrorNamesOperatorBackendAndKernels) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("sin(Tensor self) -> Tensor");
  lib.impl("sin", sin_cpu, DispatchKey::CPU);
  lib.impl("sin", [](const Tensor& x) { return x; }, DispatchKey::Meta);
  auto op = registry.get("t::sin").typed<Tensor(const Tensor&)>();
  try {
    op.call(meta_on(Device::cuda(0)));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotImplemented);
    EXPECT_THAT(e.what(), HasSubstr("Could not run 't::sin' with arguments from the 'CUDA' backend; "
                                    "it has kernels for: CPU (registered at core/tests/dispatch_test.cpp:"));
    EXPECT_THAT(e.what(), HasSubstr("Meta (registered at core/tests/dispatch_test.cpp:"));
  }
  // The table's CUDA entry holds that error kernel: kernel_for is valid, has_kernel_for says no.
  const OperatorHandle handle = registry.get("t::sin");
  EXPECT_TRUE(handle.kernel_for(DispatchKey::CUDA).valid());
  EXPECT_FALSE(handle.has_kernel_for(DispatchKey::CUDA));
  EXPECT_TRUE(handle.has_kernel_for(DispatchKey::CPU));
}

TEST_F(DispatchTest, AutogradKeyRunsFirstAndRedispatchesBelow) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("sin(Tensor self) -> Tensor");
  lib.impl("sin", sin_cpu, DispatchKey::CPU);
  std::vector<std::string> trace;
  lib.impl("sin", [&](DispatchKeySet keys, const Tensor& x) {
    trace.push_back("autograd");
    EXPECT_TRUE(keys.has(DispatchKey::AutogradCPU));
    auto op = registry.get("t::sin").typed<Tensor(const Tensor&)>();
    return op.redispatch(keys.after(DispatchKey::AutogradCPU), x);
  }, DispatchKey::AutogradCPU, {.with_keyset = true});
  Tensor y = registry.get("t::sin").typed<Tensor(const Tensor&)>().call(vec({0.5f}));
  EXPECT_FLOAT_EQ(y.item().to<float>(), std::sin(0.5f));
  EXPECT_EQ(trace, std::vector<std::string>{"autograd"});

  // Excluding the autograd key for a scope skips the autograd kernel.
  {
    ExcludeDispatchKeyGuard guard(DispatchKey::AutogradCPU);
    registry.get("t::sin").typed<Tensor(const Tensor&)>().call(vec({0.5f}));
  }
  EXPECT_EQ(trace.size(), 1u);
}

TEST_F(DispatchTest, CompositeExplicitCoversEveryBackend) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("ident(Tensor self) -> Tensor");
  int calls = 0;
  lib.impl("ident", [&](const Tensor& x) { ++calls; return x; }, DispatchKey::CompositeExplicitAutograd);
  auto op = registry.get("t::ident").typed<Tensor(const Tensor&)>();
  op.call(vec({1}));
  op.call(meta_on(Device::meta()));
  op.call(meta_on(Device::cuda(0)));
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(registry.get("t::ident").has_kernel_for(DispatchKey::CUDA));
  EXPECT_THAT(registry.get("t::ident").dump_dispatch_table(), HasSubstr("CPU: kernel registered at"));
  EXPECT_THAT(registry.get("t::ident").dump_dispatch_table(), HasSubstr("[CompositeExplicitAutograd]"));
}

TEST_F(DispatchTest, CompositeImplicitYieldsAutogradKeyToBackendKernel) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("f(Tensor self) -> Tensor");
  std::vector<std::string> trace;
  lib.impl("f", [&](const Tensor& x) { trace.push_back("implicit"); return x; }, DispatchKey::CompositeImplicitAutograd);
  auto op = registry.get("t::f").typed<Tensor(const Tensor&)>();
  op.call(vec({1}));
  EXPECT_EQ(trace, std::vector<std::string>{"implicit"});
  EXPECT_EQ(registry.get("t::f").entry().table_source[static_cast<size_t>(DispatchKey::AutogradCPU)],
            detail::TableSource::CompositeImplicit);

  // With a CPU kernel of its own, AutogradCPU no longer uses the implicit kernel (it is skipped,
  // so CPU runs), while AutogradCUDA still does.
  lib.impl("f", [&](const Tensor& x) { trace.push_back("cpu"); return x; }, DispatchKey::CPU);
  op.call(vec({1}));
  EXPECT_EQ(trace.back(), "cpu");
  op.call(meta_on(Device::cuda(0)));
  EXPECT_EQ(trace.back(), "implicit");
}

TEST_F(DispatchTest, FallbackAndFallthrough) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("sin(Tensor self) -> Tensor");
  lib.impl("sin", sin_cpu, DispatchKey::CPU);
  auto op = registry.get("t::sin").typed<Tensor(const Tensor&)>();
  std::vector<std::string> seen;
  {
    Library fallbacks("_", LibraryKind::IMPL, std::nullopt, registry);
    fallbacks.fallback([&](const OperatorHandle& o, DispatchKeySet keys, Stack& stack) {
      seen.push_back(o.name());
      o.redispatch_boxed(keys.after(DispatchKey::AutocastCPU), stack);
    }, DispatchKey::AutocastCPU);
    IncludeDispatchKeyGuard autocast(DispatchKey::AutocastCPU);
    Tensor y = op.call(vec({0.25f}));
    EXPECT_FLOAT_EQ(y.item().to<float>(), std::sin(0.25f));
    EXPECT_EQ(seen, std::vector<std::string>{"t::sin"});

    // An operator-level fallthrough at the key skips the fallback for that operator only.
    Library skip("t", LibraryKind::IMPL, std::nullopt, registry);
    skip.impl("sin", fallthrough_kernel(), DispatchKey::AutocastCPU);
    op.call(vec({0.25f}));
    EXPECT_EQ(seen.size(), 1u);
  }
  // The fallback library is gone: the key is skipped again.
  IncludeDispatchKeyGuard autocast(DispatchKey::AutocastCPU);
  op.call(vec({0.25f}));
  EXPECT_EQ(seen.size(), 1u);
}

TEST_F(DispatchTest, OverrideIsUndoneWhenItsLibraryDies) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("k(Tensor self) -> int");
  lib.impl("k", [](const Tensor&) -> int64_t { return 1; }, DispatchKey::CPU);
  auto op = registry.get("t::k").typed<int64_t(const Tensor&)>();
  EXPECT_EQ(op.call(vec({0})), 1);
  {
    Library over("t", LibraryKind::IMPL, std::nullopt, registry);
    over.impl("k", [](const Tensor&) -> int64_t { return 2; }, DispatchKey::CPU);
    EXPECT_EQ(op.call(vec({0})), 2);
    try {
      over.impl("k", [](const Tensor&) -> int64_t { return 3; }, DispatchKey::CPU, {.allow_override = false});
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("already registered"));
      EXPECT_THAT(e.what(), HasSubstr("allow_override is false"));
    }
  }
  EXPECT_EQ(op.call(vec({0})), 1);
}

TEST_F(DispatchTest, LibraryLifetimeAndKinds) {
  {
    Library lib("t", LibraryKind::DEF, std::nullopt, registry);
    lib.define("a(Tensor x) -> Tensor");
    EXPECT_TRUE(registry.find("t::a")->has_schema());
    // A second DEF library for the same namespace is refused; a FRAGMENT is fine.
    EXPECT_THROW(Library("t", LibraryKind::DEF, std::nullopt, registry), Error);
    Library frag("t", LibraryKind::FRAGMENT, std::nullopt, registry);
    frag.define("b(Tensor x) -> Tensor");
    EXPECT_TRUE(registry.find("t::b")->has_schema());
    // One definition per operator.
    EXPECT_THROW(frag.define("a(Tensor x) -> Tensor"), Error);
    // IMPL libraries cannot define.
    Library impl("t", LibraryKind::IMPL, std::nullopt, registry);
    EXPECT_THROW(impl.define("c(Tensor x) -> Tensor"), Error);
    // Namespaces must match.
    EXPECT_THROW(frag.define("other::d(Tensor x) -> Tensor"), Error);
  }
  // Everything was undone; the namespace can be claimed again.
  EXPECT_FALSE(registry.find("t::a")->has_schema());
  EXPECT_TRUE(registry.operators().empty());
  Library again("t", LibraryKind::DEF, std::nullopt, registry);
}

TEST_F(DispatchTest, DanglingImplsAndUnknownOperatorHints) {
  Library lib("t", LibraryKind::IMPL, std::nullopt, registry);
  lib.impl("ghost", sin_cpu, DispatchKey::CPU);
  EXPECT_EQ(registry.dangling_impls(), std::vector<std::string>{"t::ghost"});
  Library def("t", LibraryKind::DEF, std::nullopt, registry);
  def.define("sin(Tensor self) -> Tensor");
  try {
    registry.get("t::son");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown operator 't::son'; did you mean: t::sin"));
  }
  Stack stack{IValue(vec({1}))};
  try {
    registry.get("t::ghost").call_boxed(stack);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'t::ghost': it has no definition"));
  }
}

// The seed document's get_kernel example: a CPU kernel that falls back to the original
// kernel for some inputs.
TEST_F(DispatchTest, GetKernelConditionalSin) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("sin(Tensor self) -> Tensor");
  lib.impl("sin", sin_cpu, DispatchKey::CPU);
  SafeKernelFunction original = get_kernel("t::sin", DispatchKey::CPU, registry);

  Library over("t", LibraryKind::IMPL, std::nullopt, registry);
  over.impl("sin", [original](DispatchKeySet keys, const Tensor& x) -> Tensor {
    bool any_negative = false;
    for (float v : x.to_vector<float>()) any_negative = any_negative || v < 0;
    if (any_negative) return original.call_boxed(keys, x)[0].to_tensor();
    return zeros(x.sizes(), x.options());
  }, DispatchKey::CPU, {.with_keyset = true});

  auto op = registry.get("t::sin").typed<Tensor(const Tensor&)>();
  EXPECT_EQ(op.call(vec({1, 2})).to_vector<float>(), (std::vector<float>{0, 0}));
  auto mixed = op.call(vec({-1, 2})).to_vector<float>();
  EXPECT_FLOAT_EQ(mixed[0], std::sin(-1.0f));
  EXPECT_FLOAT_EQ(mixed[1], std::sin(2.0f));

  EXPECT_THROW(get_kernel("t::nope", DispatchKey::CPU, registry), Error);
  EXPECT_THROW(get_kernel("t::sin", DispatchKey::CompositeImplicitAutograd, registry), Error);
}

TEST_F(DispatchTest, FactoryOpDispatchesThroughBackendSelect) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("make(int n, Device device) -> Tensor");
  lib.impl("make", [&](DispatchKeySet keys, int64_t n, Device device) {
    auto op = registry.get("t::make").typed<Tensor(int64_t, Device)>();
    return op.redispatch(keys.add(backend_key(device.type)).after(DispatchKey::BackendSelect), n, device);
  }, DispatchKey::BackendSelect, {.with_keyset = true});
  lib.impl("make", [](int64_t n, Device) { return ones({n}); }, DispatchKey::CPU);
  auto op = registry.get("t::make").typed<Tensor(int64_t, Device)>();
  EXPECT_EQ(op.call(3, Device::cpu()).numel(), 3);
  EXPECT_THROW(op.call(3, Device::meta()), Error);  // no Meta kernel: "Could not run"
}

TEST_F(DispatchTest, NoTensorArgumentsAndNoBackendSelectIsAClearError) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("make(int n) -> Tensor");
  lib.impl("make", [](int64_t n) { return ones({n}); }, DispatchKey::CPU);
  try {
    registry.get("t::make").typed<Tensor(int64_t)>().call(2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no tensor arguments"));
  }
}

TEST_F(DispatchTest, VendorDeviceDispatchesToPrivateUseKey) {
  DeviceType npu = register_device_type("npu_dispatch_test");
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("ident(Tensor self) -> Tensor");
  int vendor_calls = 0;
  lib.impl("ident", [&](const Tensor& x) { ++vendor_calls; return x; }, backend_key(npu));
  registry.get("t::ident").typed<Tensor(const Tensor&)>().call(meta_on(Device(npu, 0)));
  EXPECT_EQ(vendor_calls, 1);
}

TEST_F(DispatchTest, TensorListArgumentsContributeKeys) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("count(Tensor[] xs) -> int");
  lib.impl("count", [](const std::vector<Tensor>& xs) -> int64_t { return static_cast<int64_t>(xs.size()); },
           DispatchKey::CPU);
  auto op = registry.get("t::count").typed<int64_t(const std::vector<Tensor>&)>();
  EXPECT_EQ(op.call({vec({1}), vec({2})}), 2);
  Stack stack{IValue(std::vector<Tensor>{vec({1})})};
  registry.get("t::count").call_boxed(stack);
  EXPECT_EQ(stack.at(0).to_int(), 1);
}

TEST_F(DispatchTest, TupleReturnsAreBoxedInOrder) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("pair(Tensor x) -> (Tensor, int)");
  lib.impl("pair", [](const Tensor& x) { return std::make_tuple(x, x.numel()); }, DispatchKey::CPU);
  Stack stack{IValue(vec({1, 2, 3}))};
  registry.get("t::pair").call_boxed(stack);
  ASSERT_EQ(stack.size(), 2u);
  EXPECT_EQ(stack[1].to_int(), 3);
  auto [t, n] = registry.get("t::pair").typed<std::tuple<Tensor, int64_t>(const Tensor&)>().call(vec({1}));
  EXPECT_EQ(n, 1);
}

TEST_F(DispatchTest, DumpListsEveryReachableKey) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("sin(Tensor self) -> Tensor");
  lib.impl("sin", sin_cpu, DispatchKey::CPU);
  std::string dump = registry.get("t::sin").dump_dispatch_table();
  EXPECT_THAT(dump, HasSubstr("schema: t::sin(Tensor self) -> Tensor"));
  EXPECT_THAT(dump, HasSubstr("CPU: kernel registered at core/tests/dispatch_test.cpp:"));
  EXPECT_THAT(dump, HasSubstr("[direct]"));
  EXPECT_THAT(dump, HasSubstr("CUDA: missing"));
  EXPECT_THAT(dump, ::testing::Not(HasSubstr("AutogradCPU")));
}

TEST_F(DispatchTest, KeySetComputation) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("f(Tensor a, Tensor? b, int c) -> Tensor");
  lib.impl("f", [](const Tensor& a, const std::optional<Tensor>&, int64_t) { return a; }, DispatchKey::CPU);
  auto op = registry.get("t::f");
  Stack stack{IValue(vec({1})), IValue(meta_on(Device::cuda(0))), IValue(int64_t(1))};
  DispatchKeySet keys = op.dispatch_keys(stack);
  EXPECT_EQ(keys.highest(), DispatchKey::CUDA);  // autograd keys are skipped: no kernel there
  EXPECT_TRUE(keys.has(DispatchKey::CPU));
}

}  // namespace
}  // namespace opconform
