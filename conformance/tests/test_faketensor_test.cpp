// test_faketensor on correct fake kernels and on fake kernels with one seeded bug each.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/library.h"
#include "support/float_ops.h"

namespace opconform::conformance {
namespace {

using ::testing::HasSubstr;
using ::opconform::conformance::FindingKind;

Tensor mat() { return from_vector<float>({1, 0, 3, 0, 5, 6}, {2, 3}); }
Tensor twice(const Tensor& x) { return testing::map(x, [](double v) { return 2 * v; }); }

// The registry has no fake fallback of its own: the check installs one for the fake run.
class FakeTensorTest : public ::testing::Test {
 protected:
  CheckResult check(std::string_view op, Stack args) {
    Sample sample(std::move(args));
    ToleranceSpec tolerance;
    CheckContext ctx{registry.get(op), sample, tolerance, registry};
    return detail::make_test_faketensor()->run(ctx);
  }
  CustomOpOptions opts(CustomOpOptions o = {}) {
    o.registry = &registry;
    return o;
  }
  // A custom op twice(x) whose fake kernel is `fake`.
  template <typename F>
  auto twice_with_fake(std::string name, F fake) {
    auto op = custom_op(name, [](const Tensor& x) { return twice(x); }, opts(), {"x"});
    op.register_fake(fake);
    return op;
  }
  Registry registry;
  Library lib{"ft", LibraryKind::DEF, std::nullopt, registry};
};

// ---- correct fake kernels pass

TEST_F(FakeTensorTest, MatchingFakeKernelPasses) {
  auto op = twice_with_fake("cft::twice", [](const Tensor& x) { return empty_like(x); });
  CheckResult r = check("cft::twice", {IValue(mat())});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  EXPECT_EQ(r.check, "test_faketensor");
  Tensor g = mat();
  g.set_requires_grad(true);  // requires_grad is compared too (the fallback marks both runs)
  EXPECT_EQ(check("cft::twice", {IValue(g)}).outcome, Outcome::passed);
}

TEST_F(FakeTensorTest, InplaceCustomOpAndMetaKernelPass) {
  auto add_ = custom_op("cft::twice_", [](const Tensor& x) { x.copy_(twice(x)); return x; },
                        opts({.mutates_args = {"x"}, .tags = {Tag::inplace}}), {"x"});
  CheckResult r1 = check("cft::twice_", {IValue(mat())});
  EXPECT_EQ(r1.outcome, Outcome::passed) << r1.message;
  // A C++ op with a Meta kernel runs through the fake fallback.
  lib.define("sum0(Tensor x) -> Tensor");
  lib.impl("sum0", [](const Tensor& x) { return zeros({x.size(1)}, x.options()); }, DispatchKey::CPU);
  lib.impl("sum0", [](const Tensor& x) { return empty({x.size(1)}, x.options()); }, DispatchKey::Meta);
  CheckResult r2 = check("ft::sum0", {IValue(mat())});
  EXPECT_EQ(r2.outcome, Outcome::passed) << r2.message;
}

TEST_F(FakeTensorTest, DataDependentSizeWithNewDynamicSizePasses) {
  auto nonzero = custom_op("cft::nonzero", [](const Tensor& x) {
    std::vector<int64_t> idx;
    auto v = x.to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i) if (v[i] != 0) idx.push_back(static_cast<int64_t>(i));
    return from_vector<int64_t>(idx, {static_cast<int64_t>(idx.size()), 1});
  }, opts(), {"x"});
  nonzero.register_fake([](const Tensor& x) {
    return make_fake_tensor({get_ctx().new_dynamic_size(), SymInt(1)}, DType::Int64, x.device());
  });
  CheckResult r = check("cft::nonzero", {IValue(mat().view({-1}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(FakeTensorTest, ViewWithAViewFakeKernelPasses) {
  lib.define("flat(Tensor(a) x) -> Tensor(a)");
  lib.impl("flat", [](const Tensor& x) { return x.view({-1}); }, DispatchKey::CPU);
  auto fake = register_fake("ft::flat", [](const Tensor& x) { return x.view({-1}); }, false, registry);
  CheckResult r = check("ft::flat", {IValue(mat())});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

// ---- seeded bugs fail

TEST_F(FakeTensorTest, MissingFakeKernelFails) {
  auto op = custom_op("cft::nofake", [](const Tensor& x) { return twice(x); }, opts(), {"x"});
  CheckResult r = check("cft::nofake", {IValue(mat())});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("no fake kernel"));
  EXPECT_THAT(r.message, HasSubstr("register_fake"));
  EXPECT_THAT(r.message, HasSubstr("x: float32[2, 3]"));
  // The fallback the check installed for the fake run is gone again.
  EXPECT_NE(registry.get("cft::nofake").entry().table_source[static_cast<size_t>(DispatchKey::Fake)],
            opconform::detail::TableSource::Fallback);
}

TEST_F(FakeTensorTest, WrongShapeFails) {
  auto op = twice_with_fake("cft::shape", [](const Tensor& x) { return empty({x.size(1), x.size(0)}, x.options()); });
  CheckResult r = check("cft::shape", {IValue(mat())});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("output 0 sizes: the fake kernel gives [3, 2], the real kernel [2, 3]"));
}

TEST_F(FakeTensorTest, WrongDtypeFails) {
  auto op = twice_with_fake("cft::dtype", [](const Tensor& x) { return empty_like(x, DType::Float64); });
  CheckResult r = check("cft::dtype", {IValue(mat())});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("output 0 dtype: the fake kernel gives float64, the real kernel float32"));
}

TEST_F(FakeTensorTest, WrongStridesFailOnCpuToo) {
  auto op = twice_with_fake("cft::strides", [](const Tensor& x) {
    return empty_strided(x.sizes(), std::vector<int64_t>{1, 2}, x.options());  // column-major
  });
  CheckResult r = check("cft::strides", {IValue(mat())});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("output 0 strides: the fake kernel gives [1, 2], the real kernel [3, 1]"));
}

TEST_F(FakeTensorTest, FakeKernelReadingDataFails) {
  auto op = twice_with_fake("cft::reads", [](const Tensor& x) {
    auto v = x.to_vector<float>();  // fake tensors have no data
    return empty({static_cast<int64_t>(v.size())}, x.options());
  });
  CheckResult r = check("cft::reads", {IValue(mat())});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("the fake kernel reads tensor data"));
  EXPECT_THAT(r.message, HasSubstr("get_ctx().new_dynamic_size()"));
}

// A Scalar of the input's data (Tensor.item()): the fake kernel says its output is data
// (ErrorCode::kDataDependentOutput). With the op tagged data_dependent_output there is nothing to
// compare: skipped, never passed; untagged, the claim contradicts the op's tags: failed.
TEST_F(FakeTensorTest, ADataDependentOutputIsSkippedOnlyWhenTheOpIsTaggedSo) {
  auto first = [](const Tensor& x) { return x.reshape({-1}).select(0, 0).item(); };
  auto data_dependent = [](const Tensor&) -> Scalar {
    throw Error(ErrorCode::kDataDependentOutput, "ft::first: the result is the value of 'x'");
  };
  lib.define("first(Tensor x) -> Scalar", {Tag::data_dependent_output});
  lib.impl("first", first, DispatchKey::CPU);
  lib.impl("first", data_dependent, DispatchKey::Meta);
  CheckResult r = check("ft::first", {IValue(mat())});
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_THAT(r.message, HasSubstr("tagged data_dependent_output"));
  lib.define("first_untagged(Tensor x) -> Scalar");
  lib.impl("first_untagged", first, DispatchKey::CPU);
  lib.impl("first_untagged", data_dependent, DispatchKey::Meta);
  r = check("ft::first_untagged", {IValue(mat())});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("not tagged data_dependent_output"));
}

TEST_F(FakeTensorTest, AliasingPatternMismatchFails) {
  lib.define("flat2(Tensor(a) x) -> Tensor(a)");
  lib.impl("flat2", [](const Tensor& x) { return x.view({-1}); }, DispatchKey::CPU);
  auto fake = register_fake("ft::flat2", [](const Tensor& x) { return empty({x.numel()}, x.options()); }, false, registry);
  CheckResult r = check("ft::flat2", {IValue(mat())});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("output 0 aliases argument 'x' in the real run but not in the fake run"));
  ASSERT_TRUE(r.cause.has_value());
  EXPECT_EQ(r.cause->kind, FindingKind::aliasing_mismatch);
  EXPECT_EQ(r.cause->subject, "output 0");
}

TEST_F(FakeTensorTest, RealRunErrorsAreFailuresOrUnsupported) {
  lib.define("cpu_only(Tensor x) -> Tensor");
  lib.impl("cpu_only", [](const Tensor& x) { return twice(x); }, DispatchKey::CPU);
  Tensor meta = make_metadata_tensor(std::vector<int64_t>{2}, std::vector<int64_t>{1}, DType::Float32, Device::meta());
  EXPECT_EQ(check("ft::cpu_only", {IValue(meta)}).outcome, Outcome::unsupported);
}

}  // namespace
}  // namespace opconform::conformance
