// test_autograd_registration: differentiable ops are differentiable through the right key
// (CHECKS.md; PyTorch's autograd_registration_check, plus the custom_op case it misses).
//
//   1. No tensor input requires grad: skipped (nothing to learn from this sample).
//   2. A custom_op: it always has a kernel at DispatchKey::Autograd (custom_op registers a
//      "not implemented" one so that backward fails with a clear message), so the key proves
//      nothing. What counts is register_autograd (CustomOpDef::has_autograd): without it, an op
//      with differentiable inputs and outputs fails here — PyTorch passes it and errors only
//      when backward runs. Tag::out ops do not support autograd at all: skipped.
//   3. Any other op passes when a kernel is registered at Autograd, at the autograd key of an
//      input's device, or at CompositeImplicitAutograd (autograd comes from the ops it calls).
//   4. Otherwise it is run with the autograd keys taken out of this one call's key set (the
//      counterpart of PyTorch's autograd_fallback_mode("nothing"): the registry's fallback,
//      which would mark outputs as requiring grad, is not reached). An output that requires
//      grad and is not an input object then got it from the backend kernel: autograd was wired
//      at a backend key — fail. Decision: the keys are removed from the call's key set, not
//      through an ExcludeDispatchKeyGuard, so that ops the backend kernel calls still record
//      autograd as they would in a normal call: a CPU kernel composed of differentiable ops is
//      exactly the bug to catch, and a thread-local exclusion would hide it.
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/conformance/detail/missing_backward.h"
#include "opconform/core/autograd.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/error.h"
#include "opconform/core/tag.h"

namespace opconform::conformance::detail {
namespace {

using ::opconform::detail::concat;

constexpr std::string_view kName = "test_autograd_registration";

bool is_differentiable(DType d) { return is_floating(d) || is_complex(d); }

class TestAutogradRegistration final : public Check {
 public:
  std::string_view name() const override { return kName; }

  CheckResult run(const CheckContext& ctx) const override {
    const OpcheckTestRun k(kName, ctx);
    const OperatorHandle& op = ctx.op;
    std::vector<Tensor> inputs;
    for (const IValue& v : ctx.sample.args) {
      for (const Tensor& t : tensors_in(v)) inputs.push_back(t);
    }
    bool any_requires_grad = false;
    for (const Tensor& t : inputs) any_requires_grad = any_requires_grad || t.requires_grad();
    if (!any_requires_grad) {
      return k.skipped(concat("no tensor input of '", op.name(), "' requires grad on this sample (", k.sample(),
                              "), so there is nothing to check; pass inputs with requires_grad set"),
                       "requires_grad", "no tensor input requires grad");
    }
    if (op.has_tag(Tag::out)) {
      return k.skipped(concat("'", op.name(), "' is an out= operator (Tag::out): out= operators do not support autograd"),
                       "out=", "out= operators do not support autograd");
    }
    if (auto def = find_custom_op(op.name(), ctx.registry)) return check_custom_op(k, *def);
    if (auto gap = missing_backward(ctx, kName)) return *gap;  // Note [Inference-only libraries]

    // A kernel at an autograd key, or a composite that gets autograd from the ops it calls.
    if (const auto key = autograd_kernel_key(op, inputs)) {
      return k.passed(concat("'", op.name(), "' has a kernel registered at ", to_string(*key)));
    }

    // No autograd kernel: run below the autograd keys and look for outputs that require grad.
    autograd::EnableGradGuard grad_on;  // a caller's no_grad scope would hide the finding
    Stack args = k.clone();
    Stack stack = args;
    try {
      const DispatchKeySet keyset = op.dispatch_keys(stack) - runtime_keys_of(DispatchKey::Autograd);
      op.redispatch_boxed(keyset, stack);
    } catch (const std::exception& e) {
      return k.threw(e, "the run below the autograd keys");
    }
    std::vector<Tensor> arg_tensors;
    for (const IValue& v : args) {
      for (const Tensor& t : tensors_in(v)) arg_tensors.push_back(t);
    }
    for (size_t j = 0; j < stack.size(); ++j) {
      for (const Tensor& out : tensors_in(stack[j])) {
        bool is_input = false;
        for (const Tensor& in : arg_tensors) is_input = is_input || out.is_same(in);
        if (!out.requires_grad() || is_input) continue;
        return k.failed(
            Cause{FindingKind::missing_registration, "autograd kernel",
                  "no autograd kernel: autograd is wired at a backend key"},
            concat("'", op.name(), "': output ", j, " requires grad, but the operator has no autograd kernel (nothing at "
                   "DispatchKey::Autograd, an Autograd<Backend> key or CompositeImplicitAutograd), sample (", k.sample(),
                   "): autograd was wired at a backend key. The backend kernel records autograd itself, which "
                   "bypasses the dispatcher's autograd layer and may give silently wrong gradients. Register the "
                   "formula at DispatchKey::Autograd (register_autograd), or register a kernel made of other "
                   "operators at CompositeImplicitAutograd."));
      }
    }
    return k.passed(concat("'", op.name(), "' has no autograd kernel and its outputs do not require grad "
                           "(not differentiable through this registry)"));
  }

 private:
  static CheckResult check_custom_op(const OpcheckTestRun& k, const CustomOpDef& def) {
    const OperatorHandle& op = k.op();
    if (def.has_autograd()) return k.passed(concat("custom op '", op.name(), "' has a formula (register_autograd)"));
    // A formula registered directly at a per-device autograd key also counts.
    for (const IValue& v : k.ctx().sample.args) {
      for (const Tensor& t : tensors_in(v)) {
        if (op.has_kernel_at(autograd_key(t.device().type))) {
          return k.passed(concat("custom op '", op.name(), "' has a kernel at ", to_string(autograd_key(t.device().type))));
        }
      }
    }
    // Differentiable outputs? Ran in no-grad mode: only the output dtypes matter here.
    Stack stack = k.clone();
    try {
      autograd::NoGradGuard no_grad;
      run_boxed(op, stack);
    } catch (const std::exception& e) {
      return k.threw(e, "the real run");
    }
    for (const IValue& v : stack) {
      for (const Tensor& out : tensors_in(v)) {
        if (!is_differentiable(out.dtype())) continue;
        return k.failed(Cause{FindingKind::missing_registration, "backward", "no autograd formula (register_autograd)"},
                        concat("custom op '", op.name(), "' has differentiable inputs and outputs but no autograd formula: ",
                               "register_autograd was never called, so backward through it fails (sample: ", k.sample(),
                               "). Call register_autograd(backward, setup_context) on the op (if it is not meant to be "
                               "differentiable, test it with inputs that do not require grad)."));
      }
    }
    return k.passed(concat("custom op '", op.name(), "' has no floating or complex outputs: nothing to differentiate"));
  }
};

}  // namespace

std::unique_ptr<Check> make_test_autograd_registration() { return std::make_unique<TestAutogradRegistration>(); }

}  // namespace opconform::conformance::detail
