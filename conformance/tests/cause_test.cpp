// Causes of check results (cause.h; Note [One finding per cause]): each seeded bug gets the finding
// kind and subject of its fault, the same bug on other samples and dtypes gets the same cause key,
// and two bugs of one op get two keys. opcheck gives every result that is not a pass a cause.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/gradcheck.h"
#include "opconform/conformance/opcheck.h"
#include "opconform/core/autograd.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/library.h"
#include "support/float_ops.h"

namespace opconform::conformance {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using opconform::testing::map;

Tensor values(std::vector<int64_t> sizes, DType dtype = DType::Float32, double start = 0.25) {
  Tensor t = opconform::empty(sizes, TensorOptions(DType::Float64));
  double* p = t.mutable_data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = start + 0.37 * static_cast<double>(i);
  return t.to(dtype);
}

double twice(double v) { return 2 * v; }

class CauseTest : public ::testing::Test {
 protected:
  CustomOpOptions opts(Registry& r, std::vector<Tag> tags = {}) {
    CustomOpOptions o;
    o.registry = &r;
    o.tags = std::move(tags);
    return o;
  }
  CheckResult run(std::unique_ptr<Check> check, std::string_view op, Stack args, Registry* reference = nullptr) {
    Sample sample(std::move(args));
    return check->run({registry.get(op), sample, tolerance, registry, reference});
  }
  // The reference's twice(x) = 2x, and the library's op of that name with `kernel`.
  template <typename F>
  void against_reference(const std::string& name, F kernel) {
    held.push_back(std::make_unique<CustomOpDef>(custom_op(name, [](const Tensor& x) { return map(x, twice); },
                                                           opts(reference), {"x"})));
    held.push_back(std::make_unique<CustomOpDef>(custom_op(name, kernel, opts(registry), {"x"})));
  }
  static const Cause& cause_of(const CheckResult& r) {
    static const Cause none{FindingKind::other, "<no cause>", ""};
    return r.cause ? *r.cause : none;
  }
  static std::string key(std::string_view op, const CheckResult& r) { return cause_key(op, r.check, cause_of(r)); }

