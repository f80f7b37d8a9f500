// custom_op and the register_* API: schemas, kernels per device, the aliasing contract,
// the inplace/out forms, factories, fake kernels, autograd, set_kernel_enabled.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "opconform/core/custom_op.h"
#include "support/error_of.h"
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

TEST_F(CustomOpTest, RegisterFakeTwiceNeedsAllowOverride) {
  auto f = custom_op("mylib::g", [](const Tensor& x) { return x.clone(); }, opts(), {"x"});
  EXPECT_FALSE(f.has_fake());
  f.register_fake([](const Tensor& x) { return empty_like(x); });
  EXPECT_TRUE(f.has_fake());
  EXPECT_THAT(error_message([&] { f.register_fake([](const Tensor& x) { return empty_like(x); }); }),
              HasSubstr("register_fake: 'mylib::g' already has a fake kernel (registered at core/tests/custom_op_test.cpp:"));
  f.register_fake([](const Tensor& x) { return empty_like(x); }, /*allow_override=*/true);
  // impl_abstract is the old name, with the same rule.
  EXPECT_THAT(error_message([&] { f.impl_abstract([](const Tensor& x) { return empty_like(x); }); }),
              HasSubstr("already has a fake kernel"));
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
