// What a check compares between two runs of an op: each returned value (Tensor[] flattened) and
// each argument the schema writes, and the comparison of two such lists (properties.cpp; used by
// the property checks and test_aot_dispatch_dynamic).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "opconform/conformance/tolerance.h"
#include "opconform/core/registry.h"

namespace opconform::conformance::detail {

using Observables = std::vector<std::pair<std::string, IValue>>;

// "output 0", "output 1[2]", "argument 'self' after the call", with the values.
Observables observables(const OperatorHandle& op, const Stack& args, const Stack& returns);

enum class Exactness { tolerance, bitwise };

struct Verdict {
  bool equal = true;
  bool mistrusted = false;  // every tensor comparison proved nothing
  std::string what;         // "output 0: <mismatch>"
};

// Compares two runs' observables: tensors with compare() (dtype tolerance) or bitwise, other
// values by their printed form.
Verdict compare_observables(const OperatorHandle& op, const Observables& actual, const Observables& expected,
                            const ToleranceSpec& spec, Exactness exactness);

}  // namespace opconform::conformance::detail
