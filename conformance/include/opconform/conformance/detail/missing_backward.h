// Note [Inference-only libraries]: a library under test (CheckContext::definitions set) that
// implements an op the reference can differentiate, but registers no backward for it, gives
// outputs that do not require grad: gradcheck would skip ("no output is differentiable") and
// test_autograd_registration would pass ("not differentiable through this registry"), so a wrong
// or absent backward read as a pass. The gradient checks ask this first: such an op is
// `unsupported`, its cause not_implemented with the subject kNoBackwardSubject (the console counts
// "inference only" ops by it; --fail-on unsupported fails the run on them) — never skipped, never
// passed.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "opconform/conformance/check.h"

namespace opconform::conformance::detail {

// The unsupported result, when the sample has an input that requires grad, the op is not an out=
// op, the reference has the op with a kernel at an autograd key, and the op under test has none
// (nor a CompositeImplicitAutograd kernel). nullopt otherwise: the check runs as usual.
std::optional<CheckResult> missing_backward(const CheckContext& ctx, std::string_view check);

// The autograd key `op` has a kernel at: DispatchKey::Autograd, CompositeImplicitAutograd (autograd
// from the ops it calls), or the Autograd<Backend> key of one of `inputs`' devices; nullopt: none.
std::optional<DispatchKey> autograd_kernel_key(const OperatorHandle& op, const std::vector<Tensor>& inputs);

}  // namespace opconform::conformance::detail
