// Low-precision rounding (Note [Low-precision rounding]): check_rounding on results rounded the
// wrong way in ways that stay inside float16's tolerance, and dtype_consistency flagging float16
// ops that declare the contract; their correctly rounded twins pass.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "opconform/conformance/check.h"
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/rounding.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/half.h"
#include "opconform/core/registry.h"
#include "support/error_of.h"

namespace opconform::conformance {
namespace {

using ::testing::HasSubstr;

using Rounder = std::function<uint16_t(double)>;

uint16_t nearest_even(double v) { return Half(v).bits; }
double value(uint16_t b) { return opconform::detail::half_bits_to_float(b); }
uint16_t step(uint16_t b, int k) { return static_cast<uint16_t>(b + k); }  // positive values: +k ULP

// SEEDED BUG: ties rounded half away from zero (C's round(), not the IEEE default).
uint16_t half_away(double v) {
  const uint16_t r = nearest_even(v);
  const uint16_t other = value(r) < v ? step(r, 1) : step(r, -1);
  return std::fabs(v - value(r)) == std::fabs(v - value(other)) && std::fabs(value(other)) > std::fabs(value(r)) ? other : r;
}
// SEEDED BUG: one element in ten a ULP too high.
uint16_t sometimes_off(double v, int64_t i) { return i % 10 == 3 ? step(nearest_even(v), 1) : nearest_even(v); }
// SEEDED BUG: truncation toward zero (positive values).
uint16_t toward_zero(double v) {
  const uint16_t r = nearest_even(v);
  return value(r) > v ? step(r, -1) : r;
}

// Exact values a + b for a in [1, 2) (ULP 2^-10) and b in [0.5, 1) (ULP 2^-11): every other sum
// is an exact midpoint of float16, as sums of halves so often are.
Tensor exact_sums(int64_t n) {
  Tensor t = empty({n}, TensorOptions(DType::Float64));
  double* p = t.mutable_data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = (1 + static_cast<double>(i * 7 % 1024) / 1024) + (0.5 + static_cast<double>(i % 1024) / 2048);
  return t;
}

// Exact values with no structure (a ULP's every fraction), for the bias.
Tensor exact_quotients(int64_t n) {
  Tensor t = empty({n}, TensorOptions(DType::Float64));
  double* p = t.mutable_data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = 1.0 + static_cast<double>(i) / 3.0 / static_cast<double>(n);
  return t;
}

Tensor rounded(const Tensor& exact, const std::function<uint16_t(double, int64_t)>& round) {
  Tensor out = empty(exact.sizes(), TensorOptions(DType::Float16));
  auto* o = static_cast<uint16_t*>(out.mutable_data_ptr());
  const double* e = exact.const_data_ptr<double>();
  for (int64_t i = 0; i < exact.numel(); ++i) o[i] = round(e[i], i);
  return out;
}

TEST(CheckRounding, NearestEvenPasses) {
  for (const Tensor& e : {exact_sums(512), exact_quotients(512)}) {
    RoundingVerdict v = check_rounding(rounded(e, [](double x, int64_t) { return nearest_even(x); }), e, {});
    EXPECT_TRUE(v.ok) << v.what;
    EXPECT_EQ(v.compared, 512u);
  }
}

TEST(CheckRounding, HalfAwayFromZeroFailsAtTheMidpoints) {
  const Tensor e = exact_sums(512);
  RoundingVerdict v = check_rounding(rounded(e, [](double x, int64_t) { return half_away(x); }), e, {});
  EXPECT_FALSE(v.ok);
  EXPECT_THAT(v.what, HasSubstr("at an exact midpoint, where ties go to even"));
  EXPECT_THAT(v.what, HasSubstr("of them exact midpoints not rounded to even"));
}

TEST(CheckRounding, OneUlpOffInATenthFails) {
  const Tensor e = exact_quotients(200);
  RoundingVerdict v = check_rounding(rounded(e, sometimes_off), e, {});
  EXPECT_FALSE(v.ok);
  EXPECT_THAT(v.what, HasSubstr("element 3 is"));
  EXPECT_THAT(v.what, HasSubstr("(1 ULP away)"));
  EXPECT_THAT(v.what, HasSubstr("20 of 200 elements out of the contract"));
}

TEST(CheckRounding, TruncationWithinAOneUlpContractFailsAsABias) {
  const Tensor e = exact_quotients(400);
  RoundingContract one_ulp{.ulps = 1};
  RoundingVerdict v = check_rounding(rounded(e, [](double x, int64_t) { return toward_zero(x); }), e, one_ulp);
  EXPECT_FALSE(v.ok);
  EXPECT_THAT(v.what, HasSubstr("the results lean toward zero"));
  // Unbiased errors within the same contract pass: one up, one down.
  RoundingVerdict fair = check_rounding(
      rounded(e, [](double x, int64_t i) { return i % 5 == 0 ? step(nearest_even(x), i % 10 == 0 ? 1 : -1) : nearest_even(x); }),
      e, one_ulp);
  EXPECT_TRUE(fair.ok) << fair.what;
}

TEST(CheckRounding, NearAMidpointEitherNeighbourIsRight) {
  // float32 arithmetic's last-bit error moves a value just across a midpoint: 1 + 2^-11 + 2^-30.
  Tensor e = empty({1}, TensorOptions(DType::Float64));
  e.mutable_data_ptr<double>()[0] = 1 + 0x1p-11 + 0x1p-30;
  Tensor got = rounded(e, [](double, int64_t) { return nearest_even(1.0); });  // the other side
  EXPECT_TRUE(check_rounding(got, e, {}).ok);
  EXPECT_FALSE(check_rounding(got, e, {.working_error = 0}).ok);
  // Two ULPs away is never near.
  Tensor far = rounded(e, [](double, int64_t) { return step(nearest_even(1.0), 2); });
  EXPECT_FALSE(check_rounding(far, e, {}).ok);
}

TEST(CheckRounding, NaNMustStayNaNAndOtherDtypesAreNotCompared) {
  Tensor e = empty({2}, TensorOptions(DType::Float64));
  e.mutable_data_ptr<double>()[0] = std::nan("");
  e.mutable_data_ptr<double>()[1] = 2.0;
  EXPECT_FALSE(check_rounding(rounded(e, [](double, int64_t) { return nearest_even(2.0); }), e, {}).ok);
  EXPECT_EQ(check_rounding(e.to(DType::Float32), e, {}).compared, 0u);
}

// ---- through dtype_consistency ----

class RoundingCheckTest : public ::testing::Test {
 protected:
  // float16 add computed in double and rounded by `round` (float64 inputs: plain double add).
  CustomOpDef add(const std::string& name, Rounder round, bool declare) {
    CustomOpOptions o;
    o.registry = &registry;
    auto op = custom_op(name, std::function<Tensor(const Tensor&, const Tensor&)>([round](const Tensor& a, const Tensor& b) {
                          Tensor wide = empty(a.sizes(), TensorOptions(DType::Float64));
                          const Tensor x = a.to(DType::Float64).contiguous(), y = b.to(DType::Float64).contiguous();
                          for (int64_t i = 0; i < a.numel(); ++i)
                            wide.mutable_data_ptr<double>()[i] = x.const_data_ptr<double>()[i] + y.const_data_ptr<double>()[i];
                          if (a.dtype() != DType::Float16) return wide.to(a.dtype());
                          return rounded(wide, [round](double v, int64_t) { return round(v); });
                        }),
                        o, {"a", "b"});
    if (declare) {
      OpData data;
      data.rounding = RoundingContract{};
      registry.set_op_data(name, std::move(data));
    }
    return op;
  }
  CheckResult run(const CustomOpDef& op) {
    const Tensor e = exact_sums(256);
    Tensor a = empty({256}, TensorOptions(DType::Float64)), b = empty({256}, TensorOptions(DType::Float64));
    for (int64_t i = 0; i < 256; ++i) {
      a.mutable_data_ptr<double>()[i] = 1 + static_cast<double>(i * 7 % 1024) / 1024;
      b.mutable_data_ptr<double>()[i] = 0.5 + static_cast<double>(i % 1024) / 2048;
    }
    Sample sample({IValue(a.to(DType::Float16)), IValue(b.to(DType::Float16))});
    return detail::make_dtype_consistency()->run({op.handle(), sample, tolerance, registry});
  }
  Registry registry;
  ToleranceSpec tolerance;
};

TEST_F(RoundingCheckTest, AFloat16OpRoundingHalfAwayFromZeroFails) {
  CheckResult r = run(add("t::add_half_away", half_away, true));
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("output 0 in float16 is not its float64 result rounded to nearest-even"));
  EXPECT_THAT(r.message, HasSubstr("exact midpoints not rounded to even"));
}

TEST_F(RoundingCheckTest, TheNearestEvenTwinPasses) {
  CheckResult r = run(add("t::add_nearest_even", nearest_even, true));
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(RoundingCheckTest, WithoutAContractOnlyTheToleranceApplies) {
  // The same bug inside float16's tolerance: what the contract is for.
  CheckResult r = run(add("t::add_undeclared", half_away, false));
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST(RoundingDeclaration, BadContractsAreRefused) {
  Registry registry;
  auto def = registry.define(parse_schema("t::bad(Tensor a) -> Tensor"), {}, RegistrationSource::named("test"));
  OpData data;
  data.rounding = RoundingContract{.ulps = -1};
  EXPECT_THAT(testing::error_message([&] { registry.set_op_data("t::bad", data); }),
              HasSubstr("the rounding contract of 't::bad'"));
  data.rounding = RoundingContract{.ulps = 2};
  registry.set_op_data("t::bad", data);
  EXPECT_EQ(registry.get("t::bad").data()->rounding->ulps, 2);
}

}  // namespace
}  // namespace opconform::conformance
