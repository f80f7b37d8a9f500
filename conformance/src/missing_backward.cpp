#include "opconform/conformance/detail/missing_backward.h"

#include "opconform/conformance/sample.h"
#include "opconform/core/error.h"
#include "opconform/core/tag.h"

namespace opconform::conformance::detail {

std::optional<DispatchKey> autograd_kernel_key(const OperatorHandle& op, const std::vector<Tensor>& inputs) {
  for (DispatchKey k : {DispatchKey::Autograd, DispatchKey::CompositeImplicitAutograd})
    if (op.has_kernel_at(k)) return k;
  for (const Tensor& t : inputs)
    if (op.has_kernel_at(autograd_key(t.device().type))) return autograd_key(t.device().type);
  return std::nullopt;
}

std::optional<CheckResult> missing_backward(const CheckContext& ctx, std::string_view check) {
  Registry* definitions = ctx.definitions != nullptr ? ctx.definitions : ctx.reference;
  std::vector<Tensor> inputs;
  bool requires_grad = false;
  for (const IValue& v : ctx.sample.args)
    for (const Tensor& t : tensors_in(v)) {
      inputs.push_back(t);
      requires_grad = requires_grad || t.requires_grad();
    }
  if (definitions == nullptr || !requires_grad || ctx.op.has_tag(Tag::out) || autograd_kernel_key(ctx.op, inputs))
    return std::nullopt;
  const auto reference_op = definitions->find(ctx.op.name());
  if (!reference_op || !reference_op->has_schema() || !autograd_kernel_key(*reference_op, inputs)) return std::nullopt;
  CheckResult r;
  r.check = std::string(check);
  r.outcome = Outcome::unsupported;
  r.cause = Cause{FindingKind::not_implemented, std::string(kNoBackwardSubject), "no backward registered (inference only)"};
  r.message = opconform::detail::concat(
      "'", ctx.op.name(), "': the library registers no backward for this differentiable op (the reference "
      "differentiates it), so its gradients cannot be checked; register one (OPC_KERNEL_BACKWARD in a plugin, "
      "register_autograd in C++), or accept the op as inference only (--fail-on unsupported fails on it)");
  return r;
}

}  // namespace opconform::conformance::detail