  Registry registry, reference;
  ToleranceSpec tolerance;
  std::vector<std::unique_ptr<CustomOpDef>> held;
};

// ---- comparisons say which field of which observable differs

TEST_F(CauseTest, AValueMismatchNamesTheOutputAndIsOneKeyOverSamplesAndDtypes) {
  against_reference("t::off_by_one", [](const Tensor& x) { return map(x, [](double v) { return 2 * v + 1; }); });
  CheckResult a = run(detail::make_reference_agreement(), "t::off_by_one", {IValue(values({3}))}, &reference);
  CheckResult b = run(detail::make_reference_agreement(), "t::off_by_one", {IValue(values({2, 5}, DType::Float64, 3.5))},
                      &reference);
  ASSERT_EQ(a.outcome, Outcome::failed) << a.message;
  ASSERT_EQ(b.outcome, Outcome::failed) << b.message;
  EXPECT_EQ(cause_of(a).kind, FindingKind::value_mismatch);
  EXPECT_EQ(cause_of(a).subject, "output 0");
  EXPECT_EQ(key("t::off_by_one", a), "t::off_by_one/reference_agreement/value_mismatch/output_0");
  // The same bug on another sample, in another dtype: the same cause, title included.
  EXPECT_EQ(cause_of(a), cause_of(b));
  EXPECT_EQ(key("t::off_by_one", a), key("t::off_by_one", b));
  EXPECT_THAT(cause_of(a).title, Not(HasSubstr("float")));
  EXPECT_THAT(a.message, HasSubstr("the library and the reference differ"));  // the message is unchanged
}

TEST_F(CauseTest, ADtypeMismatchAgainstTheReference) {
  against_reference("t::widens", [](const Tensor& x) { return map(x, twice).to(DType::Float64); });
  CheckResult r = run(detail::make_reference_agreement(), "t::widens", {IValue(values({3}))}, &reference);
  ASSERT_EQ(r.outcome, Outcome::failed) << r.message;
  EXPECT_EQ(cause_of(r).kind, FindingKind::dtype_mismatch);
  EXPECT_EQ(cause_of(r).subject, "output 0");
}

TEST_F(CauseTest, AShapeAStrideAndADtypeMismatchOfTheFakeKernel) {
  auto twice_with_fake = [&](const std::string& name, auto fake) {
    held.push_back(std::make_unique<CustomOpDef>(custom_op(name, [](const Tensor& x) { return map(x, twice); },
                                                           opts(registry), {"x"})));
    held.back()->register_fake(fake);
  };
  twice_with_fake("t::fake_shape", [](const Tensor& x) { return empty({x.size(1), x.size(0)}, x.options()); });
  twice_with_fake("t::fake_strides", [](const Tensor& x) { return empty_strided(x.sizes(), std::vector<int64_t>{1, 2}, x.options()); });
  twice_with_fake("t::fake_dtype", [](const Tensor& x) { return empty_like(x, DType::Float64); });
  const Stack sample{IValue(values({2, 3}))};
  CheckResult shape = run(detail::make_test_faketensor(), "t::fake_shape", sample);
  CheckResult strides = run(detail::make_test_faketensor(), "t::fake_strides", sample);
  CheckResult dtype = run(detail::make_test_faketensor(), "t::fake_dtype", sample);
  for (const CheckResult* r : {&shape, &strides, &dtype}) {
    ASSERT_EQ(r->outcome, Outcome::failed) << r->message;
    EXPECT_EQ(cause_of(*r).subject, "output 0");
  }
  EXPECT_EQ(cause_of(shape).kind, FindingKind::shape_mismatch);
  EXPECT_EQ(cause_of(strides).kind, FindingKind::stride_mismatch);
  EXPECT_EQ(cause_of(dtype).kind, FindingKind::dtype_mismatch);
  // Another shape of input: the same finding.
  CheckResult shape_again = run(detail::make_test_faketensor(), "t::fake_shape", {IValue(values({4, 5}))});
  EXPECT_EQ(key("t::fake_shape", shape), key("t::fake_shape", shape_again));
  EXPECT_EQ(cause_of(shape).title, cause_of(shape_again).title);
}

// A fake kernel that returns a view at another storage offset, and one whose output's device
// differs (meta instead of the input's): the field is the kind.
TEST_F(CauseTest, AStorageOffsetAndADeviceMismatchOfTheFakeKernel) {
  auto twice_with_fake = [&](const std::string& name, auto fake) {
    held.push_back(std::make_unique<CustomOpDef>(custom_op(name, [](const Tensor& x) { return map(x, twice); },
                                                           opts(registry), {"x"})));
    held.back()->register_fake(fake);
  };
  twice_with_fake("t::fake_offset", [](const Tensor& x) {
    return empty({x.numel() + 1}, x.options()).as_strided(x.sizes(), x.strides(), 1);
  });
  twice_with_fake("t::fake_device", [](const Tensor& x) { return empty(x.sizes(), TensorOptions{x.dtype(), Device::meta()}); });
  const Stack sample{IValue(values({2, 3}))};
  CheckResult offset = run(detail::make_test_faketensor(), "t::fake_offset", sample);
  ASSERT_EQ(offset.outcome, Outcome::failed) << offset.message;
  EXPECT_EQ(cause_of(offset).kind, FindingKind::storage_offset_mismatch) << offset.message;
  EXPECT_EQ(cause_of(offset).subject, "output 0");
  CheckResult device = run(detail::make_test_faketensor(), "t::fake_device", sample);
  ASSERT_EQ(device.outcome, Outcome::failed) << device.message;
  EXPECT_EQ(cause_of(device).kind, FindingKind::device_mismatch) << device.message;
}

// ---- effects and registrations

TEST_F(CauseTest, AnUndeclaredMutationNamesTheArgument) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("bad_mut(Tensor x) -> Tensor");
  lib.impl("bad_mut", [](const Tensor& x) {
    x.fill_(1);
    return x.clone();
  }, DispatchKey::CPU);
  CheckResult r = run(detail::make_test_schema(), "t::bad_mut", {IValue(values({3}))});
  ASSERT_EQ(r.outcome, Outcome::failed) << r.message;
  EXPECT_EQ(cause_of(r).kind, FindingKind::undeclared_mutation);
  EXPECT_EQ(cause_of(r).subject, "x");
  EXPECT_THAT(r.message, HasSubstr("argument 'x' was mutated"));
}

