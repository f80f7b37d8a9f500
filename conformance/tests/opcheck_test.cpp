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

// A correct sin with a fake kernel and an autograd formula.
CustomOpDef make_sin(Registry& registry, const std::string& name) {
  CustomOpDef op = custom_op(name, [](const Tensor& x) { return map(x, sin_); }, {.registry = &registry}, {"x"});
  op.register_fake([](const Tensor& x) { return empty_like(x); });
  op.register_autograd(
      [](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
        Tensor x = ctx.saved_tensors().at(0);
        return std::vector<Tensor>{testing::zip(g[0], x, [](double gv, double xv) { return gv * std::cos(xv); })};
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
  OpcheckOptions options;
  options.raise_exception = true;
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
  auto failure = find_failure(op.schema(), op.name(), same_for_any_layout, spec);
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
  auto results = opcheck(op.handle(), spec, options, registry);
  const CheckResult& r = results.at("stride_invariance");
  ASSERT_EQ(r.outcome, Outcome::failed) << r.message;
  ASSERT_TRUE(r.minimal_input.has_value());
  // stride_invariance builds the non-contiguous layouts itself, so the smallest input that shows
  // the bug is any two-element tensor: one element has no layout to get wrong.
  EXPECT_EQ(*r.minimal_input, "x: float32[2]");
  EXPECT_THAT(r.repro, HasSubstr("OPCONFORM_SEED=7"));
}

// One generated test per (op, check) for the ops of a registry, registered at start-up.
Registry& suite_registry() {
  static Registry registry;
  static auto fake_fallback = install_fake_fallback(registry);
  static CustomOpDef sin_op = make_sin(registry, "suite::sin");
  return registry;
}
OPCONFORM_INSTANTIATE_OPCHECK_SUITE(GeneratedSuite, suite_registry, "suite::*", default_test_utils());

TEST(Opcheck, TheSuiteRegisteredOneTestPerOpAndCheck) {
  const auto* unit = ::testing::UnitTest::GetInstance();
  int found = 0;
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    if (std::string(suite->name()) == "GeneratedSuite") found = suite->total_test_count();
  }
  EXPECT_EQ(found, static_cast<int>(default_test_utils().size()));
}

}  // namespace
}  // namespace opconform::conformance
