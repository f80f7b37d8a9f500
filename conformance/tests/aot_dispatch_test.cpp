// test_aot_dispatch_dynamic on seeded bugs that only capture into a graph shows, and on a correct
// op with a symbolic fake kernel.
#include <gtest/gtest.h>

#include "opconform/conformance/check.h"
#include "opconform/conformance/opcheck.h"
#include "opconform/core/autograd.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/library.h"
#include "opconform/reference/reference.h"

namespace opconform::conformance {
namespace {

Registry& registry() {
  static Registry r;
  static auto reg = reference::register_reference_ops(r);
  return r;
}

Tensor iota(std::vector<int64_t> sizes, double start = 1) {
  int64_t n = 1;
  for (auto s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + 0.5 * static_cast<double>(i);
  return from_vector<double>(v, sizes);
}

// x's rows twice: [2*rows, cols].
Tensor stack_rows(const Tensor& x) {
  auto v = x.contiguous().to_vector<double>();
  std::vector<double> out(v);
  out.insert(out.end(), v.begin(), v.end());
  return from_vector<double>(out, {2 * x.size(0), x.size(1)});
}

enum class Bug { none, size_formula, baked_size, untraceable_backward, invisible_mutation, fake_reads_data };

// t::<name>(Tensor x) -> Tensor computing stack_rows(x), with the seeded bug.
struct Op {
  Library lib;
  std::string name;
  Op(const std::string& op, Bug bug) : lib("t", LibraryKind::FRAGMENT, std::nullopt, registry()), name("t::" + op) {
    lib.define(op + "(Tensor x) -> Tensor");
    lib.impl(op, [bug](const Tensor& x) {
      if (bug == Bug::invisible_mutation) x.fill_(Scalar(0.0));  // not declared: Tensor x, not Tensor(a!) x
      return bug == Bug::invisible_mutation ? stack_rows(x.clone().fill_(Scalar(1.0))) : stack_rows(x);
    }, DispatchKey::CPU);
    lib.impl(op, wrap_fake_kernel([bug](const Tensor& x) {
      if (bug == Bug::fake_reads_data) (void)x.to_vector<double>();
      const auto s = x.sym_sizes();
      if (bug == Bug::baked_size) return empty({2 * x.size(0), x.size(1)}, x.options());  // the example's sizes
      return make_fake_tensor({bug == Bug::size_formula ? s[0] + x.size(0) : s[0] * 2, s[1]}, x.dtype(), x.device());
    }), DispatchKey::Fake);
    autograd::register_autograd(lib, op, [bug](autograd::AutogradContext&, const std::vector<Tensor>& grads) {
      const Tensor& g = grads.at(0);
      if (bug == Bug::untraceable_backward) (void)g.to_vector<double>();  // reads data: cannot be captured
      // d/dx of stacking rows twice: the two halves of the gradient added.
      const int64_t rows = g.size(0) / 2;
      Stack top{IValue(g), int64_t{0}, int64_t{0}, int64_t{rows}, int64_t{1}};
      Stack bottom{IValue(g), int64_t{0}, int64_t{rows}, int64_t{2 * rows}, int64_t{1}};
      registry().get("aten::slice.Tensor").call_boxed(top);
      registry().get("aten::slice.Tensor").call_boxed(bottom);
      Stack sum{top[0], bottom[0], int64_t{1}};
      registry().get("aten::add.Tensor").call_boxed(sum);
      return std::vector<Tensor>{sum[0].to_tensor()};
    });
  }
};

CheckResult run_check(const Op& op, bool requires_grad) {
  Tensor x = iota({3, 4});
  if (requires_grad) x.set_requires_grad(true);
  Sample sample({IValue(x)});
  ToleranceSpec tolerance;
  return check_named("test_aot_dispatch_dynamic").run({registry().get(op.name), sample, tolerance, registry()});
}

TEST(AotDispatchDynamic, ACorrectSymbolicOpPasses) {
  Op op("good", Bug::none);
  const CheckResult r = run_check(op, true);
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST(AotDispatchDynamic, AFakeSizeFormulaWrongOnlyAtOtherSizesFails) {
  Op op("formula", Bug::size_formula);  // s0 + 3: right at the sample's 3 rows only
  const CheckResult r = run_check(op, false);
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_NE(r.message.find("at other sizes"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("fake kernel computes its output size wrongly"), std::string::npos) << r.message;
}

TEST(AotDispatchDynamic, ASizeBakedInFromTheExampleFails) {
  Op op("baked", Bug::baked_size);
  const CheckResult r = run_check(op, false);
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_NE(r.message.find("at other sizes"), std::string::npos) << r.message;
}

TEST(AotDispatchDynamic, ABackwardThatCannotBeCapturedFails) {
  Op op("backward", Bug::untraceable_backward);
  const CheckResult r = run_check(op, true);
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_NE(r.message.find("the backward cannot be captured"), std::string::npos) << r.message;
}

TEST(AotDispatchDynamic, AMutationTheSchemaDoesNotDeclareFails) {
  Op op("sneaky", Bug::invisible_mutation);
  const CheckResult r = run_check(op, false);
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_NE(r.message.find("nothing in the graph writes"), std::string::npos) << r.message;
}

TEST(AotDispatchDynamic, AFakeKernelThatReadsDataCannotBeCaptured) {
  Op op("reads", Bug::fake_reads_data);
  const CheckResult r = run_check(op, false);
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_NE(r.message.find("capturing the call into a graph failed"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("t::reads"), std::string::npos) << r.message;
}

// Tensor.item() has no graph: a capture breaks at its data-dependent output. The reference's
// _local_scalar_dense (tagged data_dependent_output) is skipped, saying so; an untagged op whose
// fake kernel claims a data-dependent output fails capture.
TEST(AotDispatchDynamic, ADataDependentOutputBreaksTheCaptureAndIsSkippedOnlyWhenTagged) {
  ToleranceSpec tolerance;
  Sample sample({IValue(iota({1}))});
  CheckResult r = check_named("test_aot_dispatch_dynamic").run({registry().get("aten::_local_scalar_dense"), sample, tolerance, registry()});
  EXPECT_EQ(r.outcome, Outcome::skipped) << r.message;
  EXPECT_NE(r.message.find("a capture breaks at it"), std::string::npos) << r.message;
  Library lib("t", LibraryKind::DEF, std::nullopt, registry());
  lib.define("untagged_item(Tensor x) -> Scalar");
  lib.impl("untagged_item", [](const Tensor& x) { return x.item(); }, DispatchKey::CPU);
  lib.impl("untagged_item", [](const Tensor&) -> Scalar { throw Error(ErrorCode::kDataDependentOutput, "t::untagged_item"); },
           DispatchKey::Fake);
  r = check_named("test_aot_dispatch_dynamic").run({registry().get("t::untagged_item"), sample, tolerance, registry()});
  EXPECT_EQ(r.outcome, Outcome::failed) << r.message;
}

TEST(AotDispatchDynamic, IsOneOfOpchecksDefaultTests) {
  const auto all = check_names();
  EXPECT_EQ(std::count(all.begin(), all.end(), "test_aot_dispatch_dynamic"), 1);
  const auto defaults = default_test_utils();
  EXPECT_EQ(std::count(defaults.begin(), defaults.end(), "test_aot_dispatch_dynamic"), 1);
}

}  // namespace
}  // namespace opconform::conformance
