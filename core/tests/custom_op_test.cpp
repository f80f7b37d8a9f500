// custom_op and the register_* API: schemas, kernels per device, the aliasing contract,
// the inplace/out forms, factories, fake kernels, autograd, set_kernel_enabled.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "opconform/core/custom_op.h"
#include "support/error_of.h"
#include "support/host_memory.h"
#include "support/float_ops.h"

namespace opconform {
namespace {

using ::testing::HasSubstr;
using testing::allclose;

Tensor vec(std::vector<float> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return from_vector<float>(v, {n});
}

using testing::error_message;

class CustomOpTest : public ::testing::Test {
 protected:
  CustomOpOptions opts(CustomOpOptions o = {}) {
    o.registry = &registry;
    return o;
  }
  Registry registry;
};

TEST_F(CustomOpTest, InfersTheSchemaAndCallsThroughTheDispatcher) {
  auto sin_op = custom_op("mylib::numpy_sin", [](const Tensor& x) { return testing::map(x, [](double v) { return std::sin(v); }); },
                          opts(), {"x"});
  EXPECT_EQ(sin_op.schema().to_string(), "mylib::numpy_sin(Tensor x) -> Tensor");
  EXPECT_TRUE(registry.find("mylib::numpy_sin")->has_schema());
  Tensor x = vec({0.5f, -1.0f});
  EXPECT_TRUE(allclose(sin_op(x), testing::map(x, [](double v) { return std::sin(v); })));
  // The default kernel serves every backend (CompositeExplicitAutograd).
  EXPECT_TRUE(sin_op.handle().has_kernel_at(DispatchKey::CompositeExplicitAutograd));
}

TEST_F(CustomOpTest, TheOperatorLivesAsLongAsItsDefinition) {
  {
    auto op = custom_op("mylib::tmp", [](const Tensor& x) { return x.clone(); }, opts(), {"x"});
    EXPECT_TRUE(registry.find("mylib::tmp")->has_schema());
  }
  EXPECT_FALSE(registry.find("mylib::tmp")->has_schema());
}

TEST_F(CustomOpTest, DeviceTypesRestrictTheKernel) {
  auto op = custom_op("mylib::cpu_only", [](const Tensor& x) { return x.clone(); },
                      opts({.device_types = std::vector<DeviceType>{DeviceType::CPU}}), {"x"});
  op(vec({1}));
  Tensor meta = make_metadata_tensor(std::vector<int64_t>{2}, std::vector<int64_t>{1}, DType::Float32, Device::meta());
  EXPECT_THAT(error_message([&] { op(meta); }), HasSubstr("Could not run 'mylib::cpu_only' with arguments from the 'Meta' backend"));
}

TEST_F(CustomOpTest, FunctionalOpReturningAnInputFailsAtCallTime) {
  auto ident = custom_op("mylib::bad_ident", [](const Tensor& x) { return x; }, opts(), {"x"});
  EXPECT_THAT(error_message([&] { ident(vec({1})); }),
              HasSubstr("custom op 'mylib::bad_ident': output 0 is argument 'x' or a view of it"));
  auto view = custom_op("mylib::bad_view", [](const Tensor& x, const Tensor& y) { return y.view({-1}); }, opts(), {"x", "y"});
  EXPECT_THAT(error_message([&] { view(vec({1}), vec({2})); }), HasSubstr("output 0 is argument 'y'"));
}

TEST_F(CustomOpTest, InplaceTagReturnsTheFirstArgument) {
  auto add_ = custom_op(
      "mylib::add_inplace",
      [](const Tensor& x, const Tensor& y) {
        x.copy_(testing::zip(x, y, [](double a, double b) { return a + b; }));
        return x;
      },
      opts({.mutates_args = {"x"}, .tags = {Tag::inplace}}), {"x", "y"});
  EXPECT_EQ(add_.schema().to_string(), "mylib::add_inplace(Tensor(a!) x, Tensor y) -> Tensor(a!)");
  Tensor x = vec({1, 2});
  Tensor r = add_(x, vec({10, 20}));
  EXPECT_TRUE(r.is_same(x));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{11, 22}));
  // The schema alone gives it a fake kernel.
  EXPECT_TRUE(add_.handle().has_kernel_at(DispatchKey::Fake));

