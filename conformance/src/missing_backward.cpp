#include "opconform/conformance/detail/missing_backward.h"

#include "opconform/conformance/sample.h"
#include "opconform/core/error.h"
#include "opconform/core/tag.h"

namespace opconform::conformance::detail {
namespace {

bool has_autograd_kernel(const OperatorHandle& op) {
  return op.has_kernel_at(DispatchKey::Autograd) || op.has_kernel_at(DispatchKey::CompositeImplicitAutograd) ||
         op.has_kernel_at(DispatchKey::AutogradCPU) || op.has_kernel_at(DispatchKey::AutogradCUDA);
}

}  // namespace

std::optional<CheckResult> missing_backward(const CheckContext& ctx, std::string_view check) {
  if (ctx.reference == nullptr || ctx.op.has_tag(Tag::out) || has_autograd_kernel(ctx.op)) return std::nullopt;
  bool requires_grad = false;
  for (const IValue& v : ctx.sample.args)
    for (const Tensor& t : tensors_in(v)) requires_grad = requires_grad || t.requires_grad();
  if (!requires_grad) return std::nullopt;
  const auto reference_op = ctx.reference->find(ctx.op.name());
  if (!reference_op || !reference_op->has_schema() || !has_autograd_kernel(*reference_op)) return std::nullopt;
  CheckResult r;
  r.check = std::string(check);
  r.outcome = Outcome::unsupported;
  r.reason = std::string(kNoBackward);
  r.message = opconform::detail::concat(
      "'", ctx.op.name(), "': the library registers no backward for this differentiable op (the reference "
      "differentiates it), so its gradients cannot be checked; register one (OPC_KERNEL_BACKWARD in a plugin, "
      "register_autograd in C++), or accept the op as inference only (--fail-on unsupported fails on it)");
  return r;
}

}  // namespace opconform::conformance::detail