TEST_F(CauseTest, AWrongGradientNamesTheInput) {
  auto op = custom_op("t::bad_sin", [](const Tensor& x) { return map(x, [](double v) { return std::sin(v); }); },
                      opts(registry), {"x"});
  op.register_autograd(
      [](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
        return std::vector<Tensor>{testing::zip(g[0], ctx.saved_tensors()[0], [](double gv, double xv) { return gv * std::sin(xv); })};
      },
      [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) { ctx.save_for_backward({in[0].to_tensor()}); });
  Tensor x = values({2, 3}, DType::Float64);
  x.set_requires_grad(true);
  CheckResult r = gradcheck(op.handle(), {IValue(x)});
  ASSERT_EQ(r.outcome, Outcome::failed) << r.message;
  EXPECT_EQ(cause_of(r).kind, FindingKind::wrong_gradient);
  EXPECT_EQ(cause_of(r).subject, "x");
  EXPECT_EQ(cause_of(r).title, "the gradient of output 0 with respect to x is wrong");
  EXPECT_FALSE(r.repro.empty());
}

TEST_F(CauseTest, NondeterminismNamesTheOutput) {
  auto calls = std::make_shared<int>(0);
  auto op = custom_op("t::drifting", [calls](const Tensor& x) {
    const double bias = 1e-6 * (*calls)++;
    return map(x, [bias](double v) { return 2 * v + bias; });
  }, opts(registry), {"x"});
  CheckResult r = run(detail::make_determinism(), "t::drifting", {IValue(values({4}))});
  ASSERT_EQ(r.outcome, Outcome::failed) << r.message;
  EXPECT_EQ(cause_of(r).kind, FindingKind::nondeterminism);
  EXPECT_EQ(cause_of(r).subject, "output 0");
}

TEST_F(CauseTest, AnAcceptedInvalidInputNamesTheArgument) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("silent(Tensor x) -> Tensor");
  lib.impl("silent", [](const Tensor& x) { return opconform::zeros(x.sizes()); }, DispatchKey::CompositeExplicitAutograd);
  CheckResult r = run(detail::make_error_inputs(), "t::silent", {IValue(values({3}))});
  ASSERT_EQ(r.outcome, Outcome::failed) << r.message;
  EXPECT_EQ(cause_of(r).kind, FindingKind::accepted_invalid);
  EXPECT_EQ(cause_of(r).subject, "x");
}

TEST_F(CauseTest, AnOpThatThrowsWhereTheReferenceReturns) {
  against_reference("t::refuses", [](const Tensor& x) -> Tensor {
    OPCONFORM_CHECK(false, ErrorCode::kInvalidArgument, "t::refuses: 'x' is never right");
    return x;
  });
  CheckResult r = run(detail::make_reference_agreement(), "t::refuses", {IValue(values({3}))}, &reference);
  ASSERT_EQ(r.outcome, Outcome::failed) << r.message;
  EXPECT_EQ(cause_of(r).kind, FindingKind::threw);
  EXPECT_EQ(cause_of(r).subject, to_string(ErrorReason::kInvalidArgument));
}

TEST_F(CauseTest, AMissingFakeKernelIsOneLibraryWideRegistration) {
  auto a = custom_op("t::nofake_a", [](const Tensor& x) { return map(x, twice); }, opts(registry), {"x"});
  auto b = custom_op("t::nofake_b", [](const Tensor& x) { return map(x, twice); }, opts(registry), {"x"});
  CheckResult ra = run(detail::make_test_faketensor(), "t::nofake_a", {IValue(values({2, 3}))});
  CheckResult rb = run(detail::make_test_faketensor(), "t::nofake_b", {IValue(values({4}, DType::Float64))});
  ASSERT_EQ(ra.outcome, Outcome::failed) << ra.message;
  EXPECT_EQ(cause_of(ra).kind, FindingKind::missing_registration);
  EXPECT_EQ(cause_of(ra).subject, "fake kernel");
  EXPECT_TRUE(cause_of(ra).library_wide);
  EXPECT_THAT(ra.message, HasSubstr("no fake kernel"));
  // Two ops without one: one finding of the library.
  EXPECT_EQ(key("t::nofake_a", ra), key("t::nofake_b", rb));
  EXPECT_EQ(key("t::nofake_a", ra), "*/test_faketensor/missing_registration/fake_kernel");
}

