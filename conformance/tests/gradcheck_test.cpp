// gradcheck and gradgradcheck on correct operators and on seeded bugs: each bug must be flagged,
// with a message that names the input, the output, the element and the two values.
#include "opconform/conformance/gradcheck.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "opconform/conformance/check.h"
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/core/autograd.h"
#include "opconform/core/custom_op.h"
#include "support/float_ops.h"

namespace opconform::conformance {
namespace {

using autograd::AutogradContext;
using ::testing::HasSubstr;
using opconform::testing::map;
using opconform::testing::zip;

// A float32 tensor of distinct, non-special values that requires grad.
Tensor leaf(std::vector<int64_t> sizes, double start = 0.3) {
  Tensor t = opconform::empty(sizes);
  float* p = t.mutable_data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(start + 0.37 * static_cast<double>(i % 17) - 0.05 * (i % 5));
  t.set_requires_grad(true);
  return t;
}

void save_inputs(AutogradContext& ctx, const Stack& inputs, const Stack&) {
  std::vector<Tensor> saved;
  for (const auto& v : inputs) {
    if (v.is_tensor()) saved.push_back(v.to_tensor());
  }
  ctx.save_for_backward(saved);
}

class GradcheckTest : public ::testing::Test {
 protected:
  CustomOpOptions opts() {
    CustomOpOptions o;
    o.registry = &registry;
    return o;
  }
  // sin(x) with a backward given as g -> f(g, x).
  CustomOpDef sin_with_backward(const std::string& name, std::function<double(double, double)> grad_of) {
    auto op = custom_op(name, [](const Tensor& x) { return map(x, [](double v) { return std::sin(v); }); }, opts(), {"x"});
    op.register_autograd(
        [grad_of](AutogradContext& ctx, const std::vector<Tensor>& g) {
          return std::vector<Tensor>{zip(g[0], ctx.saved_tensors()[0], grad_of)};
        },
        save_inputs);
    return op;
  }
  // t::mul(a, b) = a * b whose backward calls t::mul itself, so it is differentiable again.
  CustomOpDef differentiable_mul() {
    auto op = custom_op("t::mul", [](const Tensor& a, const Tensor& b) { return zip(a, b, [](double p, double q) { return p * q; }); },
                        opts(), {"a", "b"});
    Registry* r = &registry;
    op.register_autograd(
        [r](AutogradContext& ctx, const std::vector<Tensor>& g) {
          auto mul = r->get("t::mul").typed<Tensor(const Tensor&, const Tensor&)>();
          auto saved = ctx.saved_tensors();
          return std::vector<Tensor>{mul.call(g[0], saved[1]), mul.call(g[0], saved[0])};
        },
        save_inputs);
    return op;
  }
  Tensor mul(const Tensor& a, const Tensor& b) {
    return registry.get("t::mul").typed<Tensor(const Tensor&, const Tensor&)>().call(a, b);
  }

  Registry registry;
};

double cos_grad(double g, double x) { return g * std::cos(x); }

TEST_F(GradcheckTest, CorrectBackwardPasses) {
  auto op = sin_with_backward("t::sin", cos_grad);
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({2, 3}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  EXPECT_EQ(r.check, "gradcheck");
}

TEST_F(GradcheckTest, WrongFormulaIsFlaggedWithInputOutputElementAndValues) {
  // d/dx sin(x) written as sin(x): wrong everywhere.
  auto op = sin_with_backward("t::bad_sin", [](double g, double x) { return g * std::sin(x); });
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({2, 3}))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("'t::bad_sin'"));
  EXPECT_THAT(r.message, HasSubstr("output 0"));
  EXPECT_THAT(r.message, HasSubstr("input 'x' (argument 0)"));
  EXPECT_THAT(r.message, HasSubstr("input element [0, 0]"));
  // numerical cos(0.3) = 0.9553..., analytical sin(0.3) = 0.2955...
  EXPECT_THAT(r.message, HasSubstr("numerical 0.9553"));
  EXPECT_THAT(r.message, HasSubstr("analytical 0.2955"));
  EXPECT_FALSE(r.repro.empty());
}

TEST_F(GradcheckTest, GradientWrongInOneElementIsLocated) {
  auto op = custom_op("t::scale", [](const Tensor& x) { return map(x, [](double v) { return 3 * v; }); }, opts(), {"x"});
  op.register_autograd([](AutogradContext&, const std::vector<Tensor>& g) {
    Tensor grad = map(g[0], [](double v) { return 3 * v; });
    if (grad.numel() > 2 && grad.get({2}).to_double() != 0) grad.set({2}, 3.5);  // off at element 2 only
    return std::vector<Tensor>{grad};
  });
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({4}))}, {.fast_mode = false});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("input element [2], output element [2]"));
  EXPECT_THAT(r.message, HasSubstr("numerical 3"));
  EXPECT_THAT(r.message, HasSubstr("analytical 3.5"));
}

