// The tolerance model (Note [Tolerance model] in tolerance.cpp), outcomes and sample helpers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "opconform/conformance/outcome.h"
#include "opconform/conformance/sample.h"
#include "opconform/conformance/tolerance.h"
#include "opconform/core/registry.h"
#include "support/error_of.h"

namespace opconform::conformance {
namespace {

using ::testing::HasSubstr;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f64(std::vector<double> v) { return from_vector<double>(v, {static_cast<int64_t>(v.size())}); }
Tensor f32(std::vector<float> v) { return from_vector<float>(v, {static_cast<int64_t>(v.size())}); }

TEST(Tolerance, DefaultsFollowAssertClose) {
  struct Row {
    DType dtype;
    double rtol, atol;
  };
  for (Row r : {Row{DType::Float16, 1e-3, 1e-5}, Row{DType::BFloat16, 1.6e-2, 1e-5}, Row{DType::Float32, 1.3e-6, 1e-5},
                Row{DType::Float64, 1e-7, 1e-7}, Row{DType::Complex64, 1.3e-6, 1e-5},
                Row{DType::Complex128, 1e-7, 1e-7}, Row{DType::Int64, 0, 0}, Row{DType::UInt8, 0, 0},
                Row{DType::Bool, 0, 0}}) {
    Tolerance t = default_tolerance(r.dtype);
    EXPECT_EQ(t.rtol, r.rtol) << name(r.dtype);
    EXPECT_EQ(t.atol, r.atol) << name(r.dtype);
    EXPECT_FALSE(t.max_ulp.has_value());
  }
}

TEST(Tolerance, ElementsWithinToleranceAreEqualAndBeyondAreNot) {
  Tolerance t{1e-3, 1e-5, {}};
  EXPECT_TRUE(compare(f64({1.0005, 2}), f64({1, 2}), t).equal);
  Comparison c = compare(f64({1.01, 2, 3.5}), f64({1, 2, 3}), t);
  EXPECT_FALSE(c.equal);
  EXPECT_FALSE(c.mistrusted);
  EXPECT_THAT(c.mismatch, HasSubstr("mismatch at index [0]: actual 1.01, expected 1"));
  EXPECT_THAT(c.mismatch, HasSubstr("2 of 3 elements differ (greatest |difference| 0.5 at [2])"));
}

TEST(Tolerance, ZeroToleranceMeansZero) {
  Tolerance zero{0, 0, {}};
  EXPECT_TRUE(compare(f64({1.5}), f64({1.5}), zero).equal);
  EXPECT_FALSE(compare(f64({1.5}), f64({std::nextafter(1.5, 2.0)}), zero).equal);
  // Explicit zeros replace the defaults; they are not "unset".
  ToleranceSpec spec{.atol = 0.0, .rtol = 0.0};
  Tolerance t = spec.for_dtype(DType::Float32);
  EXPECT_EQ(t.atol, 0);
  EXPECT_EQ(t.rtol, 0);
  // Each one on its own: the other keeps the dtype default.
  Tolerance only_atol = ToleranceSpec{.atol = 0.5, .rtol = {}}.for_dtype(DType::Float32);
  EXPECT_EQ(only_atol.atol, 0.5);
  EXPECT_EQ(only_atol.rtol, 1.3e-6);
  EXPECT_THAT(testing::error_message([] { ToleranceSpec{.atol = -1.0, .rtol = {}}.for_dtype(DType::Float32); }),
              HasSubstr("atol must be a finite value >= 0"));
}

TEST(Tolerance, NaNMatchesNaNAndInfinitiesMustMatchInSign) {
  Tolerance loose{1, 1, {}};
  EXPECT_TRUE(compare(f64({kNaN, 1}), f64({kNaN, 1}), loose).equal);
  EXPECT_FALSE(compare(f64({kNaN}), f64({1}), loose).equal);
  EXPECT_FALSE(compare(f64({1}), f64({kNaN}), loose).equal);
  EXPECT_TRUE(compare(f64({kInf, -kInf}), f64({kInf, -kInf}), loose).equal);
  Comparison c = compare(f64({kInf}), f64({-kInf}), loose);
  EXPECT_FALSE(c.equal);
  EXPECT_THAT(c.mismatch, HasSubstr("NaN and infinity must match exactly"));
  // However loose the tolerance, a finite value does not match an infinity.
  EXPECT_FALSE(compare(f64({1e308}), f64({kInf}), Tolerance{1e9, 1e9, {}}).equal);
  // Complex: a NaN in either part makes the value NaN.
  auto c128 = [](std::vector<complex128> v) { return from_vector<complex128>(v, {static_cast<int64_t>(v.size())}); };
  EXPECT_TRUE(compare(c128({{kNaN, 1}}), c128({{2, kNaN}}), loose).equal);
  EXPECT_FALSE(compare(c128({{kInf, 0}}), c128({{-kInf, 0}}), loose).equal);
  EXPECT_TRUE(compare(c128({{1, 1}}), c128({{1, 1 + 1e-9}}), default_tolerance(DType::Complex128)).equal);
}

TEST(Tolerance, UlpBoundPassesValuesFewRepresentableStepsApart) {
  float a = 1.0f, b = a;
  for (int i = 0; i < 3; ++i) b = std::nextafter(b, 2.0f);
  Tolerance ulp{0, 0, 3};
  EXPECT_TRUE(compare(f32({a}), f32({b}), ulp).equal);
  EXPECT_FALSE(compare(f32({a}), f32({std::nextafter(b, 2.0f)}), ulp).equal);
  // Across a binade boundary: 1 - 2^-24 and 1 + 2^-23 are two float32 steps apart.
  EXPECT_TRUE(compare(f32({std::nextafter(1.0f, 0.0f)}), f32({std::nextafter(1.0f, 2.0f)}), Tolerance{0, 0, 2}).equal);
  EXPECT_FALSE(compare(f32({std::nextafter(1.0f, 0.0f)}), f32({std::nextafter(1.0f, 2.0f)}), Tolerance{0, 0, 1}).equal);
  // Around zero, -min_subnormal and +min_subnormal are two steps apart.
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_TRUE(compare(f32({-tiny}), f32({tiny}), Tolerance{0, 0, 2}).equal);
  EXPECT_THAT(compare(f32({a}), f32({2.0f}), ulp).mismatch, HasSubstr("or within 3 ULP"));
}

TEST(Tolerance, ComparisonOfOnlyZerosOrNaNsIsMistrusted) {
  Tolerance t = default_tolerance(DType::Float64);
  Comparison c = compare(f64({0, -0.0, kNaN}), f64({0, 0, kNaN}), t);
  EXPECT_TRUE(c.equal);
  EXPECT_TRUE(c.mistrusted);
  EXPECT_FALSE(compare(f64({0, 1}), f64({0, 1}), t).mistrusted);
  // A mismatch is a finding, never mistrusted; empty tensors are not mistrusted either.
  Comparison m = compare(f64({0, 1}), f64({0, 0}), t);
  EXPECT_FALSE(m.equal);
  EXPECT_FALSE(m.mistrusted);
  Comparison e = compare(empty({0}, DType::Float64), empty({0}, DType::Float64), t);
  EXPECT_TRUE(e.equal);
  EXPECT_FALSE(e.mistrusted);
  EXPECT_TRUE(compare(zeros({3}, DType::Int64), zeros({3}, DType::Int64), {}).mistrusted);
}

TEST(Tolerance, ShapeAndDtypeMismatchesAreNotEqual) {
  Comparison s = compare(zeros({2, 3}), zeros({3, 2}), {});
  EXPECT_FALSE(s.equal);
  EXPECT_THAT(s.mismatch, HasSubstr("shape mismatch: actual [2, 3], expected [3, 2]"));
  Comparison d = compare(zeros({2}, DType::Float32), zeros({2}, DType::Float64), {});
  EXPECT_FALSE(d.equal);
  EXPECT_THAT(d.mismatch, HasSubstr("dtype mismatch: actual float32, expected float64"));
}

TEST(Tolerance, IntegersCompareExactlyIncludingBeyondFloat64Precision) {
  const int64_t big = (int64_t(1) << 60) + 1;
  auto i64 = [](std::vector<int64_t> v) { return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); };
  EXPECT_TRUE(compare(i64({big}), i64({big}), default_tolerance(DType::Int64)).equal);
  Comparison c = compare(i64({big}), i64({big - 1}), default_tolerance(DType::Int64));
  EXPECT_FALSE(c.equal);
  EXPECT_THAT(c.mismatch, HasSubstr("actual 1152921504606846977, expected 1152921504606846976"));
  EXPECT_TRUE(compare(i64({5}), i64({7}), Tolerance{0, 2, {}}).equal);
}

TEST(Tolerance, AnyStridesCompareByElement) {
  Tensor base = f64({1, 2, 3, 4, 5, 6}).view({2, 3});
  Tensor t = base.transpose(0, 1);  // [[1, 4], [2, 5], [3, 6]], non-contiguous
  Tensor expected = from_vector<double>({1, 4, 2, 5, 3, 6}, {3, 2});
  EXPECT_TRUE(compare(t, expected, {}).equal);
  EXPECT_TRUE(bitwise_equal(t, expected));
  Comparison c = compare(t, from_vector<double>({1, 4, 2, 5, 3, 7}, {3, 2}), {});
  EXPECT_THAT(c.mismatch, HasSubstr("index [2, 1]"));
}

TEST(Tolerance, BitwiseEqualSeesWhatAllcloseDoesNot) {
  EXPECT_FALSE(bitwise_equal(f64({1.0}), f64({std::nextafter(1.0, 2.0)})));
  EXPECT_FALSE(bitwise_equal(f64({0.0}), f64({-0.0})));
  EXPECT_TRUE(bitwise_equal(f64({kNaN}), f64({kNaN})));
  EXPECT_FALSE(bitwise_equal(f64({1, 2}), f64({1, 2}).to(DType::Float32)));
  Tensor strided = f64({1, 2, 3, 4}).slice(0, 0, 4, 2);  // [1, 3]
  EXPECT_EQ(element_bytes(strided), element_bytes(f64({1, 3})));
}

TEST(Tolerance, AnOpsOwnTolerancesOverrideOptionsAndDefaults) {
  OpData data;
  data.tolerances.push_back({DType::Float32, Tolerance{1e-2, 1e-3, 4}, "accumulates in float32 by design"});
  ASSERT_NE(data.tolerance_for(DType::Float32), nullptr);
  EXPECT_EQ(data.tolerance_for(DType::Float32)->reason, "accumulates in float32 by design");
  ToleranceSpec spec{.atol = 0.0, .rtol = 0.0};
  Tolerance t = spec.for_dtype(DType::Float32, &data);
  EXPECT_EQ(t.rtol, 1e-2);
  EXPECT_EQ(t.atol, 1e-3);
  EXPECT_EQ(t.max_ulp, 4);
  // Other dtypes and ops without data are untouched.
  EXPECT_EQ(spec.for_dtype(DType::Float64, &data).rtol, 0);
  EXPECT_EQ(spec.for_dtype(DType::Float32).rtol, 0);
  const OpData none;
  EXPECT_EQ(spec.for_dtype(DType::Float32, &none).rtol, 0);
  // Set on an op, an override needs a reason and sane bounds (validate_op_data).
  Registry registry;
  auto def = registry.define(parse_schema("tol_test::op(Tensor a) -> Tensor"), {}, RegistrationSource::named("test"));
  OpData no_reason;
  no_reason.tolerances.push_back({DType::Float32, {}, ""});
  EXPECT_THAT(testing::error_message([&] { registry.set_op_data("tol_test::op", no_reason); }), HasSubstr("has no reason"));
  OpData negative;
  negative.tolerances.push_back({DType::Float32, {-1, 0, {}}, "r"});
  EXPECT_THAT(testing::error_message([&] { registry.set_op_data("tol_test::op", negative); }),
              HasSubstr("must be a finite value >= 0"));
}

// ---- outcomes and samples (small, they live with the model they serve)

TEST(Outcome, NamesAndCombineKeepsTheWorst) {
  EXPECT_EQ(to_string(Outcome::mistrusted), "mistrusted");
  std::ostringstream out;
  out << Outcome::timed_out;
  EXPECT_EQ(out.str(), "timed_out");
  auto result = [](Outcome o, std::string message = "") {
    CheckResult r;
    r.check = "c";
    r.outcome = o;
    r.message = std::move(message);
    return r;
  };
  CheckResult passed = result(Outcome::passed, "ok"), skipped = result(Outcome::skipped, "why"),
              failed1 = result(Outcome::failed, "first"), failed2 = result(Outcome::failed, "second"),
              unsupported = result(Outcome::unsupported, "no cuda"), mistrusted = result(Outcome::mistrusted, "zeros");
  EXPECT_EQ(combine(skipped, passed).outcome, Outcome::passed);
  EXPECT_EQ(combine(passed, unsupported).outcome, Outcome::unsupported);
  EXPECT_EQ(combine(unsupported, mistrusted).outcome, Outcome::mistrusted);
  EXPECT_EQ(combine(failed1, failed2).message, "first");
  EXPECT_EQ(combine(mistrusted, failed2).message, "second");
  EXPECT_EQ(combine(result(Outcome::crashed), result(Outcome::timed_out)).outcome, Outcome::crashed);
}

TEST(Sample, DescribeNamesArgumentsAndUnusualLayouts) {
  Tensor x = zeros({2, 3}).transpose(0, 1);
  Tensor y = zeros({4}, DType::Int64).slice(0, 1);
  EXPECT_EQ(describe({IValue(x), IValue(y), IValue(2.5)}, {"x", "y", "alpha"}),
            "x: float32[3, 2] strides [1, 3], y: int64[3] offset 1, alpha: 2.5");
  Tensor g = zeros({2});
  g.set_requires_grad(true);
  EXPECT_EQ(describe({IValue(std::vector<Tensor>{g, zeros({1})})}), "[float32[2] requires_grad, float32[1]]");
}

TEST(Sample, CloneArgsKeepsStridesAliasingAndRequiresGrad) {
  Tensor base = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = base.transpose(0, 1);
  Tensor expanded = from_vector<float>({7}, {1}).expand({3});
  Tensor leaf = from_vector<float>({1, 2}, {2});
  leaf.set_requires_grad(true);
  Stack args{IValue(t), IValue(base), IValue(expanded), IValue(std::vector<Tensor>{leaf, t}), IValue(int64_t(3))};
  Stack c = clone_args(args);
  const Tensor& ct = c[0].to_tensor();
  EXPECT_FALSE(ct.is_alias_of(t));
  EXPECT_EQ(std::vector<int64_t>(ct.strides().begin(), ct.strides().end()), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(ct.is_alias_of(c[1].to_tensor()));  // views of one base still share memory
  EXPECT_EQ(c[2].to_tensor().stride(0), 0);
  const auto& list = c[3].to_tensor_list();
  EXPECT_TRUE(list[0].requires_grad());
  EXPECT_TRUE(list[0].is_leaf());
  EXPECT_TRUE(list[1].is_same(ct));  // the same object stays the same object
  EXPECT_EQ(c[4].to_int(), 3);
  ct.fill_(0);
  EXPECT_EQ(t.get({0, 1}).to<float>(), 4.0f);  // the sample is untouched
}

}  // namespace
}  // namespace opconform::conformance
