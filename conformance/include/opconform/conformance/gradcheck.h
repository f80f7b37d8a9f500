// gradcheck and gradgradcheck: torch.autograd.gradcheck in C++ (CHECKS.md, "Gradients").
//
//   Tensor x = ...; x.set_requires_grad(true);
//   CheckResult r = gradcheck(registry.get("mylib::my_sin"), {IValue(x)});
//   // r.outcome == Outcome::passed, or failed with a message naming the input, the output,
//   // the element and the numerical and analytical values.
//
// The check works on float64 copies of the floating tensor arguments (the ones that require grad
// are differentiated; the others are held constant), so the sample's own tensors are never
// touched and float32 round-off does not drown the comparison. It proves:
//   - the Jacobian of the backward matches central differences of the forward (slow mode: every
//     element; fast mode: v^T J u for random unit u, v, per input and output);
//   - backward is reentrant: the same grad_outputs twice give bitwise identical gradients;
//   - zero grad_outputs give zero (or no) gradients;
//   - each gradient has its input's shape and dtype.
// gradgradcheck does the same for the function (inputs, grad_outputs) -> gradients, that is for
// the backward itself, when the op claims double backward (see gradgradcheck below).
#pragma once

#include <cstdint>
#include <optional>

#include "opconform/conformance/outcome.h"
#include "opconform/core/ivalue.h"
#include "opconform/core/registry.h"

namespace opconform::conformance {

struct GradcheckOptions {
  // The precision the op runs in: float64, as PyTorch's gradcheck wants; float32 only for a
  // library without float64 kernels (Note [Gradcheck below float64] in gradcheck.cpp).
  DType dtype = DType::Float64;
  double eps = 1e-6;   // the central-difference step
  double atol = 1e-5;  // |analytical - numerical| <= atol + rtol * |numerical|
  double rtol = 1e-3;
  // nullopt: fast mode when the differentiated inputs have more than fast_mode_threshold
  // elements in total (the slow mode costs one backward per output element). A sample on which
  // fast mode disagrees is re-checked in slow mode, which tells a wrong element from a point
  // where the op is not differentiable and names the element.
  std::optional<bool> fast_mode;
  // Slow mode builds the full Jacobian (two forwards per input element and one backward per
  // output element): exact but quadratic; past a few dozen elements fast mode says as much
  // (measured: 170 ms per sample at 1,000 elements in slow mode, see bench/README.md).
  int64_t fast_mode_threshold = 64;
  uint64_t seed = 0;  // the random u, v of fast mode (and grad_outputs of gradgradcheck)
  bool check_reentrancy = true;
  bool check_zero_grad_outputs = true;
  bool check_grad_dtypes = true;  // gradient dtype == input dtype (shapes are always checked)
};

// Checks the op's backward against finite differences on `args` (schema order): with respect to
// every floating tensor that requires grad, a Tensor argument or an element of a Tensor[] one.
// Skipped, with the reason, when none requires grad, no output is differentiable, or the op is
// an out= overload (those refuse autograd, as in PyTorch).
// Never throws for a finding: an opconform::Error from the op or its backward is a failure.
CheckResult gradcheck(const OperatorHandle& op, const Stack& args, const GradcheckOptions& options = {});

// Checks the backward's own derivatives: G(inputs, grad_outputs) = backward(grad_outputs) is
// differentiated numerically and through a second backward (create_graph = true), w.r.t. both
// the inputs and the grad_outputs. An op claims double backward by a backward that is itself
// recorded: when the gradients of the first backward (with create_graph) do not require grad,
// the check is skipped with that reason. It checks the second order only (run gradcheck for the
// first); grad_outputs are random (seeded by options.seed) and differentiated too.
CheckResult gradgradcheck(const OperatorHandle& op, const Stack& args, const GradcheckOptions& options = {});

}  // namespace opconform::conformance