TEST_F(GradcheckTest, NonReentrantBackwardIsFlagged) {
  auto calls = std::make_shared<int>(0);
  auto op = sin_with_backward("t::stateful_sin", [calls](double g, double x) {
    // Drifts with every call: right on the first backward only.
    return g * std::cos(x) * (1 + 1e-3 * (*calls)++);
  });
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({3}))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("not reentrant"));
  EXPECT_THAT(r.message, HasSubstr("input 'x'"));
}

TEST_F(GradcheckTest, NonzeroGradientForZeroGradOutputsIsFlagged) {
  auto op = sin_with_backward("t::affine_grad", [](double g, double x) { return g * std::cos(x) + 0.5; });
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({3}))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("zero grad_outputs gave a nonzero gradient of input 'x'"));
}

TEST_F(GradcheckTest, TwoInputsAndOnlyOneRequiringGrad) {
  auto op = differentiable_mul();
  Tensor b = leaf({2, 2}, 1.1).detach();
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({2, 2})), IValue(b)});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  CheckResult both = gradcheck(op.handle(), {IValue(leaf({2, 2})), IValue(leaf({2, 2}, 1.1))});
  EXPECT_EQ(both.outcome, Outcome::passed) << both.message;
}

TEST_F(GradcheckTest, WrongGradientOfTheSecondInputNamesIt) {
  auto op = custom_op("t::bad_mul", [](const Tensor& a, const Tensor& b) { return zip(a, b, [](double p, double q) { return p * q; }); },
                      opts(), {"a", "b"});
  op.register_autograd(
      [](AutogradContext& ctx, const std::vector<Tensor>& g) {
        auto s = ctx.saved_tensors();
        Tensor ga = zip(g[0], s[1], [](double p, double q) { return p * q; });
        return std::vector<Tensor>{ga, ga};  // b's gradient should use a
      },
      save_inputs);
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({3})), IValue(leaf({3}, 1.7))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("input 'b' (argument 1)"));
}

TEST_F(GradcheckTest, FastModeForLargeInputs) {
  auto good = sin_with_backward("t::sin", cos_grad);
  auto bad = sin_with_backward("t::bad_sin", [](double g, double x) { return g * std::sin(x); });
  Tensor x = leaf({40, 30});  // 1200 elements: fast mode by default
  CheckResult ok = gradcheck(good.handle(), {IValue(x)});
  EXPECT_EQ(ok.outcome, Outcome::passed) << ok.message;
  CheckResult r = gradcheck(bad.handle(), {IValue(x)});
  ASSERT_EQ(r.outcome, Outcome::failed);
  // Fast mode saw the disagreement; the slow mode, run on that sample, locates the element.
  EXPECT_THAT(r.message, HasSubstr("at input element [0, 0]"));
  EXPECT_THAT(r.message, HasSubstr("input 'x'"));
  // Forced fast mode on a small input, too.
  EXPECT_EQ(gradcheck(bad.handle(), {IValue(leaf({3}))}, {.fast_mode = true}).outcome, Outcome::failed);
  EXPECT_EQ(gradcheck(good.handle(), {IValue(leaf({3}))}, {.fast_mode = true}).outcome, Outcome::passed);
}

TEST_F(GradcheckTest, SkippedWithoutInputsThatRequireGrad) {
  auto op = sin_with_backward("t::sin", cos_grad);
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({3}).detach())});
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_THAT(r.message, HasSubstr("requires grad"));
}

