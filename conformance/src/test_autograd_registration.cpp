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
#include "opconform/conformance/detail/missing_backward.h"
#include "opconform/core/autograd.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/error.h"
#include "opconform/core/tag.h"

namespace opconform::conformance {
namespace {

using ::opconform::detail::concat;

constexpr std::string_view kName = "test_autograd_registration";

bool is_differentiable(DType d) { return is_floating(d) || is_complex(d); }

class TestAutogradRegistration final : public Check {
 public:
  std::string_view name() const override { return kName; }

  CheckResult run(const CheckContext& ctx) const override {
    CheckResult result;
    result.check = std::string(kName);
    const OperatorHandle& op = ctx.op;
    const FunctionSchema& schema = op.schema();
    const std::string sample = description_of(ctx.sample, schema);

    std::vector<Tensor> inputs;
    for (const IValue& v : ctx.sample.args) {
      for (const Tensor& t : tensors_in(v)) inputs.push_back(t);
    }
    bool any_requires_grad = false;
    for (const Tensor& t : inputs) any_requires_grad = any_requires_grad || t.requires_grad();
    if (!any_requires_grad) {
      result.outcome = Outcome::skipped;
      result.message = concat("no tensor input of '", op.name(), "' requires grad on this sample (", sample,
                              "), so there is nothing to check; pass inputs with requires_grad set");
      return result;
    }
    if (op.has_tag(Tag::out)) {
      result.outcome = Outcome::skipped;
      result.message = concat("'", op.name(), "' is an out= operator (Tag::out): out= operators do not support autograd");
      return result;
    }

    if (auto def = find_custom_op(op.name(), ctx.registry)) return check_custom_op(ctx, *def, sample, result);
    if (auto gap = detail::missing_backward(ctx, kName)) return *gap;  // Note [Inference-only libraries]

    // A kernel at an autograd key, or a composite that gets autograd from the ops it calls.
    if (const auto key = detail::autograd_kernel_key(op, inputs)) {
      result.message = concat("'", op.name(), "' has a kernel registered at ", to_string(*key));
      return result;
    }

    // No autograd kernel: run below the autograd keys and look for outputs that require grad.
    autograd::EnableGradGuard grad_on;  // a caller's no_grad scope would hide the finding
    Stack args = clone_args(ctx.sample.args);
    Stack stack = args;
    try {
      const DispatchKeySet keyset = op.dispatch_keys(stack) - runtime_keys_of(DispatchKey::Autograd);
      op.redispatch_boxed(keyset, stack);
    } catch (const std::exception& e) {
      return operator_threw(result.check, op.name(), e, sample, "the run below the autograd keys");
    }
    std::vector<Tensor> arg_tensors;
    for (const IValue& v : args) {
      for (const Tensor& t : tensors_in(v)) arg_tensors.push_back(t);
    }
    for (size_t j = 0; j < stack.size(); ++j) {
      for (const Tensor& out : tensors_in(stack[j])) {
        bool is_input = false;
        for (const Tensor& in : arg_tensors) is_input = is_input || out.is_same(in);
        if (out.requires_grad() && !is_input) {
          result.outcome = Outcome::failed;
          result.message = concat(
              "'", op.name(), "': output ", j, " requires grad, but the operator has no autograd kernel (nothing at "
              "DispatchKey::Autograd, an Autograd<Backend> key or CompositeImplicitAutograd), sample (", sample,
              "): autograd was wired at a backend key. The backend kernel records autograd itself, which "
              "bypasses the dispatcher's autograd layer and may give silently wrong gradients. Register the "
              "formula at DispatchKey::Autograd (register_autograd), or register a kernel made of other "
              "operators at CompositeImplicitAutograd.");
          result.repro = concat("opcheck(\"", op.name(), "\", test_utils={\"", kName, "\"}) on sample: ", sample);
          return result;
        }
      }
    }
    result.message = concat("'", op.name(), "' has no autograd kernel and its outputs do not require grad "
                            "(not differentiable through this registry)");
    return result;
  }

 private:
  static CheckResult check_custom_op(const CheckContext& ctx, const CustomOpDef& def, const std::string& sample,
                                     CheckResult& result) {
    const OperatorHandle& op = ctx.op;
    if (def.has_autograd()) {
      result.message = concat("custom op '", op.name(), "' has a formula (register_autograd)");
      return result;
    }
    // A formula registered directly at a per-device autograd key also counts.
    for (const IValue& v : ctx.sample.args) {
      for (const Tensor& t : tensors_in(v)) {
        if (op.has_kernel_at(autograd_key(t.device().type))) {
          result.message = concat("custom op '", op.name(), "' has a kernel at ", to_string(autograd_key(t.device().type)));
          return result;
        }
      }
    }
    // Differentiable outputs? Ran in no-grad mode: only the output dtypes matter here.
    Stack stack = clone_args(ctx.sample.args);
    try {
      autograd::NoGradGuard no_grad;
      ::opconform::conformance::detail::run_boxed(op, stack);
    } catch (const std::exception& e) {
      return operator_threw(result.check, op.name(), e, sample, "the real run");
    }
    for (const IValue& v : stack) {
      for (const Tensor& out : tensors_in(v)) {
        if (!is_differentiable(out.dtype())) continue;
        result.outcome = Outcome::failed;
        result.message = concat(
            "custom op '", op.name(), "' has differentiable inputs and outputs but no autograd formula: ",
            "register_autograd was never called, so backward through it fails (sample: ", sample,
            "). Call register_autograd(backward, setup_context) on the op (if it is not meant to be "
            "differentiable, test it with inputs that do not require grad).");
        result.repro = concat("opcheck(\"", op.name(), "\", test_utils={\"", kName, "\"}) on sample: ", sample);
        return result;
      }
    }
    result.message = concat("custom op '", op.name(), "' has no floating or complex outputs: nothing to differentiate");
    return result;
  }
};

}  // namespace

std::unique_ptr<Check> detail::make_test_autograd_registration() {
  return std::make_unique<TestAutogradRegistration>();
}

}  // namespace opconform::conformance
