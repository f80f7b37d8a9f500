// test_autograd_registration on ops with autograd at the right key, at a backend key, and
// custom ops with and without register_autograd.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/core/autograd.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/library.h"
#include "support/float_ops.h"

namespace opconform::conformance {
namespace {

using ::testing::HasSubstr;

Tensor leaf(std::vector<float> v) {
  Tensor t = from_vector<float>(v, {static_cast<int64_t>(v.size())});
  t.set_requires_grad(true);
  return t;
}
Tensor twice(const Tensor& x) { return testing::map(x, [](double v) { return 2 * v; }); }
std::vector<Tensor> twice_backward(autograd::AutogradContext&, const std::vector<Tensor>& g) { return {twice(g[0])}; }

class AutogradRegistrationTest : public ::testing::Test {
 protected:
  AutogradRegistrationTest() { handles.push_back(autograd::install_autograd_fallback(registry)); }
  CheckResult check(std::string_view op, Stack args) {
    Sample sample(std::move(args));
    ToleranceSpec tolerance;
    CheckContext ctx{registry.get(op), sample, tolerance, registry};
    return detail::make_test_autograd_registration()->run(ctx);
  }
  CustomOpOptions opts(CustomOpOptions o = {}) {
    o.registry = &registry;
    return o;
  }
  Registry registry;
  std::vector<RegistrationHandle> handles;
  Library lib{"ag", LibraryKind::DEF, std::nullopt, registry};
};

TEST_F(AutogradRegistrationTest, SkippedWhenNoInputRequiresGrad) {
  auto op = custom_op("cag::twice", [](const Tensor& x) { return twice(x); }, opts(), {"x"});
  CheckResult r = check("cag::twice", {IValue(from_vector<float>({1}, {1}))});
  EXPECT_EQ(r.outcome, Outcome::skipped);
  EXPECT_THAT(r.message, HasSubstr("no tensor input of 'cag::twice' requires grad"));
}

TEST_F(AutogradRegistrationTest, CustomOpWithAFormulaPasses) {
  auto op = custom_op("cag::twice", [](const Tensor& x) { return twice(x); }, opts(), {"x"});
  op.register_autograd(twice_backward);
  CheckResult r = check("cag::twice", {IValue(leaf({1, 2}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(AutogradRegistrationTest, KernelAtTheAutogradKeyPasses) {
  lib.define("twice(Tensor x) -> Tensor");
  lib.impl("twice", [](const Tensor& x) { return twice(x); }, DispatchKey::CPU);
  autograd::register_autograd(lib, "twice", twice_backward);
  CheckResult r = check("ag::twice", {IValue(leaf({1, 2}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
  EXPECT_THAT(r.message, HasSubstr("Autograd"));
}

TEST_F(AutogradRegistrationTest, CompositeImplicitPasses) {
  lib.define("comp(Tensor x) -> Tensor");
  lib.impl("comp", [](const Tensor& x) { return twice(x); }, DispatchKey::CompositeImplicitAutograd);
  CheckResult r = check("ag::comp", {IValue(leaf({1}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(AutogradRegistrationTest, NonDifferentiableBackendKernelPasses) {
  // No autograd anywhere, and the backend kernel does not fake it: the registry's fallback is
  // what would mark outputs, and the check runs below it.
  lib.define("plain(Tensor x) -> Tensor");
  lib.impl("plain", [](const Tensor& x) { return twice(x.detach()); }, DispatchKey::CPU);
  CheckResult r = check("ag::plain", {IValue(leaf({1}))});
  EXPECT_EQ(r.outcome, Outcome::passed) << r.message;
}

TEST_F(AutogradRegistrationTest, CustomOpWithoutFormulaFails) {
  auto op = custom_op("cag::noformula", [](const Tensor& x) { return twice(x); }, opts(), {"x"});
  CheckResult r = check("cag::noformula", {IValue(leaf({1, 2}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("custom op 'cag::noformula' has differentiable inputs and outputs but no autograd formula"));
  EXPECT_THAT(r.message, HasSubstr("register_autograd"));
  // Integer outputs are not differentiable: nothing to register.
  auto idx = custom_op("cag::argmax", [](const Tensor& x) { return zeros({1}, DType::Int64); }, opts(), {"x"});
  EXPECT_EQ(check("cag::argmax", {IValue(leaf({1}))}).outcome, Outcome::passed);
}

TEST_F(AutogradRegistrationTest, BackendKernelMarkingRequiresGradFails) {
  lib.define("wired(Tensor x) -> Tensor");
  lib.impl("wired", [](const Tensor& x) {
    Tensor y = twice(x.detach());
    y.set_requires_grad(x.requires_grad());  // autograd done by hand in the CPU kernel
    return y;
  }, DispatchKey::CPU);
  CheckResult r = check("ag::wired", {IValue(leaf({1}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("autograd was wired at a backend key"));
  EXPECT_THAT(r.message, HasSubstr("Register the formula at DispatchKey::Autograd"));
}

TEST_F(AutogradRegistrationTest, BackendKernelComposedOfDifferentiableOpsFails) {
  // The CPU kernel calls a differentiable op: its output gets a grad_fn from inside the backend.
  auto inner = custom_op("cag::inner", [](const Tensor& x) { return twice(x); }, opts(), {"x"});
  inner.register_autograd(twice_backward);
  lib.define("outer(Tensor x) -> Tensor");
  // (The kernel holds the operator handle, not the CustomOpDef: a kernel owning the def would
  // unregister it from inside the registry's own teardown.)
  auto typed = inner.handle().typed<Tensor(const Tensor&)>();
  lib.impl("outer", [typed](const Tensor& x) { return typed.call(x); }, DispatchKey::CPU);
  CheckResult r = check("ag::outer", {IValue(leaf({1, 2}))});
  EXPECT_EQ(r.outcome, Outcome::failed);
  EXPECT_THAT(r.message, HasSubstr("'ag::outer': output 0 requires grad, but the operator has no autograd kernel"));
}

}  // namespace
}  // namespace opconform::conformance