  auto wrong = custom_op("mylib::inplace_copy", [](const Tensor& x) { return x.clone(); },
                         opts({.mutates_args = {"x"}, .tags = {Tag::inplace}}), {"x"});
  EXPECT_THAT(error_message([&] { wrong(vec({1})); }), HasSubstr("output 0 must be argument 'x' itself"));
}

TEST_F(CustomOpTest, OutTagReturnsTheOutArgumentsAndRefusesAutograd) {
  auto add_out = custom_op(
      "mylib::add_out",
      [](const Tensor& x, const Tensor& y, const Tensor& out) {
        out.copy_(testing::zip(x, y, [](double a, double b) { return a + b; }));
        return out;
      },
      opts({.mutates_args = {"out"}, .tags = {Tag::out}}), {"x", "y", "*", "out"});
  EXPECT_EQ(add_out.schema().to_string(), "mylib::add_out(Tensor x, Tensor y, *, Tensor(a!) out) -> Tensor(a!)");
  Tensor out = empty({2});
  EXPECT_TRUE(add_out(vec({1, 2}), vec({3, 4}), out).is_same(out));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{4, 6}));
  Tensor x = vec({1, 2});
  x.set_requires_grad(true);
  EXPECT_THAT(error_message([&] { add_out(x, vec({3, 4}), out); }),
              HasSubstr("'mylib::add_out' is an out= operator (Tag::out) and does not support automatic differentiation"));
  EXPECT_THAT(error_message([&] { add_out.register_autograd([](autograd::AutogradContext&, const std::vector<Tensor>&) {
                return std::vector<Tensor>{}; }); }),
              HasSubstr("out= operators do not support autograd"));
}

TEST_F(CustomOpTest, MutableOpReturningNothingGetsATrivialFakeKernel) {
  auto add_mutate = custom_op(
      "mylib::add_mutate",
      [](const Tensor& x, const Tensor& y) { x.copy_(testing::zip(x, y, [](double a, double b) { return a + b; })); },
      opts({.mutates_args = {"x"}}), {"x", "y"});
  EXPECT_EQ(add_mutate.schema().to_string(), "mylib::add_mutate(Tensor(a0!) x, Tensor y) -> ()");
  EXPECT_TRUE(add_mutate.handle().has_kernel_at(DispatchKey::Fake));
  Tensor x = vec({1});
  add_mutate(x, vec({2}));
  EXPECT_EQ(x.item().to<float>(), 3.0f);
}

TEST_F(CustomOpTest, GivenSchemasAreCheckedAgainstMutatesArgsAndTags) {
  auto op = custom_op("mylib::given", [](const Tensor& x, int64_t n) { return x.clone(); },
                      opts({.schema = "(Tensor x, int n) -> Tensor"}));
  EXPECT_EQ(op.schema().to_string(), "mylib::given(Tensor x, int n) -> Tensor");
  EXPECT_THAT(error_message([&] {
                custom_op("mylib::given2", [](const Tensor& x) { return x.clone(); },
                          opts({.mutates_args = {"x"}, .schema = "(Tensor x) -> Tensor"}));
              }),
              HasSubstr("the schema and mutates_args disagree: the schema writes {}, mutates_args names {x}"));
  EXPECT_THAT(error_message([&] {
                custom_op("mylib::given3", [](const Tensor& x, const Tensor& y) { return x; },
                          opts({.mutates_args = {"y"}, .schema = "(Tensor x, Tensor(a!) y) -> Tensor(a!)", .tags = {Tag::inplace}}));
              }),
              HasSubstr("Tag::inplace needs the schema (Tensor(a!) self, ...) -> Tensor(a!)"));
  EXPECT_THAT(error_message([&] { custom_op("nonamespace", [](const Tensor& x) { return x.clone(); }, opts(), {"x"}); }),
              HasSubstr("namespace::name"));
}

