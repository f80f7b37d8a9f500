// opcheck(): options, raise_exception, generated samples with a shrunk minimal input, and the
// GoogleTest integration (EXPECT_OPCHECK, one generated test per (op, check)).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "opconform/conformance/gtest.h"
#include "opconform/conformance/opcheck.h"
#include "opconform/core.h"
#include "support/error_of.h"
#include "support/float_ops.h"

namespace opconform::conformance {
namespace {

using ::testing::HasSubstr;
using opconform::testing::map;

double sin_(double v) { return std::sin(v); }

Tensor vec(std::vector<float> v) { return from_vector<float>(v, {static_cast<int64_t>(v.size())}); }

// A correct sin with a fake kernel and an autograd formula. The formula calls an operator
// ("<ns>_grad::<op>": g * cos(x), with its own fake kernel) instead of reading data, so that
// test_aot_dispatch_dynamic can capture the backward too (generated inputs require grad).
CustomOpDef make_sin(Registry& registry, const std::string& name) {
  const std::string grad_name = name.substr(0, name.find("::")) + "_grad" + name.substr(name.find("::"));
  CustomOpDef grad = custom_op(grad_name, [](const Tensor& g, const Tensor& x) {
    return testing::zip(g, x, [](double gv, double xv) { return gv * std::cos(xv); });
  }, {.registry = &registry}, {"g", "x"});
  grad.register_fake([](const Tensor& g, const Tensor&) { return empty_like(g); });
  CustomOpDef op = custom_op(name, [](const Tensor& x) { return map(x, sin_); }, {.registry = &registry}, {"x"});
  op.register_fake([](const Tensor& x) { return empty_like(x); });
  op.register_autograd(
      [grad](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
        Stack stack{IValue(g[0]), IValue(ctx.saved_tensors().at(0))};
        grad.call_boxed(stack);
        return std::vector<Tensor>{stack.at(0).to_tensor()};
      },
      [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) { ctx.save_for_backward({in[0].to_tensor()}); });
  return op;
}

// Reads its input as if it were contiguous: right only for contiguous inputs.
CustomOpDef make_strided_bug(Registry& registry) {
  CustomOpDef op = custom_op("t::strided_bug", [](const Tensor& x) {
    Tensor as_if_contiguous = x.is_contiguous() ? x : x.as_strided(x.sizes(), contiguous_strides(x.sizes()));
    return map(as_if_contiguous.contiguous(), sin_);
  }, {.registry = &registry}, {"x"});
  op.register_fake([](const Tensor& x) { return empty_like(x); });
  return op;
}

TEST(Opcheck, ACorrectOpPassesTheDefaultTests) {
  Registry registry;
  auto fallback = install_fake_fallback(registry);
  CustomOpDef op = make_sin(registry, "t::sin");
  Tensor x = vec({0.5f, 1.0f});
  EXPECT_OPCHECK(op, std::vector<Sample>{Sample({IValue(x)})});
  auto results = opcheck(op.handle(), {Sample({IValue(x)})}, {}, registry);
  EXPECT_EQ(results.size(), default_test_utils().size());
  for (const auto& [name, r] : results) EXPECT_TRUE(r.ok()) << name << ": " << r.message;
}

TEST(Opcheck, RaiseExceptionThrowsWithEveryFailure) {
  Registry registry;
  auto fallback = install_fake_fallback(registry);
  CustomOpDef op = custom_op("t::no_fake", [](const Tensor& x) { return map(x, sin_); }, {.registry = &registry}, {"x"});
  OpcheckOptions options;  // raise_exception is true by default, as in PyTorch
  EXPECT_TRUE(options.raise_exception);
  try {
    opcheck(op.handle(), {Sample({IValue(vec({1}))})}, options, registry);
    FAIL() << "expected OpcheckError";
  } catch (const OpcheckError& e) {
    EXPECT_THAT(e.what(), HasSubstr("opcheck('t::no_fake') failed"));
    EXPECT_THAT(e.what(), HasSubstr("test_faketensor: failed"));
    EXPECT_EQ(e.results().at("test_faketensor").outcome, Outcome::failed);
  }
}

TEST(Opcheck, UnknownChecksAndNoSamplesAreErrors) {
  Registry registry;
  CustomOpDef op = make_sin(registry, "t::sin2");
  OpcheckOptions options;
  options.test_utils = {"test_shcema"};
  EXPECT_THAT(testing::error_message([&] { opcheck(op.handle(), {Sample({IValue(vec({1}))})}, options, registry); }),
              HasSubstr("unknown check 'test_shcema' (known: "));
  EXPECT_THAT(testing::error_message([&] { opcheck(op.handle(), std::vector<Sample>{}, {}, registry); }),
              HasSubstr("no samples"));
}

// The acceptance test of generated samples: the stride bug is found and shrunk to a
// two-element non-contiguous tensor, with a line that replays it.
TEST(Opcheck, GeneratedSamplesShrinkTheStrideBugToTwoElements) {
  Registry registry;
  CustomOpDef op = make_strided_bug(registry);
  GenerateSpec spec;
  spec.count = 200;
  spec.seed = 2024;
  spec.include_special_values = false;
  spec.include_empty = false;
  // The op must give the same values for any layout.
  SampleProperty same_for_any_layout = [&](const Sample& s) {
    Tensor x = s.args.at(0).to_tensor();
    Stack real{IValue(x)}, contiguous{IValue(x.contiguous())};
    op.call_boxed(real);
    op.call_boxed(contiguous);
    Comparison c = compare(real[0].to_tensor(), contiguous[0].to_tensor(), default_tolerance(x.dtype()));
    return CheckResult{"layout", c.equal ? Outcome::passed : Outcome::failed, c.mismatch, "", {}};
  };
  auto failure = find_failure(op.handle(), same_for_any_layout, spec);
  ASSERT_TRUE(failure.has_value());
  Tensor minimal = failure->minimal.args.at(0).to_tensor();
  EXPECT_EQ(minimal.numel(), 2);
  EXPECT_FALSE(minimal.is_contiguous());
  EXPECT_THAT(failure->replay, HasSubstr("OPCONFORM_SEED=2024"));
}

TEST(Opcheck, GeneratedSamplesThroughOpcheckReportTheMinimalInput) {
  Registry registry;
  CustomOpDef op = make_strided_bug(registry);
  GenerateSpec spec;
  spec.count = 100;
  spec.seed = 7;
  OpcheckOptions options;
  options.test_utils = {"stride_invariance"};
  options.raise_exception = false;
  auto results = opcheck(op.handle(), spec, options, registry);
  const CheckResult& r = results.at("stride_invariance");
  ASSERT_EQ(r.outcome, Outcome::failed) << r.message;
  ASSERT_TRUE(r.minimal_input.has_value());
  // stride_invariance builds the non-contiguous layouts itself, so the smallest input that shows
  // the bug is any two-element tensor: one element has no layout to get wrong.
  EXPECT_EQ(*r.minimal_input, "x: float32[2] requires_grad");
  EXPECT_THAT(r.repro, HasSubstr("OPCONFORM_SEED=7"));
}

// A kernel wrong only past 2,000 elements (a tiled loop that drops what lies past its last full
// tile) passes every small sample; opcheck over GenerateSpec's defaults — what the generated suite
// and the CLI run — reaches it through the large tier, and shrinks it to the smallest size that
// still fails.
TEST(Opcheck, DefaultGeneratedSamplesFindABugPastTwoThousandElements) {
  Registry registry;
  auto fake_fallback = install_fake_fallback(registry);
  CustomOpDef op = custom_op("t::tiled_sin", [](const Tensor& x) {
    Tensor out = map(x, sin_);
    if (out.numel() > 2000) out.view({-1}).slice(0, 2000, std::nullopt).fill_(Scalar(0.0));  // the seeded bug
    return out;
  }, {.registry = &registry}, {"x"});
  op.register_fake([](const Tensor& x) { return empty_like(x); });
  op.register_autograd(
      [](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
        Tensor x = ctx.saved_tensors().at(0);
        return std::vector<Tensor>{testing::zip(g[0], x, [](double gv, double xv) { return gv * std::cos(xv); })};
      },
      [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) { ctx.save_for_backward({in[0].to_tensor()}); });
  GenerateSpec spec;  // defaults: the large tier and inputs that require grad
  spec.seed = 11;
  OpcheckOptions options;
  options.test_utils = {"gradcheck"};
  options.raise_exception = false;
  const CheckResult r = opcheck(op.handle(), spec, options, registry).at("gradcheck");
  ASSERT_EQ(r.outcome, Outcome::failed) << r.message;
  ASSERT_TRUE(r.minimal_input.has_value());
  EXPECT_THAT(*r.minimal_input, HasSubstr("[2047]")) << "the smallest failing size of the large tier";
  // The same op with the tier off passes: only large samples reach the bug.
  spec.large_percent = 0;
  EXPECT_EQ(opcheck(op.handle(), spec, options, registry).at("gradcheck").outcome, Outcome::passed);
}

TEST(Opcheck, RtolWithoutAtolIsAnErrorAsInPyTorch) {
  Registry registry;
  CustomOpDef op = make_sin(registry, "t::sin_tol");
  OpcheckOptions options;
  options.rtol = 1e-3;
  EXPECT_THAT(testing::error_message([&] { opcheck(op.handle(), {Sample({IValue(vec({1}))})}, options, registry); }),
              HasSubstr("rtol was given without atol"));
  options.rtol.reset();
  options.atol = 1e-3;
  EXPECT_THAT(testing::error_message([&] { opcheck(op.handle(), GenerateSpec{.count = 1, .seed = 1}, options, registry); }),
              HasSubstr("atol was given without rtol"));
}

// One generated test per (op, check) for the ops of a registry, registered at start-up.
Registry& suite_registry() {
  static Registry registry;
  static auto fake_fallback = install_fake_fallback(registry);
  static CustomOpDef sin_op = make_sin(registry, "suite::sin");
  return registry;
}
OPCONFORM_INSTANTIATE_OPCHECK_SUITE(GeneratedSuite, suite_registry, "suite::*", default_test_utils());
// Without a list of checks: every check (a skipped one shows as SKIPPED, never OK). The op is
// differentiable to any order through itself: y = 2x, and its backward is the op again (gradgradcheck
// runs on it).
Registry& every_check_registry() {
  static Registry registry;
  static auto fake_fallback = install_fake_fallback(registry);
  static CustomOpDef twice = [] {
    CustomOpDef op = custom_op("every::twice", [](const Tensor& x) { return map(x, [](double v) { return 2 * v; }); },
                               {.registry = &registry}, {"x"});
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    op.register_autograd([op](autograd::AutogradContext&, const std::vector<Tensor>& g) {
      Stack stack{IValue(g[0])};
      op.handle().call_boxed(stack);
      return std::vector<Tensor>{stack.at(0).to_tensor()};
    });
    return op;
  }();
  return registry;
}
OPCONFORM_INSTANTIATE_OPCHECK_SUITE(EveryCheckSuite, every_check_registry, "every::*");

int tests_in_suite(const std::string& name) {
  const auto* unit = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    if (name == suite->name()) return suite->total_test_count();
  }
  return 0;
}

TEST(Opcheck, TheSuiteRegisteredOneTestPerOpAndCheck) {
  EXPECT_EQ(tests_in_suite("GeneratedSuite"), static_cast<int>(default_test_utils().size()));
  EXPECT_EQ(tests_in_suite("EveryCheckSuite"), static_cast<int>(check_names().size()));
}

}  // namespace
}  // namespace opconform::conformance