TEST_F(GradcheckTest, SkippedWithoutDifferentiableOutput) {
  // An integer output never requires grad.
  auto op = custom_op("t::truncate", [](const Tensor& x) { return x.to(DType::Int64); }, opts(), {"x"});
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({3}))});
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_THAT(r.message, HasSubstr("no differentiable output"));
}

TEST_F(GradcheckTest, MissingFormulaFails) {
  // custom_op records a node that refuses backward when no formula is registered.
  auto op = custom_op("t::plain", [](const Tensor& x) { return map(x, [](double v) { return v; }); }, opts(), {"x"});
  CheckResult r = gradcheck(op.handle(), {IValue(leaf({3}))});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("no autograd formula"));
}

TEST_F(GradcheckTest, TheSampleIsNotTouched) {
  auto op = sin_with_backward("t::sin", cos_grad);
  Tensor x = leaf({2, 2});
  std::vector<float> before = x.to_vector<float>();
  gradcheck(op.handle(), {IValue(x)});
  EXPECT_EQ(x.to_vector<float>(), before);
  EXPECT_EQ(x.dtype(), DType::Float32);
  EXPECT_FALSE(x.grad().defined());
}

// ---- gradgradcheck ----

TEST_F(GradcheckTest, GradgradcheckPassesForADifferentiableBackward) {
  auto op = differentiable_mul();
  CheckResult r = gradgradcheck(op.handle(), {IValue(leaf({2, 2})), IValue(leaf({2, 2}, 1.1))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  EXPECT_EQ(r.check, "gradgradcheck");
}

TEST_F(GradcheckTest, GradgradcheckFlagsABackwardThatDropsItsDependenceOnTheInput) {
  auto mul_op = differentiable_mul();
  // square(x) = x^2; backward g * (2x) with 2x computed outside autograd: right to first order,
  // but its derivative with respect to x is lost (second order zero instead of 2g).
  auto sq = custom_op("t::square", [](const Tensor& x) { return zip(x, x, [](double p, double q) { return p * q; }); }, opts(), {"x"});
  sq.register_autograd(
      [this](AutogradContext& ctx, const std::vector<Tensor>& g) {
        Tensor two_x = map(ctx.saved_tensors()[0].detach(), [](double v) { return 2 * v; });
        return std::vector<Tensor>{mul(g[0], two_x)};
      },
      save_inputs);
  Tensor x = leaf({3});
  EXPECT_EQ(gradcheck(sq.handle(), {IValue(x)}).outcome, Outcome::passed);
  CheckResult r = gradgradcheck(sq.handle(), {IValue(x)});
  ASSERT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("the gradient of input 'x' (argument 0) with respect to input 'x'"));
  EXPECT_THAT(r.message, HasSubstr("analytical 0"));
}

TEST_F(GradcheckTest, GradgradcheckSkipsABackwardThatIsNotRecorded) {
  auto op = sin_with_backward("t::sin", cos_grad);  // zip(...) is not an operator: not recorded
  CheckResult r = gradgradcheck(op.handle(), {IValue(leaf({3}))});
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_THAT(r.message, HasSubstr("does not support double backward"));
}

// ---- the Check wrappers ----

TEST_F(GradcheckTest, ChecksRunOnTheContextSample) {
  auto good = sin_with_backward("t::sin", cos_grad);
  auto bad = sin_with_backward("t::bad_sin", [](double g, double x) { return g * std::sin(x); });
  auto check = detail::make_gradcheck();
  EXPECT_EQ(check->name(), "gradcheck");
  EXPECT_EQ(detail::make_gradgradcheck()->name(), "gradgradcheck");
  Sample sample({IValue(leaf({2}))});
  ToleranceSpec tolerance;
  EXPECT_EQ(check->run({good.handle(), sample, tolerance, registry}).outcome, Outcome::passed);
  EXPECT_EQ(check->run({bad.handle(), sample, tolerance, registry}).outcome, Outcome::failed);
  // opcheck's atol/rtol replace gradcheck's defaults: loose enough, the wrong formula passes.
  ToleranceSpec loose{.atol = 10.0, .rtol = 0.0};
  EXPECT_EQ(check->run({bad.handle(), sample, loose, registry}).outcome, Outcome::passed);
}

// Note [Gradcheck below float64]: a library without float64 kernels is checked in float32, and
// the message says so; a wrong formula still fails; no float32 kernel either is unsupported.
TEST_F(GradcheckTest, ALibraryWithoutFloat64IsCheckedInFloat32) {
  auto sin_in = [&](const std::string& name, DType only, std::function<double(double, double)> grad_of) {
    auto op = custom_op(name, [only](const Tensor& x) {
      OPCONFORM_CHECK(x.dtype() == only, ErrorCode::kNotImplemented, "only ", opconform::name(only), " for 'x'");
      return map(x, [](double v) { return std::sin(v); });
    }, opts(), {"x"});
    op.register_autograd(
        [grad_of](AutogradContext& ctx, const std::vector<Tensor>& g) {
          return std::vector<Tensor>{zip(g[0], ctx.saved_tensors()[0], grad_of)};
        },
        save_inputs);
    return op;
  };
  auto good = sin_in("t::sin32", DType::Float32, cos_grad);
  auto bad = sin_in("t::bad_sin32", DType::Float32, [](double g, double x) { return g * std::cos(x) * 1.1; });
  auto none = sin_in("t::sin16", DType::Float16, cos_grad);
  auto check = detail::make_gradcheck();
  Sample sample({IValue(leaf({2, 3}))});
  ToleranceSpec tolerance;
  const CheckResult passed = check->run({good.handle(), sample, tolerance, registry});
  EXPECT_EQ(passed.outcome, Outcome::passed) << passed.message;
  EXPECT_THAT(passed.message, HasSubstr("in float32 (float64 unsupported"));
  const CheckResult failed = check->run({bad.handle(), sample, tolerance, registry});
  EXPECT_EQ(failed.outcome, Outcome::failed) << failed.message;  // 10% off: far outside float32's tolerance
  EXPECT_THAT(failed.message, HasSubstr("in float32"));
  const CheckResult unsupported = check->run({none.handle(), sample, tolerance, registry});
  EXPECT_EQ(unsupported.outcome, Outcome::unsupported) << unsupported.message;
  EXPECT_THAT(unsupported.message, HasSubstr("does not take this sample in float64"));
  EXPECT_THAT(unsupported.message, HasSubstr("; in float32: "));
  // Straight from gradcheck(): float64 refused is unsupported, not a wrong gradient.
  EXPECT_EQ(gradcheck(good.handle(), {IValue(leaf({2}))}).outcome, Outcome::unsupported);
}

// |x| with a backward g -> g * dabs(x): at a kink any value between the one-sided derivatives
// is a subgradient (Note [Points where the op is not differentiable]); outside them it fails.
class KinkTest : public GradcheckTest {
 protected:
  CustomOpDef abs_with(const std::string& name, std::function<double(double)> dabs) {
    auto op = custom_op(name, [](const Tensor& x) { return map(x, [](double v) { return std::abs(v); }); }, opts(), {"x"});
    op.register_autograd(
        [dabs](AutogradContext& ctx, const std::vector<Tensor>& g) {
          return std::vector<Tensor>{zip(g[0], ctx.saved_tensors()[0], [dabs](double gv, double x) { return gv * dabs(x); })};
        },
        save_inputs);
    return op;
  }
  Tensor at(std::vector<double> v) {
    Tensor t = from_vector<double>(v, {static_cast<int64_t>(v.size())});
    t.set_requires_grad(true);
    return t;
  }
};

TEST_F(KinkTest, SubgradientsAtAKinkPassAndOtherValuesFail) {
  auto sign = [](double x) { return static_cast<double>((x > 0) - (x < 0)); };
  auto good = abs_with("t::abs", sign);
  // 0 and a value within eps of 0: the central difference says 0, sign says 0 and -1.
  EXPECT_EQ(gradcheck(good.handle(), {IValue(at({0.0, -1e-9, 0.5}))}).outcome, Outcome::passed);
  auto wrong = abs_with("t::abs_wrong", [sign](double x) { return x == 0 ? 3.0 : sign(x); });
  CheckResult r = gradcheck(wrong.handle(), {IValue(at({0.0, 0.5}))});
  EXPECT_EQ(r.outcome, Outcome::failed) << r.message;
  // Away from the kink nothing changes: a wrong derivative there still fails.
  auto off = abs_with("t::abs_off", [sign](double x) { return 2 * sign(x); });
  EXPECT_EQ(gradcheck(off.handle(), {IValue(at({-1e-9, 0.5}))}).outcome, Outcome::failed);
}

TEST_F(KinkTest, AtAJumpAnyConventionPassesButNotElsewhere) {
  // floor with the usual convention (derivative 0), sampled exactly at integers and between.
  auto floor_op = custom_op("t::floor", [](const Tensor& x) { return map(x, [](double v) { return std::floor(v); }); },
                            opts(), {"x"});
  floor_op.register_autograd(
      [](AutogradContext&, const std::vector<Tensor>& g) { return std::vector<Tensor>{map(g[0], [](double) { return 0.0; })}; });
  // No finding; a Jacobian that is zero everywhere proves nothing, which the outcome says.
  EXPECT_EQ(gradcheck(floor_op.handle(), {IValue(at({0.0, 2.0, 1.5}))}).outcome, Outcome::mistrusted);
  EXPECT_EQ(gradcheck(floor_op.handle(), {IValue(at({0.0, 2.0, 1.5}))}, {.fast_mode = true}).outcome, Outcome::mistrusted);
  // A backward claiming slope 1 is still wrong between the jumps.
  auto wrong = custom_op("t::floor_wrong", [](const Tensor& x) { return map(x, [](double v) { return std::floor(v); }); },
                         opts(), {"x"});
  wrong.register_autograd([](AutogradContext&, const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0].clone()}; });
  EXPECT_EQ(gradcheck(wrong.handle(), {IValue(at({0.0, 1.5}))}).outcome, Outcome::failed);
}