TEST_F(CauseTest, AMissingKernelIsNotImplemented) {
  Library lib("t", LibraryKind::DEF, std::nullopt, registry);
  lib.define("cpu_only(Tensor x) -> Tensor");
  lib.impl("cpu_only", [](const Tensor& x) { return x.clone(); }, DispatchKey::CPU);
  Tensor meta = make_metadata_tensor(std::vector<int64_t>{2}, std::vector<int64_t>{1}, DType::Float32, Device::meta());
  CheckResult r = run(detail::make_test_schema(), "t::cpu_only", {IValue(meta)});
  ASSERT_EQ(r.outcome, Outcome::unsupported) << r.message;
  EXPECT_EQ(cause_of(r).kind, FindingKind::not_implemented);
  EXPECT_FALSE(cause_of(r).subject.empty());
  EXPECT_THAT(cause_of(r).subject, Not(HasSubstr("[")));  // a reason's name, no sample
}

// ---- keys: one bug one key, two bugs two keys

TEST_F(CauseTest, TwoBugsOfOneOpAreTwoKeys) {
  // A kernel that drifts between calls, and a fake kernel with the wrong shape.
  auto calls = std::make_shared<int>(0);
  auto op = custom_op("t::two_bugs", [calls](const Tensor& x) {
    const double bias = 1e-6 * (*calls)++;
    return map(x, [bias](double v) { return 2 * v + bias; });
  }, opts(registry), {"x"});
  op.register_fake([](const Tensor& x) { return empty({x.numel() + 1}, x.options()); });
  CheckResult drift = run(detail::make_determinism(), "t::two_bugs", {IValue(values({4}))});
  CheckResult shape = run(detail::make_test_faketensor(), "t::two_bugs", {IValue(values({4}))});
  ASSERT_EQ(drift.outcome, Outcome::failed);
  ASSERT_EQ(shape.outcome, Outcome::failed);
  EXPECT_NE(key("t::two_bugs", drift), key("t::two_bugs", shape));

  // Within one check: a wrong value of one output and a wrong dtype are two findings too.
  against_reference("t::off", [](const Tensor& x) { return map(x, [](double v) { return 2 * v + 1; }); });
  against_reference("t::wide", [](const Tensor& x) { return map(x, twice).to(DType::Float64); });
  CheckResult value = run(detail::make_reference_agreement(), "t::off", {IValue(values({3}))}, &reference);
  CheckResult dtype = run(detail::make_reference_agreement(), "t::wide", {IValue(values({3}))}, &reference);
  EXPECT_NE(key("t::x", value), key("t::x", dtype));
}

TEST_F(CauseTest, OpcheckGivesEveryResultThatIsNotAPassACause) {
  auto calls = std::make_shared<int>(0);
  auto op = custom_op("t::drift_all", [calls](const Tensor& x) {
    const double bias = 1e-6 * (*calls)++;
    return map(x, [bias](double v) { return 2 * v + bias; });
  }, opts(registry), {"x"});
  OpcheckOptions options;
  options.test_utils = check_names();
  options.raise_exception = false;
  const OpcheckResults results =
      opcheck(op.handle(), {Sample({IValue(values({3}))}), Sample({IValue(values({2, 2}, DType::Float64))})}, options,
              registry);
  size_t not_passed = 0;
  for (const auto& [name, r] : results) {
    if (r.outcome == Outcome::passed) continue;
    ++not_passed;
    ASSERT_TRUE(r.cause.has_value()) << name << ": " << r.outcome << " — " << r.message;
    if (r.outcome == Outcome::skipped) EXPECT_EQ(r.cause->kind, FindingKind::not_applicable) << name;
    if (r.outcome == Outcome::unsupported) EXPECT_EQ(r.cause->kind, FindingKind::not_implemented) << name;
    if (r.outcome == Outcome::mistrusted) EXPECT_EQ(r.cause->kind, FindingKind::inconclusive) << name;
  }
  EXPECT_GT(not_passed, 0u);
  EXPECT_EQ(results.at("determinism").cause->kind, FindingKind::nondeterminism);
}

}  // namespace
}  // namespace opconform::conformance
