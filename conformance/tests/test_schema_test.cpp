// test_schema on correct operators and on operators with one seeded schema bug each.
// Correct ops come from custom_op; the buggy ones are registered with Library, which (unlike
// custom_op) does not check aliasing at call time, so the bugs reach the check.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <tuple>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/library.h"
#include "support/float_ops.h"

namespace opconform::conformance {
namespace {

using ::testing::HasSubstr;
using ::opconform::conformance::FindingKind;

Tensor vec(std::vector<float> v) { return from_vector<float>(v, {static_cast<int64_t>(v.size())}); }
Tensor add(const Tensor& a, const Tensor& b) { return testing::zip(a, b, [](double p, double q) { return p + q; }); }

class TestSchemaTest : public ::testing::Test {
 protected:
  CheckResult check(std::string_view op, Stack args) {
    Sample sample(std::move(args));
    ToleranceSpec tolerance;
    CheckContext ctx{registry.get(op), sample, tolerance, registry};
    return detail::make_test_schema()->run(ctx);
  }
  CustomOpOptions opts(CustomOpOptions o = {}) {
    o.registry = &registry;
    return o;
  }
  Registry registry;
  Library lib{"ts", LibraryKind::DEF, std::nullopt, registry};
};

// ---- correct operators pass

TEST_F(TestSchemaTest, FunctionalCustomOpPasses) {
  auto op = custom_op("cs::sin", [](const Tensor& x) { return testing::map(x, [](double v) { return std::sin(v); }); },
                      opts(), {"x"});
  Tensor x = vec({1, 2, 3});
  CheckResult r = check("cs::sin", {IValue(x)});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  EXPECT_EQ(r.check, "test_schema");
  // On a transposed input too.
  Tensor t = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
  EXPECT_EQ(check("cs::sin", {IValue(t)}).outcome, Outcome::passed);
}

TEST_F(TestSchemaTest, InplaceOutAndMutableCustomOpsPass) {
  auto add_ = custom_op("cs::add_", [](const Tensor& x, const Tensor& y) { x.copy_(add(x, y)); return x; },
                        opts({.mutates_args = {"x"}, .tags = {Tag::inplace}}), {"x", "y"});
  auto add_out = custom_op("cs::add_out", [](const Tensor& x, const Tensor& y, const Tensor& out) {
    out.copy_(add(x, y));
    return out;
  }, opts({.mutates_args = {"out"}, .tags = {Tag::out}}), {"x", "y", "*", "out"});
  auto add_mutate = custom_op("cs::add_mutate", [](const Tensor& x, const Tensor& y) { x.copy_(add(x, y)); },
                              opts({.mutates_args = {"x"}}), {"x", "y"});
  Tensor x = vec({1, 2}), y = vec({10, 20});
  const uint64_t version = x.version();
  CheckResult r1 = check("cs::add_", {IValue(x), IValue(y)});
  EXPECT_EQ(r1.outcome, Outcome::passed) << r1.message;
  CheckResult r2 = check("cs::add_out", {IValue(x), IValue(y), IValue(empty({2}))});
  EXPECT_EQ(r2.outcome, Outcome::passed) << r2.message;
  CheckResult r3 = check("cs::add_mutate", {IValue(x), IValue(y)});
  EXPECT_EQ(r3.outcome, Outcome::passed) << r3.message;
  // The caller's sample is never touched.
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(x.version(), version);
}

TEST_F(TestSchemaTest, DeclaredViewPasses) {
  lib.define("flat(Tensor(a) x) -> Tensor(a)");
  lib.impl("flat", [](const Tensor& x) { return x.view({-1}); }, DispatchKey::CPU);
  CheckResult r = check("ts::flat", {IValue(zeros({2, 2}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

// ---- mutation

TEST_F(TestSchemaTest, UndeclaredMutationFails) {
  lib.define("bad_mut(Tensor x) -> Tensor");
  lib.impl("bad_mut", [](const Tensor& x) {
    x.fill_(1);
    return x.clone();
  }, DispatchKey::CPU);
  CheckResult r = check("ts::bad_mut", {IValue(vec({0, 0, 0}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("'ts::bad_mut' on sample (x: float32[3])"));
  EXPECT_THAT(r.message, HasSubstr("argument 'x' was mutated"));
  EXPECT_THAT(r.message, HasSubstr("Declare it: Tensor(a!) x"));
  EXPECT_THAT(r.repro, HasSubstr("ts::bad_mut"));
}

TEST_F(TestSchemaTest, AWriteOfIdenticalValuesIsStillAWrite) {
  // The bytes do not change; the version counter does.
  lib.define("rewrite(Tensor x) -> Tensor");
  lib.impl("rewrite", [](const Tensor& x) {
    x.copy_(x.clone());
    return x.clone();
  }, DispatchKey::CPU);
  CheckResult r = check("ts::rewrite", {IValue(vec({1, 2}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("argument 'x' was mutated (its bytes or its version counter changed)"));
}

TEST_F(TestSchemaTest, DeclaredMutableButNeverWrittenFails) {
  lib.define("lazy(Tensor(a!) x, Tensor y) -> ()");
  lib.impl("lazy", [](const Tensor&, const Tensor&) {}, DispatchKey::CPU);
  CheckResult r = check("ts::lazy", {IValue(vec({1})), IValue(vec({2}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("argument 'x' is declared mutable (Tensor(a!) x) but was never written on this sample"));
  EXPECT_THAT(r.message, HasSubstr("Remove the '!'"));
}

// ---- aliasing

TEST_F(TestSchemaTest, OutputAliasingAnInputWithoutAnnotationFails) {
  lib.define("leak_view(Tensor x) -> Tensor");
  lib.impl("leak_view", [](const Tensor& x) { return x.view({-1}); }, DispatchKey::CPU);
  CheckResult r = check("ts::leak_view", {IValue(zeros({2, 2}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("output 0 overlaps the memory of argument 'x'"));
  EXPECT_THAT(r.message, HasSubstr("Return a clone (x.clone()), or declare the alias: Tensor(a) x -> Tensor(a)"));
}

TEST_F(TestSchemaTest, OutputThatIsAnInputObjectFails) {
  // Even with the alias declared: a view op must return a new tensor object.
  lib.define("ident(Tensor(a) x) -> Tensor(a)");
  lib.impl("ident", [](const Tensor& x) { return x; }, DispatchKey::CPU);
  CheckResult r = check("ts::ident", {IValue(vec({1}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("output 0 is argument 'x' itself, but 'x' is not mutable"));
  ASSERT_TRUE(r.cause.has_value());
  EXPECT_EQ(r.cause->kind, FindingKind::schema_violation);
}

TEST_F(TestSchemaTest, OutputsAliasingEachOtherFail) {
  lib.define("two(Tensor x) -> (Tensor, Tensor)");
  lib.impl("two", [](const Tensor& x) {
    Tensor y = x.clone();
    return std::make_tuple(y, y.view({-1}));
  }, DispatchKey::CPU);
  CheckResult r = check("ts::two", {IValue(vec({1, 2}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("output 0 and output 1 share memory but the schema does not annotate them"));
}

// ---- Tag::inplace and Tag::out

TEST_F(TestSchemaTest, InplaceOpReturningANewTensorFails) {
  lib.define("inc_(Tensor(a!) self) -> Tensor(a!)", {Tag::inplace});
  lib.impl("inc_", [](const Tensor& self) {
    self.copy_(testing::map(self, [](double v) { return v + 1; }));
    return self.clone();
  }, DispatchKey::CPU);
  CheckResult r = check("ts::inc_", {IValue(vec({1, 2}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("Tag::inplace: output 0 is a new tensor"));
  EXPECT_THAT(r.message, HasSubstr("Return self (the object passed in)"));
}

TEST_F(TestSchemaTest, OutOpReadingItsOutBufferFails) {
  lib.define("acc_out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)", {Tag::out});
  lib.impl("acc_out", [](const Tensor& x, const Tensor& out) {
    out.copy_(add(out, x));  // reads out: the result depends on what out held
    return out;
  }, DispatchKey::CPU);
  CheckResult r = check("ts::acc_out", {IValue(vec({1, 2})), IValue(zeros({2}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("the results differ when the out buffer(s) 'out' are pre-filled"));
  EXPECT_THAT(r.message, HasSubstr("reads its out arguments"));
}

TEST_F(TestSchemaTest, OutOpReturningInTheWrongOrderFails) {
  lib.define("pair_out(Tensor x, *, Tensor(a!) a, Tensor(b!) b) -> (Tensor(a!), Tensor(b!))", {Tag::out});
  lib.impl("pair_out", [](const Tensor& x, const Tensor& a, const Tensor& b) {
    a.copy_(x);
    b.copy_(x);
    return std::make_tuple(b, a);
  }, DispatchKey::CPU);
  CheckResult r = check("ts::pair_out", {IValue(vec({1})), IValue(zeros({1})), IValue(zeros({1}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("Tag::out: the outputs must be the out arguments themselves, in declaration order"));
}

// ---- arity, types, errors

TEST_F(TestSchemaTest, WrongArityAndTypesFail) {
  lib.define("short(Tensor x) -> (Tensor, Tensor)");
  lib.impl("short", [](const OperatorHandle&, DispatchKeySet, Stack& s) {
    Tensor x = s.back().to_tensor();
    s.pop_back();
    s.push_back(IValue(x.clone()));  // one return where the schema has two
  }, DispatchKey::CPU);
  CheckResult r = check("ts::short", {IValue(vec({1}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("returned 1 value(s) but the schema declares 2"));

  lib.define("wrong_type(Tensor x) -> Tensor");
  lib.impl("wrong_type", [](const OperatorHandle&, DispatchKeySet, Stack& s) {
    s.pop_back();
    s.push_back(IValue(int64_t(3)));
  }, DispatchKey::CPU);
  CheckResult t = check("ts::wrong_type", {IValue(vec({1}))});
  EXPECT_EQ(t.outcome, Outcome::failed);
  EXPECT_THAT(t.message, HasSubstr("output 0 is a int but the schema declares Tensor"));
}

TEST_F(TestSchemaTest, AThrowingOperatorFailsAndAMissingKernelIsUnsupported) {
  lib.define("boom(Tensor x) -> Tensor");
  lib.impl("boom", [](const Tensor&) -> Tensor { throw Error(ErrorCode::kInvalidArgument, "boom: broken"); },
           DispatchKey::CPU);
  CheckResult r = check("ts::boom", {IValue(vec({1}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("'ts::boom' threw in the real run on a valid sample (x: float32[1])"));
  EXPECT_THAT(r.message, HasSubstr("boom: broken"));
  Tensor meta = make_metadata_tensor(std::vector<int64_t>{2}, std::vector<int64_t>{1}, DType::Float32, Device::meta());
  CheckResult u = check("ts::boom", {IValue(meta)});
  EXPECT_EQ(u.outcome, Outcome::unsupported) << u.message;
  EXPECT_THAT(u.message, HasSubstr("'Meta' backend"));
}

}  // namespace
}  // namespace opconform::conformance