TEST_F(CustomOpTest, FactoryOpsDispatchOnTheirDeviceArgument) {
  auto bar = custom_op("mylib::bar", [](Device) { return ones({3}); },
                       opts({.device_types = std::vector<DeviceType>{DeviceType::CPU}}), {"device"});
  EXPECT_EQ(bar.schema().to_string(), "mylib::bar(Device device) -> Tensor");
  EXPECT_EQ(bar(Device::cpu()).numel(), 3);
  EXPECT_THAT(error_message([&] { bar(Device::meta()); }), HasSubstr("'Meta' backend"));
}

TEST_F(CustomOpTest, RegisterKernelAndSetKernelEnabled) {
  auto f = custom_op("mylib::f", [](const Tensor& x) { return full(x.sizes(), 1.0); }, opts(), {"x"});
  f.register_kernel({DeviceType::CPU}, [](const Tensor& x) { return full(x.sizes(), 2.0); });
  EXPECT_EQ(f(vec({0})).item().to<float>(), 2.0f);
  {
    auto guard = f.set_kernel_enabled(DeviceType::CPU, false);
    EXPECT_EQ(f(vec({0})).item().to<float>(), 1.0f);  // falls back to the original function
  }
  EXPECT_EQ(f(vec({0})).item().to<float>(), 2.0f);
}

Tensor meta_tensor(std::vector<int64_t> sizes) {
  return make_metadata_tensor(sizes, contiguous_strides(sizes), DType::Float32, Device::meta());
}

TEST_F(CustomOpTest, RegisterFakeAgainReplacesTheFakeKernel) {
  // As PyTorch's CustomOpDef.register_fake: the newest fake kernel serves fake and meta calls.
  auto f = custom_op("mylib::g", [](const Tensor& x) { return x.clone(); }, opts(), {"x"});
  EXPECT_FALSE(f.has_fake());
  f.register_fake([](const Tensor& x) { return empty({1}, x.options()); });
  f.register_fake([](const Tensor& x) { return empty({2}, x.options()); });
  EXPECT_TRUE(f.has_fake());
  FakeTensorMode mode;
  Tensor fx = mode.from_tensor(vec({1, 2, 3}));
  auto fake_size = [&] {
    FakeTensorModeGuard guard(mode);
    return f(fx).size(0);
  };
  EXPECT_EQ(fake_size(), 2);
  EXPECT_EQ(f(meta_tensor({3})).size(0), 2);
  // The replaced kernel is undone, not hidden under the new one.
  EXPECT_EQ(f.handle().entry().kernels[static_cast<size_t>(DispatchKey::Fake)].size(), 1u);
  // impl_abstract (the old name) and the free function replace it too, whatever allow_override.
  f.impl_abstract([](const Tensor& x) { return empty({3}, x.options()); });
  EXPECT_EQ(fake_size(), 3);
  register_fake("mylib::g", [](const Tensor& x) { return empty({4}, x.options()); }, /*allow_override=*/false,
                registry);
  EXPECT_EQ(fake_size(), 4);
  EXPECT_EQ(f(meta_tensor({3})).size(0), 4);
}

TEST_F(CustomOpTest, RegisterFakeTwiceOnAnotherOperatorNeedsAllowOverride) {
  // Only operators not made with custom_op keep PyTorch's "already has a fake kernel" rule.
  Library lib("plainlib", LibraryKind::DEF, std::nullopt, registry);
  lib.define("p(Tensor x) -> Tensor");
  auto fake = [](const Tensor& x) { return empty_like(x); };
  RegistrationHandle first = register_fake("plainlib::p", fake, false, registry);
  EXPECT_THAT(error_message([&] { register_fake("plainlib::p", fake, false, registry); }),
              HasSubstr("a kernel is already registered for this key"));
  RegistrationHandle second = register_fake("plainlib::p", fake, /*allow_override=*/true, registry);
  EXPECT_EQ(registry.get("plainlib::p").entry().kernels[static_cast<size_t>(DispatchKey::Fake)].size(), 2u);
}

