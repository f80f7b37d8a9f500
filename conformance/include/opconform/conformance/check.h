// Check: the one shape every conformance check has (STYLE.md: benchdnn gives every driver the
// same file roles; here, one small interface). A check gets the operator, one sample and the
// options, and returns a CheckResult. It never throws for a finding; an opconform::Error thrown
// by the operator where none was expected is a finding too (failed, with the message).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/conformance/outcome.h"
#include "opconform/conformance/sample.h"
#include "opconform/conformance/tolerance.h"
#include "opconform/core/registry.h"

namespace opconform::conformance {

struct CheckContext {
  OperatorHandle op;
  const Sample& sample;
  const ToleranceSpec& tolerance;  // the options' atol/rtol, or the dtype defaults
  Registry& registry;              // the registry the op lives in
  // The registry the op is compared with (reference_agreement); null when there is none.
  Registry* reference = nullptr;
  // The registry the op's definition came from (the reference, for a library's ops), asked
  // whether the op is differentiable there (Note [Inference-only libraries]) even when
  // reference_agreement is off; null: `reference`.
  Registry* definitions = nullptr;
};

class Check {
 public:
  virtual ~Check() = default;
  virtual std::string_view name() const = 0;
  virtual CheckResult run(const CheckContext& ctx) const = 0;
};

// The checks by name ("test_schema", "test_autograd_registration", "test_faketensor",
// "gradcheck", "gradgradcheck", "stride_invariance", ...). Throws for an unknown name, listing
// the known ones.
const Check& check_named(std::string_view name);
// Every check, in run order (in_run_order): thread_safety first, then by name.
std::vector<std::string> check_names();
// `checks` as they must run: thread_safety first, wherever it was given (Note [Concurrent first
// calls] in thread_safety.cpp); the others keep their order. opcheck and the harness's plan run
// every list in this order.
std::vector<std::string> in_run_order(std::vector<std::string> checks);

}  // namespace opconform::conformance