TEST_F(KinkTest, FastModeAtManyKinksFallsBackToTheSlowMode) {
  // relu at a vector of zeros: along a random direction every element is at its kink.
  auto relu = custom_op("t::relu", [](const Tensor& x) { return map(x, [](double v) { return v > 0 ? v : 0.0; }); },
                        opts(), {"x"});
  relu.register_autograd(
      [](AutogradContext& ctx, const std::vector<Tensor>& g) {
        return std::vector<Tensor>{zip(g[0], ctx.saved_tensors()[0], [](double gv, double x) { return x > 0 ? gv : 0.0; })};
      },
      save_inputs);
  std::vector<double> zeros(100, 0.0);
  zeros[7] = 0.5;
  CheckResult r = gradcheck(relu.handle(), {IValue(at(zeros))}, {.fast_mode = true});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(KinkTest, InPlaceOpsAreEvaluatedFromTheSampleEachTime) {
  // x.add_(y): every evaluation must start from the sample's x, not from the previous result.
  auto add_ = custom_op("t::add_", [](const Tensor& x, const Tensor& y) {
    x.copy_(zip(x, y, [](double a, double b) { return a + b; }));
    return x;
  }, [&] { auto o = opts(); o.mutates_args = {"x"}; o.tags = {Tag::inplace}; return o; }(), {"x", "y"});
  add_.register_autograd([](AutogradContext&, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].clone(), g[0].clone()};
  });
  Tensor x = from_vector<double>({1, 2}, {2});
  CheckResult r = gradcheck(add_.handle(), {IValue(x), IValue(at({0.5, -0.5}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{1, 2}));  // the caller's sample is untouched
  // x requiring grad too: the written argument is held constant, y is still differentiated.
  CheckResult both = gradcheck(add_.handle(), {IValue(at({1, 2})), IValue(at({0.5, -0.5}))});
  EXPECT_EQ(both.outcome, Outcome::passed) << both.message;
  // A constant so large that eps is lost next to it: no difference quotient, skipped.
  CheckResult huge = gradcheck(add_.handle(), {IValue(from_vector<double>({1e30, 2}, {2})), IValue(at({0.5, -0.5}))});
  EXPECT_EQ(huge.outcome, Outcome::skipped);
  EXPECT_THAT(huge.message, HasSubstr("too large"));
}

TEST_F(KinkTest, OutVariantsAreSkipped) {
  Library lib("t", LibraryKind::FRAGMENT, std::nullopt, registry);
  lib.define("twice.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)");
  lib.impl("twice.out", [](const Tensor& x, const Tensor& out) {
    out.copy_(map(x, [](double v) { return 2 * v; }));
    return out;
  }, DispatchKey::CPU);
  CheckResult r = gradcheck(registry.get("t::twice.out"), {IValue(at({1.0})), IValue(from_vector<double>({0}, {1}))});
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_THAT(r.message, HasSubstr("out="));
}

TEST_F(GradcheckTest, ElementsOfATensorListAreDifferentiated) {
  // t::pairwise(Tensor[] xs) = xs[0] * xs[1], composite over the differentiable t::mul.
  auto mul_op = differentiable_mul();
  Library lib("t", LibraryKind::FRAGMENT, std::nullopt, registry);
  lib.define("pairwise(Tensor[] xs) -> Tensor");
  lib.impl("pairwise", [this](const std::vector<Tensor>& xs) { return mul(xs.at(0), xs.at(1)); },
           DispatchKey::CompositeImplicitAutograd);
  Stack args{IValue(std::vector<Tensor>{leaf({3}, 0.3), leaf({3}, 1.1)})};
  CheckResult r = gradcheck(registry.get("t::pairwise"), args);
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  EXPECT_EQ(gradgradcheck(registry.get("t::pairwise"), args).outcome, Outcome::passed);
  // A wrong derivative of the second element is found and named.
  lib.define("pairwise_wrong(Tensor[] xs) -> Tensor");
  lib.impl("pairwise_wrong", [this](const std::vector<Tensor>& xs) { return mul(mul(xs.at(0), xs.at(1).detach()), xs.at(1)); },
           DispatchKey::CompositeImplicitAutograd);
  CheckResult wrong = gradcheck(registry.get("t::pairwise_wrong"), args);
  ASSERT_EQ(wrong.outcome, Outcome::failed);
  EXPECT_THAT(wrong.message, HasSubstr("input 'xs'[1]"));
}

TEST_F(KinkTest, ABackwardMakingNaNIsAFindingNotAnOverflow) {
  // 0/0 in the backward at an ordinary point: NaN, which zero grad_outputs must not excuse.
  auto op = custom_op("t::nan_grad", [](const Tensor& x) { return map(x, [](double v) { return v; }); }, opts(), {"x"});
  op.register_autograd(
      [](AutogradContext& ctx, const std::vector<Tensor>& g) {
        return std::vector<Tensor>{zip(g[0], ctx.saved_tensors()[0], [](double gv, double x) { return gv * (x - x) / (x - x); })};
      },
      save_inputs);
  EXPECT_EQ(gradcheck(op.handle(), {IValue(at({0.5, 1.5}))}).outcome, Outcome::failed);
}

TEST_F(KinkTest, NonFiniteSamplesAreSkippedWithTheReason) {
  auto op = sin_with_backward("t::sin", cos_grad);
  CheckResult r = gradcheck(op.handle(), {IValue(at({0.5, INFINITY}))});
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_THAT(r.message, HasSubstr("NaN or infinity"));
  auto log_op = custom_op("t::log", [](const Tensor& x) { return map(x, [](double v) { return std::log(v); }); }, opts(), {"x"});
  log_op.register_autograd(
      [](AutogradContext& ctx, const std::vector<Tensor>& g) {
        return std::vector<Tensor>{zip(g[0], ctx.saved_tensors()[0], [](double gv, double x) { return gv / x; })};
      },
      save_inputs);
  EXPECT_EQ(gradcheck(log_op.handle(), {IValue(at({0.0, 1.0}))}).outcome, Outcome::skipped);  // log(0) = -inf
  // log(x - eps) is NaN: the sample sits at the edge of the domain.
  CheckResult edge = gradcheck(log_op.handle(), {IValue(at({1e-7, 1.0}))});
  EXPECT_EQ(edge.outcome, Outcome::skipped);
  EXPECT_THAT(edge.message, HasSubstr("within eps"));
  // x + eps == x in float64: no difference quotient.
  CheckResult huge = gradcheck(op.handle(), {IValue(at({1e12, 0.5}))});
  EXPECT_EQ(huge.outcome, Outcome::skipped);
  EXPECT_THAT(huge.message, HasSubstr("too large"));
}

}  // namespace
}  // namespace opconform::conformance