TEST_F(CustomOpTest, MetaCallRunsTheFakeKernelNotTheFunction) {
  int calls = 0;
  auto f = custom_op("mylib::counted", [&calls](const Tensor& x) { ++calls; return x.clone(); }, opts(), {"x"});
  f.register_fake([](const Tensor& x) { return empty({x.size(0), 2}, TensorOptions(DType::Float64, x.device())); });
  Tensor y = f(meta_tensor({3}));
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(std::vector<int64_t>(y.sizes().begin(), y.sizes().end()), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(y.dtype(), DType::Float64);
  EXPECT_TRUE(y.device() == Device::meta());
  EXPECT_TRUE(y.is_meta_data());
  EXPECT_FALSE(y.is_fake());  // a plain meta tensor, not the fake kernel's fake one
  EXPECT_TRUE(y.key_set().has(DispatchKey::Meta));
  f(vec({1, 2, 3}));
  EXPECT_EQ(calls, 1);  // real tensors still reach the function

  // The automatic fake kernel of an in-place op serves meta too: it returns its argument itself.
  int inplace_calls = 0;
  auto scale_ = custom_op("mylib::scale_", [&inplace_calls](const Tensor& x) { ++inplace_calls; return x; },
                          opts({.mutates_args = {"x"}, .tags = {Tag::inplace}}), {"x"});
  Tensor m = meta_tensor({2});
  EXPECT_TRUE(scale_(m).is_same(m));
  EXPECT_EQ(inplace_calls, 0);

  // A meta call needs meta tensors throughout, and sizes a meta tensor can hold.
  auto add = custom_op("mylib::add2", [](const Tensor& x, const Tensor& y) { return x.clone(); }, opts(), {"x", "y"});
  add.register_fake([](const Tensor& x, const Tensor&) { return empty_like(x); });
  EXPECT_THAT(error_message([&] { add(vec({1, 2}), meta_tensor({2})); }),
              HasSubstr("custom op 'mylib::add2': argument 'x' is on cpu in a call with meta tensors"));
  auto nonzero = custom_op("mylib::nonzero_like", [](const Tensor& x) { return x.clone(); }, opts(), {"x"});
  nonzero.register_fake([](const Tensor& x) {
    return empty(std::vector<SymInt>{get_ctx().new_dynamic_size()}, x.options());
  });
  EXPECT_THAT(error_message([&] { nonzero(meta_tensor({4})); }),
              HasSubstr("'mylib::nonzero_like': its fake kernel returned a size that depends on the data"));
}

TEST_F(CustomOpTest, MetaCallWithoutAFakeKernelIsAClearError) {
  int calls = 0;
  auto f = custom_op("mylib::no_fake", [&calls](const Tensor& x) { ++calls; return x.clone(); }, opts(), {"x"});
  Error e = testing::error_of([&] { f(meta_tensor({2})); });
  EXPECT_EQ(e.code(), ErrorCode::kNotImplemented);
  EXPECT_THAT(e.message(), HasSubstr("operator 'mylib::no_fake' has no fake kernel; register one with register_fake"));
  EXPECT_EQ(calls, 0);
  // Fake tensors through the fake fallback (which runs Meta kernels) get the same error.
  RegistrationHandle fallback = install_fake_fallback(registry);
  Tensor x = vec({1, 2});
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  Error fake_error = testing::error_of([&] { f(x); });
  EXPECT_EQ(fake_error.code(), ErrorCode::kNotImplemented);
  EXPECT_THAT(fake_error.message(), HasSubstr("'mylib::no_fake' has no fake kernel"));
  EXPECT_EQ(calls, 0);
}

TEST_F(CustomOpTest, RegisterKernelWithoutDevicesServesEveryDevice) {
  static testing::HostMemory memory;
  DeviceType second = register_device_type("custom_op_test_device");
  set_allocator(second, &memory);
  int original = 0, every = 0;
  auto f = custom_op("mylib::every", [&original](const Tensor& x) { ++original; return full(x.sizes(), 1.0); }, opts(),
                     {"x"});
  f.register_fake([](const Tensor& x) { return empty_like(x); });
  f.register_kernel([&every](const Tensor& x) { ++every; return full(x.sizes(), 2.0); });
  Tensor x = vec({0});
  Tensor x_dev = x.to(Device(second, 0));
  EXPECT_EQ(f(x).item().to<float>(), 2.0f);
  EXPECT_EQ(f(x_dev).item().to<float>(), 2.0f);
  EXPECT_EQ(every, 2);
  // Meta keeps the fake kernel.
  EXPECT_TRUE(f(meta_tensor({1})).device() == Device::meta());
  EXPECT_EQ(every, 2);
  EXPECT_EQ(original, 0);
  {
    auto guard = f.set_kernel_enabled(DeviceType::CPU, false);
    EXPECT_EQ(f(x).item().to<float>(), 1.0f);      // the default function, on cpu only
    EXPECT_EQ(f(x_dev).item().to<float>(), 2.0f);
  }
  EXPECT_EQ(original, 1);
  EXPECT_EQ(f(x).item().to<float>(), 2.0f);
  // An empty list is the same; a device's own kernel still beats the every-device one.
  f.register_kernel({}, [](const Tensor& x) { return full(x.sizes(), 3.0); });
  f.register_kernel({DeviceType::CPU}, [](const Tensor& x) { return full(x.sizes(), 4.0); });
  EXPECT_EQ(f(x).item().to<float>(), 4.0f);
  EXPECT_EQ(f(x_dev).item().to<float>(), 3.0f);
  // The free function, on an operator not made with custom_op: CompositeExplicitAutograd.
  Library lib("plainlib", LibraryKind::DEF, std::nullopt, registry);
  lib.define("q(Tensor x) -> Tensor");
  RegistrationHandle h =
      register_kernel("plainlib::q", {}, [](const Tensor& x) { return full(x.sizes(), 5.0); }, registry);
  EXPECT_EQ(registry.get("plainlib::q").typed<Tensor(const Tensor&)>().call(x_dev).item().to<float>(), 5.0f);
}

TEST_F(CustomOpTest, AutogradFormulaAndMissingFormula) {
  auto numpy_sin = custom_op("mylib::numpy_sin2", [](const Tensor& x) { return testing::map(x, [](double v) { return std::sin(v); }); },
                             opts(), {"x"});
  Tensor x = vec({0.3f, 1.2f});
  x.set_requires_grad(true);
  Tensor y = numpy_sin(x);
  EXPECT_THAT(error_message([&] { autograd::grad({y}, {x}, {ones({2})}); }),
              HasSubstr("'mylib::numpy_sin2' has no autograd formula"));

  numpy_sin.register_autograd(
      [](autograd::AutogradContext& ctx, const std::vector<Tensor>& grads) {
        Tensor saved = ctx.saved_tensors().at(0);
        return std::vector<Tensor>{testing::zip(grads[0], saved, [](double g, double v) { return g * std::cos(v); })};
      },
      [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack&) { ctx.save_for_backward({inputs[0].to_tensor()}); });
  EXPECT_TRUE(numpy_sin.has_autograd());
  Tensor y2 = numpy_sin(x);
  auto g = autograd::grad({y2}, {x}, {ones({2})});
  EXPECT_TRUE(allclose(g.at(0), testing::map(x.detach(), [](double v) { return std::cos(v); })));
}

TEST_F(CustomOpTest, RegistrationsRecordTheCallersLine) {
  auto f = custom_op("mylib::where", [](const Tensor& x) { return x.clone(); }, opts(), {"x"});
  f.register_kernel({DeviceType::CPU}, [](const Tensor& x) { return x.clone(); });
  std::string dump = f.handle().dump_dispatch_table();
  EXPECT_THAT(dump, HasSubstr("CPU: kernel registered at core/tests/custom_op_test.cpp:"));
  EXPECT_THAT(dump, HasSubstr("[CompositeExplicitAutograd]"));
  EXPECT_THAT(dump, ::testing::Not(HasSubstr("custom_op.cpp")));
  EXPECT_THAT(dump, ::testing::Not(HasSubstr("custom_op.h")));
}

TEST_F(CustomOpTest, FreeFunctionsActOnTheCustomOp) {
  auto f = custom_op("mylib::h", [](const Tensor& x) { return full(x.sizes(), 1.0); }, opts(), {"x"});
  register_kernel("mylib::h", {DeviceType::CPU}, [](const Tensor& x) { return full(x.sizes(), 5.0); }, registry);
  EXPECT_EQ(f(vec({0})).item().to<float>(), 5.0f);
  ASSERT_TRUE(find_custom_op("mylib::h", registry).has_value());
  EXPECT_FALSE(find_custom_op("mylib::nope", registry).has_value());
}

}  // namespace
}  // namespace opconform
