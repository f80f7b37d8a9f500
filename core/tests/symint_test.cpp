// SymInt expressions and the ShapeEnv: canonical arithmetic and printing, deciding comparisons
// (constants, ranges, hints with guards, unbacked errors), evaluation, binding and guard checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "opconform/core/shape_env.h"
#include "opconform/core/symint.h"
#include "support/error_of.h"

namespace opconform {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::error_of;

int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t py_mod(int64_t a, int64_t b) { return a - py_floordiv(a, b) * b; }

TEST(SymIntConcrete, ArithmeticStaysConcrete) {
  SymInt a = 7;
  EXPECT_FALSE((a + 3).is_symbolic());
  EXPECT_EQ((a + 3).maybe_as_int(), 10);
  EXPECT_EQ((a - 10).expect_int(), -3);
  EXPECT_EQ((a * -2).expect_int(), -14);
  EXPECT_EQ((-a).expect_int(), -7);
  // Python's floor semantics.
  EXPECT_EQ(floordiv(SymInt(-7), 2).expect_int(), -4);
  EXPECT_EQ(mod(SymInt(-7), 2).expect_int(), 1);
  EXPECT_EQ(mod(SymInt(7), -2).expect_int(), -1);
  EXPECT_EQ(a.hint(), 7);
  EXPECT_EQ(a.to_string(), "7");
  EXPECT_TRUE(a == 7 && a != 8 && a < 8 && a <= 7 && a > 6 && a >= 7);
}

TEST(SymIntConcrete, DivisionByZeroAndOverflowAreErrors) {
  EXPECT_EQ(error_of([] { floordiv(SymInt(1), 0); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(error_of([] { mod(SymInt(1), 0); }).what(), HasSubstr("by zero"));
  EXPECT_THAT(error_of([] { SymInt(INT64_MAX) + 1; }).what(), HasSubstr("overflow"));
  EXPECT_THAT(error_of([] { SymInt(INT64_MIN) * -1; }).what(), HasSubstr("overflow"));
}

class SymIntTest : public ::testing::Test {
 protected:
  ShapeEnv env;
  SymInt s0 = env.create_symbol(5, "x.size(0)");
  SymInt s1 = env.create_symbol(3, "x.size(1)");
  SymInt u0 = env.create_unbacked();
};

TEST_F(SymIntTest, SymbolsAreNamedAndHinted) {
  EXPECT_TRUE(s0.is_symbolic());
  EXPECT_EQ(s0.maybe_as_int(), std::nullopt);
  EXPECT_EQ(s0.to_string(), "s0");
  EXPECT_EQ(s1.to_string(), "s1");
  EXPECT_EQ(u0.to_string(), "u0");
  EXPECT_EQ(s0.hint(), 5);
  EXPECT_EQ(u0.hint(), std::nullopt);
  EXPECT_EQ((s0 * 2 + s1).hint(), 13);
  EXPECT_EQ((s0 + u0).hint(), std::nullopt);
  EXPECT_THAT(error_of([&] { s0.expect_int(); }).what(), HasSubstr("concrete integer is needed: s0"));
  auto symbols = env.symbols();
  ASSERT_EQ(symbols.size(), 3u);
  EXPECT_EQ(symbols[0].source, "x.size(0)");
  EXPECT_EQ(symbols[0].min, 2);  // backed symbols are never 0 or 1
  EXPECT_EQ(symbols[2].hint, std::nullopt);
}

TEST_F(SymIntTest, SizesZeroAndOneAreSpecialised) {
  EXPECT_EQ(env.create_symbol(1, "y.size(0)").maybe_as_int(), 1);
  EXPECT_EQ(env.create_symbol(0, "y.size(1)").maybe_as_int(), 0);
  EXPECT_EQ(env.create_symbol(2, "y.size(2)").to_string(), "s2");  // numbering is not disturbed
  EXPECT_THROW(env.create_symbol(-1, "bad"), Error);
}

TEST_F(SymIntTest, PrintingAndCanonicalForm) {
  SymInt u1 = env.create_unbacked();
  EXPECT_EQ((s0 * 2 + u1).to_string(), "s0*2 + u1");
  EXPECT_EQ((u1 + s0 * 2).to_string(), "s0*2 + u1");  // terms are ordered
  EXPECT_EQ((s0 + s0).to_string(), "s0*2");
  EXPECT_EQ((s1 * s0).to_string(), "s0*s1");
  EXPECT_EQ(((s0 + 1) * 2).to_string(), "s0*2 + 2");
  EXPECT_EQ((2 - s0).to_string(), "-s0 + 2");
  EXPECT_EQ((s0 - s1 - 3).to_string(), "s0 - s1 - 3");
  EXPECT_EQ((s0 * s0 * 3 - s0).to_string(), "-s0 + s0*s0*3");  // s0 sorts before s0*s0
  // Folding: what cancels is a plain integer again.
  EXPECT_EQ((s0 - s0).maybe_as_int(), 0);
  EXPECT_EQ((s0 * 2 - s0 - s0 + 4).maybe_as_int(), 4);
  EXPECT_EQ((s0 * 0).maybe_as_int(), 0);
  EXPECT_EQ((s0 * 1).to_string(), "s0");
}

TEST_F(SymIntTest, FloorDivisionAndModuloNormalise) {
  EXPECT_EQ(floordiv(s0 + 1, 2).to_string(), "(s0 + 1)//2");
  EXPECT_EQ(floordiv(s0 * 4 + 2, 2).to_string(), "s0*2 + 1");  // exact division
  EXPECT_EQ(floordiv(s0 * 4 + 3, 2).to_string(), "s0*2 + 1");  // 3//2 == 1
  EXPECT_EQ(floordiv(s0 * 2 + s1, 2).to_string(), "s0 + s1//2");
  EXPECT_EQ(floordiv(s0, s1).to_string(), "s0//s1");
  EXPECT_EQ(floordiv(s0, 1).to_string(), "s0");
  EXPECT_EQ(mod(s0 * 3, 3).maybe_as_int(), 0);
  EXPECT_EQ(mod(s0 + 4, 3).to_string(), "(s0 + 1) % 3");
  EXPECT_EQ(mod(s0, 1).maybe_as_int(), 0);
  EXPECT_EQ((floordiv(s0, 2) * 3).to_string(), "(s0//2)*3");
  EXPECT_EQ((floordiv(s0, 2) - floordiv(s0, 2)).maybe_as_int(), 0);  // equal opaque atoms cancel
  EXPECT_THROW(floordiv(s0, 0), Error);
}

TEST_F(SymIntTest, ComparisonsDecidedByRangeRecordNoGuard) {
  EXPECT_TRUE(s0 >= 2);
  EXPECT_FALSE(s0 == 1);
  EXPECT_TRUE(s0 != 0);
  EXPECT_TRUE(s0 + s1 > 3);
  EXPECT_TRUE(s0 * 2 == s0 + s0);  // the difference folds to 0
  EXPECT_TRUE(s0 + 1 > s0);
  EXPECT_TRUE(u0 >= 0);
  EXPECT_FALSE(u0 < 0);
  EXPECT_TRUE(mod(s0, 3) < 3);
  EXPECT_TRUE(env.guards().empty());
}

TEST_F(SymIntTest, ComparisonsDecidedByHintRecordGuards) {
  EXPECT_TRUE(s0 > 3);
  EXPECT_FALSE(s0 == 4);
  EXPECT_TRUE(s0 > s1);
  EXPECT_TRUE(s0 * 2 <= s1 * 4);
  EXPECT_TRUE(s0 > 3);  // the same guard again is not repeated
  EXPECT_THAT(env.guards(), ElementsAre("s0 > 3", "s0 != 4", "s0 > s1", "s0*2 <= s1*4"));
}

TEST_F(SymIntTest, UnbackedComparisonsNeedARange) {
  Error e = error_of([&] { (void)(u0 < 5); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message(),
            "data-dependent expression u0 < 5 cannot be decided (unbacked symbol from get_ctx().new_dynamic_size())");
  EXPECT_THAT(error_of([&] { (void)(u0 + s0 == 7); }).message(), HasSubstr("s0 + u0 == 7 cannot be decided"));

  SymInt u1 = env.create_unbacked(2, 10);
  EXPECT_TRUE(u1 < 11);
  EXPECT_FALSE(u1 > 10);
  EXPECT_TRUE(u1 * 2 + 1 >= 5);
  EXPECT_TRUE(u1 != 1);
  EXPECT_THROW((void)(u1 == 5), Error);
  EXPECT_TRUE(env.guards().empty());  // nothing was decided from a hint
  EXPECT_THROW(env.create_unbacked(3, 2), Error);
}

TEST_F(SymIntTest, EvaluateWithBindings) {
  SymInt e = floordiv(s0 * s1 + 7, 2) - mod(s1, 2);
  EXPECT_EQ(env.evaluate(e, {{"s0", 5}, {"s1", 3}}), py_floordiv(5 * 3 + 7, 2) - py_mod(3, 2));
  EXPECT_EQ(env.evaluate(e, {{"s0", 10}, {"s1", 4}}), py_floordiv(10 * 4 + 7, 2) - py_mod(4, 2));
  EXPECT_EQ(env.evaluate(SymInt(4), {}), 4);
  EXPECT_EQ(env.evaluate(u0 * 3, {{"u0", 4}}), 12);
  EXPECT_THAT(error_of([&] { env.evaluate(s0 + s1, {{"s0", 2}}); }).what(), HasSubstr("no value bound for symbol s1"));
}

TEST_F(SymIntTest, CheckReportsWhichGuardFailsAndWhy) {
  ASSERT_TRUE(s0 > 3);
  ASSERT_TRUE(s0 != s1);
  EXPECT_TRUE(env.check({{"s0", 5}, {"s1", 3}}).ok());  // the hints
  EXPECT_TRUE(env.check({{"s0", 9}, {"s1", 2}}).ok());

  GuardCheckResult r = env.check({{"s0", 3}, {"s1", 3}});
  ASSERT_EQ(r.failures.size(), 2u);
  EXPECT_EQ(r.failures[0].guard, "s0 > 3");
  EXPECT_EQ(r.failures[0].reason, "false for s0 = 3 (x.size(0))");
  EXPECT_EQ(r.failures[1].guard, "s0 != s1");
  EXPECT_THAT(r.to_string(), HasSubstr("guard s0 != s1 failed: false for s0 = 3 (x.size(0)), s1 = 3 (x.size(1))"));

  // A value outside a symbol's range breaks the assumption that sizes 0 and 1 were specialised.
  GuardCheckResult range = env.check({{"s0", 5}, {"s1", 1}});
  ASSERT_EQ(range.failures.size(), 1u);
  EXPECT_EQ(range.failures[0].guard, "s1 in [2, inf]");
  EXPECT_THAT(range.failures[0].reason, HasSubstr("s1 = 1 is outside its range"));

  GuardCheckResult missing = env.check({{"s0", 5}});
  ASSERT_EQ(missing.failures.size(), 1u);
  EXPECT_EQ(missing.failures[0].reason, "no value for s1");
}

TEST_F(SymIntTest, BindFromSizes) {
  std::map<std::string, int64_t> bindings;
  std::vector<SymInt> traced{s0, 4, s1 * 2};
  std::vector<int64_t> now{7, 4, 10};
  ShapeEnv::bind(bindings, traced, now);
  EXPECT_EQ(bindings, (std::map<std::string, int64_t>{{"s0", 7}}));  // s1*2 is not solved for s1
  std::vector<SymInt> again{s0};
  std::vector<int64_t> conflicting{8};
  EXPECT_THAT(error_of([&] { ShapeEnv::bind(bindings, again, conflicting); }).what(), HasSubstr("both 7 and 8"));
  std::vector<int64_t> wrong_constant{7, 5, 10};
  EXPECT_THROW(ShapeEnv::bind(bindings, traced, wrong_constant), Error);
}

TEST(SymIntEnv, CurrentShapeEnvIsThreadLocalAndScoped) {
  ShapeEnv a, b;
  EXPECT_EQ(ShapeEnv::current(), nullptr);
  {
    ShapeEnvGuard ga(&a);
    EXPECT_EQ(ShapeEnv::current(), &a);
    {
      ShapeEnvGuard gb(&b);
      EXPECT_EQ(ShapeEnv::current(), &b);
    }
    EXPECT_EQ(ShapeEnv::current(), &a);
  }
  EXPECT_EQ(ShapeEnv::current(), nullptr);
}

TEST(SymIntEnv, SymbolsOutliveTheirShapeEnv) {
  SymInt s;
  {
    ShapeEnv env;
    s = env.create_symbol(6, "z");
  }
  EXPECT_TRUE(s > 4);  // still decided from the hint; there is nowhere to record the guard
  EXPECT_EQ((s * 2).hint(), 12);
}

// ---- property: symbolic arithmetic agrees with plain arithmetic on the hints ----

struct Expr {
  SymInt sym;
  int64_t value;  // the same arithmetic on the hints
};

Expr gen_expr(const std::vector<SymInt>& syms, const std::vector<int64_t>& hints, int depth) {
  int choice = *rc::gen::inRange(0, depth == 0 ? 2 : 7);
  auto leaf_divisor = [&]() -> Expr {
    if (*rc::gen::arbitrary<bool>()) {
      size_t i = *rc::gen::inRange<size_t>(0, syms.size());
      return {syms[i], hints[i]};  // backed symbols are >= 2: never zero
    }
    int64_t d = *rc::gen::suchThat(rc::gen::inRange<int64_t>(-6, 7), [](int64_t v) { return v != 0; });
    return {SymInt(d), d};
  };
  switch (choice) {
    case 0: {
      size_t i = *rc::gen::inRange<size_t>(0, syms.size());
      return {syms[i], hints[i]};
    }
    case 1: {
      int64_t c = *rc::gen::inRange<int64_t>(-10, 11);
      return {SymInt(c), c};
    }
    default: break;
  }
  Expr a = gen_expr(syms, hints, depth - 1);
  switch (choice) {
    case 2: {
      Expr b = gen_expr(syms, hints, depth - 1);
      return {a.sym + b.sym, a.value + b.value};
    }
    case 3: {
      Expr b = gen_expr(syms, hints, depth - 1);
      return {a.sym - b.sym, a.value - b.value};
    }
    case 4: {
      Expr b = gen_expr(syms, hints, depth - 1);
      return {a.sym * b.sym, a.value * b.value};
    }
    case 5: {
      Expr d = leaf_divisor();
      return {floordiv(a.sym, d.sym), py_floordiv(a.value, d.value)};
    }
    default: {
      Expr d = leaf_divisor();
      return {mod(a.sym, d.sym), py_mod(a.value, d.value)};
    }
  }
}

RC_GTEST_PROP(SymIntProperty, ExpressionsEvaluateLikeTheirHints, ()) {
  ShapeEnv env;
  std::vector<SymInt> syms;
  std::vector<int64_t> hints;
  std::map<std::string, int64_t> bindings;
  for (int i = 0; i < 3; ++i) {
    int64_t h = *rc::gen::inRange<int64_t>(2, 40);
    syms.push_back(env.create_symbol(h, "p.size(" + std::to_string(i) + ")"));
    hints.push_back(h);
    bindings[syms.back().to_string()] = h;
  }
  Expr e = gen_expr(syms, hints, 3);
  RC_ASSERT(env.evaluate(e.sym, bindings) == e.value);
  RC_ASSERT(e.sym.hint() == std::optional<int64_t>(e.value));
  // Canonicalising again changes nothing.
  RC_ASSERT((e.sym + 0).to_string() == e.sym.to_string());
  // A comparison agrees with the hints, and whatever guard it recorded holds for them.
  int64_t c = *rc::gen::inRange<int64_t>(-50, 50);
  RC_ASSERT((e.sym < c) == (e.value < c));
  RC_ASSERT((e.sym == c) == (e.value == c));
  RC_ASSERT(env.check(bindings).ok());
}

}  // namespace
}  // namespace opconform
